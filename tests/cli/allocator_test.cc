// The malloc Tessel's executables allocate through: jemalloc where the build found it (CMake's
// TESSEL_ALLOCATOR), which `tessel --version` reports, and the configure error for a bad choice.

#include <dlfcn.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "tests/cli/cli_test_util.h"
#include "tests/test_util.h"

namespace tessel::testing {
namespace {

using ::testing::HasSubstr;

// The file of the library `malloc` binds to in this process.
std::string MallocLibrary() {
  Dl_info info{};
  void* m = dlsym(RTLD_DEFAULT, "malloc");
  return m && dladdr(m, &info) && info.dli_fname ? info.dli_fname : "";
}

TEST(Allocator, TheExecutablesAllocateThroughTheMallocTheBuildChose) {
  const std::string used = TESSEL_ALLOCATOR_USED;
  CliResult r = RunTessel("--version");
  ASSERT_EQ(r.status, 0) << r.output;
  if (used == "jemalloc") {
    EXPECT_THAT(r.output, HasSubstr("allocator: jemalloc 5."));
    EXPECT_THAT(MallocLibrary(), HasSubstr("libjemalloc.so"));
  } else {
    EXPECT_THAT(r.output, HasSubstr("allocator: libc.so"));
    EXPECT_THAT(MallocLibrary(), HasSubstr("libc.so"));
  }
}

TEST(Allocator, ConfiguringWithAnUnknownAllocatorSaysWhichOnesExist) {
  if (RunShell("command -v cmake").status != 0) GTEST_SKIP() << "no cmake on PATH";
  const std::string dir = MakeTempDir("tessel_allocator_configure_");
  ASSERT_FALSE(dir.empty());
  CliResult r = RunShell("cmake -S '" + SourceDir() + "' -B '" + dir +
                         "' -DTESSEL_ALLOCATOR=tcmalloc -DBUILD_TESTING=OFF");
  EXPECT_NE(r.status, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("TESSEL_ALLOCATOR is 'tcmalloc': use auto, jemalloc or system"));
}

}  // namespace
}  // namespace tessel::testing
