// Tests of the loop kind and binding (bind, parallel, vectorize, unroll) primitives
// (schedules/schedule/primitive/loop_kind.cc): what each does to the stage state and to the lowered
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
  EXPECT_THAT(ir, HasSubstr("allreduce_sum over threadIdx.x (256 threads)"));  // expanded
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

}  // namespace
}  // namespace tessel::schedules
