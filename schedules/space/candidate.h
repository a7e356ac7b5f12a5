#pragma once

// A candidate: a trace of a workload, lowered for a target, checked against the target's limits
// (lower/check_limits.h) and printed as source (DESIGN.md section 3). The trace is the truth; the
// program and source are derived from it.
//
// Candidate files (`tessel sample --out DIR`, read by `tessel measure --candidate FILE`) hold
// one candidate each, self-contained, as JSON beside its source file (<stem>.json and
// <stem>.cu or <stem>.cc):
//   {"format": "tessel-candidate", "version": 1,
//    "workload": {"name", "spec", "key", "canonical"},   spec: the one-line spec or definition
//    "target": {"kind": "cuda"|"host", "arch", "device_name"},
//    "trace": <trace JSON (trace.h)>,
//    "source_file": "<stem>.cu", "code": <the source text>,
//    "kernels": [{"entry", "grid": [x, y, z], "block": [x, y, z], "dynamic_shared_bytes",
//                 "params": [buffer indices]}],
//    "buffers": [{"name", "dtype", "shape": [...], "role": "input"|"output"|"workspace"}]}
//
// Threads: free functions, callable from any thread.

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "schedules/codegen/source.h"
#include "schedules/lower/program.h"
#include "schedules/schedule/schedule.h"
#include "schedules/schedule/trace.h"
#include "schedules/target/target.h"
#include "schedules/workload/workload.h"

namespace tessel::schedules {

struct Candidate {
  Workload workload;
  Target target;
  std::optional<Trace> trace;  // nullopt: the reference lowering
  Program program;
  GeneratedSource source;
};

// Replays `trace` (or takes the reference lowering when nullopt), lowers it for `target`,
// checks it against the target's limits and generates its source.
absl::StatusOr<Candidate> BuildCandidate(const Workload& workload, const Target& target,
                                         std::optional<Trace> trace);
// The same from a schedule already replayed; its trace is the candidate's. On failure,
// `failed_at` (when given) says which step rejected it.
enum class BuildStep : uint8_t { kLower, kLimits, kCodegen };
const char* BuildStepName(BuildStep s);  // "lowering", "over_limits", "codegen"
absl::StatusOr<Candidate> BuildCandidate(const Schedule& schedule, const Target& target,
                                         BuildStep* failed_at = nullptr);

// A trace JSON file (`tessel lower --trace`).
absl::StatusOr<Trace> ReadTraceFile(const std::string& path);

// The candidate file's JSON (above); `source_file` is the name of the source beside it.
nlohmann::json CandidateToJson(const Candidate& c, const std::string& source_file);
// Writes <dir>/<stem>.json and its source <dir>/<stem>.cu (or .cc); returns the JSON's path.
absl::StatusOr<std::string> WriteCandidateFiles(const Candidate& c, const std::string& dir,
                                                const std::string& stem);

// A candidate file as written. The workload is parsed again from its spec and must have the key
// the file records (a workload definition that changed since is reported); the source is the one
// stored, not regenerated.
struct CandidateFile {
  Workload workload;
  Target target;
  std::optional<Trace> trace;  // nullopt: the reference lowering
  GeneratedSource source;
};
absl::StatusOr<CandidateFile> ReadCandidateFile(const std::string& path);

}  // namespace tessel::schedules
