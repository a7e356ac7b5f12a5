#pragma once

// Built-in workload families, named by one-line specs such as
//   matmul(M=1024, N=1024, K=1024, dtype=f16)
// Each family is defined by generating a definition in the text format (parser.h) and parsing
// it, so a builtin and the same text typed by hand are the same workload with the same key.
// docs/workload-format.md lists the families; in short (defaults after '='):
//   matmul(M, N, K, batch=1, transpose_a=false, transpose_b=false, dtype=f32)
//   matmul_bias_gelu(M, N, K, dtype=f32)
//   conv2d(N, C, H, W, K, R, S, stride=1, padding=0, dilation=1, layout=nchw, dtype=f32)
//   conv2d_bias_relu(N, C, H, W, K, R, S, stride=1, padding=0, dilation=1, layout=nchw,
//                    dtype=f32)
//   softmax(rows, cols, dtype=f32)
//   layernorm(rows, cols, dtype=f32)
//   reduce(rows, cols, op=sum, dtype=f32)          op: sum | max | mean
// dtype is f32, f16 or bf16; f16 and bf16 inputs are accumulated in f32 and the result is cast
// back to the dtype in a final injective stage.
//
// All functions are thread-safe (no shared mutable state).

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "schedules/workload/workload.h"

namespace tessel::schedules {

// Parses a one-line spec into a validated Workload whose name is the family and whose spec is
// the normalized spec: every parameter, in the family's order, with defaults filled in, e.g.
// "matmul(M=1024, N=1024, K=1024, batch=1, transpose_a=false, transpose_b=false, dtype=f32)".
// Errors are InvalidArgument and name the family, the parameter and the fix.
absl::StatusOr<Workload> ParseWorkloadSpec(const std::string& spec);

// The text-format definition that a spec expands to (what ParseWorkloadSpec parses).
absl::StatusOr<std::string> BuiltinWorkloadText(const std::string& spec);

// A workload given as text, never read from a file (what a server accepts from clients): a
// definition in the text format when the text has a line holding both '=' and '[', or more than
// one line; otherwise a one-line spec. Pure; call from any thread.
absl::StatusOr<Workload> ParseWorkloadText(const std::string& text);

// Accepts what a user may type where a workload is expected:
//   - the path of an existing file: its contents, read as below (errors are prefixed by the path);
//   - a definition in the text format: any text with a line that holds both '=' and '[', or of
//     more than one line;
//   - otherwise a one-line spec.
// Reads the file system; call from any thread.
absl::StatusOr<Workload> LoadWorkload(const std::string& spec_or_file);

// The built-in families and their parameters, for help texts.
struct BuiltinParam {
  std::string name;
  std::string default_value;  // empty: required
  std::string description;
};
struct BuiltinFamily {
  std::string name;
  std::string description;
  std::vector<BuiltinParam> params;
};
std::vector<BuiltinFamily> BuiltinFamilies();

}  // namespace tessel::schedules
