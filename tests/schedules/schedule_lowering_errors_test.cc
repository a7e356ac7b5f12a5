// Tests of lowering's errors for schedule states it cannot lower (schedules/lower/lower.h): each
// names the stage or loop and the fix.

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

}  // namespace
}  // namespace tessel::schedules
