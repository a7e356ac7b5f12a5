// The fuzz targets of tests/fuzz without libFuzzer: every file of each target's seed corpus
// (tests/fuzz/corpus/<target>/, regressions included) is fed to the target's entry point, which
// aborts on a violated property and must neither crash nor hang. tests/fuzz/CMakeLists.txt
// compiles each <target>_fuzzer.cc with its LLVMFuzzerTestOneInput renamed TesselFuzz_<target>.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "gtest/gtest.h"

extern "C" int TesselFuzz_workload_parser(const uint8_t* data, size_t size);
extern "C" int TesselFuzz_trace_replay(const uint8_t* data, size_t size);
extern "C" int TesselFuzz_candidate_file(const uint8_t* data, size_t size);
extern "C" int TesselFuzz_jsonl_import(const uint8_t* data, size_t size);
extern "C" int TesselFuzz_proto_convert(const uint8_t* data, size_t size);
extern "C" int TesselFuzz_submit_job(const uint8_t* data, size_t size);

namespace {

using FuzzFn = int (*)(const uint8_t*, size_t);

// Feeds every file of corpus/<target> to `fn`; the corpus must hold at least `min_files`.
void ReplayCorpus(const std::string& target, FuzzFn fn, size_t min_files) {
  const std::filesystem::path dir = std::filesystem::path(TESSEL_FUZZ_CORPUS_DIR) / target;
  ASSERT_TRUE(std::filesystem::is_directory(dir)) << dir << " is missing";
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (e.is_regular_file()) files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  ASSERT_GE(files.size(), min_files) << dir << " holds too few seeds";
  for (const auto& f : files) {
    SCOPED_TRACE(f.string());
    std::ifstream in(f, std::ios::binary);
    ASSERT_TRUE(in) << "cannot read " << f;
    std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)),
                               std::istreambuf_iterator<char>());
    EXPECT_EQ(fn(bytes.data(), bytes.size()), 0);
  }
}

TEST(FuzzCorpusReplay, WorkloadParser) {
  ReplayCorpus("workload_parser", TesselFuzz_workload_parser, 5);
}
TEST(FuzzCorpusReplay, TraceReplay) { ReplayCorpus("trace_replay", TesselFuzz_trace_replay, 5); }
TEST(FuzzCorpusReplay, CandidateFile) {
  ReplayCorpus("candidate_file", TesselFuzz_candidate_file, 4);
}
TEST(FuzzCorpusReplay, JsonlImport) { ReplayCorpus("jsonl_import", TesselFuzz_jsonl_import, 4); }
TEST(FuzzCorpusReplay, ProtoConvert) { ReplayCorpus("proto_convert", TesselFuzz_proto_convert, 4); }
TEST(FuzzCorpusReplay, SubmitJob) { ReplayCorpus("submit_job", TesselFuzz_submit_job, 6); }

}  // namespace
