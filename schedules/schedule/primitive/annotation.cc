// Annotations: key/value pairs on a loop or a stage that lowering reads (Schedule::Annotate).

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "schedules/schedule/instruction_table.h"
#include "schedules/schedule/primitive/common.h"
#include "schedules/schedule/primitive/register.h"
#include "schedules/schedule/schedule.h"
#include "schedules/util/status_macros.h"

namespace tessel::schedules {

namespace {

constexpr char kAnnotate[] = "annotate";
constexpr char kAnnotateLoop[] = "annotate_loop";
constexpr char kAnnotateStage[] = "annotate_stage";

}  // namespace

absl::Status Schedule::Annotate(LoopRV loop, const std::string& key, Factor value) {
  auto l = MutableLoop(loop, kAnnotate);
  if (!l.ok()) return l.status();
  auto [s, iter] = *l;
  if (key.empty()) return Invalid(kAnnotate, "the annotation key is empty");
  s->iters[iter].annotations.emplace_back(key, value.rv.id >= 0 ? Value(value.rv) : value.value);
  RecordAnnotate(kAnnotateLoop, RVName(loop.id), key, value);
  return absl::OkStatus();
}

absl::Status Schedule::Annotate(BlockRV block, const std::string& key, Factor value) {
  auto st = MutableStage(block, kAnnotate);
  if (!st.ok()) return st.status();
  if (key.empty()) return Invalid(kAnnotate, "the annotation key is empty");
  (*st)->annotations[key] = value.rv.id >= 0 ? Value(value.rv) : value.value;
  RecordAnnotate(kAnnotateStage, RVName(block.id), key, value);
  return absl::OkStatus();
}

void Schedule::RecordAnnotate(const char* kind, const std::string& target, const std::string& key,
                              Factor value) {
  // A sampled value is an input (its attribute is null), as in split.
  if (value.rv.id >= 0) {
    Record(Instruction{
        kind, {target, RVName(value.rv.id)}, {{"key", key}, {"value", nullptr}}, {}, {}});
  } else {
    Record(Instruction{kind, {target}, {{"key", key}, {"value", value.value}}, {}, {}});
  }
}

// ---------------------------------------------------------------------------------------------
// Instruction table entries.

namespace {

// The value: a literal attribute, or null and a sampled input after the target.
absl::StatusOr<Factor> AnnotationValue(const InstructionReader& in) {
  if (in.attrs().contains("value") && in.attrs()["value"].is_null()) {
    TESSEL_ASSIGN_OR_RETURN(IntRV v, in.Value(1));
    return Factor(v);
  }
  TESSEL_ASSIGN_OR_RETURN(int64_t literal, in.AttrInt("value"));
  return Factor(literal);
}

absl::Status ApplyAnnotateLoop(InstructionReader& in) {
  TESSEL_ASSIGN_OR_RETURN(std::string key, in.AttrString("key"));
  TESSEL_ASSIGN_OR_RETURN(Factor value, AnnotationValue(in));
  TESSEL_ASSIGN_OR_RETURN(LoopRV loop, in.Loop(0));
  return in.schedule().Annotate(loop, key, value);
}

absl::Status ApplyAnnotateStage(InstructionReader& in) {
  TESSEL_ASSIGN_OR_RETURN(std::string key, in.AttrString("key"));
  TESSEL_ASSIGN_OR_RETURN(Factor value, AnnotationValue(in));
  TESSEL_ASSIGN_OR_RETURN(BlockRV block, in.Block(0));
  return in.schedule().Annotate(block, key, value);
}

}  // namespace

void RegisterAnnotationInstructions(InstructionTable* table) {
  table->Register(kAnnotateLoop, ApplyAnnotateLoop);
  table->Register(kAnnotateStage, ApplyAnnotateStage);
}

}  // namespace tessel::schedules
