#include "schedules/codegen/source_json.h"

#include <algorithm>
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
    if (!k.launch.tensor_maps.empty()) {
      kernels.back()["tensor_maps"] = TensorMapsToJson(k.launch.tensor_maps);
    }
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
    if (k.contains("tensor_maps")) {
      absl::StatusOr<std::vector<TensorMapSpec>> maps = TensorMapsFromJson(k["tensor_maps"], what);
      if (!maps.ok()) return Malformed(std::string(maps.status().message()));
      ks.launch.tensor_maps = std::move(*maps);
    }
    s.kernels.push_back(std::move(ks));
  }
  TESSEL_RETURN_IF_ERROR(CheckTensorMaps(s));
  return s;
}

json TensorMapsToJson(const std::vector<TensorMapSpec>& maps) {
  json out = json::array();
  for (const TensorMapSpec& m : maps) {
    out.push_back({{"buffer", m.buffer}, {"box", m.box}, {"swizzle_bytes", m.swizzle_bytes}});
  }
  return out;
}

absl::StatusOr<std::vector<TensorMapSpec>> TensorMapsFromJson(const json& maps,
                                                              const std::string& what) {
  const auto bad = [&](const char* why) {
    return absl::InvalidArgumentError(absl::StrCat(what, "\"tensor_maps\" must be ", why));
  };
  if (!maps.is_array()) return bad("an array");
  std::vector<TensorMapSpec> out;
  for (const json& m : maps) {
    if (!m.is_object() || !m.contains("buffer") || !m["buffer"].is_number_integer() ||
        !m.contains("box") || !m["box"].is_array() ||
        (m.contains("swizzle_bytes") && !m["swizzle_bytes"].is_number_integer())) {
      return bad("objects with an integer \"buffer\", a \"box\" array and \"swizzle_bytes\"");
    }
    TensorMapSpec spec;
    spec.buffer = static_cast<int>(std::clamp<int64_t>(m["buffer"].get<int64_t>(), -1, 1 << 20));
    spec.swizzle_bytes = m.value("swizzle_bytes", int64_t{0});
    for (const json& e : m["box"]) {
      if (!e.is_number_integer()) return bad("objects whose \"box\" holds integers");
      spec.box.push_back(e.get<int64_t>());
    }
    out.push_back(std::move(spec));
  }
  return out;
}

absl::Status CheckTensorMaps(const GeneratedSource& source) {
  for (const KernelSource& k : source.kernels) {
    for (size_t i = 0; i < k.launch.tensor_maps.size(); ++i) {
      const TensorMapSpec& m = k.launch.tensor_maps[i];
      const std::string what = absl::StrCat("kernel ", k.entry, ": tensor map ", i, " ");
      if (m.buffer < 0 || m.buffer >= static_cast<int>(source.buffers.size())) {
        return absl::InvalidArgumentError(
            absl::StrCat(what, "names buffer ", m.buffer, " of ", source.buffers.size(),
                         ": a tensor map's buffer indexes the program's buffers"));
      }
      const Buffer& b = *source.buffers[m.buffer].buffer;
      if (b.shape.empty() || b.shape.size() > 5 || m.box.size() != b.shape.size()) {
        return absl::InvalidArgumentError(
            absl::StrCat(what, "has a box of ", m.box.size(), " extents over ", b.name, " of rank ",
                         b.shape.size(), ": give one extent per axis, for buffers of rank 1 to 5"));
      }
      for (int64_t e : m.box) {
        if (e < 1 || e > 256) {
          return absl::InvalidArgumentError(absl::StrCat(
              what, "has a box extent of ", e, ": the copy engine moves 1 to 256 a side"));
        }
      }
      const int64_t row = m.box.back() * DTypeBytes(b.dtype);
      if ((m.swizzle_bytes != 0 && m.swizzle_bytes != 32 && m.swizzle_bytes != 64 &&
           m.swizzle_bytes != 128) ||
          row % 16 != 0 || (m.swizzle_bytes > 0 && row > m.swizzle_bytes)) {
        return absl::InvalidArgumentError(absl::StrCat(
            what, "has rows of ", row, " bytes and a swizzle of ", m.swizzle_bytes,
            " bytes: rows are a multiple of 16 bytes, at most the swizzle (0, 32, 64 or 128)"));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace tessel::schedules
