#include "tests/test_util.h"

#include <stdio.h>
#include <stdlib.h>

#include <filesystem>

namespace tessel::testing {

std::string MakeTempDir(const std::string& prefix) {
  const char* base = getenv("TEST_TMPDIR");
  std::string tmpl = std::string(base ? base : "/tmp") + "/" + prefix + "XXXXXX";
  char* made = mkdtemp(tmpl.data());
  return made ? std::string(made) : std::string();
}

std::string SourceDir() { return TESSEL_SOURCE_DIR; }

std::string ReadGzipFile(const std::string& path) {
  std::string out;
  FILE* p = popen(("gzip -dc '" + path + "' 2>/dev/null").c_str(), "r");
  if (p == nullptr) return out;
  char buf[1 << 16];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  if (pclose(p) != 0) out.clear();
  return out;
}

std::string ReplayFixtureJsonl() {
  return ReadGzipFile(SourceDir() + "/tests/data/replay/host_matmul256_random1200.jsonl.gz");
}

}  // namespace tessel::testing
