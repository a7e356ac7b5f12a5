#pragma once

// The instruction table: every instruction kind a trace may hold, and how an instruction of that
// kind is applied when a trace is replayed (its inputs, attributes and decision read back from
// the trace, the primitive called, its outputs bound). Replay and the trace's list of known kinds
// (InstructionKinds, trace.h) come from it.
//
// Each family of primitives (schedules/schedule/primitive/*.cc) holds, next to its primitives,
// one constant per instruction name, used both by the primitive's Record call (which writes the
// instruction's inputs, attributes and decision: its serialized form) and by its table entry
// (which reads that form back), and one function Register<Family>Instructions(InstructionTable*)
// that adds its entries. Builtin() calls every family's function, in one place
// (primitive/register.cc); nothing registers itself.

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "schedules/schedule/schedule.h"
#include "schedules/schedule/trace.h"
#include "schedules/workload/workload.h"

namespace tessel::schedules {

// One instruction of a trace being replayed, read against the schedule it is applied to: its
// inputs resolved to this schedule's random variables, typed reads of its attributes and
// decision, and the binding of its outputs. Errors are kInvalidArgument and carry no position;
// Replay prefixes them with "replaying instruction N (kind): ".
class InstructionReader {
 public:
  InstructionReader(Schedule* sch, const Instruction* inst, std::map<std::string, int>* rvs)
      : sch_(sch), inst_(inst), rvs_(rvs) {}

  Schedule& schedule() { return *sch_; }
  const Instruction& inst() const { return *inst_; }
  size_t num_inputs() const { return inst_->inputs.size(); }

  // Input i as a random variable of the given kind. A loop input may be one of the markers
  // "root" and "inline" of sample_compute_location (Schedule::kRootLoop, kInlineLoop).
  absl::StatusOr<BlockRV> Block(size_t i) const;
  absl::StatusOr<LoopRV> Loop(size_t i) const;
  absl::StatusOr<IntRV> Value(size_t i) const;
  // Inputs i, i + 1, ... to the last one.
  absl::StatusOr<std::vector<BlockRV>> BlocksFrom(size_t i) const;
  absl::StatusOr<std::vector<LoopRV>> LoopsFrom(size_t i) const;

  const nlohmann::json& attrs() const { return inst_->attrs; }
  absl::StatusOr<int64_t> AttrInt(const char* key) const;
  // An integer attribute that must fit an int.
  absl::StatusOr<int> AttrInt32(const char* key) const;
  absl::StatusOr<std::string> AttrString(const char* key) const;
  // An array attribute, its elements not checked.
  absl::StatusOr<const nlohmann::json*> AttrArray(const char* key) const;
  absl::StatusOr<std::vector<int64_t>> AttrIntArray(const char* key) const;
  absl::StatusOr<std::vector<double>> AttrNumberArray(const char* key) const;
  // A factor list (split, split_buffer_axis): literal integers, and null for each sampled factor,
  // whose value is the next input from `first_input` on (Schedule::RecordFactors writes it).
  absl::StatusOr<std::vector<Factor>> AttrFactors(const char* key, size_t first_input) const;

  // A scalar decision: absent (nullopt: sample) or an integer.
  absl::StatusOr<std::optional<int64_t>> IntDecision() const;
  // A list decision: absent (nullopt: sample) or an array of integers.
  absl::StatusOr<std::optional<std::vector<int64_t>>> IntArrayDecision() const;

  // Binds the instruction's output names to the results, which must be as many.
  absl::Status BindOutputs(const std::vector<int>& ids);
  template <typename RV>
  absl::Status BindOutputs(const std::vector<RV>& rvs) {
    std::vector<int> ids;
    for (const RV& r : rvs) ids.push_back(r.id);
    return BindOutputs(ids);
  }
  template <typename RV>
  absl::Status BindOutput(RV rv) {
    return BindOutputs(std::vector<int>{rv.id});
  }

  static absl::Status Error(const std::string& msg) { return absl::InvalidArgumentError(msg); }

 private:
  // The id of input i, which must name a random variable of kind 'b', 'l' or 'v'.
  absl::StatusOr<int> Input(size_t i, char kind) const;

  Schedule* sch_;
  const Instruction* inst_;
  std::map<std::string, int>* rvs_;  // trace name -> id in sch_
};

// Entries of primitives whose only arguments are stage and loop inputs and whose result is a
// Status: Register(kComputeInline, ApplyBlockPrimitive<&Schedule::ComputeInline>).
template <absl::Status (Schedule::*Primitive)(BlockRV)>
absl::Status ApplyBlockPrimitive(InstructionReader& in) {
  absl::StatusOr<BlockRV> block = in.Block(0);
  if (!block.ok()) return block.status();
  return (in.schedule().*Primitive)(*block);
}
template <absl::Status (Schedule::*Primitive)(LoopRV)>
absl::Status ApplyLoopPrimitive(InstructionReader& in) {
  absl::StatusOr<LoopRV> loop = in.Loop(0);
  if (!loop.ok()) return loop.status();
  return (in.schedule().*Primitive)(*loop);
}
template <absl::Status (Schedule::*Primitive)(BlockRV, LoopRV)>
absl::Status ApplyBlockLoopPrimitive(InstructionReader& in) {
  absl::StatusOr<BlockRV> block = in.Block(0);
  if (!block.ok()) return block.status();
  absl::StatusOr<LoopRV> loop = in.Loop(1);
  if (!loop.ok()) return loop.status();
  return (in.schedule().*Primitive)(*block, *loop);
}

class InstructionTable {
 public:
  // Applies one instruction read by `in` to in.schedule() and binds its outputs.
  using ApplyFn = absl::Status (*)(InstructionReader& in);

  // The built-in instructions of every primitive family, built on first use.
  static const InstructionTable& Builtin();

  // Adds an instruction kind; registering a kind twice is a programming error.
  void Register(std::string_view kind, ApplyFn apply);
  // An instruction kind that only older traces hold: replayed (often as what replaced it) or
  // refused with a message saying what replaced it; schedules never record it.
  void RegisterRetired(std::string_view kind, ApplyFn apply);
  // The kinds schedules record, in registration order, and the retired ones.
  const std::vector<std::string>& Kinds() const { return kinds_; }
  const std::vector<std::string>& RetiredKinds() const { return retired_; }
  bool Contains(std::string_view kind) const { return apply_.count(std::string(kind)) > 0; }

  // Applies `trace` to a fresh schedule of `workload` (Replay in schedule.h, with this table).
  absl::StatusOr<Schedule> Replay(const Workload& workload, const Trace& trace,
                                  uint64_t seed) const;

 private:
  std::vector<std::string> kinds_, retired_;
  std::map<std::string, ApplyFn> apply_;
};

}  // namespace tessel::schedules
