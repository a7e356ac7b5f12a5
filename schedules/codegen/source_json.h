#pragma once

// How a generated program is launched, as JSON: its kernels (entry, grid, block, dynamic shared
// memory, cluster, cooperative, parameters) and its buffers (name, dtype, shape, role), without
// the source text. The same fields as a candidate file's "kernels" and "buffers"
// (schedules/space/candidate.h), plus "target" and each kernel's "cluster":
//   {"target": "cuda"|"host",
//    "kernels": [{"entry", "grid": [x, y, z], "block": [x, y, z], "dynamic_shared_bytes",
//                 "cluster", "cooperative", "params": [buffer indices]}],
//    "buffers": [{"name", "dtype", "shape": [...], "role": "input"|"output"|"workspace",
//                 "strides": [...] (only when not compact row-major)}]}
// What a tuning record keeps of its program (measure::Artifact::launch_json).
//
// Threads: free functions, callable from any thread.

#include <string>

#include "absl/status/statusor.h"
#include "schedules/codegen/source.h"

namespace tessel::schedules {

// `source` without its code, as compact JSON text.
std::string SourceLaunchToJson(const GeneratedSource& source);

// The program of `launch_json` with `code` as its source. InvalidArgument naming the field when
// the JSON is malformed (a wrong type, a non-positive extent, a parameter that names no buffer).
absl::StatusOr<GeneratedSource> SourceFromLaunchJson(const std::string& launch_json,
                                                     std::string code);

}  // namespace tessel::schedules
