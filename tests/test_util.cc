#include "tests/test_util.h"

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

}  // namespace tessel::testing
