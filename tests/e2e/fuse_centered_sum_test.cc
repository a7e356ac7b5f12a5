// fuse_centered_sum: layernorm's chunk sums computed in the same cross-thread reduction as the
// squares centred on them (one all-reduce of (mean, squares, count) per chunk, Chan et al.).
// What lowering and CUDA code generation produce for equal and ragged thread counts, NVRTC
// compilation where the toolkit is installed, trace replay, and each error. Results on the GPU:
// tests/gpu/e2e_gpu_test.cc (FusedCenteredSumMatchesReference).

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "schedules/lower/lower.h"
#include "schedules/schedule/schedule.h"
#include "schedules/schedule/trace.h"
#include "schedules/workload/builtins.h"
#include "tests/e2e/e2e_util.h"
#include "tests/schedules/test_workloads.h"
#ifdef TESSEL_HAVE_CUDA
#include "worker/cuda/nvrtc_compiler.h"
#endif

namespace tessel::testing {
namespace {

using schedules::BlockRV;
using schedules::Schedule;
using schedules::test_workloads::CenteredLayernormCuda;
using schedules::test_workloads::CountOf;
using ::testing::HasSubstr;

Schedule Stats(const std::string& spec, int64_t chunk, int64_t threads, bool fuse) {
  return CenteredLayernormCuda(LoadSpec(spec), chunk, threads, fuse);
}

// The squares' and sums' partial stages, center_partials applied, nothing bound.
Schedule Centered(const std::string& spec, BlockRV* sum_rf, BlockRV* sq_rf) {
  Schedule s = schedules::test_workloads::NewSchedule(LoadSpec(spec));
  EXPECT_TRUE(s.ComputeInline(BlockNamed(&s, "mean")).ok());
  BlockRV* out[] = {sum_rf, sq_rf};
  const char* names[] = {"x_sum", "sq_sum"};
  for (int i = 0; i < 2; ++i) {
    auto loops = s.GetLoops(BlockNamed(&s, names[i]));
    auto ks = s.Split(loops->back(), {-1, 16});
    *out[i] = *s.RFactor((*ks)[0]);
  }
  EXPECT_TRUE(s.CenterPartials(*sq_rf, *sum_rf).ok());
  return s;
}

void ExpectCompiles(const schedules::GeneratedSource& src) {
#ifdef TESSEL_HAVE_CUDA
  if (!worker::FindCudaIncludeDir().ok()) return;
  for (const char* arch : {"sm_80", "sm_90"}) {
    worker::NvrtcOptions o;
    o.arch = arch;
    auto bin = worker::CompileCuda(src, o);
    EXPECT_TRUE(bin.ok()) << arch << ": " << bin.status() << "\n" << src.code;
  }
#else
  (void)src;
#endif
}

TEST(FuseCenteredSum, OneReductionComputesTheSumsAndTheSquares) {
  const auto t = schedules::CudaTarget("sm_90");
  // 512 columns a chunk over 128 threads: 4 each, no guard: counts are constants.
  Schedule s = Stats("layernorm(rows=2, cols=4096)", 512, 128, true);
  auto p = schedules::Lower(s, t);
  ASSERT_TRUE(p.ok()) << p.status();
  const std::string ir = schedules::ToString(*p);
  // The sums have no kernel of their own: the squares' kernel writes both; then the two
  // combining kernels and Y.
  ASSERT_EQ(p->kernels.size(), 4u) << ir;
  EXPECT_EQ(p->kernels[0].name, "tessel_layernorm_sq_sum_rf");
  EXPECT_EQ(CountOf(ir, "allreduce_centered("), 1) << ir;
  EXPECT_THAT(ir, HasSubstr("count 4.0) over threadIdx.x x128"));
  EXPECT_EQ(CountOf(ir, "x_sum_rf[x_sum_rf_i"), 0) << ir;
  auto src = Generate(s, t);
  ASSERT_TRUE(src.ok()) << src.status();
  // Equal groups: halves of the mean, the squares' correction n/2 for groups of n; the four
  // warps in order with constant weights; no count in shared memory.
  EXPECT_THAT(src->code, HasSubstr("tessel_m = 0.5f * (tessel_m + tessel_m2);"));
  EXPECT_THAT(src->code,
              HasSubstr("tessel_q = tessel_q + tessel_q2 + tessel_d * tessel_d * 2.0f;"));
  EXPECT_THAT(src->code, HasSubstr("tessel_m = tessel_m + tessel_d * 0.25f;"));
  EXPECT_THAT(src->code, HasSubstr("tessel_n = 512.0f;"));
  EXPECT_EQ(CountOf(src->code, "tessel_red_f32[256 + "), 0) << src->code;
  EXPECT_THAT(src->code,
              HasSubstr("x_sum_rf[i_j_0_f / 8 * 8 + i_j_0_f % 8] = sq_sum_rf_sum_red[0];"));
  ExpectCompiles(*src);
}

TEST(FuseCenteredSum, RaggedChunksCountTheirElements) {
  const auto t = schedules::CudaTarget("sm_90");
  // 300 columns a chunk over 64 threads (the last 20 threads of the fifth pass idle), a last
  // chunk of 100: every thread counts what it summed.
  Schedule s = Stats("layernorm(rows=3, cols=1000)", 300, 64, true);
  auto src = Generate(s, t);
  ASSERT_TRUE(src.ok()) << src.status();
  EXPECT_THAT(
      src->code,
      HasSubstr("sq_sum_rf_count[0] = sq_sum_rf_count[0] + (i_j_0_f % 4 * 300 + j_1_0 * 64 + "
                "j_1_1 < 1000 ? 1.0f : 0.0f);"));
  EXPECT_THAT(src->code,
              HasSubstr("const float tessel_n2 = __shfl_xor_sync(tessel_mask, tessel_n"));
  EXPECT_THAT(src->code, HasSubstr("tessel_m = (tessel_m * tessel_n + "));
  // Two warps: their counts go through shared memory too.
  EXPECT_THAT(src->code, HasSubstr("tessel_red_f32[4 + (threadIdx.x >> 5)] = tessel_n;"));
  ExpectCompiles(*src);
  // Within one warp (16 threads): butterflies over 16 lanes only.
  auto small = Generate(Stats("layernorm(rows=2, cols=300)", 100, 16, true), t);
  ASSERT_TRUE(small.ok()) << small.status();
  EXPECT_THAT(small->code, HasSubstr("const unsigned tessel_mask = 0x0000ffffu;"));
  EXPECT_THAT(small->code, HasSubstr("__shfl_xor_sync(tessel_mask, tessel_m, 8, 16)"));
  EXPECT_EQ(CountOf(small->code, "__syncthreads"), 0) << small->code;
  ExpectCompiles(*small);
}

TEST(FuseCenteredSum, TraceReplaysToTheSameProgram) {
  const auto t = schedules::CudaTarget("sm_90");
  Schedule s = Stats("layernorm(rows=3, cols=1000)", 300, 64, true);
  auto trace = schedules::Trace::FromJson(s.trace().ToJson());
  ASSERT_TRUE(trace.ok()) << trace.status();
  EXPECT_THAT(s.trace().ToJson().dump(), HasSubstr("\"fuse_centered_sum\""));
  auto replayed = schedules::Replay(LoadSpec("layernorm(rows=3, cols=1000)"), *trace);
  ASSERT_TRUE(replayed.ok()) << replayed.status();
  auto a = schedules::Lower(s, t);
  auto b = schedules::Lower(*replayed, t);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(schedules::ToString(*a), schedules::ToString(*b));
}

TEST(FuseCenteredSumErrors, NotCentred) {
  Schedule s = schedules::test_workloads::NewSchedule(LoadSpec("layernorm(rows=2, cols=64)"));
  absl::Status st = s.FuseCenteredSum(BlockNamed(&s, "sq_sum"));
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(st.message(), HasSubstr("fuse_centered_sum: stage sq_sum is not centred on the sums "
                                      "of its chunks; apply center_partials to it and its sum "
                                      "stage first"));
}

TEST(FuseCenteredSumErrors, FusedTwiceAndTheSumStageAfterwards) {
  BlockRV p, q;
  Schedule s = Centered("layernorm(rows=2, cols=64)", &p, &q);
  ASSERT_TRUE(s.FuseCenteredSum(q).ok());
  EXPECT_THAT(s.FuseCenteredSum(q).message(),
              HasSubstr("stage sq_sum_rf already computes stage x_sum_rf"));
  EXPECT_THAT(s.GetLoops(p).status().message(),
              HasSubstr("stage x_sum_rf is computed by stage sq_sum_rf (fuse_centered_sum); "
                        "schedule that stage instead"));
  EXPECT_THAT(s.CacheRead("x_sum_rf", "local", {q}).status().message(),
              HasSubstr("stage sq_sum_rf computes x_sum_rf in the same pass (fuse_centered_sum); "
                        "it holds x_sum_rf in a register already"));
  EXPECT_THAT(s.CacheWrite(q, "local").status().message(),
              HasSubstr("stage sq_sum_rf computes x_sum_rf in the same reduction "
                        "(fuse_centered_sum); cache_write it before fusing"));
}

TEST(FuseCenteredSumErrors, SquaresReadACopyOfTheSums) {
  BlockRV p, q;
  Schedule s = Centered("layernorm(rows=2, cols=64)", &p, &q);
  ASSERT_TRUE(s.CacheRead("x_sum_rf", "local", {q}).ok());
  absl::Status st = s.FuseCenteredSum(q);
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(st.message(),
              HasSubstr("stage sq_sum_rf no longer squares deviations from x_sum_rf's chunk mean "
                        "at its own indices; fuse before caching x_sum_rf for it"));
}

TEST(FuseCenteredSumErrors, AReaderOfTheSumsRunsFirst) {
  BlockRV p, q;
  Schedule s = Centered("layernorm(rows=2, cols=64)", &p, &q);
  // The copy for the combining stage goes right after x_sum_rf: before the squares.
  ASSERT_TRUE(s.CacheRead("x_sum_rf", "local", {BlockNamed(&s, "x_sum")}).ok());
  absl::Status st = s.FuseCenteredSum(q);
  EXPECT_THAT(st.message(), HasSubstr("stage x_sum_rf_local reads x_sum_rf before stage sq_sum_rf "
                                      "runs, so it could not see the fused pass"));
}

TEST(FuseCenteredSumErrors, LoweringNeedsTheSquaresAcrossThreadIdxX) {
  BlockRV p, q;
  Schedule s = Centered("layernorm(rows=2, cols=64)", &p, &q);
  ASSERT_TRUE(s.FuseCenteredSum(q).ok());
  for (const auto& t : {schedules::HostTarget(), schedules::CudaTarget("sm_90")}) {
    auto prog = schedules::Lower(s, t);
    ASSERT_FALSE(prog.ok());
    EXPECT_THAT(prog.status().message(),
                HasSubstr("stage sq_sum_rf computes x_sum_rf in the same reduction "
                          "(fuse_centered_sum), which combines (sum, squares) pairs across the "
                          "threads of threadIdx.x: bind a reduction loop of sq_sum_rf to "
                          "threadIdx.x (and none to the cluster)"));
  }
}

}  // namespace
}  // namespace tessel::testing
