#pragma once

// Helpers shared by the test suites.

#include <string>

namespace tessel::testing {

// A fresh empty directory under the test temp dir, removed by the OS later.
std::string MakeTempDir(const std::string& prefix);
// Root of the source tree (for tests/data).
std::string SourceDir();

}  // namespace tessel::testing
