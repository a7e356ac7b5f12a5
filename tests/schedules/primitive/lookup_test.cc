// Tests of the lookup (get_stage, get_loops) primitives (schedules/schedule/primitive/lookup.cc):
// what each does to the stage state and to the lowered IR, and each of its errors (code and
// message), with the state left unchanged by a failed primitive.

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
// Lookup.

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

}  // namespace
}  // namespace tessel::schedules
