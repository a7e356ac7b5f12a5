// Lookup: get_stage and get_loops, the handles every other primitive starts from.

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "schedules/schedule/instruction_table.h"
#include "schedules/schedule/primitive/common.h"
#include "schedules/schedule/primitive/register.h"
#include "schedules/schedule/schedule.h"
#include "schedules/util/status_macros.h"

namespace tessel::schedules {

namespace {

constexpr char kGetStage[] = "get_stage";
constexpr char kGetLoops[] = "get_loops";

}  // namespace

absl::StatusOr<BlockRV> Schedule::GetBlock(const std::string& stage_name) {
  const Stage* s = FindStage(stage_name);
  if (!s) {
    std::vector<std::string> names;
    for (const Stage& st : stages_) {
      if (!st.inlined()) names.push_back(st.name);
    }
    return Invalid(kGetStage, absl::StrCat("no stage named '", stage_name,
                                           "'; the stages are: ", absl::StrJoin(names, ", ")));
  }
  BlockRV b{static_cast<int>(rvs_.size())};
  Instruction inst{kGetStage, {}, {{"name", stage_name}}, {NewRV('b', {0, stage_name})}, {}};
  Record(std::move(inst));
  return b;
}

absl::StatusOr<std::vector<LoopRV>> Schedule::GetLoops(BlockRV block) {
  auto s = MutableStage(block, kGetLoops);
  if (!s.ok()) return s.status();
  Instruction inst{kGetLoops, {RVName(block.id)}, {}, {}, {}};
  std::vector<LoopRV> out;
  for (int iter : (*s)->leaves) {
    out.push_back(LoopRV{static_cast<int>(rvs_.size())});
    inst.outputs.push_back(NewLoopRV(**s, iter));
  }
  Record(std::move(inst));
  return out;
}

// ---------------------------------------------------------------------------------------------
// Instruction table entries.

namespace {

absl::Status ApplyGetStage(InstructionReader& in) {
  TESSEL_ASSIGN_OR_RETURN(std::string name, in.AttrString("name"));
  TESSEL_ASSIGN_OR_RETURN(BlockRV r, in.schedule().GetBlock(name));
  return in.BindOutput(r);
}

absl::Status ApplyGetLoops(InstructionReader& in) {
  TESSEL_ASSIGN_OR_RETURN(BlockRV block, in.Block(0));
  TESSEL_ASSIGN_OR_RETURN(std::vector<LoopRV> r, in.schedule().GetLoops(block));
  return in.BindOutputs(r);
}

}  // namespace

void RegisterLookupInstructions(InstructionTable* table) {
  table->Register(kGetStage, ApplyGetStage);
  table->Register(kGetLoops, ApplyGetLoops);
}

}  // namespace tessel::schedules
