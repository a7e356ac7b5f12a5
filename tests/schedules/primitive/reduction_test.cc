// Tests of the reduction (decompose_reduction, rfactor) primitives
// (schedules/schedule/primitive/reduction.cc): what each does to the stage state and to the lowered
// IR, and each of its errors (code and message), with the state left unchanged by a failed
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
  // The initialization nest (over j and i) comes before the reduction loop.
  EXPECT_EQ(ir, R"(kernel tessel_matmul_C:
for j in [0, 16):
  for i in [0, 8):
    C[i, j] = 0.0
for k in [0, 4):
  for j in [0, 16):
    for i in [0, 8):
      C[i, j] = C[i, j] + A[i, k] * B[k, j]
)");
}

TEST(ScheduleDecomposeReduction, AtOuterSpatialLoop) {
  Schedule sch = NewSchedule(Matmul(8, 16, 4));
  BlockRV c = BlockOf(sch, "C");
  std::vector<LoopRV> l = LoopsOf(sch, c);
  TESSEL_ASSERT_OK(sch.DecomposeReduction(c, l[0]));
  const std::string ir = LowerText(sch, HostT());
  // The init nest covers the spatial loops from i inward and comes before loop i.
  EXPECT_EQ(ir, R"(kernel tessel_matmul_C:
for i in [0, 8):
  for j in [0, 16):
    C[i, j] = 0.0
for i in [0, 8):
  for j in [0, 16):
    for k in [0, 4):
      C[i, j] = C[i, j] + A[i, k] * B[k, j]
)");
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

TEST(ScheduleRFactor, FactorAxisFirstMakesABatchOfContractions) {
  // Split-K: C[i, j] = sum_k A[i, k] B[k, j] with k in 4 chunks of 16, the chunk axis first: the
  // partials are 4 matmuls over the chunks, C sums them.
  Schedule sch = NewSchedule(Matmul(8, 16, 64));
  std::vector<LoopRV> l = LoopsOf(sch, "C");
  std::vector<LoopRV> k = ValueOrDie(sch.Split(l[2], {4, -1}));
  BlockRV rf = ValueOrDie(sch.RFactor(k[0], /*factor_axis=*/0));
  const Stage& r = sch.GetStage(rf);
  EXPECT_EQ(r.buffer->shape, (std::vector<int64_t>{4, 8, 16}));
  EXPECT_THAT(LeafNames(r), ElementsAre("k_0", "i", "j", "k_1"));
  EXPECT_THAT(LeafExtents(r), ElementsAre(4, 8, 16, 16));
  EXPECT_EQ(ToString(r.body), "A[i, k_0 * 16 + k_1] * B[k_0 * 16 + k_1, j]");
  const Stage& c = StageNamed(sch, "C");
  EXPECT_EQ(ToString(c.body), "C_rf[k_0, i, j]");
  EXPECT_THAT(LeafNames(c), ElementsAre("i", "j", "k_0"));
  EXPECT_THAT(LeafExtents(c), ElementsAre(8, 16, 4));
  // Recorded with its factor_axis, and replayed to the same stages.
  const Instruction& inst = sch.trace().insts.back();
  EXPECT_EQ(inst.kind, "rfactor");
  EXPECT_EQ(inst.attrs.value("factor_axis", -1), 0);
  auto again = Replay(Matmul(8, 16, 64), sch.trace());
  TESSEL_ASSERT_OK(again);
  EXPECT_EQ(StageNamed(*again, "C_rf").buffer->shape, r.buffer->shape);
  EXPECT_EQ(ToString(StageNamed(*again, "C").body), "C_rf[k_0, i, j]");
  // In the middle: [i, f, j].
  Schedule mid = NewSchedule(Matmul(8, 16, 64));
  std::vector<LoopRV> ml = LoopsOf(mid, "C");
  std::vector<LoopRV> mk = ValueOrDie(mid.Split(ml[2], {4, -1}));
  BlockRV mrf = ValueOrDie(mid.RFactor(mk[0], 1));
  EXPECT_EQ(mid.GetStage(mrf).buffer->shape, (std::vector<int64_t>{8, 4, 16}));
  EXPECT_EQ(ToString(StageNamed(mid, "C").body), "C_rf[i, k_0, j]");
  auto prog = Lower(sch, HostT());
  TESSEL_ASSERT_OK(prog);
  EXPECT_EQ(prog->kernels.size(), 2u);
}

TEST(ScheduleRFactor, FactorAxisLastIsTheDefaultAndNotRecorded) {
  Schedule sch = NewSchedule(Matmul(8, 16, 64));
  std::vector<LoopRV> l = LoopsOf(sch, "C");
  std::vector<LoopRV> k = ValueOrDie(sch.Split(l[2], {4, -1}));
  BlockRV rf = ValueOrDie(sch.RFactor(k[0], 2));  // the last, given explicitly
  EXPECT_EQ(sch.GetStage(rf).buffer->shape, (std::vector<int64_t>{8, 16, 4}));
  EXPECT_EQ(sch.trace().insts.back().attrs.value("factor_axis", -1), 2);
  Schedule dflt = NewSchedule(Matmul(8, 16, 64));
  std::vector<LoopRV> dl = LoopsOf(dflt, "C");
  std::vector<LoopRV> dk = ValueOrDie(dflt.Split(dl[2], {4, -1}));
  BlockRV drf = ValueOrDie(dflt.RFactor(dk[0]));
  EXPECT_EQ(dflt.GetStage(drf).buffer->shape, (std::vector<int64_t>{8, 16, 4}));
  EXPECT_FALSE(dflt.trace().insts.back().attrs.contains("factor_axis"));
}

TEST(ScheduleErrors, RFactorFactorAxisOutOfRange) {
  for (int axis : {3, -2}) {
    Schedule sch = NewSchedule(Matmul(8, 16, 64));
    std::vector<LoopRV> l = LoopsOf(sch, "C");
    std::vector<LoopRV> k = ValueOrDie(sch.Split(l[2], {4, -1}));
    ExpectFails(
        sch, [&] { return sch.RFactor(k[0], axis); }, kInvalid,
        "rfactor: factor_axis " + std::to_string(axis) +
            " is out of range for stage C of 2 axes (0 to 2, or -1 for the last)");
  }
}

TEST(ScheduleErrors, RFactorReplayedFactorAxisIsChecked) {
  Schedule sch = NewSchedule(Matmul(8, 16, 64));
  std::vector<LoopRV> l = LoopsOf(sch, "C");
  std::vector<LoopRV> k = ValueOrDie(sch.Split(l[2], {4, -1}));
  TESSEL_ASSERT_OK(sch.RFactor(k[0], 0));
  Trace t = sch.trace();
  const size_t n = t.insts.size() - 1;
  t.insts[n].attrs["factor_axis"] = 7;
  ExpectError(Replay(Matmul(8, 16, 64), t).status(), kInvalid,
              "replaying instruction " + std::to_string(n) +
                  " (rfactor): rfactor: factor_axis 7 is out of range for stage C of 2 axes");
  t.insts[n].attrs["factor_axis"] = "first";
  EXPECT_FALSE(Replay(Matmul(8, 16, 64), t).ok());
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

}  // namespace
}  // namespace tessel::schedules
