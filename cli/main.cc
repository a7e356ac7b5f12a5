#include <cstdio>

int main() {
  std::printf("tessel %s\n", TESSEL_VERSION);
  return 0;
}
