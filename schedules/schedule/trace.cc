#include "schedules/schedule/trace.h"

#include "schedules/schedule/instruction_table.h"

#include <algorithm>
#include <cstdint>

#include "absl/strings/str_cat.h"

namespace tessel::schedules {

bool Instruction::operator==(const Instruction& o) const {
  return kind == o.kind && inputs == o.inputs && attrs == o.attrs && outputs == o.outputs &&
         decision == o.decision;
}

nlohmann::json Trace::ToJson() const {
  nlohmann::json insts_json = nlohmann::json::array();
  for (const Instruction& i : insts) {
    nlohmann::json j;
    j["kind"] = i.kind;
    if (!i.inputs.empty()) j["inputs"] = i.inputs;
    if (!i.attrs.empty()) j["attrs"] = i.attrs;
    if (!i.outputs.empty()) j["outputs"] = i.outputs;
    if (!i.decision.is_null()) j["decision"] = i.decision;
    insts_json.push_back(std::move(j));
  }
  return nlohmann::json{{"version", kVersion}, {"insts", std::move(insts_json)}};
}

namespace {

// `s` as nlohmann::json dumps it: quoted as it is when every byte is printable ASCII other than
// a quote or a backslash (names and kinds always are), else through the library's escaping.
void AppendJsonString(const std::string& s, std::string* out) {
  const bool plain = std::all_of(
      s.begin(), s.end(), [](char c) { return c >= 0x20 && c < 0x7f && c != '"' && c != '\\'; });
  if (!plain) {
    *out += nlohmann::json(s).dump();
    return;
  }
  *out += '"';
  *out += s;
  *out += '"';
}

void AppendJsonStrings(const std::vector<std::string>& v, std::string* out) {
  *out += '[';
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) *out += ',';
    AppendJsonString(v[i], out);
  }
  *out += ']';
}

}  // namespace

// Compact: the bytes of ToJson().dump() (keys in nlohmann's sorted order), written directly. A
// search takes every candidate's id from this text, and building the JSON tree first (copying
// each instruction's attributes and decision) cost more than the rest of the id.
std::string Trace::ToJsonString(int indent) const {
  if (indent >= 0) return ToJson().dump(indent);
  std::string out = "{\"insts\":[";
  for (size_t n = 0; n < insts.size(); ++n) {
    const Instruction& i = insts[n];
    if (n) out += ',';
    out += '{';
    if (!i.attrs.empty()) {
      out += "\"attrs\":";
      out += i.attrs.dump();
      out += ',';
    }
    if (!i.decision.is_null()) {
      out += "\"decision\":";
      out += i.decision.dump();
      out += ',';
    }
    if (!i.inputs.empty()) {
      out += "\"inputs\":";
      AppendJsonStrings(i.inputs, &out);
      out += ',';
    }
    out += "\"kind\":";
    AppendJsonString(i.kind, &out);
    if (!i.outputs.empty()) {
      out += ",\"outputs\":";
      AppendJsonStrings(i.outputs, &out);
    }
    out += '}';
  }
  absl::StrAppend(&out, "],\"version\":", kVersion, "}");
  return out;
}

namespace {

absl::StatusOr<Trace> TraceFromJson(const nlohmann::json& j) {
  if (!j.is_object() || !j.contains("version") || !j["version"].is_number_integer()) {
    return absl::InvalidArgumentError(
        "trace JSON must be an object with an integer \"version\" and an \"insts\" array");
  }
  const int64_t version = j["version"].get<int64_t>();
  if (version != Trace::kVersion) {
    return absl::InvalidArgumentError(absl::StrCat("trace version ", version,
                                                   " is not supported; this build reads version ",
                                                   Trace::kVersion));
  }
  if (!j.contains("insts") || !j["insts"].is_array()) {
    return absl::InvalidArgumentError("trace JSON has no \"insts\" array");
  }
  Trace t;
  const InstructionTable& table = InstructionTable::Builtin();
  int n = 0;
  for (const auto& ij : j["insts"]) {
    Instruction inst;
    if (!ij.is_object() || !ij.contains("kind") || !ij["kind"].is_string()) {
      return absl::InvalidArgumentError(
          absl::StrCat("trace instruction ", n, " has no string \"kind\""));
    }
    inst.kind = ij["kind"].get<std::string>();
    if (!table.Contains(inst.kind)) {
      return absl::InvalidArgumentError(
          absl::StrCat("trace instruction ", n, " has unknown kind '", inst.kind, "'"));
    }
    auto read_names = [&](const char* key, std::vector<std::string>* out) -> absl::Status {
      if (!ij.contains(key)) return absl::OkStatus();
      if (!ij[key].is_array()) {
        return absl::InvalidArgumentError(absl::StrCat("trace instruction ", n, " (", inst.kind,
                                                       "): \"", key,
                                                       "\" must be an array of names"));
      }
      for (const auto& s : ij[key]) {
        if (!s.is_string()) {
          return absl::InvalidArgumentError(absl::StrCat("trace instruction ", n, " (", inst.kind,
                                                         "): \"", key, "\" must hold strings"));
        }
        out->push_back(s.get<std::string>());
      }
      return absl::OkStatus();
    };
    if (auto s = read_names("inputs", &inst.inputs); !s.ok()) return s;
    if (auto s = read_names("outputs", &inst.outputs); !s.ok()) return s;
    if (ij.contains("attrs") && !ij["attrs"].is_null()) {
      if (!ij["attrs"].is_object()) {
        return absl::InvalidArgumentError(absl::StrCat("trace instruction ", n, " (", inst.kind,
                                                       "): \"attrs\" must be an object"));
      }
      inst.attrs = ij["attrs"];
    }
    if (ij.contains("decision")) inst.decision = ij["decision"];
    t.insts.push_back(std::move(inst));
    ++n;
  }
  return t;
}

}  // namespace

absl::StatusOr<Trace> Trace::FromJson(const nlohmann::json& j) {
  try {
    return TraceFromJson(j);
  } catch (const nlohmann::json::exception& e) {
    // Backstop: every value is type-checked before it is read; a miss must not crash the caller.
    return absl::InvalidArgumentError(absl::StrCat("trace JSON is malformed: ", e.what()));
  }
}

absl::StatusOr<Trace> Trace::Parse(const std::string& text) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  } catch (const nlohmann::json::exception&) {
    j = nlohmann::json(nlohmann::json::value_t::discarded);
  }
  if (j.is_discarded()) {
    return absl::InvalidArgumentError("trace is not valid JSON");
  }
  return FromJson(j);
}

}  // namespace tessel::schedules
