// Tests of the compute_at and reverse_compute_at primitives
// (schedules/schedule/primitive/compute_at.cc): what each does to the stage state and to the
// lowered IR, and each of its errors (code and message), with the state left unchanged by a failed
// primitive.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "schedules/lower/lower.h"
#include "schedules/schedule/schedule.h"
#include "tests/schedules/primitive/primitive_test_util.h"
#include "tests/schedules/test_workloads.h"

namespace tessel::schedules {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;
using namespace test_workloads;  // NOLINT
using namespace primitive_test;  // NOLINT

// =============================================================================================
// compute_at, reverse_compute_at

TEST(ScheduleComputeAt, ComputesOnlyTheRegionTheLoopNeeds) {
  Schedule sch = NewSchedule(ElementwiseChain(64, 32));
  BlockRV b = BlockOf(sch, "B");
  std::vector<LoopRV> cl = LoopsOf(sch, "C");
  TESSEL_ASSERT_OK(sch.ComputeAt(b, cl[0]));
  const Stage& bs = StageNamed(sch, "B");
  EXPECT_EQ(bs.attach.kind, AttachPoint::Kind::kAt);
  EXPECT_EQ(bs.attach.stage, "C");
  EXPECT_FALSE(bs.attach.reverse);
  EXPECT_THAT(LeafExtents(bs), ElementsAre(1, 32));  // one row per iteration of C.i
  const std::string ir = LowerText(sch, HostT());
  // One kernel; B's row is computed inside C's i loop, before C's j loop (C's variables are
  // renamed C_i, C_j by lowering since B's are also i and j).
  EXPECT_EQ(ir, R"(kernel tessel_ewchain_C:
for C_i in [0, 64):
  for j in [0, 32):
    B[C_i, j] = A[C_i, j] * 2.0
  for C_j in [0, 32):
    C[C_i, C_j] = max(B[C_i, C_j], 0.0)
)");
}

TEST(ScheduleComputeAt, BackToRoot) {
  Schedule sch = NewSchedule(ElementwiseChain(64, 32));
  BlockRV b = BlockOf(sch, "B");
  std::vector<LoopRV> cl = LoopsOf(sch, "C");
  TESSEL_ASSERT_OK(sch.ComputeAt(b, cl[1]));
  EXPECT_THAT(LeafExtents(StageNamed(sch, "B")), ElementsAre(1, 1));
  TESSEL_ASSERT_OK(sch.ComputeAt(b, LoopRV{Schedule::kRootLoop}));
  EXPECT_EQ(StageNamed(sch, "B").attach.kind, AttachPoint::Kind::kRoot);
  EXPECT_THAT(LeafExtents(StageNamed(sch, "B")), ElementsAre(64, 32));
  EXPECT_THAT(sch.trace().insts.back().inputs, ElementsAre("b0", "root"));
  EXPECT_EQ(CountOf(LowerText(sch, HostT()), "kernel "), 2);
}

TEST(ScheduleComputeAt, InlineMarkerInlines) {
  Schedule sch = NewSchedule(ElementwiseChain(8, 8));
  BlockRV b = BlockOf(sch, "B");
  TESSEL_ASSERT_OK(sch.ComputeAt(b, LoopRV{Schedule::kInlineLoop}));
  EXPECT_TRUE(StageNamed(sch, "B").inlined());
  EXPECT_EQ(sch.trace().insts.back().kind, "compute_inline");
}

TEST(ScheduleErrors, ComputeAtItself) {
  Schedule sch = NewSchedule(ElementwiseChain(8, 8));
  BlockRV b = BlockOf(sch, "B");
  LoopRV bi = LoopsOf(sch, b)[0];
  ExpectFails(
      sch, [&] { return sch.ComputeAt(b, bi); }, kInvalid,
      "compute_at: cannot attach stage B to itself");
}

TEST(ScheduleErrors, ComputeAtOutput) {
  Schedule sch = NewSchedule(MatmulRelu(8, 8, 8));
  BlockRV d = BlockOf(sch, "D");
  LoopRV ci = LoopsOf(sch, "C")[0];
  ExpectFails(
      sch, [&] { return sch.ComputeAt(d, ci); }, kPrecondition,
      "compute_at: stage D is an output; attach its producers to it instead, or use "
      "reverse_compute_at");
}

TEST(ScheduleErrors, ComputeAtCycle) {
  Schedule sch = NewSchedule(Softmax(8, 16));
  BlockRV mx = BlockOf(sch, "Mx");
  BlockRV e = BlockOf(sch, "E");
  TESSEL_ASSERT_OK(sch.ComputeAt(mx, LoopsOf(sch, e)[0]));
  LoopRV mi = LoopsOf(sch, mx)[0];
  ExpectFails(
      sch, [&] { return sch.ComputeAt(e, mi); }, kPrecondition,
      "compute_at: stage Mx is attached inside stage E; attaching back would make a "
      "cycle");
}

TEST(ScheduleErrors, ComputeAtWithReaderOutsideLoop) {
  Schedule sch = NewSchedule(Softmax(8, 16));
  BlockRV e = BlockOf(sch, "E");
  LoopRV yj = LoopsOf(sch, "Y")[1];
  ExpectFails(
      sch, [&] { return sch.ComputeAt(e, yj); }, kPrecondition,
      "compute_at: stage E is also read by stage Sm, which is not inside stage Y; "
      "cache_read it for each reader or attach that reader too");
}

TEST(ScheduleErrors, ComputeAtWithoutConsumer) {
  Schedule sch = NewSchedule(DeadStageWorkload());
  BlockRV b = BlockOf(sch, "B");
  LoopRV ci = LoopsOf(sch, "C")[0];
  ExpectFails(
      sch, [&] { return sch.ComputeAt(b, ci); }, kPrecondition,
      "compute_at: stage B has no consumer");
}

TEST(ScheduleErrors, ComputeAtInlinedStage) {
  Schedule sch = NewSchedule(ElementwiseChain(8, 8));
  BlockRV b = BlockOf(sch, "B");
  LoopRV ci = LoopsOf(sch, "C")[0];
  TESSEL_ASSERT_OK(sch.ComputeInline(b));
  ExpectFails(
      sch, [&] { return sch.ComputeAt(b, ci); }, kPrecondition,
      "compute_at: stage B was inlined and has no loops");
}

// Regression: ResetLoops (compute_at, reverse_compute_at, cache_write, rfactor) drops the derived
// iters and later splits reuse their ids; the stage's loop generation makes every handle made
// before the reset stale, instead of it naming whichever new loop got its id (here B.j_0).
TEST(ScheduleErrors, StaleHandleAfterResetStaysStale) {
  Schedule sch = NewSchedule(ElementwiseChain(16, 16));
  BlockRV b = BlockOf(sch, "B");
  std::vector<LoopRV> roots = LoopsOf(sch, b);
  std::vector<LoopRV> p = ValueOrDie(sch.Split(roots[0], {2, 8}));
  EXPECT_EQ(sch.LoopName(p[0]), "B.i_0");
  TESSEL_ASSERT_OK(sch.ComputeAt(b, LoopsOf(sch, "C")[0]));
  TESSEL_ASSERT_OK(sch.Split(LoopsOf(sch, b)[1], {2, 8}));
  ExpectFails(
      sch, [&] { return sch.Bind(p[0], "threadIdx.x"); }, kPrecondition,
      "bind: loop i_0 of stage B is no longer a loop (the stage's loops were reset by "
      "compute_at, reverse_compute_at, cache_write or rfactor; get its loops again)");
  // Root loops are reset too: B.j from before compute_at is stale although j is still a leaf.
  ExpectFails(
      sch, [&] { return sch.Parallel(roots[1]); }, kPrecondition,
      "parallel: loop j of stage B is no longer a loop");
  // Fresh handles work.
  TESSEL_ASSERT_OK(sch.Bind(LoopsOf(sch, b)[1], "threadIdx.x"));
}

// A stage attached to a derived loop of a stage whose loops are reset loses that attach loop
// (lowering says so) instead of landing on a new loop that reuses the iter id.
TEST(ScheduleErrors, AttachToResetLoopIsReportedNotMoved) {
  Schedule sch = NewSchedule(ElementwiseChain(16, 16));
  BlockRV b = BlockOf(sch, "B");
  BlockRV as = ValueOrDie(sch.CacheRead("A", "shared", {b}));
  std::vector<LoopRV> p = ValueOrDie(sch.Split(LoopsOf(sch, b)[0], {2, 8}));
  TESSEL_ASSERT_OK(sch.ComputeAt(as, p[0]));
  TESSEL_ASSERT_OK(sch.ComputeAt(b, LoopsOf(sch, "C")[0]));
  TESSEL_ASSERT_OK(sch.Split(LoopsOf(sch, b)[0], {1, 1}));  // a new B.i_0 reusing the old id
  EXPECT_EQ(StageNamed(sch, "A_shared").attach.iter, -1);
  EXPECT_THAT(LowerText(sch, HostT()),
              HasSubstr("stage A_shared is attached to a loop of stage B that was later split, "
                        "fused or reset"));
}

TEST(ScheduleErrors, ComputeAtStaleLoop) {
  Schedule sch = NewSchedule(ElementwiseChain(8, 8));
  BlockRV b = BlockOf(sch, "B");
  LoopRV ci = LoopsOf(sch, "C")[0];
  TESSEL_ASSERT_OK(sch.Split(ci, {2, 4}));
  ExpectFails(
      sch, [&] { return sch.ComputeAt(b, ci); }, kPrecondition,
      "compute_at: loop i of stage C is no longer a loop");
}

TEST(ScheduleReverseComputeAt, ConsumerRunsAfterProducerBody) {
  Schedule sch = NewSchedule(MatmulRelu(16, 16, 8));
  BlockRV d = BlockOf(sch, "D");
  std::vector<LoopRV> cl = LoopsOf(sch, "C");
  TESSEL_ASSERT_OK(sch.ReverseComputeAt(d, cl[1]));
  const Stage& ds = StageNamed(sch, "D");
  EXPECT_EQ(ds.attach.kind, AttachPoint::Kind::kAt);
  EXPECT_TRUE(ds.attach.reverse);
  EXPECT_EQ(ds.attach.stage, "C");
  EXPECT_THAT(LeafExtents(ds), ElementsAre(1, 1));
  const std::string ir = LowerText(sch, HostT());
  ASSERT_THAT(ir, Not(HasSubstr("ERROR"))) << ir;
  EXPECT_EQ(CountOf(ir, "kernel "), 1) << ir;
  EXPECT_LT(Pos(ir, "for k in"), Pos(ir, "D["));
  EXPECT_THAT(ir, HasSubstr("max(C[i, j], 0.0)"));
}

TEST(ScheduleErrors, ReverseComputeAtItself) {
  Schedule sch = NewSchedule(MatmulRelu(8, 8, 8));
  BlockRV d = BlockOf(sch, "D");
  LoopRV di = LoopsOf(sch, d)[0];
  ExpectFails(
      sch, [&] { return sch.ReverseComputeAt(d, di); }, kInvalid,
      "reverse_compute_at: cannot attach stage D to itself");
}

TEST(ScheduleErrors, ReverseComputeAtReduction) {
  Schedule sch = NewSchedule(MatmulRelu(8, 8, 8));
  BlockRV c = BlockOf(sch, "C");
  LoopRV di = LoopsOf(sch, "D")[0];
  ExpectFails(
      sch, [&] { return sch.ReverseComputeAt(c, di); }, kPrecondition,
      "reverse_compute_at: stage C is a reduction; only injective consumers can be "
      "attached after their producer");
}

TEST(ScheduleErrors, ReverseComputeAtNotElementwise) {
  Schedule sch = NewSchedule(Softmax(8, 16));
  BlockRV y = BlockOf(sch, "Y");
  LoopRV si = LoopsOf(sch, "Sm")[0];
  ExpectFails(
      sch, [&] { return sch.ReverseComputeAt(y, si); }, kPrecondition,
      "reverse_compute_at: stage Y must read Sm at its own indices (an elementwise "
      "consumer)");
}

TEST(ScheduleErrors, ReverseComputeAtSharedProducerWithOtherConsumers) {
  Schedule sch = NewSchedule(Softmax(8, 16));
  BlockRV e = BlockOf(sch, "E");
  BlockRV y = BlockOf(sch, "Y");
  TESSEL_ASSERT_OK(sch.SetScope(e, "shared"));
  LoopRV ej = LoopsOf(sch, e)[1];
  ExpectFails(
      sch, [&] { return sch.ReverseComputeAt(y, ej); }, kPrecondition,
      "reverse_compute_at: stage E is in shared memory and has other consumers than Y");
}

TEST(ScheduleErrors, ReverseComputeAtCycle) {
  Schedule sch = NewSchedule(ElementwiseChain(8, 8));
  BlockRV b = BlockOf(sch, "B");
  BlockRV c = BlockOf(sch, "C");
  TESSEL_ASSERT_OK(sch.ComputeAt(b, LoopsOf(sch, c)[0]));
  LoopRV bi = LoopsOf(sch, b)[0];
  ExpectFails(
      sch, [&] { return sch.ReverseComputeAt(c, bi); }, kPrecondition,
      "reverse_compute_at: stage B is attached inside stage C; attaching back would make "
      "a cycle");
}

}  // namespace
}  // namespace tessel::schedules
