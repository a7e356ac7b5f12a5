// Tests of the compute_inline and reverse_compute_inline primitives
// (schedules/schedule/primitive/compute_inline.cc): what each does to the stage state and to the
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

using ::testing::HasSubstr;
using ::testing::Not;
using namespace test_workloads;  // NOLINT
using namespace primitive_test;  // NOLINT

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

}  // namespace
}  // namespace tessel::schedules
