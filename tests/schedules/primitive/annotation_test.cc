// Tests of the annotation (annotate) primitives (schedules/schedule/primitive/annotation.cc): what
// each does to the stage state and to the lowered IR, and each of its errors (code and message),
// with the state left unchanged by a failed primitive.

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
using namespace test_workloads;  // NOLINT
using namespace primitive_test;  // NOLINT

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

}  // namespace
}  // namespace tessel::schedules
