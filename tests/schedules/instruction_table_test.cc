// Tests of the instruction table (schedules/schedule/instruction_table.h): every registered
// instruction is recorded by its primitive and replays from its trace to the same instruction, the
// trace's known kinds are the table's, an unknown kind is an error naming it, and a family's
// registration is all it takes to make an instruction known to Replay.

#include "schedules/schedule/instruction_table.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "schedules/schedule/primitive/register.h"
#include "schedules/schedule/schedule.h"
#include "schedules/schedule/trace.h"
#include "tests/schedules/recorded_schedules.h"
#include "tests/schedules/test_workloads.h"

namespace tessel::schedules {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;
using namespace test_workloads;      // NOLINT
using namespace recorded_schedules;  // NOLINT

TEST(InstructionTable, TraceKnownKindsAreTheTableKinds) {
  const std::vector<std::string>& kinds = InstructionTable::Builtin().Kinds();
  EXPECT_EQ(InstructionKinds(), kinds);
  EXPECT_EQ(std::set<std::string>(kinds.begin(), kinds.end()).size(), kinds.size());
  for (const std::string& k : kinds) EXPECT_TRUE(InstructionTable::Builtin().Contains(k)) << k;
  // Retired kinds replay from older traces but are not recorded.
  for (const std::string& k : InstructionTable::Builtin().RetiredKinds()) {
    EXPECT_TRUE(InstructionTable::Builtin().Contains(k)) << k;
    EXPECT_EQ(std::find(kinds.begin(), kinds.end(), k), kinds.end()) << k;
  }
  EXPECT_THAT(InstructionTable::Builtin().RetiredKinds(),
              ElementsAre("fuse_online_max", "center_partials", "fuse_centered_sum"));
  EXPECT_FALSE(InstructionTable::Builtin().Contains("tile"));
}

// Each family registers its own instructions, and only those (register.h lists the families).
TEST(InstructionTable, EachFamilyRegistersItsInstructions) {
  const std::vector<std::pair<void (*)(InstructionTable*), std::vector<std::string>>> families = {
      {RegisterLookupInstructions, {"get_stage", "get_loops"}},
      {RegisterSamplingInstructions,
       {"sample_perfect_tile", "sample_categorical", "sample_compute_location"}},
      {RegisterLoopTransformationInstructions, {"split", "fuse", "reorder"}},
      {RegisterLoopKindInstructions, {"bind", "parallel", "vectorize", "unroll"}},
      {RegisterCacheInstructions, {"cache_read", "cache_write", "reindex"}},
      {RegisterComputeAtInstructions, {"compute_at", "reverse_compute_at"}},
      {RegisterComputeInlineInstructions, {"compute_inline", "reverse_compute_inline"}},
      {RegisterLayoutInstructions,
       {"storage_align", "split_buffer_axis", "set_scope", "fuse_axes", "pad_axis",
        "permute_axes"}},
      {RegisterAnnotationInstructions, {"annotate_loop", "annotate_stage"}},
      {RegisterReductionInstructions, {"decompose_reduction", "rfactor"}},
      {RegisterReductionFusionInstructions, {"fuse_reductions"}},
      {RegisterTensorizeInstructions, {"tensorize"}}};
  std::vector<std::string> all;
  for (const auto& [reg, expected] : families) {
    InstructionTable table;
    reg(&table);
    EXPECT_EQ(table.Kinds(), expected);
    all.insert(all.end(), expected.begin(), expected.end());
  }
  EXPECT_THAT(InstructionTable::Builtin().Kinds(), ElementsAreArray(all));
}

// Every registered instruction is recorded by some recorded schedule, and replaying that
// schedule's trace (through its JSON text) records the same instructions again.
TEST(InstructionTable, EveryRegisteredInstructionRoundTripsThroughATrace) {
  std::map<std::string, int> replayed;  // kind -> instructions of that kind replayed equal
  for (const Recorded& r : AllRecorded()) {
    SCOPED_TRACE(r.name);
    const Schedule orig = r.make(1);
    auto parsed = Trace::Parse(orig.trace().ToJsonString());
    TESSEL_ASSERT_OK(parsed);
    auto again = Replay(orig.workload(), *parsed, 1);
    TESSEL_ASSERT_OK(again);
    ASSERT_EQ(again->trace().insts.size(), orig.trace().insts.size());
    for (size_t i = 0; i < orig.trace().insts.size(); ++i) {
      const Instruction& inst = orig.trace().insts[i];
      EXPECT_TRUE(InstructionTable::Builtin().Contains(inst.kind)) << inst.kind;
      EXPECT_EQ(again->trace().insts[i], inst) << "instruction " << i << " (" << inst.kind << ")";
      if (again->trace().insts[i] == inst) ++replayed[inst.kind];
    }
    EXPECT_EQ(ProgramText(*again, r.cuda), ProgramText(orig, r.cuda));
  }
  for (const std::string& k : InstructionTable::Builtin().Kinds()) {
    EXPECT_GT(replayed[k], 0) << "no recorded schedule exercises " << k
                              << "; add one to tests/schedules/recorded_schedules.h";
  }
}

TEST(InstructionTable, UnknownKindIsAnErrorNamingIt) {
  Trace t;
  t.insts.push_back(Instruction{"get_stage", {}, {{"name", "C"}}, {"b0"}, {}});
  t.insts.push_back(Instruction{"tile_everything", {"b0"}, {}, {}, {}});
  auto replayed = Replay(Matmul(8, 8, 8), t);
  ASSERT_FALSE(replayed.ok());
  EXPECT_EQ(replayed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(replayed.status().message(),
            "replaying instruction 1 (tile_everything): unknown instruction kind");
  // The same trace as JSON is refused when it is read.
  auto parsed = Trace::Parse(t.ToJsonString());
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.status().message(), "trace instruction 1 has unknown kind 'tile_everything'");
}

// A new instruction: its registration is the only place that names it, and Replay applies it.
absl::Status ApplySplitInHalves(InstructionReader& in) {
  absl::StatusOr<LoopRV> loop = in.Loop(0);
  if (!loop.ok()) return loop.status();
  absl::StatusOr<std::vector<LoopRV>> halves = in.schedule().Split(*loop, {2, -1});
  if (!halves.ok()) return halves.status();
  return in.BindOutputs(*halves);
}

TEST(InstructionTable, RegistrationMakesAnInstructionKnownToReplay) {
  InstructionTable table;
  RegisterLookupInstructions(&table);
  table.Register("split_in_halves", ApplySplitInHalves);
  EXPECT_THAT(table.Kinds(), ElementsAre("get_stage", "get_loops", "split_in_halves"));
  Trace t;
  t.insts.push_back(Instruction{"get_stage", {}, {{"name", "C"}}, {"b0"}, {}});
  t.insts.push_back(Instruction{"get_loops", {"b0"}, {}, {"l1", "l2", "l3"}, {}});
  t.insts.push_back(Instruction{"split_in_halves", {"l1"}, {}, {"l4", "l5"}, {}});
  auto sch = table.Replay(Matmul(8, 8, 8), t, 0);
  TESSEL_ASSERT_OK(sch);
  // The primitive it calls records itself.
  EXPECT_EQ(sch->trace().insts.back().kind, "split");
  const Stage* c = sch->FindStage("C");
  ASSERT_NE(c, nullptr);
  std::vector<int64_t> extents;
  for (int l : c->leaves) extents.push_back(c->iters[l].extent);
  EXPECT_THAT(extents, ElementsAre(2, 4, 8, 8));
  // The table's reader errors carry the position, as the built-in ones do.
  t.insts[2].inputs = {"b0"};
  auto bad = table.Replay(Matmul(8, 8, 8), t, 0);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()),
              HasSubstr("replaying instruction 2 (split_in_halves): input b0 has the wrong kind "
                        "(expected a loop)"));
  // The built-in table does not know it.
  t.insts[2].inputs = {"l1"};
  auto unknown = Replay(Matmul(8, 8, 8), t);
  ASSERT_FALSE(unknown.ok());
  EXPECT_THAT(std::string(unknown.status().message()), HasSubstr("unknown instruction kind"));
}

}  // namespace
}  // namespace tessel::schedules
