// Tests of every schedule primitive (schedules/schedule/schedule.h): what it does to the stage
// state and to the lowered IR, and each of its errors (code and message), with the state left
// unchanged by a failed primitive.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "schedules/lower/lower.h"
#include "schedules/schedule/schedule.h"
#include "tests/schedules/test_workloads.h"

namespace tessel::schedules {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;
using namespace test_workloads;  // NOLINT

constexpr absl::StatusCode kInvalid = absl::StatusCode::kInvalidArgument;
constexpr absl::StatusCode kPrecondition = absl::StatusCode::kFailedPrecondition;

void ExpectError(const absl::Status& st, absl::StatusCode code, const std::string& sub) {
  EXPECT_EQ(st.code(), code) << st;
  EXPECT_THAT(std::string(st.message()), HasSubstr(sub));
}

// Runs a primitive that must fail with `code` and a message containing `sub`, and checks that it
// left the schedule unchanged (stages and trace).
template <typename F>
void ExpectFails(Schedule& sch, F&& f, absl::StatusCode code, const std::string& sub) {
  const std::string before = DescribeSchedule(sch);
  const size_t trace_len = sch.trace().insts.size();
  const absl::Status st = StatusOf(f());
  ASSERT_FALSE(st.ok()) << "expected an error containing: " << sub;
  ExpectError(st, code, sub);
  EXPECT_EQ(sch.trace().insts.size(), trace_len) << "a failed primitive was recorded";
  EXPECT_EQ(DescribeSchedule(sch), before) << "a failed primitive changed the state";
}

const Stage& StageNamed(const Schedule& sch, const std::string& name) {
  const Stage* s = sch.FindStage(name);
  if (!s) throw std::runtime_error("no stage " + name);
  return *s;
}

// Leaf loop names of a stage, outermost first.
std::vector<std::string> LeafNames(const Stage& s) {
  std::vector<std::string> out;
  for (int l : s.leaves) out.push_back(s.iters[l].var->name);
  return out;
}
std::vector<int64_t> LeafExtents(const Stage& s) {
  std::vector<int64_t> out;
  for (int l : s.leaves) out.push_back(s.iters[l].extent);
  return out;
}

// Position of `needle` in `hay`, or npos; used to check statement order in printed IR.
size_t Pos(const std::string& hay, const std::string& needle) { return hay.find(needle); }

// =============================================================================================
// Create, lookup, random variables.

TEST(ScheduleCreate, OneRootStagePerComputedTensor) {
  Schedule sch = NewSchedule(Matmul(64, 32, 16));
  ASSERT_EQ(sch.stages().size(), 1u);
  const Stage& c = sch.stages()[0];
  EXPECT_EQ(c.name, "C");
  EXPECT_EQ(c.origin, "compute");
  EXPECT_TRUE(c.is_output);
  EXPECT_EQ(c.attach.kind, AttachPoint::Kind::kRoot);
  EXPECT_THAT(LeafNames(c), ElementsAre("i", "j", "k"));
  EXPECT_THAT(LeafExtents(c), ElementsAre(64, 32, 16));
  EXPECT_TRUE(c.iters[2].reduce);
  EXPECT_FALSE(c.iters[0].reduce);
  EXPECT_EQ(ToString(c.body), "A[i, k] * B[k, j]");
  EXPECT_TRUE(sch.trace().insts.empty());
}

TEST(ScheduleCreate, RejectsInvalidWorkload) {
  Workload w = Matmul(4, 4, 4);
  w.outputs = {"Z"};
  auto sch = Schedule::Create(w);
  ASSERT_FALSE(sch.ok());
  ExpectError(sch.status(), kInvalid, "output Z is not a tensor of the workload");
}

TEST(ScheduleLookup, GetBlockAndLoopsRecordAndNameLoops) {
  Schedule sch = NewSchedule(Matmul(64, 32, 16));
  BlockRV c = BlockOf(sch, "C");
  EXPECT_EQ(sch.GetStage(c).name, "C");
  std::vector<LoopRV> loops = LoopsOf(sch, c);
  ASSERT_EQ(loops.size(), 3u);
  EXPECT_EQ(sch.LoopName(loops[0]), "C.i");
  EXPECT_EQ(sch.LoopName(loops[2]), "C.k");
  EXPECT_EQ(sch.LoopExtent(loops[1]), 32);
  EXPECT_EQ(&sch.LoopStage(loops[0]), sch.FindStage("C"));
  ASSERT_EQ(sch.trace().insts.size(), 2u);
  EXPECT_EQ(sch.trace().insts[0].kind, "get_stage");
  EXPECT_EQ(sch.trace().insts[0].attrs["name"], "C");
  EXPECT_THAT(sch.trace().insts[0].outputs, ElementsAre("b0"));
  EXPECT_EQ(sch.trace().insts[1].kind, "get_loops");
  EXPECT_THAT(sch.trace().insts[1].inputs, ElementsAre("b0"));
  EXPECT_THAT(sch.trace().insts[1].outputs, ElementsAre("l1", "l2", "l3"));
}

TEST(ScheduleErrors, GetBlockUnknownStageListsStages) {
  Schedule sch = NewSchedule(ElementwiseChain(8, 8));
  ExpectFails(
      sch, [&] { return sch.GetBlock("Q"); }, kInvalid,
      "get_stage: no stage named 'Q'; the stages are: B, C");
}

TEST(ScheduleErrors, GetLoopsOfInlinedStage) {
  Schedule sch = NewSchedule(ElementwiseChain(8, 8));
  BlockRV b = BlockOf(sch, "B");
  TESSEL_ASSERT_OK(sch.ComputeInline(b));
  ExpectFails(
      sch, [&] { return sch.GetLoops(b); }, kPrecondition,
      "get_loops: stage B was inlined and has no loops");
}

TEST(ScheduleErrors, ForeignHandles) {
  Schedule sch = NewSchedule(ElementwiseChain(8, 8));
  ExpectFails(
      sch, [&] { return sch.GetLoops(BlockRV{42}); }, kInvalid,
      "get_loops: the stage handle does not belong to this schedule");
  ExpectFails(
      sch,
      [&] {
        return sch.Split(LoopRV{42}, {2, 4});
      },
      kInvalid, "split: the loop handle does not belong to this schedule");
  // A loop handle used as a stage handle.
  std::vector<LoopRV> loops = LoopsOf(sch, "C");
  ExpectFails(
      sch, [&] { return sch.ComputeInline(BlockRV{loops[0].id}); }, kInvalid,
      "compute_inline: the stage handle does not belong to this schedule");
}

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
  EXPECT_THAT(ir, HasSubstr("for i_0 in [0, 4)"));
  EXPECT_THAT(ir, HasSubstr("for i_1 in [0, 32)"));
  EXPECT_THAT(ir, HasSubstr("< 100"));
  EXPECT_THAT(ir, HasSubstr("C[i_0 * 32 + i_1] = A[i_0 * 32 + i_1] + B[i_0 * 32 + i_1]"));
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
  EXPECT_THAT(ir, HasSubstr("C[i_0 * 32 + i_1 * 8 + i_2]"));
  EXPECT_THAT(ir, Not(HasSubstr("if ")));
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

// =============================================================================================
// bind

TEST(ScheduleBind, BindsBlocksAndThreads) {
  Schedule sch = NewSchedule(VectorAdd(1024));
  LoopRV i = LoopsOf(sch, "C")[0];
  std::vector<LoopRV> p = ValueOrDie(sch.Split(i, {-1, 128}));
  TESSEL_ASSERT_OK(sch.Bind(p[0], "blockIdx.x"));
  TESSEL_ASSERT_OK(sch.Bind(p[1], "threadIdx.x"));
  const Stage& c = StageNamed(sch, "C");
  EXPECT_EQ(c.iters[c.leaves[0]].thread, ThreadTag::kBlockX);
  EXPECT_EQ(c.iters[c.leaves[0]].kind, ForKind::kThreadBinding);
  EXPECT_EQ(c.iters[c.leaves[1]].thread, ThreadTag::kThreadX);
  EXPECT_EQ(sch.trace().insts.back().attrs["thread"], "threadIdx.x");
  auto prog = Lower(sch, CudaT());
  TESSEL_ASSERT_OK(prog);
  ASSERT_EQ(prog->kernels.size(), 1u);
  EXPECT_EQ(prog->kernels[0].launch.grid[0], 8);
  EXPECT_EQ(prog->kernels[0].launch.block[0], 128);
  const std::string ir = ToString(prog->kernels[0].body);
  EXPECT_THAT(ir, HasSubstr("i_0 = blockIdx.x  // extent 8"));
  EXPECT_THAT(ir, HasSubstr("i_1 = threadIdx.x  // extent 128"));
  EXPECT_THAT(ir, HasSubstr("C[i_0 * 128 + i_1]"));
  EXPECT_THAT(ir, Not(HasSubstr("for ")));
}

TEST(ScheduleBind, VThreadMayRepeat) {
  Schedule sch = NewSchedule(VectorAdd(64));
  LoopRV i = LoopsOf(sch, "C")[0];
  std::vector<LoopRV> p = ValueOrDie(sch.Split(i, {2, 4, 8}));
  TESSEL_ASSERT_OK(sch.Bind(p[0], "vthread"));
  TESSEL_ASSERT_OK(sch.Bind(p[1], "vthread"));
  TESSEL_ASSERT_OK(sch.Bind(p[2], "threadIdx.x"));
  EXPECT_EQ(StageNamed(sch, "C").iters[StageNamed(sch, "C").leaves[1]].thread, ThreadTag::kVThread);
}

TEST(ScheduleBind, ReductionToThreadsMakesAllReduce) {
  Schedule sch = NewSchedule(RowSum(64, 256));
  std::vector<LoopRV> l = LoopsOf(sch, "S");
  TESSEL_ASSERT_OK(sch.Bind(l[0], "blockIdx.x"));
  TESSEL_ASSERT_OK(sch.Bind(l[1], "threadIdx.x"));
  auto prog = Lower(sch, CudaT());
  TESSEL_ASSERT_OK(prog);
  EXPECT_EQ(prog->kernels[0].launch.block[0], 256);
  EXPECT_EQ(prog->kernels[0].launch.grid[0], 64);
  const std::string ir = ToString(prog->kernels[0].body);
  EXPECT_THAT(ir, HasSubstr("allreduce_sum"));
  EXPECT_THAT(ir, HasSubstr("over threadIdx.x x256"));
  EXPECT_THAT(ir, HasSubstr("alloc local f32 S_acc[1]"));
  EXPECT_THAT(ir, HasSubstr("S[i] = S_red[0]"));
  EXPECT_THAT(ir, HasSubstr("k == 0"));  // one thread stores the result
}

TEST(ScheduleBind, SplitReductionInnerToThreads) {
  Schedule sch = NewSchedule(RowSum(16, 1000));
  std::vector<LoopRV> l = LoopsOf(sch, "S");
  std::vector<LoopRV> k = ValueOrDie(sch.Split(l[1], {-1, 128}));
  TESSEL_ASSERT_OK(sch.Bind(l[0], "blockIdx.x"));
  TESSEL_ASSERT_OK(sch.Bind(k[1], "threadIdx.x"));
  const std::string ir = LowerText(sch, CudaT());
  EXPECT_THAT(ir, HasSubstr("allreduce_sum"));
  EXPECT_THAT(ir, HasSubstr("for k_0 in [0, 8)"));
  EXPECT_THAT(ir, HasSubstr("< 1000"));
}

TEST(ScheduleErrors, BindUnknownThreadAxis) {
  Schedule sch = NewSchedule(VectorAdd(64));
  LoopRV i = LoopsOf(sch, "C")[0];
  ExpectFails(
      sch, [&] { return sch.Bind(i, "warp.x"); }, kInvalid,
      "bind: unknown thread axis 'warp.x'; use blockIdx.x|y|z, threadIdx.x|y|z, vthread or "
      "cluster.x");
}

TEST(ScheduleErrors, BindAlreadyBoundLoop) {
  Schedule sch = NewSchedule(VectorAdd(64));
  LoopRV i = LoopsOf(sch, "C")[0];
  TESSEL_ASSERT_OK(sch.Bind(i, "threadIdx.x"));
  ExpectFails(
      sch, [&] { return sch.Bind(i, "blockIdx.x"); }, kPrecondition,
      "bind: loop i of stage C is already threadIdx.x");
}

TEST(ScheduleErrors, BindVectorizedLoop) {
  Schedule sch = NewSchedule(VectorAdd(64));
  LoopRV i = LoopsOf(sch, "C")[0];
  TESSEL_ASSERT_OK(sch.Vectorize(i));
  ExpectFails(
      sch, [&] { return sch.Bind(i, "threadIdx.x"); }, kPrecondition,
      "bind: loop i of stage C is already vectorized");
}

TEST(ScheduleErrors, BindTagTwice) {
  Schedule sch = NewSchedule(ElementwiseChain(8, 8));
  std::vector<LoopRV> l = LoopsOf(sch, "C");
  TESSEL_ASSERT_OK(sch.Bind(l[1], "threadIdx.x"));
  ExpectFails(
      sch, [&] { return sch.Bind(l[0], "threadIdx.x"); }, kPrecondition,
      "bind: threadIdx.x is already bound to loop j of stage C");
}

TEST(ScheduleErrors, BindReductionToBlock) {
  Schedule sch = NewSchedule(RowSum(8, 64));
  std::vector<LoopRV> l = LoopsOf(sch, "S");
  ExpectFails(
      sch, [&] { return sch.Bind(l[1], "blockIdx.y"); }, kInvalid,
      "bind: cannot bind reduction loop k of stage S to blockIdx.y: blocks cannot "
      "combine partial results; rfactor the reduction first");
}

TEST(ScheduleErrors, BindReductionToVThread) {
  Schedule sch = NewSchedule(RowSum(8, 64));
  std::vector<LoopRV> l = LoopsOf(sch, "S");
  ExpectFails(
      sch, [&] { return sch.Bind(l[1], "vthread"); }, kInvalid,
      "bind: cannot bind reduction loop k of stage S to vthread");
}

TEST(ScheduleErrors, BindSecondCrossThreadReduction) {
  Schedule sch = NewSchedule(RowSum(8, 64));
  std::vector<LoopRV> l = LoopsOf(sch, "S");
  std::vector<LoopRV> k = ValueOrDie(sch.Split(l[1], {-1, 32}));
  TESSEL_ASSERT_OK(sch.Bind(k[1], "threadIdx.x"));
  ExpectFails(
      sch, [&] { return sch.Bind(k[0], "threadIdx.y"); }, kPrecondition,
      "bind: stage S already has a cross-thread reduction over loop k_1 of stage S");
}

// =============================================================================================
// parallel, vectorize, unroll

TEST(ScheduleLoopKinds, ParallelVectorizeUnroll) {
  Schedule sch = NewSchedule(Matmul(64, 64, 16));
  std::vector<LoopRV> l = LoopsOf(sch, "C");
  std::vector<LoopRV> j = ValueOrDie(sch.Split(l[1], {-1, 8}));
  TESSEL_ASSERT_OK(sch.Parallel(l[0]));
  TESSEL_ASSERT_OK(sch.Vectorize(j[1]));
  TESSEL_ASSERT_OK(sch.Unroll(l[2]));  // unrolling a reduction loop is allowed
  const Stage& c = StageNamed(sch, "C");
  EXPECT_EQ(c.iters[c.leaves[0]].kind, ForKind::kParallel);
  EXPECT_EQ(c.iters[c.leaves[2]].kind, ForKind::kVectorized);
  EXPECT_EQ(c.iters[c.leaves[3]].kind, ForKind::kUnrolled);
  std::vector<std::string> kinds;
  for (const Instruction& in : sch.trace().insts) kinds.push_back(in.kind);
  EXPECT_THAT(kinds,
              ElementsAre("get_stage", "get_loops", "split", "parallel", "vectorize", "unroll"));
  const std::string ir = LowerText(sch, HostT());
  EXPECT_THAT(ir, HasSubstr("parallel for i in [0, 64)"));
  EXPECT_THAT(ir, HasSubstr("vectorized for j_1 in [0, 8)"));
  EXPECT_THAT(ir, HasSubstr("unrolled for k in [0, 16)"));
}

TEST(ScheduleErrors, ParallelReduction) {
  Schedule sch = NewSchedule(Matmul(8, 8, 8));
  std::vector<LoopRV> l = LoopsOf(sch, "C");
  ExpectFails(
      sch, [&] { return sch.Parallel(l[2]); }, kInvalid,
      "parallel: cannot make reduction loop k of stage C parallel: its iterations "
      "depend on each other");
}

TEST(SchedulePrimitives, VectorizeReductionLoop) {
  // Allowed: codegen reads the operands as vectors and accumulates the lanes in order.
  Schedule sch = NewSchedule(Matmul(8, 8, 8));
  std::vector<LoopRV> l = LoopsOf(sch, "C");
  ASSERT_TRUE(sch.Vectorize(l[2]).ok());
  EXPECT_THAT(LowerText(sch, HostT()), HasSubstr("vectorized for k in [0, 8)"));
}

TEST(ScheduleErrors, ParallelTwice) {
  Schedule sch = NewSchedule(Matmul(8, 8, 8));
  std::vector<LoopRV> l = LoopsOf(sch, "C");
  TESSEL_ASSERT_OK(sch.Parallel(l[0]));
  ExpectFails(
      sch, [&] { return sch.Parallel(l[0]); }, kPrecondition,
      "parallel: loop i of stage C is already parallel");
  ExpectFails(
      sch, [&] { return sch.Vectorize(l[0]); }, kPrecondition,
      "vectorize: loop i of stage C is already parallel");
}

TEST(ScheduleErrors, UnrollBoundLoop) {
  Schedule sch = NewSchedule(Matmul(8, 8, 8));
  std::vector<LoopRV> l = LoopsOf(sch, "C");
  TESSEL_ASSERT_OK(sch.Bind(l[1], "threadIdx.x"));
  ExpectFails(
      sch, [&] { return sch.Unroll(l[1]); }, kPrecondition,
      "unroll: loop j of stage C is already threadIdx.x");
}

// =============================================================================================
// cache_read

// Matmul tiled for CUDA: C's loops i_0 j_0 i_1 j_1 k_0 k_1 with i_0/j_0 bound to blocks and
// i_1/j_1 to threads (16 x 16 tiles, k in steps of 8).
struct TiledMatmul {
  Schedule sch;
  BlockRV c;
  LoopRV i0, j0, i1, j1, k0, k1;
};

TiledMatmul MakeTiledMatmul(int64_t m, int64_t n, int64_t k) {
  Schedule sch = NewSchedule(Matmul(m, n, k));
  BlockRV c = BlockOf(sch, "C");
  std::vector<LoopRV> l = LoopsOf(sch, c);
  std::vector<LoopRV> i = ValueOrDie(sch.Split(l[0], {-1, 16}));
  std::vector<LoopRV> j = ValueOrDie(sch.Split(l[1], {-1, 16}));
  std::vector<LoopRV> kk = ValueOrDie(sch.Split(l[2], {-1, 8}));
  if (!sch.Reorder({i[0], j[0], i[1], j[1], kk[0], kk[1]}).ok())
    throw std::runtime_error("reorder");
  if (!sch.Bind(i[0], "blockIdx.y").ok() || !sch.Bind(j[0], "blockIdx.x").ok() ||
      !sch.Bind(i[1], "threadIdx.y").ok() || !sch.Bind(j[1], "threadIdx.x").ok()) {
    throw std::runtime_error("bind");
  }
  return TiledMatmul{sch, c, i[0], j[0], i[1], j[1], kk[0], kk[1]};
}

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
      "cache_read: unknown cache scope 'global'; use shared or local");
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
      "cache_write: unknown cache scope 'global'; use shared or local");
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
  ASSERT_THAT(ir, Not(HasSubstr("ERROR"))) << ir;
  EXPECT_EQ(CountOf(ir, "kernel "), 1) << ir;
  // B's row is computed inside C's i loop, before C's j loop (C's variables are renamed C_i, C_j
  // by lowering since B's are also i and j).
  const size_t ci = Pos(ir, "for C_i in [0, 64)");
  const size_t bstore = Pos(ir, "B[C_i, j] = A[C_i, j] * 2.0");
  const size_t cj = Pos(ir, "for C_j in [0, 32)");
  ASSERT_NE(ci, std::string::npos) << ir;
  ASSERT_NE(bstore, std::string::npos) << ir;
  ASSERT_NE(cj, std::string::npos) << ir;
  EXPECT_LT(ci, bstore);
  EXPECT_LT(bstore, cj);
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

// A = input; B = A * 2 (read by nobody); C = A + 1 (output).
Workload DeadStageWorkload() {
  Workload w;
  w.name = "dead";
  TensorDef a = InputTensor("A", {8});
  TensorDef b = ComputeTensor("B", {8}, {"i"});
  b.body = Ld(a, {b.axes[0]}) * MakeFloat(2.0);
  TensorDef c = ComputeTensor("C", {8}, {"i"});
  c.body = Ld(a, {c.axes[0]}) + MakeFloat(1.0);
  w.tensors = {a, b, c};
  w.outputs = {"C"};
  return w;
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

// =============================================================================================
// compute_inline, reverse_compute_inline

TEST(ScheduleComputeInline, SubstitutesProducerBody) {
  Schedule sch = NewSchedule(ElementwiseChain(8, 8));
  BlockRV b = BlockOf(sch, "B");
  TESSEL_ASSERT_OK(sch.ComputeInline(b));
  EXPECT_TRUE(StageNamed(sch, "B").inlined());
  EXPECT_EQ(ToString(StageNamed(sch, "C").body), "max(A[i, j] * 2.0, 0.0)");
  auto prog = Lower(sch, HostT());
  TESSEL_ASSERT_OK(prog);
  ASSERT_EQ(prog->kernels.size(), 1u);
  EXPECT_THAT(ToString(prog->kernels[0].body), Not(HasSubstr("B[")));
  for (const ProgramBuffer& pb : prog->buffers) EXPECT_NE(pb.buffer->name, "B");
}

TEST(ScheduleComputeInline, IntoAReduction) {
  // E = exp(X - Mx) inlined into Sm (a reduction) and Y.
  Schedule sch = NewSchedule(Softmax(4, 8));
  TESSEL_ASSERT_OK(sch.ComputeInline(BlockOf(sch, "E")));
  EXPECT_EQ(ToString(StageNamed(sch, "Sm").body), "exp(X[i, k] - Mx[i])");
  EXPECT_EQ(ToString(StageNamed(sch, "Y").body), "exp(X[i, j] - Mx[i]) / Sm[i]");
}

TEST(ScheduleErrors, ComputeInlineReduction) {
  Schedule sch = NewSchedule(MatmulRelu(8, 8, 8));
  BlockRV c = BlockOf(sch, "C");
  ExpectFails(
      sch, [&] { return sch.ComputeInline(c); }, kPrecondition,
      "compute_inline: stage C is a reduction; only injective stages can be inlined");
}

TEST(ScheduleErrors, ComputeInlineOutput) {
  Schedule sch = NewSchedule(ElementwiseChain(8, 8));
  BlockRV c = BlockOf(sch, "C");
  ExpectFails(
      sch, [&] { return sch.ComputeInline(c); }, kPrecondition,
      "compute_inline: stage C is an output of the workload; outputs must be stored");
}

TEST(ScheduleErrors, ComputeInlineWithAttachedStage) {
  Schedule sch = NewSchedule(Softmax(8, 16));
  BlockRV mx = BlockOf(sch, "Mx");
  BlockRV e = BlockOf(sch, "E");
  TESSEL_ASSERT_OK(sch.ComputeAt(mx, LoopsOf(sch, e)[0]));
  ExpectFails(
      sch, [&] { return sch.ComputeInline(e); }, kPrecondition,
      "compute_inline: stage Mx is attached to a loop of E; move it before inlining E");
}

TEST(ScheduleErrors, ComputeInlineWithoutConsumer) {
  Schedule sch = NewSchedule(DeadStageWorkload());
  BlockRV b = BlockOf(sch, "B");
  ExpectFails(
      sch, [&] { return sch.ComputeInline(b); }, kPrecondition,
      "compute_inline: stage B has no consumer to inline into");
}

TEST(ScheduleErrors, ComputeInlineTwice) {
  Schedule sch = NewSchedule(ElementwiseChain(8, 8));
  BlockRV b = BlockOf(sch, "B");
  TESSEL_ASSERT_OK(sch.ComputeInline(b));
  ExpectFails(
      sch, [&] { return sch.ComputeInline(b); }, kPrecondition,
      "compute_inline: stage B was inlined and has no loops");
}

TEST(ScheduleReverseComputeInline, MergesConsumerIntoInjectiveProducer) {
  Schedule sch = NewSchedule(ElementwiseChain(8, 8));
  BlockRV c = BlockOf(sch, "C");
  TESSEL_ASSERT_OK(sch.ReverseComputeInline(c));
  EXPECT_TRUE(StageNamed(sch, "C").inlined());
  const Stage& b = StageNamed(sch, "B");
  EXPECT_FALSE(b.inlined());
  EXPECT_TRUE(b.is_output);
  EXPECT_EQ(b.buffer->name, "C");
  EXPECT_EQ(ToString(b.body), "max(A[i, j] * 2.0, 0.0)");
  auto prog = Lower(sch, HostT());
  TESSEL_ASSERT_OK(prog);
  ASSERT_EQ(prog->kernels.size(), 1u);
  ASSERT_EQ(prog->buffers.size(), 2u);
  EXPECT_EQ(prog->buffers[0].buffer->name, "A");
  EXPECT_EQ(prog->buffers[1].buffer->name, "C");
  EXPECT_EQ(prog->buffers[1].role, BufferRole::kOutput);
  // The output buffer is the workload's object.
  EXPECT_EQ(prog->buffers[1].buffer.get(), sch.workload().Find("C")->buffer.get());
  EXPECT_THAT(ToString(prog->kernels[0].body), HasSubstr("C[i, j] = max(A[i, j] * 2.0, 0.0)"));
}

// B = A * 2; C = max(B, 0); D = B + 1; outputs as given.
Workload FanOutWorkload(std::vector<std::string> outputs) {
  Workload w;
  w.name = "fanout";
  TensorDef a = InputTensor("A", {8, 8});
  TensorDef b = ComputeTensor("B", {8, 8}, {"i", "j"});
  b.body = Ld(a, {b.axes[0], b.axes[1]}) * MakeFloat(2.0);
  TensorDef c = ComputeTensor("C", {8, 8}, {"i", "j"});
  c.body = MakeMax(Ld(b, {c.axes[0], c.axes[1]}), MakeFloat(0.0));
  TensorDef d = ComputeTensor("D", {8, 8}, {"i", "j"});
  d.body = Ld(b, {d.axes[0], d.axes[1]}) + MakeFloat(1.0);
  w.tensors = {a, b, c, d};
  w.outputs = std::move(outputs);
  return w;
}

TEST(ScheduleErrors, ReverseComputeInlineReduction) {
  Schedule sch = NewSchedule(MatmulRelu(8, 8, 8));
  BlockRV c = BlockOf(sch, "C");
  ExpectFails(
      sch, [&] { return sch.ReverseComputeInline(c); }, kPrecondition,
      "reverse_compute_inline: stage C is a reduction; only injective consumers can be "
      "inlined into their producer");
}

TEST(ScheduleErrors, ReverseComputeInlineTwoProducers) {
  Schedule sch = NewSchedule(Softmax(8, 16));
  BlockRV y = BlockOf(sch, "Y");
  ExpectFails(
      sch, [&] { return sch.ReverseComputeInline(y); }, kPrecondition,
      "reverse_compute_inline: stage Y reads two computed stages (E and Sm); it can be "
      "inlined into one producer only");
}

TEST(ScheduleErrors, ReverseComputeInlineNoProducer) {
  Schedule sch = NewSchedule(VectorAdd(8));
  BlockRV c = BlockOf(sch, "C");
  ExpectFails(
      sch, [&] { return sch.ReverseComputeInline(c); }, kPrecondition,
      "reverse_compute_inline: stage C reads no computed stage to be inlined into");
}

TEST(ScheduleErrors, ReverseComputeInlineIntoReduction) {
  Schedule sch = NewSchedule(MatmulRelu(8, 8, 8));
  BlockRV d = BlockOf(sch, "D");
  ExpectFails(
      sch, [&] { return sch.ReverseComputeInline(d); }, kPrecondition,
      "reverse_compute_inline: producer C of stage D is a reduction; cache_write it "
      "first and inline into the write-back stage");
}

TEST(ScheduleErrors, ReverseComputeInlineNotIdentity) {
  Workload w = ElementwiseChain(8, 8);
  // C[i, j] = max(B[j, i], 0): a transpose, not elementwise.
  TensorDef& c = w.tensors[2];
  c.body = MakeMax(Ld(w.tensors[1], {c.axes[1], c.axes[0]}), MakeFloat(0.0));
  Schedule sch = NewSchedule(w);
  BlockRV cb = BlockOf(sch, "C");
  ExpectFails(
      sch, [&] { return sch.ReverseComputeInline(cb); }, kPrecondition,
      "reverse_compute_inline: stage C must read B at its own indices, with the same "
      "shape");
}

TEST(ScheduleErrors, ReverseComputeInlineProducerWithOtherConsumers) {
  Schedule sch = NewSchedule(FanOutWorkload({"C", "D"}));
  BlockRV c = BlockOf(sch, "C");
  ExpectFails(
      sch, [&] { return sch.ReverseComputeInline(c); }, kPrecondition,
      "reverse_compute_inline: producer B has other consumers than C");
}

TEST(ScheduleErrors, ReverseComputeInlineProducerIsOutput) {
  Workload w = ElementwiseChain(8, 8);
  w.outputs = {"B", "C"};
  Schedule sch2 = NewSchedule(w);
  BlockRV c = BlockOf(sch2, "C");
  ExpectFails(
      sch2, [&] { return sch2.ReverseComputeInline(c); }, kPrecondition,
      "reverse_compute_inline: producer B is an output");
}

TEST(ScheduleErrors, ReverseComputeInlineWithAttachedStage) {
  Schedule sch = NewSchedule(ElementwiseChain(8, 8));
  BlockRV b = BlockOf(sch, "B");
  BlockRV c = BlockOf(sch, "C");
  TESSEL_ASSERT_OK(sch.ComputeAt(b, LoopsOf(sch, c)[0]));
  ExpectFails(
      sch, [&] { return sch.ReverseComputeInline(c); }, kPrecondition,
      "reverse_compute_inline: stage B is attached to a loop of C; move it before "
      "inlining C");
}

// Regression: inlining the output C into a producer in local memory would make the output live in
// a local buffer (bypassing set_scope's rule that outputs stay global); it is rejected.
TEST(ScheduleErrors, ReverseComputeInlineKeepsOutputGlobal) {
  Schedule sch = NewSchedule(ElementwiseChain(8, 8));
  BlockRV b = BlockOf(sch, "B");
  BlockRV c = BlockOf(sch, "C");
  TESSEL_ASSERT_OK(sch.SetScope(b, "local"));
  const absl::Status st = sch.ReverseComputeInline(c);
  if (st.ok()) {
    EXPECT_EQ(StageNamed(sch, "B").buffer->scope, MemScope::kGlobal);
    EXPECT_EQ(StageNamed(sch, "B").buffer.get(), sch.workload().Find("C")->buffer.get());
    EXPECT_THAT(LowerText(sch, HostT()), Not(HasSubstr("ERROR")));
  } else {
    EXPECT_EQ(st.code(), kPrecondition) << st;
  }
}

TEST(ScheduleErrors, ReverseComputeInlineOutputIntoLocalProducer) {
  Schedule sch = NewSchedule(ElementwiseChain(8, 8));
  BlockRV b = BlockOf(sch, "B");
  BlockRV c = BlockOf(sch, "C");
  TESSEL_ASSERT_OK(sch.SetScope(b, "local"));
  ExpectFails(
      sch, [&] { return sch.ReverseComputeInline(c); }, kPrecondition,
      "reverse_compute_inline: producer B is in local memory; the output C must stay in "
      "global memory (set_scope B global first, or do not inline C)");
}

// =============================================================================================
// set_scope, storage_align

TEST(ScheduleSetScope, ChangesTheBufferEverywhere) {
  Schedule sch = NewSchedule(ElementwiseChain(8, 32));
  BlockRV b = BlockOf(sch, "B");
  TESSEL_ASSERT_OK(sch.SetScope(b, "shared"));
  EXPECT_EQ(StageNamed(sch, "B").buffer->scope, MemScope::kShared);
  EXPECT_EQ(sch.trace().insts.back().attrs["scope"], "shared");
  // The reader's load refers to the new buffer.
  const Stage& c = StageNamed(sch, "C");
  EXPECT_EQ(ToString(c.body), "max(B[i, j], 0.0)");
  EXPECT_THAT(LowerText(sch, CudaT()),
              HasSubstr("stage B is in shared memory but not attached to any loop"));
  std::vector<LoopRV> cl = LoopsOf(sch, "C");
  TESSEL_ASSERT_OK(sch.Bind(cl[0], "blockIdx.x"));
  TESSEL_ASSERT_OK(sch.Bind(cl[1], "threadIdx.x"));
  TESSEL_ASSERT_OK(sch.ComputeAt(b, cl[0]));
  auto prog = Lower(sch, CudaT());
  TESSEL_ASSERT_OK(prog);
  const std::string ir = ToString(prog->kernels[0].body);
  // Threads are relaxed for a shared buffer: one row of 32 per block.
  EXPECT_THAT(ir, HasSubstr("alloc shared f32 B[1, 32]"));
  EXPECT_THAT(ir, HasSubstr("barrier"));
  // B is not a global buffer any more.
  for (const ProgramBuffer& pb : prog->buffers) EXPECT_NE(pb.buffer->name, "B");
}

TEST(ScheduleErrors, SetScopeUnknown) {
  Schedule sch = NewSchedule(ElementwiseChain(8, 8));
  BlockRV b = BlockOf(sch, "B");
  ExpectFails(
      sch, [&] { return sch.SetScope(b, "texture"); }, kInvalid,
      "set_scope: unknown scope 'texture'; use global, shared or local");
}

TEST(ScheduleErrors, SetScopeOutput) {
  Schedule sch = NewSchedule(ElementwiseChain(8, 8));
  BlockRV c = BlockOf(sch, "C");
  ExpectFails(
      sch, [&] { return sch.SetScope(c, "local"); }, kPrecondition,
      "set_scope: stage C is an output and must stay in global memory");
}

TEST(ScheduleStorageAlign, PadsRealizedStrides) {
  TiledMatmul t = MakeTiledMatmul(64, 64, 64);
  Schedule& sch = t.sch;
  BlockRV as = ValueOrDie(sch.CacheRead("A", "shared", {t.c}));
  TESSEL_ASSERT_OK(sch.ComputeAt(as, t.k0));
  TESSEL_ASSERT_OK(sch.StorageAlign(as, 0, 32, 1));
  const Stage& a = StageNamed(sch, "A_shared");
  ASSERT_EQ(a.aligns.size(), 1u);
  EXPECT_EQ(a.aligns[0].axis, 0);
  EXPECT_EQ(a.aligns[0].factor, 32);
  EXPECT_EQ(a.aligns[0].offset, 1);
  const Instruction& inst = sch.trace().insts.back();
  EXPECT_EQ(inst.kind, "storage_align");
  EXPECT_EQ(inst.attrs, nlohmann::json::parse(R"({"axis": 0, "factor": 32, "offset": 1})"));
  auto prog = Lower(sch, CudaT());
  TESSEL_ASSERT_OK(prog);
  const AllocateNode* alloc = FindAllocate(prog->kernels[0].body, "A_shared");
  ASSERT_NE(alloc, nullptr);
  EXPECT_EQ(alloc->buffer->shape, (std::vector<int64_t>{16, 8}));
  // Row stride 8 padded to 33 (33 % 32 == 1).
  EXPECT_EQ(alloc->buffer->strides, (std::vector<int64_t>{33, 1}));
  EXPECT_EQ(alloc->buffer->AllocatedElements(), 15 * 33 + 8);
}

TEST(ScheduleStorageAlign, AlreadyAlignedStrideUnchanged) {
  TiledMatmul t = MakeTiledMatmul(64, 64, 64);
  Schedule& sch = t.sch;
  BlockRV as = ValueOrDie(sch.CacheRead("A", "shared", {t.c}));
  TESSEL_ASSERT_OK(sch.ComputeAt(as, t.k0));
  TESSEL_ASSERT_OK(sch.StorageAlign(as, 0, 4, 0));  // 8 % 4 == 0 already
  auto prog = Lower(sch, CudaT());
  TESSEL_ASSERT_OK(prog);
  const AllocateNode* alloc = FindAllocate(prog->kernels[0].body, "A_shared");
  ASSERT_NE(alloc, nullptr);
  EXPECT_EQ(alloc->buffer->Strides(), (std::vector<int64_t>{8, 1}));
}

TEST(ScheduleErrors, StorageAlignBadAxis) {
  Schedule sch = NewSchedule(Matmul(8, 8, 8));
  BlockRV c = BlockOf(sch, "C");
  BlockRV as = ValueOrDie(sch.CacheRead("A", "shared", {c}));
  ExpectFails(
      sch, [&] { return sch.StorageAlign(as, 1, 32, 1); }, kInvalid,
      "storage_align: axis 1 of stage A_shared (rank 2) must be an outer axis in [0, 1): "
      "the innermost stride is always 1");
  ExpectFails(
      sch, [&] { return sch.StorageAlign(as, -1, 32, 1); }, kInvalid,
      "axis -1 of stage A_shared (rank 2) must be an outer axis");
}

TEST(ScheduleErrors, StorageAlignBadFactorOrOffset) {
  Schedule sch = NewSchedule(Matmul(8, 8, 8));
  BlockRV c = BlockOf(sch, "C");
  BlockRV as = ValueOrDie(sch.CacheRead("A", "shared", {c}));
  ExpectFails(
      sch, [&] { return sch.StorageAlign(as, 0, 0, 0); }, kInvalid,
      "storage_align: needs factor > 0 and 0 <= offset < factor, got factor 0 offset 0");
  ExpectFails(
      sch, [&] { return sch.StorageAlign(as, 0, 32, 32); }, kInvalid, "got factor 32 offset 32");
  ExpectFails(
      sch, [&] { return sch.StorageAlign(as, 0, 32, -1); }, kInvalid, "got factor 32 offset -1");
}

TEST(ScheduleErrors, StorageAlignGlobal) {
  Schedule sch = NewSchedule(MatmulRelu(8, 8, 8));
  BlockRV c = BlockOf(sch, "C");
  ExpectFails(
      sch, [&] { return sch.StorageAlign(c, 0, 32, 1); }, kPrecondition,
      "storage_align: stage C is in global memory; storage_align pads buffers the kernel "
      "allocates (shared, local)");
}

// =============================================================================================
// annotate

TEST(ScheduleAnnotate, LoopAnnotationIsPrinted) {
  Schedule sch = NewSchedule(Matmul(8, 8, 8));
  std::vector<LoopRV> l = LoopsOf(sch, "C");
  TESSEL_ASSERT_OK(sch.Annotate(l[2], "pipeline_depth", 2));
  const Stage& c = StageNamed(sch, "C");
  ASSERT_EQ(c.iters[c.leaves[2]].annotations.size(), 1u);
  EXPECT_EQ(c.iters[c.leaves[2]].annotations[0].first, "pipeline_depth");
  EXPECT_EQ(c.iters[c.leaves[2]].annotations[0].second, 2);
  const Instruction& inst = sch.trace().insts.back();
  EXPECT_EQ(inst.kind, "annotate_loop");
  EXPECT_EQ(inst.attrs, nlohmann::json::parse(R"({"key": "pipeline_depth", "value": 2})"));
  EXPECT_THAT(LowerText(sch, HostT()), HasSubstr("for k in [0, 8) @pipeline_depth=2:"));
}

TEST(ScheduleAnnotate, StageAutoUnroll) {
  Schedule sch = NewSchedule(VectorAdd(64));
  BlockRV c = BlockOf(sch, "C");
  TESSEL_ASSERT_OK(sch.Split(LoopsOf(sch, c)[0], {-1, 8}));
  TESSEL_ASSERT_OK(sch.Annotate(c, "auto_unroll_max_step", 16));
  EXPECT_EQ(StageNamed(sch, "C").annotations.at("auto_unroll_max_step"), 16);
  EXPECT_EQ(sch.trace().insts.back().kind, "annotate_stage");
  const std::string ir = LowerText(sch, HostT());
  EXPECT_THAT(ir, HasSubstr("unrolled for i_1 in [0, 8)"));
  EXPECT_THAT(ir, HasSubstr("\nfor i_0 in [0, 8)"));  // 64 iterations > 16: not unrolled
}

TEST(ScheduleErrors, AnnotateEmptyKey) {
  Schedule sch = NewSchedule(Matmul(8, 8, 8));
  BlockRV c = BlockOf(sch, "C");
  LoopRV i = LoopsOf(sch, c)[0];
  ExpectFails(
      sch, [&] { return sch.Annotate(i, "", 1); }, kInvalid,
      "annotate: the annotation key is empty");
  ExpectFails(
      sch, [&] { return sch.Annotate(c, "", 1); }, kInvalid,
      "annotate: the annotation key is empty");
}

// =============================================================================================
// decompose_reduction

TEST(ScheduleDecomposeReduction, InitBeforeReductionLoop) {
  Schedule sch = NewSchedule(Matmul(8, 16, 4));
  BlockRV c = BlockOf(sch, "C");
  std::vector<LoopRV> l = LoopsOf(sch, c);
  TESSEL_ASSERT_OK(sch.Reorder({l[2], l[0]}));  // k, j, i: spatial loops inside the reduction
  EXPECT_THAT(LowerText(sch, HostT()),
              HasSubstr("stage C has spatial loop j inside reduction loop k; use "
                        "decompose_reduction"));
  TESSEL_ASSERT_OK(sch.DecomposeReduction(c, l[2]));
  EXPECT_EQ(StageNamed(sch, "C").init_at, sch.LoopIter(l[2]));
  const std::string ir = LowerText(sch, HostT());
  ASSERT_THAT(ir, Not(HasSubstr("ERROR"))) << ir;
  // The initialization nest (over j and i) comes before the reduction loop.
  const size_t init = Pos(ir, "C[i, j] = 0.0");
  ASSERT_NE(init, std::string::npos) << ir;
  EXPECT_LT(init, Pos(ir, "for k in [0, 4)"));
  EXPECT_EQ(CountOf(ir, "for j in [0, 16)"), 2) << ir;
  EXPECT_EQ(CountOf(ir, "for i in [0, 8)"), 2) << ir;
}

TEST(ScheduleDecomposeReduction, AtOuterSpatialLoop) {
  Schedule sch = NewSchedule(Matmul(8, 16, 4));
  BlockRV c = BlockOf(sch, "C");
  std::vector<LoopRV> l = LoopsOf(sch, c);
  TESSEL_ASSERT_OK(sch.DecomposeReduction(c, l[0]));
  const std::string ir = LowerText(sch, HostT());
  // The init nest covers the spatial loops from i inward and comes before loop i:
  // (for i: for j: C = 0), (for i: for j: for k: C += ...).
  EXPECT_EQ(CountOf(ir, "for i in [0, 8)"), 2) << ir;
  EXPECT_EQ(CountOf(ir, "for j in [0, 16)"), 2) << ir;
  EXPECT_EQ(CountOf(ir, "C[i, j] = 0.0"), 1) << ir;
  EXPECT_LT(Pos(ir, "C[i, j] = 0.0"), Pos(ir, "for k in"));
  EXPECT_NE(ir.find("for i in [0, 8)", Pos(ir, "C[i, j] = 0.0")), std::string::npos) << ir;
}

TEST(ScheduleErrors, DecomposeReductionOtherStageLoop) {
  Schedule sch = NewSchedule(MatmulRelu(8, 8, 8));
  BlockRV c = BlockOf(sch, "C");
  LoopRV di = LoopsOf(sch, "D")[0];
  ExpectFails(
      sch, [&] { return sch.DecomposeReduction(c, di); }, kInvalid,
      "decompose_reduction: loop i of stage D is not a loop of stage C");
}

TEST(ScheduleErrors, DecomposeReductionNotAReduction) {
  Schedule sch = NewSchedule(MatmulRelu(8, 8, 8));
  BlockRV d = BlockOf(sch, "D");
  LoopRV di = LoopsOf(sch, d)[0];
  ExpectFails(
      sch, [&] { return sch.DecomposeReduction(d, di); }, kPrecondition,
      "decompose_reduction: stage D is not a reduction");
}

TEST(ScheduleErrors, DecomposeReductionInsideReductionLoop) {
  Schedule sch = NewSchedule(Matmul(8, 8, 8));
  BlockRV c = BlockOf(sch, "C");
  std::vector<LoopRV> l = LoopsOf(sch, c);
  TESSEL_ASSERT_OK(sch.Reorder({l[2], l[0]}));  // k, j, i
  ExpectFails(
      sch, [&] { return sch.DecomposeReduction(c, l[1]); }, kPrecondition,
      "decompose_reduction: reduction loop k of stage C is outside loop j of stage C; "
      "the initialization must come before every reduction loop");
}

// =============================================================================================
// rfactor

TEST(ScheduleRFactor, CreatesPartialStageWithOneMoreAxis) {
  Schedule sch = NewSchedule(RowSum(64, 1024));
  std::vector<LoopRV> l = LoopsOf(sch, "S");
  std::vector<LoopRV> k = ValueOrDie(sch.Split(l[1], {-1, 32}));
  auto rf = sch.RFactor(k[1]);
  TESSEL_ASSERT_OK(rf);
  const Stage& r = sch.GetStage(*rf);
  EXPECT_EQ(r.name, "S_rf");
  EXPECT_EQ(r.origin, "rfactor");
  const Stage& s = StageNamed(sch, "S");
  EXPECT_EQ(r.axes.size(), s.axes.size() + 1);
  EXPECT_EQ(r.buffer->shape, (std::vector<int64_t>{64, 32}));
  EXPECT_EQ(r.buffer->scope, MemScope::kGlobal);
  ASSERT_TRUE(r.reduce.has_value());
  EXPECT_EQ(*r.reduce, ReduceOp::kSum);
  EXPECT_THAT(LeafNames(r), ElementsAre("i", "k_1", "k_0"));
  EXPECT_THAT(LeafExtents(r), ElementsAre(64, 32, 32));
  EXPECT_EQ(ToString(r.body), "X[i, k_0 * 32 + k_1]");
  // S reduces the partials.
  EXPECT_EQ(ToString(s.body), "S_rf[i, k_1]");
  EXPECT_THAT(LeafExtents(s), ElementsAre(64, 32));
  EXPECT_TRUE(s.relations.empty());
  std::vector<std::string> names;
  for (const Stage& st : sch.stages()) names.push_back(st.name);
  EXPECT_THAT(names, ElementsAre("S_rf", "S"));

  auto prog = Lower(sch, HostT());
  TESSEL_ASSERT_OK(prog);
  EXPECT_EQ(prog->kernels.size(), 2u);
  ASSERT_EQ(prog->buffers.size(), 3u);
  EXPECT_EQ(prog->buffers[2].buffer->name, "S_rf");
  EXPECT_EQ(prog->buffers[2].role, BufferRole::kWorkspace);
}

TEST(ScheduleRFactor, OuterSideAndNonDividingExtentIsGuarded) {
  Schedule sch = NewSchedule(RowSum(8, 100));
  std::vector<LoopRV> l = LoopsOf(sch, "S");
  std::vector<LoopRV> k = ValueOrDie(sch.Split(l[1], {-1, 32}));  // 4 x 32 = 128 > 100
  auto rf = sch.RFactor(k[0]);
  TESSEL_ASSERT_OK(rf);
  const Stage& r = sch.GetStage(*rf);
  EXPECT_EQ(r.buffer->shape, (std::vector<int64_t>{8, 4}));
  EXPECT_EQ(ToString(r.body), "select(k_0 * 32 + k_1 < 100, X[i, k_0 * 32 + k_1], 0.0)");
  EXPECT_THAT(LeafExtents(StageNamed(sch, "S")), ElementsAre(8, 4));
}

TEST(ScheduleRFactor, PartialsAcrossBlocksThenCrossThread) {
  // The use case: rf's new spatial axis bound to blocks, S's reduction bound to threads.
  Schedule sch = NewSchedule(RowSum(4, 4096));
  std::vector<LoopRV> l = LoopsOf(sch, "S");
  std::vector<LoopRV> k = ValueOrDie(sch.Split(l[1], {32, -1}));
  BlockRV rf = ValueOrDie(sch.RFactor(k[0]));
  std::vector<LoopRV> rl = LoopsOf(sch, rf);  // i, k_0, k_1
  TESSEL_ASSERT_OK(sch.Bind(rl[0], "blockIdx.y"));
  TESSEL_ASSERT_OK(sch.Bind(rl[1], "blockIdx.x"));
  std::vector<LoopRV> sl = LoopsOf(sch, "S");  // i, k_0
  TESSEL_ASSERT_OK(sch.Bind(sl[0], "blockIdx.x"));
  TESSEL_ASSERT_OK(sch.Bind(sl[1], "threadIdx.x"));
  auto prog = Lower(sch, CudaT());
  TESSEL_ASSERT_OK(prog);
  ASSERT_EQ(prog->kernels.size(), 2u);
  EXPECT_EQ(prog->kernels[0].launch.grid[0], 32);
  EXPECT_EQ(prog->kernels[0].launch.grid[1], 4);
  EXPECT_THAT(ToString(prog->kernels[1].body), HasSubstr("allreduce_sum"));
}

TEST(ScheduleErrors, RFactorSpatialLoop) {
  Schedule sch = NewSchedule(RowSum(8, 64));
  std::vector<LoopRV> l = LoopsOf(sch, "S");
  ExpectFails(
      sch, [&] { return sch.RFactor(l[0]); }, kInvalid,
      "rfactor: loop i of stage S is not a reduction loop");
}

TEST(ScheduleErrors, RFactorUnsplitLoop) {
  Schedule sch = NewSchedule(RowSum(8, 64));
  std::vector<LoopRV> l = LoopsOf(sch, "S");
  ExpectFails(
      sch, [&] { return sch.RFactor(l[1]); }, kPrecondition,
      "rfactor: loop k of stage S must come from one split of a reduction axis (split it "
      "in two, then rfactor one side)");
}

TEST(ScheduleErrors, RFactorThreeWaySplit) {
  Schedule sch = NewSchedule(RowSum(8, 64));
  std::vector<LoopRV> l = LoopsOf(sch, "S");
  std::vector<LoopRV> k = ValueOrDie(sch.Split(l[1], {4, 4, 4}));
  ExpectFails(
      sch, [&] { return sch.RFactor(k[2]); }, kPrecondition,
      "rfactor: loop k_2 of stage S must come from one split of a reduction axis");
}

TEST(ScheduleErrors, RFactorAttachedStage) {
  Schedule sch = NewSchedule(Softmax(8, 64));
  BlockRV mx = BlockOf(sch, "Mx");
  TESSEL_ASSERT_OK(sch.ComputeAt(mx, LoopsOf(sch, "E")[0]));
  std::vector<LoopRV> ml = LoopsOf(sch, mx);
  std::vector<LoopRV> k = ValueOrDie(sch.Split(ml[1], {-1, 16}));
  ExpectFails(
      sch, [&] { return sch.RFactor(k[1]); }, kPrecondition,
      "rfactor: stage Mx is attached; rfactor it first");
}

// S[i] = sum_{k, l} X[i, k, l]: two reduction axes.
Workload TwoAxisSum() {
  Workload w;
  w.name = "sum2";
  TensorDef x = InputTensor("X", {4, 16, 16});
  TensorDef s = ComputeTensor("S", {4}, {"i"});
  VarPtr k = MakeVar("k");
  VarPtr l = MakeVar("l");
  s.reduce_axes = {k, l};
  s.reduce_extents = {16, 16};
  s.reduce = ReduceOp::kSum;
  s.body = Ld(x, {s.axes[0], k, l});
  w.tensors = {x, s};
  w.outputs = {"S"};
  return w;
}

TEST(ScheduleErrors, RFactorWithOtherTransformedReduction) {
  Schedule sch = NewSchedule(TwoAxisSum());
  std::vector<LoopRV> l = LoopsOf(sch, "S");
  std::vector<LoopRV> k = ValueOrDie(sch.Split(l[1], {-1, 4}));
  TESSEL_ASSERT_OK(sch.Split(l[2], {-1, 4}));
  ExpectFails(
      sch, [&] { return sch.RFactor(k[1]); }, kPrecondition,
      "rfactor: stage S has other transformed reduction loops; rfactor supports one "
      "split of one reduction axis");
}

TEST(ScheduleRFactor, KeepsOtherReductionAxes) {
  Schedule sch = NewSchedule(TwoAxisSum());
  std::vector<LoopRV> l = LoopsOf(sch, "S");
  std::vector<LoopRV> k = ValueOrDie(sch.Split(l[1], {-1, 4}));
  BlockRV rf = ValueOrDie(sch.RFactor(k[1]));
  const Stage& r = sch.GetStage(rf);
  EXPECT_THAT(LeafNames(r), ElementsAre("i", "k_1", "k_0", "l"));
  EXPECT_THAT(LeafExtents(r), ElementsAre(4, 4, 4, 16));
  EXPECT_EQ(ToString(r.body), "X[i, k_0 * 4 + k_1, l]");
  EXPECT_THAT(LowerText(sch, HostT()), Not(HasSubstr("ERROR")));
}

// =============================================================================================
// Sampling

TEST(ScheduleSamplePerfectTile, ProductIsExtentAndInnermostBounded) {
  for (uint64_t seed = 0; seed < 30; ++seed) {
    Schedule sch = NewSchedule(VectorAdd(96), seed);
    LoopRV i = LoopsOf(sch, "C")[0];
    auto tiles = sch.SamplePerfectTile(i, 3, 4);
    TESSEL_ASSERT_OK(tiles);
    ASSERT_EQ(tiles->size(), 3u);
    int64_t prod = 1;
    for (IntRV v : *tiles) {
      EXPECT_GE(sch.Value(v), 1);
      prod *= sch.Value(v);
    }
    EXPECT_EQ(prod, 96) << "seed " << seed;
    EXPECT_LE(sch.Value(tiles->back()), 4) << "seed " << seed;
    const Instruction& inst = sch.trace().insts.back();
    EXPECT_EQ(inst.kind, "sample_perfect_tile");
    EXPECT_EQ(inst.attrs, nlohmann::json::parse(R"({"n": 3, "max_innermost": 4})"));
    EXPECT_EQ(inst.decision, nlohmann::json({sch.Value((*tiles)[0]), sch.Value((*tiles)[1]),
                                             sch.Value((*tiles)[2])}));
  }
}

std::vector<int64_t> SampleTiles(uint64_t seed) {
  Schedule sch = NewSchedule(VectorAdd(1024), seed);
  LoopRV i = LoopsOf(sch, "C")[0];
  std::vector<int64_t> out;
  for (IntRV v : ValueOrDie(sch.SamplePerfectTile(i, 4, 64))) out.push_back(sch.Value(v));
  return out;
}

TEST(ScheduleSamplePerfectTile, DeterministicForASeed) {
  std::set<std::vector<int64_t>> distinct;
  for (uint64_t seed = 0; seed < 20; ++seed) {
    EXPECT_EQ(SampleTiles(seed), SampleTiles(seed));
    distinct.insert(SampleTiles(seed));
  }
  EXPECT_GT(distinct.size(), 1u) << "the seed does not change the samples";
}

TEST(ScheduleSamplePerfectTile, DecisionIsUsed) {
  Schedule sch = NewSchedule(VectorAdd(64));
  LoopRV i = LoopsOf(sch, "C")[0];
  auto tiles = sch.SamplePerfectTile(i, 2, 16, std::vector<int64_t>{8, 8});
  TESSEL_ASSERT_OK(tiles);
  EXPECT_EQ(sch.Value((*tiles)[0]), 8);
  EXPECT_EQ(sch.Value((*tiles)[1]), 8);
  EXPECT_EQ(sch.trace().insts.back().decision, nlohmann::json::parse("[8, 8]"));
}

// Regression: with n == 1 the only factor is the extent; sampling rejects an extent above
// max_innermost, as the decision check (and so Replay) does.
TEST(ScheduleSamplePerfectTile, SingleFactorRespectsMaxInnermost) {
  Schedule sch = NewSchedule(VectorAdd(64));
  LoopRV i = LoopsOf(sch, "C")[0];
  auto tiles = sch.SamplePerfectTile(i, 1, 16);
  if (tiles.ok()) {
    EXPECT_LE(sch.Value(tiles->back()), 16) << "sampled [64] with max_innermost 16";
    auto replayed = Replay(sch.workload(), sch.trace());
    EXPECT_TRUE(replayed.ok()) << replayed.status();
  }
}

TEST(ScheduleErrors, SamplePerfectTileSingleFactorOverMaxInnermost) {
  Schedule sch = NewSchedule(VectorAdd(64));
  LoopRV i = LoopsOf(sch, "C")[0];
  ExpectFails(
      sch, [&] { return sch.SamplePerfectTile(i, 1, 16); }, kInvalid,
      "sample_perfect_tile: n is 1, so the only factor is the extent 64 of loop i of "
      "stage C, which exceeds max_innermost 16; use n >= 2 or raise max_innermost");
  auto ok = sch.SamplePerfectTile(i, 1, 64);
  TESSEL_ASSERT_OK(ok);
  EXPECT_EQ(sch.Value(ok->back()), 64);
}

TEST(ScheduleErrors, SamplePerfectTileBadN) {
  Schedule sch = NewSchedule(VectorAdd(64));
  LoopRV i = LoopsOf(sch, "C")[0];
  ExpectFails(
      sch, [&] { return sch.SamplePerfectTile(i, 0, 16); }, kInvalid,
      "sample_perfect_tile: n must be at least 1, got 0");
  ExpectFails(
      sch, [&] { return sch.SamplePerfectTile(i, 2, 0); }, kInvalid,
      "sample_perfect_tile: max_innermost must be at least 1, got 0");
}

TEST(ScheduleErrors, SamplePerfectTileBadDecision) {
  Schedule sch = NewSchedule(VectorAdd(64));
  LoopRV i = LoopsOf(sch, "C")[0];
  ExpectFails(
      sch,
      [&] {
        return sch.SamplePerfectTile(i, 2, 16, std::vector<int64_t>{3, 8});
      },
      kInvalid,
      "sample_perfect_tile: decision [3, 8] is not 2 positive factors of loop i of "
      "stage C (extent 64)");
  ExpectFails(
      sch, [&] { return sch.SamplePerfectTile(i, 2, 16, std::vector<int64_t>{64}); }, kInvalid,
      "decision [64] is not 2 positive factors");
  ExpectFails(
      sch,
      [&] {
        return sch.SamplePerfectTile(i, 2, 16, std::vector<int64_t>{-8, -8});
      },
      kInvalid, "decision [-8, -8] is not 2 positive factors");
  ExpectFails(
      sch,
      [&] {
        return sch.SamplePerfectTile(i, 2, 16, std::vector<int64_t>{2, 32});
      },
      kInvalid, "sample_perfect_tile: decision's innermost factor 32 exceeds max_innermost 16");
}

int64_t SampleCat(uint64_t seed) {
  Schedule sch = NewSchedule(VectorAdd(8), seed);
  return sch.Value(ValueOrDie(sch.SampleCategorical({16, 32, 64, 128}, {0.1, 0.2, 0.3, 0.4})));
}

TEST(ScheduleSampleCategorical, DeterministicAndWithinCandidates) {
  std::set<int64_t> seen;
  for (uint64_t seed = 0; seed < 40; ++seed) {
    const int64_t v = SampleCat(seed);
    EXPECT_EQ(v, SampleCat(seed));
    EXPECT_THAT((std::vector<int64_t>{16, 32, 64, 128}), ::testing::Contains(v));
    seen.insert(v);
  }
  EXPECT_GT(seen.size(), 1u);
}

TEST(ScheduleSampleCategorical, ZeroProbabilityNeverChosen) {
  for (uint64_t seed = 0; seed < 20; ++seed) {
    Schedule sch = NewSchedule(VectorAdd(8), seed);
    auto v = sch.SampleCategorical({1, 2, 3}, {0.0, 1.0, 0.0});
    TESSEL_ASSERT_OK(v);
    EXPECT_EQ(sch.Value(*v), 2);
    EXPECT_EQ(sch.trace().insts.back().decision, nlohmann::json(1));
  }
}

TEST(ScheduleSampleCategorical, DecisionIsUsed) {
  Schedule sch = NewSchedule(VectorAdd(8));
  auto v = sch.SampleCategorical({16, 32, 64}, {0.9, 0.05, 0.05}, 2);
  TESSEL_ASSERT_OK(v);
  EXPECT_EQ(sch.Value(*v), 64);
  const Instruction& inst = sch.trace().insts.back();
  EXPECT_EQ(inst.kind, "sample_categorical");
  EXPECT_EQ(inst.decision, nlohmann::json(2));
  EXPECT_EQ(inst.attrs["candidates"], nlohmann::json::parse("[16, 32, 64]"));
  EXPECT_TRUE(inst.inputs.empty());
  EXPECT_EQ(inst.outputs.size(), 1u);
}

TEST(ScheduleErrors, SampleCategoricalMismatchedSizes) {
  Schedule sch = NewSchedule(VectorAdd(8));
  ExpectFails(
      sch,
      [&] {
        return sch.SampleCategorical({1, 2, 3}, {0.5, 0.5});
      },
      kInvalid,
      "sample_categorical: needs as many probabilities as candidates (got 3 candidates "
      "and 2 probabilities)");
  ExpectFails(
      sch, [&] { return sch.SampleCategorical({}, {}); }, kInvalid,
      "got 0 candidates and 0 probabilities");
}

TEST(ScheduleErrors, SampleCategoricalBadProbabilities) {
  Schedule sch = NewSchedule(VectorAdd(8));
  ExpectFails(
      sch,
      [&] {
        return sch.SampleCategorical({1, 2}, {-0.5, 1.5});
      },
      kInvalid, "sample_categorical: probabilities must be non-negative");
  ExpectFails(
      sch,
      [&] {
        return sch.SampleCategorical({1, 2}, {0.0, 0.0});
      },
      kInvalid, "sample_categorical: probabilities must not all be zero");
}

TEST(ScheduleErrors, SampleCategoricalBadDecision) {
  Schedule sch = NewSchedule(VectorAdd(8));
  ExpectFails(
      sch,
      [&] {
        return sch.SampleCategorical({1, 2, 3}, {1, 1, 1}, 3);
      },
      kInvalid, "sample_categorical: decision 3 is not an index below 3");
  ExpectFails(
      sch,
      [&] {
        return sch.SampleCategorical({1, 2, 3}, {1, 1, 1}, -1);
      },
      kInvalid, "decision -1 is not an index below 3");
}

TEST(ScheduleSampleComputeLocation, DecisionsMapToLocations) {
  Schedule sch = NewSchedule(ElementwiseChain(8, 8));
  BlockRV b = BlockOf(sch, "B");
  auto at = sch.SampleComputeLocation(b, 1);
  TESSEL_ASSERT_OK(at);
  EXPECT_EQ(sch.LoopName(*at), "C.j");
  EXPECT_EQ(sch.trace().insts.back().kind, "sample_compute_location");
  EXPECT_EQ(sch.trace().insts.back().decision, nlohmann::json(1));
  auto root = sch.SampleComputeLocation(b, -2);
  TESSEL_ASSERT_OK(root);
  EXPECT_EQ(root->id, Schedule::kRootLoop);
  EXPECT_THAT(sch.trace().insts.back().outputs, ElementsAre("root"));
  auto inl = sch.SampleComputeLocation(b, -1);
  TESSEL_ASSERT_OK(inl);
  EXPECT_EQ(inl->id, Schedule::kInlineLoop);
  // The sampled loop is usable by compute_at.
  TESSEL_ASSERT_OK(sch.ComputeAt(b, *at));
  EXPECT_THAT(LeafExtents(StageNamed(sch, "B")), ElementsAre(1, 1));
}

TEST(ScheduleSampleComputeLocation, SampledLocationsAreValidAndDeterministic) {
  std::set<int64_t> seen;
  for (uint64_t seed = 0; seed < 30; ++seed) {
    int64_t first = 0;
    for (int rep = 0; rep < 2; ++rep) {
      Schedule sch = NewSchedule(ElementwiseChain(8, 8), seed);
      BlockRV b = BlockOf(sch, "B");
      auto at = sch.SampleComputeLocation(b);
      TESSEL_ASSERT_OK(at);
      const int64_t d = sch.trace().insts.back().decision.get<int64_t>();
      EXPECT_THAT((std::vector<int64_t>{-2, -1, 0, 1}), ::testing::Contains(d));
      if (rep == 0) first = d;
      EXPECT_EQ(d, first) << "seed " << seed;
      // Applying the location works for every choice.
      TESSEL_ASSERT_OK(sch.ComputeAt(b, *at));
      EXPECT_THAT(LowerText(sch, HostT()), Not(HasSubstr("ERROR")));
    }
    seen.insert(first);
  }
  EXPECT_EQ(seen.size(), 4u);
}

TEST(ScheduleSampleComputeLocation, ReductionAndOutputCannotInline) {
  Schedule sch = NewSchedule(MatmulRelu(8, 8, 8));
  BlockRV c = BlockOf(sch, "C");
  ExpectFails(
      sch, [&] { return sch.SampleComputeLocation(c, -1); }, kInvalid,
      "sample_compute_location: decision -1 is not a location of stage C");
  BlockRV d = BlockOf(sch, "D");
  ExpectFails(
      sch, [&] { return sch.SampleComputeLocation(d, 0); }, kInvalid,
      "sample_compute_location: decision 0 is not a location of stage D");
  auto root = sch.SampleComputeLocation(d);
  TESSEL_ASSERT_OK(root);
  EXPECT_EQ(root->id, Schedule::kRootLoop);
}

TEST(ScheduleErrors, SampleComputeLocationOfInlinedStage) {
  Schedule sch = NewSchedule(ElementwiseChain(8, 8));
  BlockRV b = BlockOf(sch, "B");
  TESSEL_ASSERT_OK(sch.ComputeInline(b));
  ExpectFails(
      sch, [&] { return sch.SampleComputeLocation(b); }, kPrecondition,
      "sample_compute_location: stage B was inlined and has no loops");
}

TEST(ScheduleSampleComputeLocation, SeveralConsumersOnlyRootOrInline) {
  Schedule sch = NewSchedule(Softmax(8, 16));
  BlockRV e = BlockOf(sch, "E");  // read by Sm and Y
  ExpectFails(
      sch, [&] { return sch.SampleComputeLocation(e, 0); }, kInvalid,
      "sample_compute_location: decision 0 is not a location of stage E");
  TESSEL_ASSERT_OK(sch.SampleComputeLocation(e, -1));
}

// Regression: inline (-1) is offered only where compute_inline accepts it: not with a stage
// attached to the stage's loops (Mx at a loop of E), nor for a stage without consumers.
TEST(ScheduleSampleComputeLocation, InlineNotOfferedWhenAStageIsAttached) {
  Schedule sch = NewSchedule(Softmax(8, 16));
  BlockRV mx = BlockOf(sch, "Mx");
  BlockRV e = BlockOf(sch, "E");
  TESSEL_ASSERT_OK(sch.ComputeAt(mx, LoopsOf(sch, e)[0]));
  ExpectFails(
      sch, [&] { return sch.SampleComputeLocation(e, -1); }, kInvalid,
      "decision -1 is not a location of stage E");
  Schedule dead = NewSchedule(DeadStageWorkload());
  BlockRV b = BlockOf(dead, "B");
  ExpectFails(
      dead, [&] { return dead.SampleComputeLocation(b, -1); }, kInvalid,
      "decision -1 is not a location of stage B");
}

// A consumer attached inside the stage (reverse_compute_at) cannot host it: compute_at would make
// a cycle, so its loops are not offered.
TEST(ScheduleSampleComputeLocation, ConsumerAttachedInsideIsNotOffered) {
  Schedule sch = NewSchedule(MatmulRelu(16, 16, 8));
  BlockRV c = BlockOf(sch, "C");
  BlockRV d = BlockOf(sch, "D");
  TESSEL_ASSERT_OK(sch.ReverseComputeAt(d, LoopsOf(sch, c)[1]));
  ExpectFails(
      sch, [&] { return sch.SampleComputeLocation(c, 0); }, kInvalid,
      "decision 0 is not a location of stage C");
}

// Whatever is sampled can be applied.
TEST(ScheduleSampleComputeLocation, SampledLocationsCanBeApplied) {
  for (uint64_t seed = 0; seed < 24; ++seed) {
    SCOPED_TRACE(seed);
    Schedule sch = NewSchedule(MatmulRelu(16, 16, 8), seed);
    BlockRV c = BlockOf(sch, "C");
    BlockRV d = BlockOf(sch, "D");
    if (seed % 2) TESSEL_ASSERT_OK(sch.ReverseComputeAt(d, LoopsOf(sch, c)[1]));
    auto loc = sch.SampleComputeLocation(c);
    TESSEL_ASSERT_OK(loc);
    const absl::Status applied = sch.ComputeAt(c, *loc);
    EXPECT_TRUE(applied.ok()) << applied;
  }
}

// The explicit form: the decision is an index into candidate loops given by the caller (here the
// loops of the consumer's k split, as a cache level is chosen in multi-level tiling).
TEST(ScheduleSampleComputeLocation, ExplicitCandidatesDecisionIsAnIndex) {
  for (int64_t d : {0, 1}) {
    SCOPED_TRACE(d);
    Schedule sch = NewSchedule(Matmul(16, 16, 16));
    BlockRV c = BlockOf(sch, "C");
    BlockRV a = ValueOrDie(sch.CacheRead("A", "local", {c}));
    std::vector<LoopRV> l = LoopsOf(sch, c);
    std::vector<LoopRV> k = ValueOrDie(sch.Split(l[2], {4, 4}));
    auto at = sch.SampleComputeLocation(a, {k[0], k[1]}, d);
    TESSEL_ASSERT_OK(at);
    EXPECT_EQ(sch.LoopName(*at), d == 0 ? "C.k_0" : "C.k_1");
    const Instruction& inst = sch.trace().insts.back();
    EXPECT_EQ(inst.kind, "sample_compute_location");
    EXPECT_EQ(inst.inputs.size(), 3u);  // the stage, then the candidates
    EXPECT_EQ(inst.decision, nlohmann::json(d));
    TESSEL_ASSERT_OK(sch.ComputeAt(a, *at));
    // The trace replays through JSON to the same attachment, and another decision moves it.
    nlohmann::json j = sch.trace().ToJson();
    auto again = Replay(sch.workload(), ValueOrDie(Trace::FromJson(j)));
    TESSEL_ASSERT_OK(again);
    EXPECT_EQ(StageNamed(*again, "A_local").attach.iter, StageNamed(sch, "A_local").attach.iter);
    EXPECT_EQ(again->trace().ToJson(), j);
    for (auto& inst_json : j["insts"]) {
      if (inst_json["kind"] == "sample_compute_location") inst_json["decision"] = 1 - d;
    }
    auto moved = Replay(sch.workload(), ValueOrDie(Trace::FromJson(j)));
    TESSEL_ASSERT_OK(moved);
    EXPECT_NE(StageNamed(*moved, "A_local").attach.iter, StageNamed(sch, "A_local").attach.iter);
    EXPECT_THAT(LowerText(*moved, HostT()), Not(HasSubstr("ERROR")));
  }
  // Sampled decisions cover the list.
  std::set<int64_t> seen;
  for (uint64_t seed = 0; seed < 16; ++seed) {
    Schedule sch = NewSchedule(Matmul(16, 16, 16), seed);
    BlockRV c = BlockOf(sch, "C");
    BlockRV a = ValueOrDie(sch.CacheRead("A", "local", {c}));
    std::vector<LoopRV> l = LoopsOf(sch, c);
    TESSEL_ASSERT_OK(sch.SampleComputeLocation(a, {l[0], l[1], l[2]}));
    seen.insert(sch.trace().insts.back().decision.get<int64_t>());
  }
  EXPECT_EQ(seen.size(), 3u);
}

TEST(ScheduleErrors, SampleComputeLocationRefusedCandidate) {
  Schedule sch = NewSchedule(Matmul(16, 16, 16));
  BlockRV c = BlockOf(sch, "C");
  BlockRV a = ValueOrDie(sch.CacheRead("A", "shared", {c}));
  BlockRV al = ValueOrDie(sch.CacheRead("A_shared", "local", {c}));
  std::vector<LoopRV> l = LoopsOf(sch, c);
  // A_shared's reader A_shared_local is not inside C yet: compute_at would refuse every loop.
  ExpectFails(
      sch,
      [&] {
        return sch.SampleComputeLocation(a, {l[0], l[1]});
      },
      kPrecondition,
      "sample_compute_location: candidate 0 (loop i of stage C) is not a location of stage "
      "A_shared: compute_at: stage A_shared is also read by stage A_shared_local, which is not "
      "inside stage C; cache_read it for each reader or attach that reader too");
  // A stage cannot be its own location.
  std::vector<LoopRV> own = LoopsOf(sch, al);
  ExpectFails(
      sch,
      [&] {
        return sch.SampleComputeLocation(al, {l[2], own[0]});
      },
      kInvalid,
      "candidate 1 (loop ax0 of stage A_shared_local) is not a location of stage "
      "A_shared_local: compute_at: cannot attach stage A_shared_local to itself");
  ExpectFails(
      sch,
      [&] {
        return sch.SampleComputeLocation(al, {l[0], l[2]}, 2);
      },
      kInvalid,
      "sample_compute_location: decision 2 is not an index below 2 (the candidate loops of "
      "stage A_shared_local)");
  ExpectFails(
      sch, [&] { return sch.SampleComputeLocation(al, std::vector<LoopRV>{}); }, kInvalid,
      "sample_compute_location: needs at least one candidate loop for stage A_shared_local");
}

// =============================================================================================
// Lowering errors that come from the schedule.

TEST(LowerErrors, SpatialLoopInsideReductionNeedsDecompose) {
  Schedule sch = NewSchedule(Matmul(8, 8, 8));
  std::vector<LoopRV> l = LoopsOf(sch, "C");
  TESSEL_ASSERT_OK(sch.Reorder({l[2], l[0]}));
  auto prog = Lower(sch, HostT());
  ASSERT_FALSE(prog.ok());
  ExpectError(prog.status(), kPrecondition,
              "stage C has spatial loop j inside reduction loop k; use decompose_reduction to "
              "place the initialization before the reduction");
}

TEST(LowerErrors, ThreadBoundSpatialLoopInsideReductionIsAllowed) {
  Schedule sch = NewSchedule(Matmul(8, 8, 8));
  std::vector<LoopRV> l = LoopsOf(sch, "C");
  TESSEL_ASSERT_OK(sch.Reorder({l[2], l[1]}));  // i, k, j
  TESSEL_ASSERT_OK(sch.Bind(l[1], "threadIdx.x"));
  EXPECT_THAT(LowerText(sch, CudaT()), Not(HasSubstr("ERROR")));
}

TEST(LowerErrors, BlockBindingInAttachedStage) {
  Schedule sch = NewSchedule(ElementwiseChain(8, 8));
  BlockRV b = BlockOf(sch, "B");
  TESSEL_ASSERT_OK(sch.ComputeAt(b, LoopsOf(sch, "C")[0]));
  TESSEL_ASSERT_OK(sch.Bind(LoopsOf(sch, b)[1], "blockIdx.x"));
  auto prog = Lower(sch, CudaT());
  ASSERT_FALSE(prog.ok());
  ExpectError(prog.status(), kInvalid,
              "stage B binds loop j (extent 8) to blockIdx.x inside stage C, whose loops bind no "
              "blockIdx.x; an attached stage may bind a block index only to split its work over "
              "the kernel's blocks: bind a loop of C to it with the same extent");
}

TEST(LowerErrors, ParallelOnCuda) {
  Schedule sch = NewSchedule(VectorAdd(64));
  TESSEL_ASSERT_OK(sch.Parallel(LoopsOf(sch, "C")[0]));
  EXPECT_THAT(LowerText(sch, HostT()), HasSubstr("parallel for i in [0, 64)"));
  auto prog = Lower(sch, CudaT());
  ASSERT_FALSE(prog.ok());
  ExpectError(prog.status(), kInvalid,
              "stage C marks loop i parallel, which is for the host target; bind it to "
              "blockIdx/threadIdx instead");
}

TEST(LowerErrors, ThreadBindingOnHost) {
  Schedule sch = NewSchedule(VectorAdd(64));
  TESSEL_ASSERT_OK(sch.Bind(LoopsOf(sch, "C")[0], "threadIdx.x"));
  auto prog = Lower(sch, HostT());
  ASSERT_FALSE(prog.ok());
  ExpectError(prog.status(), kInvalid,
              "stage C binds loop i to threadIdx.x, but the host target has no thread axes; use "
              "parallel instead");
}

TEST(LowerErrors, LocalStageNotAttached) {
  Schedule sch = NewSchedule(Matmul(8, 8, 8));
  TESSEL_ASSERT_OK(sch.CacheWrite(BlockOf(sch, "C"), "local"));
  auto prog = Lower(sch, CudaT());
  ASSERT_FALSE(prog.ok());
  ExpectError(prog.status(), kPrecondition,
              "stage C_local is in local memory but not attached to any loop; compute_at it "
              "inside the loop that uses it");
}

TEST(LowerErrors, SharedStageNotAttached) {
  Schedule sch = NewSchedule(Matmul(8, 8, 8));
  TESSEL_ASSERT_OK(sch.CacheRead("A", "shared", {BlockOf(sch, "C")}));
  auto prog = Lower(sch, CudaT());
  ASSERT_FALSE(prog.ok());
  ExpectError(prog.status(), kPrecondition,
              "stage A_shared is in shared memory but not attached to any loop");
}

TEST(LowerErrors, AttachLoopLaterSplit) {
  Schedule sch = NewSchedule(ElementwiseChain(8, 8));
  BlockRV b = BlockOf(sch, "B");
  std::vector<LoopRV> cl = LoopsOf(sch, "C");
  TESSEL_ASSERT_OK(sch.ComputeAt(b, cl[1]));
  TESSEL_ASSERT_OK(sch.Split(cl[1], {2, 4}));
  auto prog = Lower(sch, HostT());
  ASSERT_FALSE(prog.ok());
  ExpectError(prog.status(), kPrecondition,
              "stage B is attached to a loop of stage C that was later split, fused or reset; "
              "attach after transforming");
}

TEST(LowerErrors, DecomposeLoopLaterSplit) {
  Schedule sch = NewSchedule(Matmul(8, 8, 8));
  BlockRV c = BlockOf(sch, "C");
  std::vector<LoopRV> l = LoopsOf(sch, c);
  TESSEL_ASSERT_OK(sch.DecomposeReduction(c, l[1]));
  TESSEL_ASSERT_OK(sch.Split(l[1], {2, 4}));
  auto prog = Lower(sch, HostT());
  ASSERT_FALSE(prog.ok());
  ExpectError(prog.status(), kPrecondition,
              "the decompose_reduction loop of stage C was later transformed");
}

TEST(LowerErrors, StageAttachedToCrossThreadReductionLoop) {
  Schedule sch = NewSchedule(RowSum(8, 256));
  BlockRV s = BlockOf(sch, "S");
  std::vector<LoopRV> l = LoopsOf(sch, s);
  TESSEL_ASSERT_OK(sch.Bind(l[0], "blockIdx.x"));
  TESSEL_ASSERT_OK(sch.Bind(l[1], "threadIdx.x"));
  BlockRV xs = ValueOrDie(sch.CacheRead("X", "shared", {s}));
  TESSEL_ASSERT_OK(sch.ComputeAt(xs, l[1]));
  auto prog = Lower(sch, CudaT());
  ASSERT_FALSE(prog.ok());
  ExpectError(prog.status(), kPrecondition,
              "stage X_shared is attached to the cross-thread "
              "reduction loop");
  EXPECT_THAT(std::string(prog.status().message()), HasSubstr("attach it to another loop"));
}

TEST(LowerErrors, StorageAlignOnGlobalStage) {
  Schedule sch = NewSchedule(ElementwiseChain(8, 8));
  BlockRV b = BlockOf(sch, "B");
  TESSEL_ASSERT_OK(sch.SetScope(b, "shared"));
  TESSEL_ASSERT_OK(sch.StorageAlign(b, 0, 32, 1));
  TESSEL_ASSERT_OK(sch.ComputeAt(b, LoopsOf(sch, "C")[0]));
  TESSEL_ASSERT_OK(sch.SetScope(b, "global"));
  auto prog = Lower(sch, HostT());
  ASSERT_FALSE(prog.ok());
  ExpectError(prog.status(), kPrecondition,
              "stage B is in global memory; storage_align applies to shared/local");
}

// =============================================================================================
// Copies are independent.

TEST(ScheduleValue, CopiesAreIndependent) {
  Schedule a = NewSchedule(VectorAdd(64));
  LoopRV i = LoopsOf(a, "C")[0];
  Schedule b = a;
  TESSEL_ASSERT_OK(a.Split(i, {-1, 8}));
  EXPECT_EQ(a.FindStage("C")->leaves.size(), 2u);
  EXPECT_EQ(b.FindStage("C")->leaves.size(), 1u);
  EXPECT_EQ(b.trace().insts.size(), 2u);
  TESSEL_ASSERT_OK(b.Split(i, {-1, 4}));
  EXPECT_EQ(b.LoopExtent(LoopRV{i.id + 2}), 4);  // b's own new RVs
}

}  // namespace
}  // namespace tessel::schedules
