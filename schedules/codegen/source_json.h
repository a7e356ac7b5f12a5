#pragma once

// How a generated program is launched, as JSON: its kernels (entry, grid, block, dynamic shared
// memory, cluster, cooperative, parameters) and its buffers (name, dtype, shape, role), without
// the source text. The same fields as a candidate file's "kernels" and "buffers"
// (schedules/space/candidate.h), plus "target" and each kernel's "cluster":
//   {"target": "cuda"|"host",
//    "kernels": [{"entry", "grid": [x, y, z], "block": [x, y, z], "dynamic_shared_bytes",
//                 "cluster", "cooperative", "params": [buffer indices],
//                 "tensor_maps": [{"buffer", "box": [...], "swizzle_bytes"}] (only when any)}],
//    "buffers": [{"name", "dtype", "shape": [...], "role": "input"|"output"|"workspace",
//                 "strides": [...] (only when not compact row-major)}]}
// What a tuning record keeps of its program (measure::Artifact::launch_json).
//
// Threads: free functions, callable from any thread.

#include <string>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "schedules/codegen/source.h"

namespace tessel::schedules {

// `source` without its code, as compact JSON text.
std::string SourceLaunchToJson(const GeneratedSource& source);

// The program of `launch_json` with `code` as its source. InvalidArgument naming the field when
// the JSON is malformed (a wrong type, a non-positive extent, a parameter that names no buffer).
absl::StatusOr<GeneratedSource> SourceFromLaunchJson(const std::string& launch_json,
                                                     std::string code);

// A kernel's "tensor_maps" (LaunchConfig::tensor_maps), as in a launch JSON and a candidate file;
// reading checks the form only ("what" heads the message), CheckTensorMaps the rest.
nlohmann::json TensorMapsToJson(const std::vector<TensorMapSpec>& maps);
absl::StatusOr<std::vector<TensorMapSpec>> TensorMapsFromJson(const nlohmann::json& maps,
                                                              const std::string& what);

// Every kernel's tensor maps describe a box of one of `source`'s buffers the copy engine can move:
// a buffer that exists, of rank 1 to 5, one box extent per axis, each 1 to 256, a swizzle of 0,
// 32, 64 or 128 bytes that the box's rows fit. InvalidArgument naming the kernel, the map and the
// fix otherwise (a stored or received program is not trusted).
absl::Status CheckTensorMaps(const GeneratedSource& source);

}  // namespace tessel::schedules
