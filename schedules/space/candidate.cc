#include "schedules/space/candidate.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "schedules/codegen/cuda_codegen.h"
#include "schedules/codegen/host_codegen.h"
#include "schedules/codegen/source_json.h"
#include "schedules/lower/check_limits.h"
#include "schedules/lower/lower.h"
#include "schedules/util/status_macros.h"
#include "schedules/workload/builtins.h"
#include "schedules/workload/key.h"
#include "schedules/workload/parser.h"

namespace tessel::schedules {

namespace {

using nlohmann::json;

absl::StatusOr<std::string> ReadFile(const std::string& path, const std::string& what) {
  std::ifstream in(path);
  if (!in) {
    return absl::NotFoundError(absl::StrCat("cannot read ", what, " '", path, "'; check the path"));
  }
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

absl::StatusOr<Candidate> Finish(Candidate c, absl::StatusOr<Program> program,
                                 BuildStep* failed_at) {
  BuildStep unused;
  BuildStep& step = failed_at ? *failed_at : unused;
  step = BuildStep::kLower;
  if (!program.ok()) return program.status();
  c.program = std::move(*program);
  step = BuildStep::kLimits;
  if (absl::Status st = CheckTargetLimits(c.program, c.target); !st.ok()) return st;
  step = BuildStep::kCodegen;
  auto source = c.target.is_cuda() ? GenerateCuda(c.program, c.target) : GenerateHost(c.program);
  if (!source.ok()) return source.status();
  c.source = std::move(*source);
  return c;
}

absl::Status Malformed(const std::string& path, const std::string& what) {
  return absl::InvalidArgumentError(
      absl::StrCat(path, ": not a valid candidate file: ", what,
                   "; write candidate files with `tessel sample --out DIR`"));
}

}  // namespace

absl::StatusOr<Candidate> BuildCandidate(const Workload& workload, const Target& target,
                                         std::optional<Trace> trace) {
  if (!trace) {
    return Finish(Candidate{workload, target, std::nullopt, {}, {}},
                  LowerReference(workload, target), nullptr);
  }
  auto sch = Replay(workload, *trace);
  if (!sch.ok()) return sch.status();
  return BuildCandidate(*sch, target);
}

absl::StatusOr<Candidate> BuildCandidate(const Schedule& schedule, const Target& target,
                                         BuildStep* failed_at) {
  return Finish(Candidate{schedule.workload(), target, schedule.trace(), {}, {}},
                Lower(schedule, target), failed_at);
}

const char* BuildStepName(BuildStep s) {
  switch (s) {
    case BuildStep::kLower:
      return "lowering";
    case BuildStep::kLimits:
      return "over_limits";
    case BuildStep::kCodegen:
      return "codegen";
  }
  return "?";
}

absl::StatusOr<Trace> ReadTraceFile(const std::string& path) {
  auto text = ReadFile(path, "trace file");
  if (!text.ok()) {
    return absl::NotFoundError(absl::StrCat(text.status().message(), " (traces are JSON files)"));
  }
  auto t = Trace::Parse(*text);
  if (!t.ok()) {
    return absl::Status(t.status().code(), absl::StrCat(path, ": ", t.status().message()));
  }
  return t;
}

json CandidateToJson(const Candidate& c, const std::string& source_file) {
  json j;
  j["format"] = "tessel-candidate";
  j["version"] = 1;
  j["workload"] = {{"name", c.workload.name},
                   {"spec", c.workload.spec},
                   {"key", WorkloadKey(c.workload)},
                   {"canonical", CanonicalText(c.workload)}};
  j["target"] = {{"kind", c.target.is_cuda() ? "cuda" : "host"},
                 {"arch", c.target.arch},
                 {"device_name", c.target.device_name}};
  j["trace"] = c.trace ? c.trace->ToJson() : json(nullptr);
  j["source_file"] = source_file;
  j["code"] = c.source.code;
  json kernels = json::array();
  for (const KernelSource& k : c.source.kernels) {
    kernels.push_back({{"entry", k.entry},
                       {"grid", k.launch.grid},
                       {"block", k.launch.block},
                       {"dynamic_shared_bytes", k.launch.dynamic_shared_bytes},
                       {"params", k.params}});
    if (k.launch.cooperative) kernels.back()["cooperative"] = true;  // a grid-synchronized kernel
    if (!k.launch.tensor_maps.empty()) {
      kernels.back()["tensor_maps"] = TensorMapsToJson(k.launch.tensor_maps);
    }
  }
  j["kernels"] = kernels;
  json buffers = json::array();
  for (const ProgramBuffer& b : c.source.buffers) {
    buffers.push_back({{"name", b.buffer->name},
                       {"dtype", DTypeName(b.buffer->dtype)},
                       {"shape", b.buffer->shape},
                       {"role", BufferRoleName(b.role)}});
  }
  j["buffers"] = buffers;
  return j;
}

absl::StatusOr<std::string> WriteCandidateFiles(const Candidate& c, const std::string& dir,
                                                const std::string& stem) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    return absl::PermissionDeniedError(absl::StrCat(
        "cannot create directory '", dir, "': ", ec.message(), "; choose another --out directory"));
  }
  const std::string source_file = stem + (c.target.is_cuda() ? ".cu" : ".cc");
  const std::string json_path = (std::filesystem::path(dir) / (stem + ".json")).string();
  const std::string src_path = (std::filesystem::path(dir) / source_file).string();
  for (const auto& [path, text] :
       {std::pair{src_path, c.source.code},
        std::pair{json_path, CandidateToJson(c, source_file).dump(1) + "\n"}}) {
    std::ofstream out(path, std::ios::trunc);
    out << text;
    out.close();
    if (!out) {
      return absl::PermissionDeniedError(
          absl::StrCat("cannot write '", path, "'; check the --out directory's permissions"));
    }
  }
  return json_path;
}

absl::StatusOr<CandidateFile> ReadCandidateFile(const std::string& path) {
  auto text = ReadFile(path, "candidate file");
  if (!text.ok()) return text.status();
  json j = json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return Malformed(path, "it is not a JSON object");
  // Every value is type-checked before it is read (json::value and get throw on a wrong type).
  if (!j.contains("format") || !j["format"].is_string() || j["format"] != "tessel-candidate") {
    return Malformed(path, "\"format\" is not \"tessel-candidate\"");
  }
  if (!j.contains("version") || !j["version"].is_number_integer() || j["version"] != 1) {
    return Malformed(path, "unsupported \"version\" (this build reads version 1)");
  }
  auto str = [&](const json& o, const char* key) -> absl::StatusOr<std::string> {
    if (!o.is_object() || !o.contains(key) || !o[key].is_string()) {
      return Malformed(path, absl::StrCat("\"", key, "\" must be a string"));
    }
    return o[key].get<std::string>();
  };
  CandidateFile f;
  // Workload: parsed again, and checked against the key it had when the file was written.
  const json& w = j.contains("workload") ? j["workload"] : json();
  TESSEL_ASSIGN_OR_RETURN(std::string name, str(w, "name"));
  TESSEL_ASSIGN_OR_RETURN(std::string spec, str(w, "spec"));
  TESSEL_ASSIGN_OR_RETURN(std::string key, str(w, "key"));
  auto workload = name == "custom" ? ParseWorkload(spec) : ParseWorkloadSpec(spec);
  if (!workload.ok()) {
    return Malformed(path,
                     absl::StrCat("its workload does not parse: ", workload.status().message()));
  }
  if (WorkloadKey(*workload) != key) {
    return absl::FailedPreconditionError(absl::StrCat(
        path, ": the workload '", spec, "' now has key ", WorkloadKey(*workload), ", not the key ",
        key, " the file was written with (its definition changed); sample the candidate again"));
  }
  f.workload = std::move(*workload);
  // Target.
  const json& t = j.contains("target") ? j["target"] : json();
  TESSEL_ASSIGN_OR_RETURN(std::string kind, str(t, "kind"));
  TESSEL_ASSIGN_OR_RETURN(std::string arch, str(t, "arch"));
  auto target = MakeTarget(kind, kind == "cuda" ? arch : "");
  if (!target.ok()) return Malformed(path, std::string(target.status().message()));
  f.target = std::move(*target);
  // Trace.
  if (!j.contains("trace") || !(j["trace"].is_object() || j["trace"].is_null())) {
    return Malformed(path, "\"trace\" must be a trace object (null for the reference)");
  }
  if (j["trace"].is_object()) {
    auto trace = Trace::FromJson(j["trace"]);
    if (!trace.ok()) {
      return Malformed(path, absl::StrCat("its trace: ", trace.status().message()));
    }
    f.trace = std::move(*trace);
  }
  // Source, as stored.
  TESSEL_ASSIGN_OR_RETURN(f.source.code, str(j, "code"));
  f.source.target = f.target.kind;
  if (!j.contains("buffers") || !j["buffers"].is_array() || !j.contains("kernels") ||
      !j["kernels"].is_array()) {
    return Malformed(path, "\"buffers\" and \"kernels\" must be arrays");
  }
  for (const json& b : j["buffers"]) {
    TESSEL_ASSIGN_OR_RETURN(std::string bname, str(b, "name"));
    TESSEL_ASSIGN_OR_RETURN(std::string dtype, str(b, "dtype"));
    TESSEL_ASSIGN_OR_RETURN(std::string role, str(b, "role"));
    std::optional<DType> dt = ParseDType(dtype);
    if (!dt || !b.contains("shape") || !b["shape"].is_array()) {
      return Malformed(path, absl::StrCat("buffer ", bname, " needs a dtype and a shape"));
    }
    std::vector<int64_t> shape;
    for (const json& d : b["shape"]) {
      if (!d.is_number_integer() || d.get<int64_t>() <= 0) {
        return Malformed(path, absl::StrCat("buffer ", bname, " has a bad shape"));
      }
      shape.push_back(d.get<int64_t>());
    }
    if (absl::Status s = CheckTensorElements(bname, shape); !s.ok()) {
      return Malformed(path, absl::StrCat("buffer ", bname, ": ", s.message()));
    }
    BufferRole r;
    if (role == "input") {
      r = BufferRole::kInput;
    } else if (role == "output") {
      r = BufferRole::kOutput;
    } else if (role == "workspace") {
      r = BufferRole::kWorkspace;
    } else {
      return Malformed(path, absl::StrCat("buffer ", bname, " has unknown role '", role, "'"));
    }
    f.source.buffers.push_back({MakeBuffer(bname, *dt, shape, MemScope::kGlobal), r});
  }
  const int nbuf = static_cast<int>(f.source.buffers.size());
  for (const json& k : j["kernels"]) {
    KernelSource ks;
    TESSEL_ASSIGN_OR_RETURN(ks.entry, str(k, "entry"));
    auto dims = [&](const char* key, std::array<int64_t, 3>* out) -> absl::Status {
      if (!k.contains(key) || !k[key].is_array() || k[key].size() != 3) {
        return Malformed(
            path, absl::StrCat("kernel ", ks.entry, ": \"", key, "\" must be three integers"));
      }
      for (int d = 0; d < 3; ++d) {
        if (!k[key][d].is_number_integer() || k[key][d].get<int64_t>() <= 0) {
          return Malformed(path, absl::StrCat("kernel ", ks.entry, ": \"", key,
                                              "\" must be three positive integers"));
        }
        (*out)[d] = k[key][d].get<int64_t>();
      }
      return absl::OkStatus();
    };
    TESSEL_RETURN_IF_ERROR(dims("grid", &ks.launch.grid));
    TESSEL_RETURN_IF_ERROR(dims("block", &ks.launch.block));
    if (k.contains("dynamic_shared_bytes")) {
      const json& v = k["dynamic_shared_bytes"];
      if (!v.is_number_integer() || v.get<int64_t>() < 0) {
        return Malformed(path, absl::StrCat("kernel ", ks.entry,
                                            ": \"dynamic_shared_bytes\" must be an integer >= 0"));
      }
      ks.launch.dynamic_shared_bytes = v.get<int64_t>();
    }
    if (k.contains("cooperative")) {
      if (!k["cooperative"].is_boolean()) {
        return Malformed(
            path, absl::StrCat("kernel ", ks.entry, ": \"cooperative\" must be true or false"));
      }
      ks.launch.cooperative = k["cooperative"].get<bool>();
    }
    if (!k.contains("params") || !k["params"].is_array()) {
      return Malformed(path, absl::StrCat("kernel ", ks.entry, ": \"params\" must be an array"));
    }
    for (const json& p : k["params"]) {
      if (!p.is_number_integer() || p.get<int64_t>() < 0 || p.get<int64_t>() >= nbuf) {
        return Malformed(path,
                         absl::StrCat("kernel ", ks.entry, " names a buffer that does not exist"));
      }
      ks.params.push_back(p.get<int>());
    }
    if (k.contains("tensor_maps")) {
      absl::StatusOr<std::vector<TensorMapSpec>> maps =
          TensorMapsFromJson(k["tensor_maps"], absl::StrCat("kernel ", ks.entry, ": "));
      if (!maps.ok()) return Malformed(path, std::string(maps.status().message()));
      ks.launch.tensor_maps = std::move(*maps);
    }
    f.source.kernels.push_back(std::move(ks));
  }
  if (absl::Status s = CheckTensorMaps(f.source); !s.ok()) {
    return Malformed(path, std::string(s.message()));
  }
  return f;
}

}  // namespace tessel::schedules
