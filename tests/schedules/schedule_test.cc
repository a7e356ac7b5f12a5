// Tests of the schedule state (schedules/schedule/schedule.h): creation, handles that do not
// belong to the schedule, and copies.

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
using namespace test_workloads;  // NOLINT
using namespace primitive_test;  // NOLINT

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
