// Tests of the cache (cache_read, cache_write) primitives (schedules/schedule/primitive/cache.cc):
// what each does to the stage state and to the lowered IR, and each of its errors (code and
// message), with the state left unchanged by a failed primitive.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "schedules/lower/lower.h"
#include "schedules/schedule/schedule.h"
#include "schedules/workload/builtins.h"
#include "schedules/workload/parser.h"
#include "tests/schedules/primitive/primitive_test_util.h"
#include "tests/schedules/test_workloads.h"

namespace tessel::schedules {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using namespace test_workloads;  // NOLINT
using namespace primitive_test;  // NOLINT

// =============================================================================================
// cache_read

TEST(ScheduleCacheRead, SharedCopyAtReductionTile) {
  TiledMatmul t = MakeTiledMatmul(64, 64, 64);
  Schedule& sch = t.sch;
  auto as = sch.CacheRead("A", "shared", {t.c});
  TESSEL_ASSERT_OK(as);
  const Stage& a = sch.GetStage(*as);
  EXPECT_EQ(a.name, "A_shared");
  EXPECT_EQ(a.origin, "cache_read");
  EXPECT_EQ(a.buffer->scope, MemScope::kShared);
  EXPECT_EQ(a.buffer->shape, (std::vector<int64_t>{64, 64}));
  EXPECT_EQ(ToString(a.body), "A[ax0, ax1]");
  EXPECT_EQ(ToString(StageNamed(sch, "C").body), "A_shared[i, k] * B[k, j]");
  // The copy stage comes before its reader.
  EXPECT_EQ(sch.stages()[0].name, "A_shared");
  EXPECT_EQ(sch.stages()[1].name, "C");
  EXPECT_EQ(sch.trace().insts.back().attrs["tensor"], "A");
  EXPECT_EQ(sch.trace().insts.back().attrs["scope"], "shared");

  TESSEL_ASSERT_OK(sch.ComputeAt(*as, t.k0));
  const Stage& a2 = StageNamed(sch, "A_shared");
  EXPECT_EQ(a2.attach.kind, AttachPoint::Kind::kAt);
  EXPECT_EQ(a2.attach.stage, "C");
  EXPECT_EQ(a2.attach.iter, sch.LoopIter(t.k0));
  EXPECT_THAT(LeafExtents(a2), ElementsAre(16, 8));

  auto prog = Lower(sch, CudaT());
  TESSEL_ASSERT_OK(prog);
  const std::string ir = ToString(prog->kernels[0].body);
  EXPECT_THAT(ir, HasSubstr("alloc shared f32 A_shared[16, 8]"));
  EXPECT_THAT(ir, HasSubstr("A_shared[i_1, k_1]"));
  EXPECT_THAT(ir, HasSubstr("A_shared[ax0, ax1] = A[i_0 * 16 + ax0, k_0 * 8 + ax1]"));
  // The copy runs once per k_0 iteration: a barrier before it (previous readers) and after it.
  EXPECT_EQ(CountOf(ir, "barrier"), 2) << ir;
  EXPECT_LT(Pos(ir, "for k_0"), Pos(ir, "barrier"));
  EXPECT_LT(Pos(ir, "barrier"), Pos(ir, "A_shared[ax0, ax1] ="));
  EXPECT_LT(Pos(ir, "A_shared[ax0, ax1] ="), Pos(ir, "for k_1"));
  EXPECT_EQ(prog->kernels[0].launch.block[0], 16);
  EXPECT_EQ(prog->kernels[0].launch.block[1], 16);
}

TEST(ScheduleCacheRead, OfAComputedStage) {
  Schedule sch = NewSchedule(MatmulRelu(8, 8, 8));
  BlockRV d = BlockOf(sch, "D");
  auto cs = sch.CacheRead("C", "local", {d});
  TESSEL_ASSERT_OK(cs);
  std::vector<std::string> names;
  for (const Stage& s : sch.stages()) names.push_back(s.name);
  EXPECT_THAT(names, ElementsAre("C", "C_local", "D"));
  EXPECT_EQ(ToString(StageNamed(sch, "D").body), "max(C_local[i, j], 0.0)");
  EXPECT_EQ(ToString(StageNamed(sch, "C_local").body), "C[ax0, ax1]");
}

TEST(ScheduleCacheRead, SecondCacheGetsUniqueName) {
  Schedule sch = NewSchedule(Matmul(8, 8, 8));
  BlockRV c = BlockOf(sch, "C");
  TESSEL_ASSERT_OK(sch.CacheRead("A", "shared", {c}));
  auto second = sch.CacheRead("B", "shared", {c});
  TESSEL_ASSERT_OK(second);
  EXPECT_EQ(sch.GetStage(*second).name, "B_shared");
  auto third = sch.CacheRead("A_shared", "shared", {c});
  TESSEL_ASSERT_OK(third);
  EXPECT_EQ(sch.GetStage(*third).name, "A_shared_shared");
}

TEST(ScheduleErrors, CacheReadBadScope) {
  Schedule sch = NewSchedule(Matmul(8, 8, 8));
  BlockRV c = BlockOf(sch, "C");
  ExpectFails(
      sch, [&] { return sch.CacheRead("A", "global", {c}); }, kInvalid,
      "cache_read: unknown cache scope 'global'; use shared, local or fragment");
  ExpectFails(
      sch, [&] { return sch.CacheRead("A", "texture", {c}); }, kInvalid,
      "unknown cache scope 'texture'");
}

TEST(ScheduleErrors, CacheReadUnknownTensor) {
  Schedule sch = NewSchedule(Matmul(8, 8, 8));
  BlockRV c = BlockOf(sch, "C");
  ExpectFails(
      sch, [&] { return sch.CacheRead("Z", "shared", {c}); }, kInvalid,
      "cache_read: no tensor named 'Z' to cache");
}

TEST(ScheduleErrors, CacheReadNoReaders) {
  Schedule sch = NewSchedule(Matmul(8, 8, 8));
  ExpectFails(
      sch, [&] { return sch.CacheRead("A", "shared", {}); }, kInvalid,
      "cache_read: needs at least one reader stage");
}

TEST(ScheduleErrors, CacheReadReaderDoesNotRead) {
  Schedule sch = NewSchedule(MatmulRelu(8, 8, 8));
  BlockRV d = BlockOf(sch, "D");
  ExpectFails(
      sch, [&] { return sch.CacheRead("A", "shared", {d}); }, kPrecondition,
      "cache_read: stage D does not read A");
}

TEST(ScheduleErrors, CacheReadInlinedStage) {
  Schedule sch = NewSchedule(ElementwiseChain(8, 8));
  BlockRV b = BlockOf(sch, "B");
  BlockRV c = BlockOf(sch, "C");
  TESSEL_ASSERT_OK(sch.ComputeInline(b));
  ExpectFails(
      sch, [&] { return sch.CacheRead("B", "shared", {c}); }, kPrecondition,
      "cache_read: stage B was inlined; it has no buffer to cache");
}

// =============================================================================================
// cache_write

TEST(ScheduleCacheWrite, MovesComputationToLocalStage) {
  Schedule sch = NewSchedule(Matmul(16, 16, 8));
  BlockRV c = BlockOf(sch, "C");
  auto cl = sch.CacheWrite(c, "local");
  TESSEL_ASSERT_OK(cl);
  const Stage& l = sch.GetStage(*cl);
  EXPECT_EQ(l.name, "C_local");
  EXPECT_EQ(l.origin, "cache_write");
  EXPECT_EQ(l.buffer->scope, MemScope::kLocal);
  ASSERT_TRUE(l.reduce.has_value());
  EXPECT_EQ(ToString(l.body), "A[i, k] * B[k, j]");
  EXPECT_THAT(LeafNames(l), ElementsAre("i", "j", "k"));
  EXPECT_FALSE(l.is_output);
  const Stage& s = StageNamed(sch, "C");
  EXPECT_FALSE(s.reduce.has_value());
  EXPECT_TRUE(s.reduce_axes.empty());
  EXPECT_EQ(ToString(s.body), "C_local[i, j]");
  EXPECT_THAT(LeafNames(s), ElementsAre("i", "j"));
  EXPECT_TRUE(s.is_output);
  EXPECT_EQ(sch.stages()[0].name, "C_local");

  // Not attached yet: lowering refuses a local stage at the root.
  EXPECT_THAT(LowerText(sch, CudaT()), HasSubstr("stage C_local is in local memory but not "
                                                 "attached to any loop"));
  std::vector<LoopRV> loops = LoopsOf(sch, "C");
  TESSEL_ASSERT_OK(sch.ComputeAt(*cl, loops[1]));
  EXPECT_THAT(LeafExtents(StageNamed(sch, "C_local")), ElementsAre(1, 1, 8));
  const std::string ir = LowerText(sch, HostT());
  EXPECT_THAT(ir, HasSubstr("alloc local f32 C_local[1, 1]"));
  EXPECT_THAT(ir, HasSubstr("C_local[0, 0] = 0.0"));
  EXPECT_THAT(ir, HasSubstr("C_local[0, 0] = C_local[0, 0] + A["));
  // Lowering renames C's loop variables (C_local's are also i and j).
  EXPECT_THAT(ir, HasSubstr("C[C_i, C_j] = C_local[0, 0]"));
}

TEST(ScheduleErrors, CacheWriteBadScope) {
  Schedule sch = NewSchedule(Matmul(8, 8, 8));
  BlockRV c = BlockOf(sch, "C");
  ExpectFails(
      sch, [&] { return sch.CacheWrite(c, "global"); }, kInvalid,
      "cache_write: unknown cache scope 'global'; use shared, local or fragment");
}

TEST(ScheduleErrors, CacheWriteAfterSplit) {
  Schedule sch = NewSchedule(Matmul(8, 8, 8));
  BlockRV c = BlockOf(sch, "C");
  TESSEL_ASSERT_OK(sch.Split(LoopsOf(sch, c)[0], {2, 4}));
  ExpectFails(
      sch, [&] { return sch.CacheWrite(c, "local"); }, kPrecondition,
      "cache_write: stage C has transformed loops or is attached; cache_write must come "
      "before its loops are transformed");
}

TEST(ScheduleErrors, CacheWriteInlined) {
  Schedule sch = NewSchedule(ElementwiseChain(8, 8));
  BlockRV b = BlockOf(sch, "B");
  TESSEL_ASSERT_OK(sch.ComputeInline(b));
  ExpectFails(
      sch, [&] { return sch.CacheWrite(b, "local"); }, kPrecondition,
      "cache_write: stage B was inlined and has no loops");
}

// Regression: cache_write resets the stage's loops, so a binding, loop kind, loop annotation or
// decomposed initialization on them would be dropped silently (the trace still holding it).
TEST(ScheduleErrors, CacheWriteAfterBind) {
  Schedule sch = NewSchedule(Matmul(8, 8, 8));
  BlockRV c = BlockOf(sch, "C");
  TESSEL_ASSERT_OK(sch.Bind(LoopsOf(sch, c)[0], "blockIdx.x"));
  ExpectFails(
      sch, [&] { return sch.CacheWrite(c, "local"); }, kPrecondition,
      "cache_write: loop i of stage C is already bound to blockIdx.x; cache_write must "
      "come before its loops are transformed");
}

TEST(ScheduleErrors, CacheWriteAfterParallelOrAnnotate) {
  Schedule sch = NewSchedule(Matmul(8, 8, 8));
  BlockRV c = BlockOf(sch, "C");
  std::vector<LoopRV> l = LoopsOf(sch, c);
  TESSEL_ASSERT_OK(sch.Parallel(l[0]));
  ExpectFails(
      sch, [&] { return sch.CacheWrite(c, "local"); }, kPrecondition,
      "cache_write: loop i of stage C is already parallel; cache_write must come before "
      "its loops are transformed");
  Schedule sch2 = NewSchedule(Matmul(8, 8, 8));
  BlockRV c2 = BlockOf(sch2, "C");
  TESSEL_ASSERT_OK(sch2.Annotate(LoopsOf(sch2, c2)[1], "pipeline_depth", 2));
  ExpectFails(
      sch2, [&] { return sch2.CacheWrite(c2, "local"); }, kPrecondition,
      "cache_write: loop j of stage C is already annotated; cache_write must come "
      "before its loops are transformed");
}

TEST(ScheduleErrors, CacheWriteAfterDecomposeReduction) {
  Schedule sch = NewSchedule(Matmul(8, 8, 8));
  BlockRV c = BlockOf(sch, "C");
  TESSEL_ASSERT_OK(sch.DecomposeReduction(c, LoopsOf(sch, c)[2]));
  ExpectFails(
      sch, [&] { return sch.CacheWrite(c, "local"); }, kPrecondition,
      "cache_write: stage C has a decomposed reduction; cache_write must come before its "
      "loops are transformed");
}

// =============================================================================================
// reindex

TEST(ScheduleReIndex, CopiesWhatTheReaderReadsInItsOwnVariables) {
  auto w = ParseWorkloadSpec(
      "conv2d(N=2, C=16, H=6, W=6, K=16, R=3, S=3, padding=1, layout=nhwc, dtype=f16)");
  ASSERT_TRUE(w.ok()) << w.status();
  Schedule sch = NewSchedule(*w);
  BlockRV conv = BlockOf(sch, "conv");
  TESSEL_ASSERT_OK(sch.FuseAxes(conv, {0, 1, 2}));
  TESSEL_ASSERT_OK(sch.FuseAxes(conv, {2, 3, 4}));
  // The padded input as the GEMM's A operand: [m, kk], gathered from padded.
  BlockRV a = ValueOrDie(sch.ReIndex(conv, "padded", "shared"));
  const Stage& copy = sch.GetStage(a);
  EXPECT_EQ(copy.name, "padded_shared");
  EXPECT_EQ(copy.buffer->shape, (std::vector<int64_t>{72, 144}));
  EXPECT_EQ(copy.buffer->scope, MemScope::kShared);
  EXPECT_EQ(ToString(copy.body),
            "padded[ax0 / 36, ax0 / 6 % 6 + ax1 / 48, ax0 % 6 + ax1 / 16 % 3, ax1 % 16]");
  EXPECT_THAT(ToString(StageNamed(sch, "conv").body), HasSubstr("padded_shared[n_p_q, r_s_c]"));
  EXPECT_EQ(sch.trace().insts.back().kind, "reindex");
  // Without fused axes the copy has one axis per variable the access uses, in the tensor's
  // order: weight[k, r, s, c] of the convolution is [k, r, s, c].
  Schedule plain = NewSchedule(*w);
  BlockRV b = ValueOrDie(plain.ReIndex(BlockOf(plain, "conv"), "weight", "local"));
  EXPECT_EQ(plain.GetStage(b).buffer->shape, (std::vector<int64_t>{16, 3, 3, 16}));
}

TEST(ScheduleErrors, ReIndexArguments) {
  auto w = ParseWorkloadSpec(
      "conv2d(N=2, C=16, H=6, W=6, K=16, R=3, S=3, padding=1, layout=nhwc, dtype=f16)");
  ASSERT_TRUE(w.ok()) << w.status();
  Schedule sch = NewSchedule(*w);
  BlockRV conv = BlockOf(sch, "conv");
  ExpectFails(
      sch, [&] { return sch.ReIndex(conv, "padded", "texture").status(); }, kInvalid,
      "reindex: unknown scope 'texture'; use global, shared, local or fragment");
  ExpectFails(
      sch, [&] { return sch.ReIndex(conv, "nope", "shared").status(); }, kInvalid,
      "reindex: no tensor named 'nope' to reindex");
  BlockRV out = BlockOf(sch, "out");
  ExpectFails(
      sch, [&] { return sch.ReIndex(out, "weight", "shared").status(); }, kPrecondition,
      "reindex: stage out does not read weight");
  auto twice = ParseWorkload(R"(A = input(f32, [8])
B[i] = A[i] + A[7 - i]
output B
)");
  ASSERT_TRUE(twice.ok()) << twice.status();
  Schedule t = NewSchedule(*twice);
  BlockRV bb = BlockOf(t, "B");
  ExpectFails(
      t, [&] { return t.ReIndex(bb, "A", "shared").status(); }, kPrecondition,
      "reindex: stage B reads A at different indices; reindex needs one access");
}

}  // namespace
}  // namespace tessel::schedules
