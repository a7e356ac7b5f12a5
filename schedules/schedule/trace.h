#pragma once

// A trace: the unit that is stored, mutated and replayed. Each instruction names its inputs and
// outputs by random-variable names ("b0" stages, "l3" loops, "v2" sampled integers), carries its
// literal arguments as JSON attributes, and sampling instructions carry their decision.
// Replaying a trace on a fresh schedule of the same workload (Replay in schedule.h) gives the
// same program every time.
//
// JSON form (version 1):
//   {"version": 1, "insts": [
//      {"kind": "get_stage", "attrs": {"name": "C"}, "outputs": ["b0"]},
//      {"kind": "get_loops", "inputs": ["b0"], "outputs": ["l1", "l2", "l3"]},
//      {"kind": "sample_perfect_tile", "inputs": ["l1"], "attrs": {"n": 2, "max_innermost": 16},
//       "outputs": ["v4", "v5"], "decision": [64, 16]},
//      {"kind": "split", "inputs": ["l1", "v4", "v5"], "outputs": ["l6", "l7"]}, ...]}
// Literal split factors appear in attrs as {"factors": [null, 16]} where null marks an input RV.

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace tessel::schedules {

struct Instruction {
  std::string kind;
  std::vector<std::string> inputs;
  nlohmann::json attrs = nlohmann::json::object();
  std::vector<std::string> outputs;
  nlohmann::json decision;  // null unless a sampling instruction

  bool operator==(const Instruction& o) const;
};

struct Trace {
  static constexpr int kVersion = 1;
  std::vector<Instruction> insts;

  nlohmann::json ToJson() const;
  // dump(indent) of ToJson(); compact (indent < 0) written directly, byte-identical.
  std::string ToJsonString(int indent = 1) const;
  static absl::StatusOr<Trace> FromJson(const nlohmann::json& j);
  static absl::StatusOr<Trace> Parse(const std::string& text);
  bool operator==(const Trace& o) const { return insts == o.insts; }
};

// The kinds a trace may contain (for validation and documentation): those of the built-in
// instruction table (instruction_table.h), in registration order.
const std::vector<std::string>& InstructionKinds();

}  // namespace tessel::schedules
