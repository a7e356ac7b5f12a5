// Tests of the loop transformation (split, fuse, reorder) primitives
// (schedules/schedule/primitive/loop_transformation.cc): what each does to the stage state and to
// the lowered IR, and each of its errors (code and message), with the state left unchanged by a
// failed primitive.

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
// split

TEST(ScheduleSplit, NonDividingSplitLeavesGuardedTail) {
  Schedule sch = NewSchedule(VectorAdd(100));
  std::vector<LoopRV> l = LoopsOf(sch, "C");
  auto parts = sch.Split(l[0], {-1, 32});
  TESSEL_ASSERT_OK(parts);
  ASSERT_EQ(parts->size(), 2u);
  EXPECT_EQ(sch.LoopName((*parts)[0]), "C.i_0");
  EXPECT_EQ(sch.LoopName((*parts)[1]), "C.i_1");
  EXPECT_EQ(sch.LoopExtent((*parts)[0]), 4);
  EXPECT_EQ(sch.LoopExtent((*parts)[1]), 32);
  const Stage& c = StageNamed(sch, "C");
  EXPECT_THAT(LeafNames(c), ElementsAre("i_0", "i_1"));
  ASSERT_EQ(c.relations.size(), 1u);
  EXPECT_EQ(c.relations[0].kind, IterRelation::Kind::kSplit);
  EXPECT_EQ(c.relations[0].parent, 0);
  EXPECT_EQ(c.relations[0].factor, 32);
  const Instruction& inst = sch.trace().insts.back();
  EXPECT_EQ(inst.kind, "split");
  EXPECT_EQ(inst.attrs["factors"], nlohmann::json::parse("[-1, 32]"));

  const std::string ir = LowerText(sch, HostT());
  EXPECT_EQ(ir, R"(kernel tessel_vadd_C:
for i_0 in [0, 4):
  for i_1 in [0, 32):
    if i_0 * 32 + i_1 < 100:
      C[i_0 * 32 + i_1] = A[i_0 * 32 + i_1] + B[i_0 * 32 + i_1]
)");
}

TEST(ScheduleSplit, DividingSplitHasNoGuard) {
  Schedule sch = NewSchedule(VectorAdd(128));
  std::vector<LoopRV> l = LoopsOf(sch, "C");
  TESSEL_ASSERT_OK(sch.Split(l[0], {4, 32}));
  const std::string ir = LowerText(sch, HostT());
  EXPECT_THAT(ir, Not(HasSubstr("if ")));
}

TEST(ScheduleSplit, ThreeWaySplit) {
  Schedule sch = NewSchedule(VectorAdd(64));
  std::vector<LoopRV> l = LoopsOf(sch, "C");
  auto parts = sch.Split(l[0], {2, 4, 8});
  TESSEL_ASSERT_OK(parts);
  ASSERT_EQ(parts->size(), 3u);
  const Stage& c = StageNamed(sch, "C");
  EXPECT_THAT(LeafNames(c), ElementsAre("i_0", "i_1", "i_2"));
  EXPECT_THAT(LeafExtents(c), ElementsAre(2, 4, 8));
  EXPECT_EQ(c.relations.size(), 2u);
  const std::string ir = LowerText(sch, HostT());
  // No guard: the factors divide the extent.
  EXPECT_EQ(ir, R"(kernel tessel_vadd_C:
for i_0 in [0, 2):
  for i_1 in [0, 4):
    for i_2 in [0, 8):
      C[i_0 * 32 + i_1 * 8 + i_2] = A[i_0 * 32 + i_1 * 8 + i_2] + B[i_0 * 32 + i_1 * 8 + i_2]
)");
}

TEST(ScheduleSplit, OuterFactorLargerThanNeededIsGuarded) {
  Schedule sch = NewSchedule(VectorAdd(100));
  std::vector<LoopRV> l = LoopsOf(sch, "C");
  TESSEL_ASSERT_OK(sch.Split(l[0], {8, 16}));  // 128 >= 100
  EXPECT_THAT(LeafExtents(StageNamed(sch, "C")), ElementsAre(8, 16));
  EXPECT_THAT(LowerText(sch, HostT()), HasSubstr("< 100"));
}

// Regression: a requested outer factor larger than ceil(parent / factor) is recorded in the split
// relation (IterRelation::outer_min), so lowering (InferBounds -> PropagateExtents) and a later
// Fuse keep it instead of recomputing ceil(100 / 16) = 7.
TEST(ScheduleSplit, RequestedOuterFactorSurvivesLoweringAndFuse) {
  Schedule sch = NewSchedule(ElementwiseChain(100, 4));
  std::vector<LoopRV> l = LoopsOf(sch, "C");
  std::vector<LoopRV> p = ValueOrDie(sch.Split(l[0], {8, 16}));
  EXPECT_EQ(sch.LoopExtent(p[0]), 8);
  EXPECT_THAT(LowerText(sch, HostT()), HasSubstr("for i_0 in [0, 8)"));
  TESSEL_ASSERT_OK(sch.Fuse({p[1], l[1]}));
  EXPECT_EQ(sch.LoopExtent(p[0]), 8);
}

// Every requested factor of a multi-way split is kept, not only the outermost one.
TEST(ScheduleSplit, RequestedMiddleFactorIsKept) {
  Schedule sch = NewSchedule(VectorAdd(100));
  std::vector<LoopRV> l = LoopsOf(sch, "C");
  std::vector<LoopRV> p = ValueOrDie(sch.Split(l[0], {2, 8, 16}));  // 256 >= 100
  EXPECT_THAT(LeafExtents(StageNamed(sch, "C")), ElementsAre(2, 8, 16));
  const std::string ir = LowerText(sch, HostT());
  EXPECT_THAT(ir, HasSubstr("for i_1 in [0, 8)"));
  EXPECT_THAT(ir, HasSubstr("< 100"));
}

// When region inference shrinks the parent below the requested tiles, the outer keeps its
// requested extent (guarded); when it grows, the outer still covers it.
TEST(ScheduleSplit, OuterCoversParentWhoseExtentChanges) {
  Stage s;
  s.iters.push_back(IterVar{MakeVar("i"), 100});
  s.iters.push_back(IterVar{MakeVar("i_0"), 0});
  s.iters.push_back(IterVar{MakeVar("i_1"), 0});
  IterRelation r;
  r.kind = IterRelation::Kind::kSplit;
  r.parent = 0;
  r.outer = 1;
  r.inner = 2;
  r.factor = 16;
  r.outer_min = 8;
  s.relations.push_back(r);
  s.leaves = {1, 2};
  s.PropagateExtents();
  EXPECT_EQ(s.iters[1].extent, 8);
  EXPECT_EQ(s.iters[2].extent, 16);
  s.iters[0].extent = 20;
  s.PropagateExtents();
  EXPECT_EQ(s.iters[1].extent, 8);
  s.iters[0].extent = 200;
  s.PropagateExtents();
  EXPECT_EQ(s.iters[1].extent, 13);
}

TEST(ScheduleSplit, SampledFactors) {
  Schedule sch = NewSchedule(VectorAdd(64));
  std::vector<LoopRV> l = LoopsOf(sch, "C");
  auto tiles = sch.SamplePerfectTile(l[0], 2, 16, std::vector<int64_t>{4, 16});
  TESSEL_ASSERT_OK(tiles);
  auto parts = sch.Split(l[0], {(*tiles)[0], (*tiles)[1]});
  TESSEL_ASSERT_OK(parts);
  EXPECT_THAT(LeafExtents(StageNamed(sch, "C")), ElementsAre(4, 16));
  const Instruction& inst = sch.trace().insts.back();
  EXPECT_THAT(inst.inputs, ElementsAre("l1", "v2", "v3"));
  EXPECT_EQ(inst.attrs["factors"], nlohmann::json::parse("[null, null]"));
}

TEST(ScheduleErrors, SplitNeedsTwoFactors) {
  Schedule sch = NewSchedule(VectorAdd(64));
  LoopRV i = LoopsOf(sch, "C")[0];
  ExpectFails(
      sch, [&] { return sch.Split(i, {64}); }, kInvalid,
      "split: needs at least two factors to split loop i of stage C");
}

TEST(ScheduleErrors, SplitNonPositiveFactor) {
  Schedule sch = NewSchedule(VectorAdd(64));
  LoopRV i = LoopsOf(sch, "C")[0];
  ExpectFails(
      sch,
      [&] {
        return sch.Split(i, {0, 64});
      },
      kInvalid, "split: factor 0 is not positive; cannot split loop i of stage C");
  ExpectFails(
      sch,
      [&] {
        return sch.Split(i, {-2, 64});
      },
      kInvalid, "factor -2 is not positive");
}

TEST(ScheduleErrors, SplitTwoInferredFactors) {
  Schedule sch = NewSchedule(VectorAdd(64));
  LoopRV i = LoopsOf(sch, "C")[0];
  ExpectFails(
      sch,
      [&] {
        return sch.Split(i, {-1, -1});
      },
      kInvalid, "split: at most one factor may be -1 (inferred) when splitting loop i of stage C");
}

TEST(ScheduleErrors, SplitProductTooSmall) {
  Schedule sch = NewSchedule(VectorAdd(100));
  LoopRV i = LoopsOf(sch, "C")[0];
  ExpectFails(
      sch,
      [&] {
        return sch.Split(i, {2, 8});
      },
      kInvalid,
      "split: factors [2, 8] multiply to 16, less than the extent 100 of loop i of stage "
      "C; use -1 for one factor to infer it");
}

TEST(ScheduleErrors, SplitBoundLoop) {
  Schedule sch = NewSchedule(VectorAdd(64));
  LoopRV i = LoopsOf(sch, "C")[0];
  TESSEL_ASSERT_OK(sch.Bind(i, "threadIdx.x"));
  ExpectFails(
      sch,
      [&] {
        return sch.Split(i, {-1, 8});
      },
      kPrecondition,
      "split: loop i of stage C is already bound; split before binding or annotating it");
}

TEST(ScheduleErrors, SplitStaleLoop) {
  Schedule sch = NewSchedule(VectorAdd(64));
  LoopRV i = LoopsOf(sch, "C")[0];
  TESSEL_ASSERT_OK(sch.Split(i, {-1, 8}));
  ExpectFails(
      sch,
      [&] {
        return sch.Split(i, {-1, 4});
      },
      kPrecondition, "split: loop i of stage C is no longer a loop");
}

// =============================================================================================
// fuse

TEST(ScheduleFuse, FusesAdjacentLoops) {
  Schedule sch = NewSchedule(Matmul(64, 32, 16));
  std::vector<LoopRV> l = LoopsOf(sch, "C");
  auto f = sch.Fuse({l[0], l[1]});
  TESSEL_ASSERT_OK(f);
  EXPECT_EQ(sch.LoopExtent(*f), 64 * 32);
  const Stage& c = StageNamed(sch, "C");
  EXPECT_THAT(LeafNames(c), ElementsAre("i_j_f", "k"));
  EXPECT_THAT(LeafExtents(c), ElementsAre(2048, 16));
  ASSERT_EQ(c.relations.size(), 1u);
  EXPECT_EQ(c.relations[0].kind, IterRelation::Kind::kFuse);
  const std::string ir = LowerText(sch, HostT());
  EXPECT_THAT(ir, HasSubstr("for i_j_f in [0, 2048)"));
  EXPECT_THAT(ir, HasSubstr("C[i_j_f / 32, i_j_f % 32]"));
  EXPECT_THAT(ir, Not(HasSubstr("if ")));
}

TEST(ScheduleFuse, FuseThenSplitIsGuarded) {
  Schedule sch = NewSchedule(ElementwiseChain(6, 10));
  std::vector<LoopRV> l = LoopsOf(sch, "C");
  auto f = sch.Fuse({l[0], l[1]});
  TESSEL_ASSERT_OK(f);
  EXPECT_EQ(sch.LoopExtent(*f), 60);
  auto parts = sch.Split(*f, {-1, 16});
  TESSEL_ASSERT_OK(parts);
  EXPECT_THAT(LeafNames(StageNamed(sch, "C")), ElementsAre("i_j_f_0", "i_j_f_1"));
  EXPECT_THAT(LeafExtents(StageNamed(sch, "C")), ElementsAre(4, 16));
  // 64 iterations for 60 elements: the row index (fused / 10) is guarded below 6.
  const std::string ir = LowerText(sch, HostT());
  EXPECT_THAT(ir, HasSubstr("if "));
  EXPECT_THAT(ir, HasSubstr("< 6:"));
}

TEST(ScheduleErrors, FuseNeedsTwoLoops) {
  Schedule sch = NewSchedule(Matmul(8, 8, 8));
  std::vector<LoopRV> l = LoopsOf(sch, "C");
  ExpectFails(
      sch, [&] { return sch.Fuse({l[0]}); }, kInvalid, "fuse: needs at least two loops");
}

TEST(ScheduleErrors, FuseNonAdjacent) {
  Schedule sch = NewSchedule(Matmul(8, 8, 8));
  std::vector<LoopRV> l = LoopsOf(sch, "C");
  ExpectFails(
      sch,
      [&] {
        return sch.Fuse({l[0], l[2]});
      },
      kInvalid,
      "fuse: loops must be adjacent and outermost first; loop k of stage C is not right "
      "inside loop i of stage C");
  ExpectFails(
      sch,
      [&] {
        return sch.Fuse({l[1], l[0]});
      },
      kInvalid, "loops must be adjacent and outermost first");
}

TEST(ScheduleErrors, FuseReductionWithSpatial) {
  Schedule sch = NewSchedule(Matmul(8, 8, 8));
  std::vector<LoopRV> l = LoopsOf(sch, "C");
  ExpectFails(
      sch,
      [&] {
        return sch.Fuse({l[1], l[2]});
      },
      kInvalid,
      "fuse: cannot fuse reduction and spatial loops (loop j of stage C, loop k of "
      "stage C)");
}

TEST(ScheduleErrors, FuseLoopsOfDifferentStages) {
  Schedule sch = NewSchedule(ElementwiseChain(8, 8));
  LoopRV bi = LoopsOf(sch, "B")[0];
  LoopRV cj = LoopsOf(sch, "C")[1];
  ExpectFails(
      sch,
      [&] {
        return sch.Fuse({bi, cj});
      },
      kInvalid, "fuse: loops of different stages (B and C) cannot be fused");
}

TEST(ScheduleErrors, FuseBoundLoop) {
  Schedule sch = NewSchedule(ElementwiseChain(8, 8));
  std::vector<LoopRV> l = LoopsOf(sch, "C");
  TESSEL_ASSERT_OK(sch.Bind(l[1], "threadIdx.x"));
  ExpectFails(
      sch,
      [&] {
        return sch.Fuse({l[0], l[1]});
      },
      kPrecondition, "fuse: loop j of stage C is already bound; fuse before binding");
}

// =============================================================================================
// reorder

TEST(ScheduleReorder, PermutesLeavesInTheirPositions) {
  Schedule sch = NewSchedule(Matmul(8, 16, 4));
  std::vector<LoopRV> l = LoopsOf(sch, "C");
  TESSEL_ASSERT_OK(sch.Reorder({l[1], l[0]}));
  EXPECT_THAT(LeafNames(StageNamed(sch, "C")), ElementsAre("j", "i", "k"));
  const std::string ir = LowerText(sch, HostT());
  ASSERT_NE(Pos(ir, "for j in [0, 16)"), std::string::npos) << ir;
  EXPECT_LT(Pos(ir, "for j in [0, 16)"), Pos(ir, "for i in [0, 8)"));
  EXPECT_EQ(sch.trace().insts.back().kind, "reorder");
}

TEST(ScheduleReorder, SubsetKeepsOtherPositions) {
  Schedule sch = NewSchedule(VectorAdd(64));
  LoopRV i = LoopsOf(sch, "C")[0];
  std::vector<LoopRV> p = ValueOrDie(sch.Split(i, {2, 4, 8}));
  TESSEL_ASSERT_OK(sch.Reorder({p[2], p[0]}));  // positions 0 and 2
  EXPECT_THAT(LeafNames(StageNamed(sch, "C")), ElementsAre("i_2", "i_1", "i_0"));
}

TEST(ScheduleErrors, ReorderEmpty) {
  Schedule sch = NewSchedule(Matmul(8, 8, 8));
  ExpectFails(
      sch, [&] { return sch.Reorder({}); }, kInvalid, "reorder: needs at least one loop");
}

TEST(ScheduleErrors, ReorderDuplicate) {
  Schedule sch = NewSchedule(Matmul(8, 8, 8));
  std::vector<LoopRV> l = LoopsOf(sch, "C");
  ExpectFails(
      sch,
      [&] {
        return sch.Reorder({l[0], l[1], l[0]});
      },
      kInvalid, "reorder: loop i of stage C appears twice");
}

TEST(ScheduleErrors, ReorderDifferentStages) {
  Schedule sch = NewSchedule(ElementwiseChain(8, 8));
  LoopRV bi = LoopsOf(sch, "B")[0];
  LoopRV ci = LoopsOf(sch, "C")[0];
  ExpectFails(
      sch,
      [&] {
        return sch.Reorder({bi, ci});
      },
      kInvalid, "reorder: loops of different stages (B and C) cannot be reordered together");
}

}  // namespace
}  // namespace tessel::schedules
