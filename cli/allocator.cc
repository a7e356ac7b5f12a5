#include "cli/allocator.h"

#include <dlfcn.h>

#include <cstddef>
#include <string>

namespace tessel::cli {

std::string AllocatorSummary() {
  // The library `malloc` binds to in this process: the first in the global lookup order that
  // defines it (the executable's jemalloc when linked, or one preloaded, before libc).
  void* m = dlsym(RTLD_DEFAULT, "malloc");
  Dl_info info{};
  const std::string file = m && dladdr(m, &info) && info.dli_fname ? info.dli_fname : "unknown";
  const size_t slash = file.rfind('/');
  const std::string name = slash == std::string::npos ? file : file.substr(slash + 1);
  using Mallctl = int (*)(const char*, void*, size_t*, void*, size_t);
  auto mallctl = reinterpret_cast<Mallctl>(dlsym(RTLD_DEFAULT, "mallctl"));
  const char* version = nullptr;
  size_t size = sizeof(version);
  if (name.find("jemalloc") != std::string::npos && mallctl &&
      mallctl("version", &version, &size, nullptr, 0) == 0 && version) {
    return std::string("allocator: jemalloc ") + version;
  }
  return "allocator: " + name;
}

}  // namespace tessel::cli
