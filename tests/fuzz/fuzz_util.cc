#include "tests/fuzz/fuzz_util.h"

#include <cstdlib>
#include <filesystem>
#include <system_error>

namespace tessel::fuzz {
namespace {

class Scratch {
 public:
  Scratch() {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern =
        std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/tessel_fuzz_XXXXXX";
    Require(mkdtemp(pattern.data()) != nullptr, "cannot make a scratch folder " + pattern);
    path_ = pattern;
  }
  ~Scratch() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace

const std::string& ScratchDir() {
  static Scratch scratch;
  return scratch.path();
}

}  // namespace tessel::fuzz
