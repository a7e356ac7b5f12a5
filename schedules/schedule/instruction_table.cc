#include "schedules/schedule/instruction_table.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "schedules/util/check.h"
#include "schedules/util/status_macros.h"

namespace tessel::schedules {

namespace {

// Typed reads of trace JSON values. nlohmann::json's get<T>() throws on a type mismatch, and a
// trace may come from a corrupt database row, so every value is checked first.
bool IsIntArray(const nlohmann::json& j) {
  return j.is_array() && std::all_of(j.begin(), j.end(),
                                     [](const nlohmann::json& x) { return x.is_number_integer(); });
}

bool IsNumberArray(const nlohmann::json& j) {
  return j.is_array() &&
         std::all_of(j.begin(), j.end(), [](const nlohmann::json& x) { return x.is_number(); });
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// InstructionReader.

absl::StatusOr<int> InstructionReader::Input(size_t i, char kind) const {
  if (i >= inst_->inputs.size()) return Error(absl::StrCat("missing input ", i));
  const std::string& name = inst_->inputs[i];
  if (kind == 'l' && (name == "root" || name == "inline")) {
    return name == "root" ? Schedule::kRootLoop : Schedule::kInlineLoop;
  }
  auto it = rvs_->find(name);
  if (it == rvs_->end()) return Error(absl::StrCat("input ", name, " is not defined before"));
  if (name.empty() || name[0] != kind) {
    return Error(absl::StrCat("input ", name, " has the wrong kind (expected a ",
                              kind == 'b'   ? "stage"
                              : kind == 'l' ? "loop"
                                            : "value",
                              ")"));
  }
  return it->second;
}

absl::StatusOr<BlockRV> InstructionReader::Block(size_t i) const {
  TESSEL_ASSIGN_OR_RETURN(int id, Input(i, 'b'));
  return BlockRV{id};
}

absl::StatusOr<LoopRV> InstructionReader::Loop(size_t i) const {
  TESSEL_ASSIGN_OR_RETURN(int id, Input(i, 'l'));
  return LoopRV{id};
}

absl::StatusOr<IntRV> InstructionReader::Value(size_t i) const {
  TESSEL_ASSIGN_OR_RETURN(int id, Input(i, 'v'));
  return IntRV{id};
}

absl::StatusOr<std::vector<BlockRV>> InstructionReader::BlocksFrom(size_t i) const {
  std::vector<BlockRV> out;
  for (; i < num_inputs(); ++i) {
    TESSEL_ASSIGN_OR_RETURN(BlockRV b, Block(i));
    out.push_back(b);
  }
  return out;
}

absl::StatusOr<std::vector<LoopRV>> InstructionReader::LoopsFrom(size_t i) const {
  std::vector<LoopRV> out;
  for (; i < num_inputs(); ++i) {
    TESSEL_ASSIGN_OR_RETURN(LoopRV l, Loop(i));
    out.push_back(l);
  }
  return out;
}

absl::StatusOr<int64_t> InstructionReader::AttrInt(const char* key) const {
  const nlohmann::json& a = attrs();
  if (!a.contains(key) || !a[key].is_number_integer()) {
    return Error(absl::StrCat("attribute \"", key, "\" must be an integer"));
  }
  return a[key].get<int64_t>();
}

absl::StatusOr<int> InstructionReader::AttrInt32(const char* key) const {
  TESSEL_ASSIGN_OR_RETURN(int64_t v, AttrInt(key));
  if (v < std::numeric_limits<int>::min() || v > std::numeric_limits<int>::max()) {
    return Error(absl::StrCat("attribute \"", key, "\" (", v, ") is out of range"));
  }
  return static_cast<int>(v);
}

absl::StatusOr<std::string> InstructionReader::AttrString(const char* key) const {
  const nlohmann::json& a = attrs();
  if (!a.contains(key) || !a[key].is_string()) {
    return Error(absl::StrCat("attribute \"", key, "\" must be a string"));
  }
  return a[key].get<std::string>();
}

absl::StatusOr<const nlohmann::json*> InstructionReader::AttrArray(const char* key) const {
  const nlohmann::json& a = attrs();
  if (!a.contains(key) || !a[key].is_array()) {
    return Error(absl::StrCat("attribute \"", key, "\" must be an array"));
  }
  return &a[key];
}

absl::StatusOr<std::vector<Factor>> InstructionReader::AttrFactors(const char* key,
                                                                   size_t first_input) const {
  absl::StatusOr<const nlohmann::json*> literals = AttrArray(key);
  if (!literals.ok()) return literals.status();
  std::vector<Factor> factors;
  size_t next = first_input;
  for (const nlohmann::json& f : **literals) {
    if (f.is_null()) {
      absl::StatusOr<IntRV> v = Value(next++);
      if (!v.ok()) return v.status();
      factors.emplace_back(*v);
    } else if (f.is_number_integer()) {
      factors.emplace_back(f.get<int64_t>());
    } else {
      return Error(absl::StrCat(key, " must be integers or null"));
    }
  }
  return factors;
}

absl::StatusOr<std::vector<int64_t>> InstructionReader::AttrIntArray(const char* key) const {
  const nlohmann::json& a = attrs();
  if (!a.contains(key) || !IsIntArray(a[key])) {
    return Error(absl::StrCat("attribute \"", key, "\" must be an array of integers"));
  }
  return a[key].get<std::vector<int64_t>>();
}

absl::StatusOr<std::vector<double>> InstructionReader::AttrNumberArray(const char* key) const {
  const nlohmann::json& a = attrs();
  if (!a.contains(key) || !IsNumberArray(a[key])) {
    return Error(absl::StrCat("attribute \"", key, "\" must be an array of numbers"));
  }
  return a[key].get<std::vector<double>>();
}

absl::StatusOr<std::optional<int64_t>> InstructionReader::IntDecision() const {
  const nlohmann::json& d = inst_->decision;
  if (d.is_null()) return std::optional<int64_t>();
  if (!d.is_number_integer()) return Error("\"decision\" must be an integer");
  return std::optional<int64_t>(d.get<int64_t>());
}

absl::StatusOr<std::optional<std::vector<int64_t>>> InstructionReader::IntArrayDecision() const {
  const nlohmann::json& d = inst_->decision;
  if (d.is_null()) return std::optional<std::vector<int64_t>>();
  if (!IsIntArray(d)) {
    return Error("\"decision\" must be an array of integers");
  }
  return std::optional<std::vector<int64_t>>(d.get<std::vector<int64_t>>());
}

absl::Status InstructionReader::BindOutputs(const std::vector<int>& ids) {
  if (ids.size() != inst_->outputs.size()) {
    return Error(absl::StrCat("produced ", ids.size(), " results but the trace names ",
                              inst_->outputs.size()));
  }
  for (size_t i = 0; i < ids.size(); ++i) (*rvs_)[inst_->outputs[i]] = ids[i];
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------------------------
// InstructionTable.

void InstructionTable::Register(std::string_view kind, ApplyFn apply) {
  const bool added = apply_.emplace(std::string(kind), apply).second;
  TESSEL_CHECK(added) << "instruction kind " << kind << " is registered twice";
  kinds_.emplace_back(kind);
}

void InstructionTable::RegisterRetired(std::string_view kind, ApplyFn apply) {
  const bool added = apply_.emplace(std::string(kind), apply).second;
  TESSEL_CHECK(added) << "instruction kind " << kind << " is registered twice";
  retired_.emplace_back(kind);
}

absl::StatusOr<Schedule> InstructionTable::Replay(const Workload& workload, const Trace& trace,
                                                  uint64_t seed) const {
  auto created = Schedule::Create(workload, seed);
  if (!created.ok()) return created.status();
  Schedule sch = std::move(*created);
  std::map<std::string, int> rvs;  // trace name -> id in this schedule
  int n = 0;
  for (const Instruction& inst : trace.insts) {
    absl::Status st;
    if (!inst.attrs.is_null() && !inst.attrs.is_object()) {
      st = InstructionReader::Error("\"attrs\" must be an object");
    } else if (auto it = apply_.find(inst.kind); it == apply_.end()) {
      st = InstructionReader::Error("unknown instruction kind");
    } else {
      InstructionReader in(&sch, &inst, &rvs);
      try {
        st = it->second(in);
      } catch (const nlohmann::json::exception& e) {
        // Backstop: every JSON value is type-checked first; a miss must not crash the caller.
        st = InstructionReader::Error(absl::StrCat("malformed attribute or decision: ", e.what()));
      }
    }
    if (!st.ok()) {
      return absl::Status(st.code(), absl::StrCat("replaying instruction ", n, " (", inst.kind,
                                                  "): ", st.message()));
    }
    ++n;
  }
  return sch;
}

absl::StatusOr<Schedule> Replay(const Workload& workload, const Trace& trace, uint64_t seed) {
  return InstructionTable::Builtin().Replay(workload, trace, seed);
}

const std::vector<std::string>& InstructionKinds() { return InstructionTable::Builtin().Kinds(); }

}  // namespace tessel::schedules
