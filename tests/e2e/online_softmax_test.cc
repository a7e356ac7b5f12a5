// fuse_online_max: the row maximum of a softmax computed in the same pass as the sum of
// exponentials. Structure of the lowered program, the primitive's errors, trace replay, and the
// results on the host against the reference lowering (CUDA results: tests/gpu, with the
// hand-written softmax schedule, which uses the primitive).

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "schedules/lower/lower.h"
#include "schedules/schedule/schedule.h"
#include "schedules/templates/templates.h"
#include "schedules/workload/builtins.h"
#include "schedules/workload/parser.h"
#include "tests/e2e/e2e_util.h"
#include "worker/backend.h"

namespace tessel::testing {
namespace {

using schedules::BlockRV;
using schedules::HostTarget;
using schedules::LoopRV;
using schedules::Schedule;
using schedules::Workload;
using ::testing::HasSubstr;

// exps inlined into row_sum and Y, row_sum fused with row_max.
Schedule Fused(const Workload& w) {
  auto s = Schedule::Create(w);
  EXPECT_TRUE(s.ok()) << s.status();
  EXPECT_TRUE(s->ComputeInline(BlockNamed(&*s, "exps")).ok());
  absl::Status st = s->FuseOnlineMax(BlockNamed(&*s, "row_sum"));
  EXPECT_TRUE(st.ok()) << st;
  return std::move(*s);
}

TEST(FuseOnlineMax, RootStagesBecomeOnePass) {
  Schedule s = Fused(LoadSpec("softmax(rows=5, cols=33)"));
  auto p = schedules::Lower(s, HostTarget());
  ASSERT_TRUE(p.ok()) << p.status();
  // row_max has no nest of its own: row_sum's nest writes both, then Y.
  ASSERT_EQ(p->kernels.size(), 2u);
  EXPECT_THAT(p->kernels[0].name, HasSubstr("row_sum"));
  const std::string ir = schedules::ToString(*p);
  EXPECT_THAT(ir, HasSubstr("row_max[row_sum_i] = -inf"));
  EXPECT_THAT(ir, HasSubstr("row_max[row_sum_i] = max(row_max[row_sum_i], row_sum_x)"));
  // One pass over X: X is read once in row_sum's nest and once in Y's.
  size_t reads = 0;
  for (size_t at = ir.find("X["); at != std::string::npos; at = ir.find("X[", at + 1)) ++reads;
  EXPECT_EQ(reads, 2u) << ir;
}

TEST(FuseOnlineMax, HostRootStagesMatchReference) {
  ExpectMatchesReference(Fused(LoadSpec("softmax(rows=7, cols=1001)")), HostTarget(), 3);
}

TEST(FuseOnlineMax, HostF16MatchesReference) {
  ExpectMatchesReference(Fused(LoadSpec("softmax(rows=3, cols=257, dtype=f16)")), HostTarget(), 4);
}

TEST(FuseOnlineMax, HostAttachedLocalMatchesReference) {
  // The max and the sum as local scalars computed inside Y's row loop, the reduction split.
  Schedule s = Fused(LoadSpec("softmax(rows=6, cols=515)"));
  ASSERT_TRUE(s.SetScope(BlockNamed(&s, "row_sum"), "local").ok());
  auto yl = s.GetLoops(BlockNamed(&s, "Y"));
  ASSERT_TRUE(yl.ok());
  absl::Status at = s.ComputeAt(BlockNamed(&s, "row_sum"), (*yl)[0]);
  ASSERT_TRUE(at.ok()) << at;
  EXPECT_EQ(s.FindStage("row_max")->attach.stage, "Y");  // follows row_sum
  auto sl = s.GetLoops(BlockNamed(&s, "row_sum"));
  ASSERT_TRUE(sl.ok());
  ASSERT_TRUE(s.Split(sl->back(), {-1, 8}).ok());
  ExpectMatchesReference(s, HostTarget(), 5);
}

TEST(FuseOnlineMax, CudaCrossThreadLowersToTwoAllReduces) {
  auto t = schedules::CudaTarget("sm_90");
  schedules::TemplateOptions o;
  o.row_threads = 128;
  o.online_softmax = true;
  auto s = schedules::HandwrittenSchedule(LoadSpec("softmax(rows=4, cols=4096)"), t, o);
  ASSERT_TRUE(s.ok()) << s.status();
  auto p = schedules::Lower(*s, t);
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_EQ(p->kernels.size(), 1u);
  const std::string ir = schedules::ToString(*p);
  // The block's maximum, then the sums rescaled to it.
  const size_t max_red = ir.find("allreduce_max(row_sum_max[0])");
  const size_t sum_red = ir.find("allreduce_sum(row_sum_acc[0] * exp(row_sum_max[0] - ");
  ASSERT_NE(max_red, std::string::npos) << ir;
  ASSERT_NE(sum_red, std::string::npos) << ir;
  EXPECT_LT(max_red, sum_red);
  // Generated CUDA compiles where NVRTC is available: tests/e2e/cuda_compile_test.cc.
}

TEST(MaxBlocksPerSm, PadsDynamicSharedMemoryToLimitOccupancy) {
  // One 1024-thread block per SM: half the SM's shared memory and a bit more per block.
  schedules::TemplateOptions o;
  o.row_blocks_per_sm_limit = 1;
  o.online_softmax = true;
  for (const char* arch : {"sm_80", "sm_90"}) {
    auto t = schedules::CudaTarget(arch);
    auto s = schedules::HandwrittenSchedule(LoadSpec("softmax(rows=64, cols=4096)"), t, o);
    ASSERT_TRUE(s.ok()) << s.status();
    auto src = Generate(*s, t);
    ASSERT_TRUE(src.ok()) << src.status();
    ASSERT_EQ(src->kernels.size(), 1u);
    EXPECT_EQ(src->kernels[0].launch.dynamic_shared_bytes, t.shared_bytes_per_sm / 2 + 1024)
        << arch;
    EXPECT_GT(2 * src->kernels[0].launch.dynamic_shared_bytes, t.shared_bytes_per_sm);
  }
  // Without the annotation: none.
  auto plain = schedules::HandwrittenSchedule(LoadSpec("softmax(rows=64, cols=4096)"),
                                              schedules::CudaTarget("sm_90"));
  auto src = Generate(*plain, schedules::CudaTarget("sm_90"));
  ASSERT_TRUE(src.ok());
  EXPECT_EQ(src->kernels[0].launch.dynamic_shared_bytes, 0);
}

TEST(FuseOnlineMax, TraceReplaysToTheSameProgram) {
  Schedule s = Fused(LoadSpec("softmax(rows=5, cols=40)"));
  auto parsed = schedules::Trace::Parse(s.trace().ToJsonString());
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  auto r = schedules::Replay(s.workload(), *parsed);
  ASSERT_TRUE(r.ok()) << r.status();
  auto a = schedules::Lower(s, HostTarget());
  auto b = schedules::Lower(*r, HostTarget());
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(schedules::ToString(*a), schedules::ToString(*b));
  EXPECT_THAT(s.trace().ToJsonString(), HasSubstr("\"fuse_online_max\""));
}

// ---- Errors: each names the stage and what is wrong.

std::string FuseError(Schedule* s, const std::string& stage) {
  absl::Status st = s->FuseOnlineMax(BlockNamed(s, stage));
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition) << st;
  return std::string(st.message());
}

TEST(FuseOnlineMaxErrors, NotASum) {
  auto s = Schedule::Create(LoadSpec("softmax(rows=2, cols=8)"));
  EXPECT_THAT(FuseError(&*s, "row_max"),
              HasSubstr("fuse_online_max: stage row_max is not a float sum; it must be a sum over "
                        "k of exp(e(k) - m[axes]) where m is the max over k of e(k)"));
}

TEST(FuseOnlineMaxErrors, ExponentNotInlined) {
  auto s = Schedule::Create(LoadSpec("softmax(rows=2, cols=8)"));
  EXPECT_THAT(FuseError(&*s, "row_sum"),
              HasSubstr("the body of stage row_sum is not exp(e - m[...]) of a computed m"));
}

TEST(FuseOnlineMaxErrors, MatmulIsNotASoftmax) {
  auto s = Schedule::Create(LoadSpec("matmul(M=4, N=4, K=4)"));
  EXPECT_THAT(FuseError(&*s, "C"), HasSubstr("the body of stage C is not exp(e - m[...])"));
}

TEST(FuseOnlineMaxErrors, ExponentIsNotTheMaximizedValue) {
  // row_sum sums exp(2 x - m): the maximum of x is not the maximum of the exponent's term.
  auto w = schedules::ParseWorkload(R"(
    X = input(f32, [4, 16])
    m[i] = max(j) X[i, j]
    s[i] = sum(j) exp(X[i, j] * 2.0 - m[i])
    Y[i, j] = exp(X[i, j] - m[i]) / s[i]
    output Y
  )");
  ASSERT_TRUE(w.ok()) << w.status();
  auto s = Schedule::Create(*w);
  ASSERT_TRUE(s.ok());
  EXPECT_THAT(FuseError(&*s, "s"),
              HasSubstr("stage m is not the max of the exponent that stage s uses"));
}

TEST(FuseOnlineMaxErrors, AlreadyFused) {
  Schedule s = Fused(LoadSpec("softmax(rows=2, cols=8)"));
  EXPECT_THAT(FuseError(&s, "row_sum"), HasSubstr("stage row_sum already computes stage row_max"));
}

TEST(FuseOnlineMaxErrors, FusedMaxHasNoLoops) {
  Schedule s = Fused(LoadSpec("softmax(rows=2, cols=8)"));
  auto b = s.GetBlock("row_max");
  ASSERT_TRUE(b.ok());
  auto loops = s.GetLoops(*b);
  ASSERT_FALSE(loops.ok());
  EXPECT_THAT(loops.status().message(),
              HasSubstr("stage row_max is computed by stage row_sum (fuse_online_max); schedule "
                        "that stage instead"));
}

TEST(FuseOnlineMaxErrors, RFactorAfterFusing) {
  Schedule s = Fused(LoadSpec("softmax(rows=2, cols=64)"));
  auto loops = s.GetLoops(BlockNamed(&s, "row_sum"));
  ASSERT_TRUE(loops.ok());
  auto parts = s.Split(loops->back(), {-1, 8});
  ASSERT_TRUE(parts.ok());
  auto rf = s.RFactor((*parts)[0]);
  ASSERT_FALSE(rf.ok());
  EXPECT_THAT(rf.status().message(),
              HasSubstr("stage row_sum computes row_max in the same pass (fuse_online_max); "
                        "rfactor it before fusing"));
}

TEST(FuseOnlineMaxErrors, CacheWriteAfterFusing) {
  Schedule s = Fused(LoadSpec("softmax(rows=2, cols=64)"));
  auto cw = s.CacheWrite(BlockNamed(&s, "row_sum"), "local");
  ASSERT_FALSE(cw.ok());
  EXPECT_THAT(cw.status().message(), HasSubstr("cache_write it before fusing"));
}

TEST(FuseOnlineMaxErrors, CacheReadOfTheMaxForTheFusedStage) {
  Schedule s = Fused(LoadSpec("softmax(rows=2, cols=64)"));
  auto c = s.CacheRead("row_max", "local", {BlockNamed(&s, "row_sum")});
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(c.status().message(),
              HasSubstr("cache_read: stage row_sum computes row_max in the same pass "
                        "(fuse_online_max); it holds row_max in a register already"));
}

}  // namespace
}  // namespace tessel::testing
