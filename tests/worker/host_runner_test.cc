#include "worker/host/host_runner.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "measure/measurement.h"
#include "schedules/codegen/source.h"
#include "schedules/ir/buffer.h"
#include "tests/test_util.h"
#include "worker/backend.h"
#include "worker/host/host_compiler.h"
#include "worker/output_compare.h"

namespace tessel::worker {
namespace {

using schedules::BufferRole;
using schedules::DType;
using schedules::GeneratedSource;
using schedules::MakeBuffer;

GeneratedSource HostSource(std::string code, std::string entry,
                           std::vector<schedules::ProgramBuffer> buffers) {
  GeneratedSource s;
  s.target = schedules::TargetKind::kHost;
  s.code = std::move(code);
  schedules::KernelSource k;
  k.entry = std::move(entry);
  s.kernels.push_back(k);
  s.buffers = std::move(buffers);
  return s;
}

// z[i] = x[i] + y[i] over 1000 floats.
std::vector<schedules::ProgramBuffer> VaddBuffers() {
  return {{MakeBuffer("x", DType::kFloat32, {1000}), BufferRole::kInput},
          {MakeBuffer("y", DType::kFloat32, {1000}), BufferRole::kInput},
          {MakeBuffer("z", DType::kFloat32, {1000}), BufferRole::kOutput}};
}

GeneratedSource Vadd(const std::string& body) {
  return HostSource(R"(
extern "C" void vadd(void* const* b) {
  const float* x = static_cast<const float*>(b[0]);
  const float* y = static_cast<const float*>(b[1]);
  float* z = static_cast<float*>(b[2]);
)" + body + "\n}\n",
                    "vadd", VaddBuffers());
}

const char kVaddCandidate[] = R"(
#pragma omp parallel for
  for (int i = 0; i < 1000; ++i) z[i] = x[i] + y[i];)";

GeneratedSource VaddReference() {
  return Vadd("for (int i = 999; i >= 0; --i) z[i] = (float)((double)x[i] + (double)y[i]);");
}

// out[r] = sum_k in[r, k] over a (64, 4096) input.
std::vector<schedules::ProgramBuffer> RowSumBuffers() {
  return {{MakeBuffer("in", DType::kFloat32, {64, 4096}), BufferRole::kInput},
          {MakeBuffer("out", DType::kFloat32, {64}), BufferRole::kOutput}};
}

class WorkerHostRunnerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    work_dir_ = tessel::testing::MakeTempDir("tessel_host_runner_");
    ASSERT_FALSE(work_dir_.empty());
    options_.run.host.work_dir = work_dir_;
  }
  // The vector add compiled here and timed with `timing` on its verification inputs.
  absl::StatusOr<measure::Timings> TimeVadd(const measure::TimingOptions& timing) {
    absl::StatusOr<HostModule> module = CompileHost(Vadd(kVaddCandidate), options_.run.host);
    if (!module.ok()) return module.status();
    absl::StatusOr<HostBuffers> buffers = MakeVerificationBuffers(VaddBuffers(), 9);
    if (!buffers.ok()) return buffers.status();
    return TimeHostModule(*module, &*buffers, timing);
  }

  std::string work_dir_;
  VerifyOptions options_;
};

TEST_F(WorkerHostRunnerTest, VectorAddVerifiesAgainstReference) {
  absl::Status s = RunAndVerify(Vadd(kVaddCandidate), VaddReference(), 1, options_);
  EXPECT_TRUE(s.ok()) << s;
}

TEST_F(WorkerHostRunnerTest, ReductionVerifiesAgainstDoubleReference) {
  GeneratedSource candidate = HostSource(R"(
extern "C" void rowsum(void* const* b) {
  const float* in = static_cast<const float*>(b[0]);
  float* out = static_cast<float*>(b[1]);
#pragma omp parallel for
  for (int r = 0; r < 64; ++r) {
    float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int k = 0; k < 4096; k += 8)
      for (int j = 0; j < 8; ++j) acc[j] += in[r * 4096 + k + j];
    float s = 0;
    for (int j = 0; j < 8; ++j) s += acc[j];
    out[r] = s;
  }
})",
                                         "rowsum", RowSumBuffers());
  GeneratedSource reference = HostSource(R"(
extern "C" void rowsum_ref(void* const* b) {
  const float* in = static_cast<const float*>(b[0]);
  float* out = static_cast<float*>(b[1]);
  for (int r = 0; r < 64; ++r) {
    double s = 0;
    for (int k = 0; k < 4096; ++k) s += in[r * 4096 + k];
    out[r] = (float)s;
  }
})",
                                         "rowsum_ref", RowSumBuffers());
  absl::Status s = RunAndVerify(candidate, reference, 2, options_);
  EXPECT_TRUE(s.ok()) << s;
}

TEST_F(WorkerHostRunnerTest, WrongAnswerFailsNamingTheBuffer) {
  absl::Status s = RunAndVerify(
      Vadd("for (int i = 0; i < 1000; ++i) z[i] = x[i] + y[i] + (i == 123 ? 0.5f : 0.0f);"),
      VaddReference(), 3, options_);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(measure::AttachedMeasureStatus(s), measure::MeasureStatus::kVerifyFailed);
  EXPECT_NE(s.message().find("output 'z'"), absl::string_view::npos) << s;
  EXPECT_NE(s.message().find("1 of 1000 elements differ"), absl::string_view::npos) << s;
  EXPECT_NE(s.message().find("index 123"), absl::string_view::npos) << s;
}

TEST_F(WorkerHostRunnerTest, UnwrittenOutputIsReported) {
  absl::Status s = RunAndVerify(Vadd("for (int i = 0; i < 600; ++i) z[i] = x[i] + y[i];"),
                                VaddReference(), 4, options_);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(measure::AttachedMeasureStatus(s), measure::MeasureStatus::kVerifyFailed);
  EXPECT_NE(s.message().find("400 never written"), absl::string_view::npos) << s;
  EXPECT_NE(s.message().find("first at index 600"), absl::string_view::npos) << s;
}

TEST_F(WorkerHostRunnerTest, WritingAnInputFails) {
  absl::Status s = RunAndVerify(
      Vadd("for (int i = 0; i < 1000; ++i) { z[i] = x[i] + y[i]; const_cast<float*>(x)[i] = 0; }"),
      VaddReference(), 5, options_);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("wrote into input buffer 'x'"), absl::string_view::npos) << s;
}

TEST_F(WorkerHostRunnerTest, CompileErrorReturnsTheCompilerLog) {
  absl::Status s = RunAndVerify(Vadd("for (int i = 0; i < 1000; ++i) z[i] = x[i] + undeclared_w;"),
                                VaddReference(), 6, options_);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(measure::AttachedMeasureStatus(s), measure::MeasureStatus::kCompileError);
  EXPECT_NE(s.message().find("compiler log"), absl::string_view::npos) << s;
  EXPECT_NE(s.message().find("undeclared_w"), absl::string_view::npos) << s;
  EXPECT_NE(s.message().find("error"), absl::string_view::npos) << s;
}

TEST_F(WorkerHostRunnerTest, BrokenReferenceIsNotTheCandidatesFault) {
  absl::Status s = RunAndVerify(Vadd(kVaddCandidate), Vadd("syntax error here"), 7, options_);
  ASSERT_FALSE(s.ok());
  EXPECT_FALSE(measure::AttachedMeasureStatus(s).has_value());
  EXPECT_NE(s.message().find("the reference program failed"), absl::string_view::npos) << s;
}

TEST_F(WorkerHostRunnerTest, MissingEntryIsNamed) {
  GeneratedSource src = Vadd(kVaddCandidate);
  src.kernels[0].entry = "vadd_typo";
  absl::StatusOr<HostModule> m = CompileHost(src, options_.run.host);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("entry 'vadd_typo' not found"), absl::string_view::npos)
      << m.status();
}

TEST_F(WorkerHostRunnerTest, DifferentBufferListsAreRejected) {
  GeneratedSource ref = VaddReference();
  ref.buffers[2].buffer = MakeBuffer("z", DType::kFloat16, {1000});
  absl::Status s = RunAndVerify(Vadd(kVaddCandidate), ref, 8, options_);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("buffer 2 differs"), absl::string_view::npos) << s;
}

TEST_F(WorkerHostRunnerTest, SecondCompileHitsTheCache) {
  absl::StatusOr<HostModule> first = CompileHost(Vadd(kVaddCandidate), options_.run.host);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_FALSE(first->cache_hit());
  absl::StatusOr<HostModule> second = CompileHost(Vadd(kVaddCandidate), options_.run.host);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_TRUE(second->cache_hit());
  EXPECT_EQ(first->library_path(), second->library_path());
  HostCompileOptions other = options_.run.host;
  other.extra_flags = {"-DTESSEL_OTHER_KEY"};
  absl::StatusOr<HostModule> third = CompileHost(Vadd(kVaddCandidate), other);
  ASSERT_TRUE(third.ok()) << third.status();
  EXPECT_FALSE(third->cache_hit());
}

TEST_F(WorkerHostRunnerTest, TimingReturnsEveryRepeat) {
  measure::TimingOptions timing;
  timing.warmup_runs = 1;
  timing.min_repeats = 4;
  timing.max_repeats = 6;
  timing.min_total_ms = 1e9;  // never reached: stops at max_repeats
  absl::StatusOr<measure::Timings> t = TimeVadd(timing);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->repeats_ms.size(), 6u);
  for (double ms : t->repeats_ms) EXPECT_GE(ms, 0.0);
  EXPECT_LE(t->min_ms, t->median_ms);
  EXPECT_LE(t->median_ms, t->max_ms);

  MeasureOptions measure;
  measure.run = options_.run;
  measure.timing.min_repeats = 3;
  measure.timing.min_total_ms = 0;
  absl::StatusOr<measure::Timings> m = Measure(Vadd(kVaddCandidate), measure);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->repeats_ms.size(), 3u);
}

TEST_F(WorkerHostRunnerTest, TimingStopsAtTheWallClockLimit) {
  // A microsecond kernel never reaches min_total_ms; the flushes would take max_repeats times
  // their own cost. The wall-clock limit ends it once min_repeats are done.
  measure::TimingOptions timing;
  timing.min_repeats = 3;
  timing.max_repeats = 1000000;
  timing.min_total_ms = 1e9;
  timing.max_wall_ms = 0;  // stop as soon as min_repeats are done
  absl::StatusOr<measure::Timings> t = TimeVadd(timing);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->repeats_ms.size(), 3u);
}

TEST_F(WorkerHostRunnerTest, TimingStopsOnceTheMedianIsPrecise) {
  // Neither the total time nor the wall clock ends it: the median's precision does, as soon as
  // its 95% interval is within the (here loose) precision, and not before there is an interval.
  measure::TimingOptions timing;
  timing.min_repeats = 3;
  timing.max_repeats = 5000;
  timing.min_total_ms = 1e9;
  timing.max_wall_ms = 1e9;
  timing.median_precision = 0.9;
  absl::StatusOr<measure::Timings> t = TimeVadd(timing);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_GE(t->repeats_ms.size(), 8u);
  EXPECT_LT(t->repeats_ms.size(), 5000u);
  EXPECT_LE(measure::MedianHalfWidth(t->repeats_ms), 0.9);
}

TEST_F(WorkerHostRunnerTest, WrongBufferCountIsAnError) {
  absl::StatusOr<HostModule> module = CompileHost(Vadd(kVaddCandidate), options_.run.host);
  ASSERT_TRUE(module.ok()) << module.status();
  HostBuffers two;
  two.data.resize(2);
  absl::Status s = RunHostModule(*module, &two);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("takes 3 buffers but got 2"), absl::string_view::npos) << s;
}

TEST(WorkerHostCacheTest, LastLevelCacheSizeIsPositive) {
  EXPECT_GT(HostLastLevelCacheBytes(), 0);
  FlushHostCaches();  // must not crash
}

}  // namespace
}  // namespace tessel::worker
