#pragma once

// Helpers shared by the test suites.

#include <string>

namespace tessel::testing {

// A fresh empty directory under the test temp dir, removed by the OS later.
std::string MakeTempDir(const std::string& prefix);
// Root of the source tree (for tests/data).
std::string SourceDir();
// The decompressed contents of a gzip file (through `gzip -dc`); empty when it cannot be read.
std::string ReadGzipFile(const std::string& path);
// The host replay fixture (tests/data/replay/host_matmul256_random1200.jsonl.gz): 1,200 real
// host measurements of kReplayFixtureWorkload by random search, as `tessel export` writes them.
inline constexpr char kReplayFixtureWorkload[] = "matmul(M=256, N=256, K=256)";
std::string ReplayFixtureJsonl();

}  // namespace tessel::testing
