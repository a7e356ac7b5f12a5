#include "schedules/codegen/source_json.h"

#include <array>
#include <cstdint>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "schedules/ir/dtype.h"
#include "schedules/util/status_macros.h"
#include "schedules/workload/parser.h"

namespace tessel::schedules {
namespace {

using nlohmann::json;

absl::Status Malformed(const std::string& why) {
  return absl::InvalidArgumentError(absl::StrCat("malformed launch configuration: ", why));
}

absl::StatusOr<std::string> StringField(const json& o, const char* key, const std::string& what) {
  if (!o.is_object() || !o.contains(key) || !o[key].is_string()) {
    return Malformed(absl::StrCat(what, "\"", key, "\" must be a string"));
  }
  return o[key].get<std::string>();
}

absl::StatusOr<int64_t> IntField(const json& o, const char* key, const std::string& what,
                                 int64_t min, int64_t fallback) {
  if (!o.contains(key)) return fallback;
  const json& v = o[key];
  if (!v.is_number_integer() || v.get<int64_t>() < min) {
    return Malformed(absl::StrCat(what, "\"", key, "\" must be an integer >= ", min));
  }
  return v.get<int64_t>();
}

absl::StatusOr<BufferRole> ParseRole(const std::string& role, const std::string& name) {
  if (role == "input") return BufferRole::kInput;
  if (role == "output") return BufferRole::kOutput;
  if (role == "workspace") return BufferRole::kWorkspace;
  return Malformed(absl::StrCat("buffer ", name, " has unknown role '", role, "'"));
}

}  // namespace

std::string SourceLaunchToJson(const GeneratedSource& source) {
  json kernels = json::array();
  for (const KernelSource& k : source.kernels) {
    kernels.push_back({{"entry", k.entry},
                       {"grid", k.launch.grid},
                       {"block", k.launch.block},
                       {"dynamic_shared_bytes", k.launch.dynamic_shared_bytes},
                       {"cluster", k.launch.cluster},
                       {"cooperative", k.launch.cooperative},
                       {"params", k.params}});
  }
  json buffers = json::array();
  for (const ProgramBuffer& b : source.buffers) {
    buffers.push_back({{"name", b.buffer->name},
                       {"dtype", DTypeName(b.buffer->dtype)},
                       {"shape", b.buffer->shape},
                       {"role", BufferRoleName(b.role)}});
    if (!b.buffer->strides.empty()) buffers.back()["strides"] = b.buffer->strides;
  }
  return json{{"target", source.target == TargetKind::kCuda ? "cuda" : "host"},
              {"kernels", kernels},
              {"buffers", buffers}}
      .dump();
}

absl::StatusOr<GeneratedSource> SourceFromLaunchJson(const std::string& launch_json,
                                                     std::string code) {
  const json j = json::parse(launch_json, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return Malformed("it is not a JSON object");
  GeneratedSource s;
  s.code = std::move(code);
  TESSEL_ASSIGN_OR_RETURN(std::string target, StringField(j, "target", ""));
  if (target != "cuda" && target != "host") {
    return Malformed(absl::StrCat("unknown target '", target, "'"));
  }
  s.target = target == "cuda" ? TargetKind::kCuda : TargetKind::kHost;
  if (!j.contains("buffers") || !j["buffers"].is_array() || !j.contains("kernels") ||
      !j["kernels"].is_array()) {
    return Malformed("\"buffers\" and \"kernels\" must be arrays");
  }
  for (const json& b : j["buffers"]) {
    TESSEL_ASSIGN_OR_RETURN(std::string name, StringField(b, "name", "a buffer's "));
    const std::string what = absl::StrCat("buffer ", name, ": ");
    TESSEL_ASSIGN_OR_RETURN(std::string dtype, StringField(b, "dtype", what));
    TESSEL_ASSIGN_OR_RETURN(std::string role_name, StringField(b, "role", what));
    const std::optional<DType> dt = ParseDType(dtype);
    if (!dt) return Malformed(absl::StrCat(what, "unknown dtype '", dtype, "'"));
    if (!b.contains("shape") || !b["shape"].is_array()) {
      return Malformed(absl::StrCat(what, "\"shape\" must be an array"));
    }
    std::vector<int64_t> shape;
    for (const json& d : b["shape"]) {
      if (!d.is_number_integer() || d.get<int64_t>() <= 0) {
        return Malformed(absl::StrCat(what, "\"shape\" must hold positive integers"));
      }
      shape.push_back(d.get<int64_t>());
    }
    if (absl::Status st = CheckTensorElements(name, shape); !st.ok()) {
      return Malformed(absl::StrCat(what, st.message()));
    }
    std::vector<int64_t> strides;
    if (b.contains("strides")) {
      if (!b["strides"].is_array() || b["strides"].size() != shape.size()) {
        return Malformed(absl::StrCat(what, "\"strides\" must hold one integer per dimension"));
      }
      // Strides >= 0 whose span (1 + sum of (extent - 1) * stride) is at most kMaxTensorElements,
      // the rule of the worker protocol (proto/convert.h).
      int64_t span = 1;
      for (size_t d = 0; d < shape.size(); ++d) {
        const json& v = b["strides"][d];
        int64_t reach = 0;
        if (!v.is_number_integer() || v.get<int64_t>() < 0 ||
            __builtin_mul_overflow(shape[d] - 1, v.get<int64_t>(), &reach) ||
            __builtin_add_overflow(span, reach, &span) || span > kMaxTensorElements) {
          return Malformed(absl::StrCat(
              what, "\"strides\" must be integers >= 0 that span at most 2^40 elements"));
        }
        strides.push_back(v.get<int64_t>());
      }
    }
    TESSEL_ASSIGN_OR_RETURN(BufferRole role, ParseRole(role_name, name));
    s.buffers.push_back(
        {MakeBuffer(name, *dt, shape, MemScope::kGlobal, std::move(strides)), role});
  }
  const int64_t nbuf = static_cast<int64_t>(s.buffers.size());
  for (const json& k : j["kernels"]) {
    KernelSource ks;
    TESSEL_ASSIGN_OR_RETURN(ks.entry, StringField(k, "entry", "a kernel's "));
    const std::string what = absl::StrCat("kernel ", ks.entry, ": ");
    for (auto [key, dims] : {std::pair{"grid", &ks.launch.grid}, {"block", &ks.launch.block}}) {
      if (!k.contains(key) || !k[key].is_array() || k[key].size() != 3) {
        return Malformed(absl::StrCat(what, "\"", key, "\" must be three integers"));
      }
      for (size_t d = 0; d < 3; ++d) {
        if (!k[key][d].is_number_integer() || k[key][d].get<int64_t>() <= 0) {
          return Malformed(absl::StrCat(what, "\"", key, "\" must be three positive integers"));
        }
        (*dims)[d] = k[key][d].get<int64_t>();
      }
    }
    TESSEL_ASSIGN_OR_RETURN(ks.launch.dynamic_shared_bytes,
                            IntField(k, "dynamic_shared_bytes", what, 0, 0));
    TESSEL_ASSIGN_OR_RETURN(ks.launch.cluster, IntField(k, "cluster", what, 1, 1));
    if (k.contains("cooperative")) {
      if (!k["cooperative"].is_boolean()) {
        return Malformed(absl::StrCat(what, "\"cooperative\" must be true or false"));
      }
      ks.launch.cooperative = k["cooperative"].get<bool>();
    }
    if (!k.contains("params") || !k["params"].is_array()) {
      return Malformed(absl::StrCat(what, "\"params\" must be an array"));
    }
    for (const json& p : k["params"]) {
      if (!p.is_number_integer() || p.get<int64_t>() < 0 || p.get<int64_t>() >= nbuf) {
        return Malformed(absl::StrCat(what, "a parameter names a buffer that does not exist"));
      }
      ks.params.push_back(static_cast<int>(p.get<int64_t>()));
    }
    s.kernels.push_back(std::move(ks));
  }
  return s;
}

}  // namespace tessel::schedules
