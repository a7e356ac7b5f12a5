#pragma once

// The workload text format: a small language for compute definitions. docs/workload-format.md is
// the user's reference; in short:
//
//   # GEMM + bias + GELU
//   A = input(f32, [M, K])
//   B = input(f32, [K, N])
//   bias = input(f32, [N])
//   C[m, n] = sum(k) A[m, k] * B[k, n]
//   D[m, n] = gelu(C[m, n] + bias[n])
//   output D
//   with M = 1024, N = 1024, K = 512
//
// Statements are separated by newlines or ';' (newlines inside brackets continue the statement);
// '#' starts a comment. A statement is one of
//   NAME = input(DTYPE, [DIM, ...])           an input tensor
//   NAME[AXIS, AXIS: EXTENT, ...] = BODY      a computed tensor (NAME = BODY for rank 0)
//   output NAME, ...                          the tensors the workload produces
//   with PARAM = INTEGER, ...                 size parameters, usable anywhere (any position)
// BODY is an expression, or a reduction `sum(AXES) EXPR` / `max(AXES) EXPR` / `min(AXES) EXPR`
// whose axes may carry extents (`sum(r: 11)`). An axis without an extent takes the extent of the
// tensor dimension it indexes alone (`A[m, k]` gives m the extent of A's dimension 0).
//
// The tensor's dtype is its body's dtype. Expressions: + - * / % (floor semantics on integers),
// unary - and !, comparisons, && ||, parentheses, integer and float literals (a literal takes the
// type of the other operand; float literals default to f32, integer literals to i64), tensor reads
// X[i, j], select(c, a, b), casts f32(x) f16(x) bf16(x) f64(x) i32(x) i64(x) bool(x),
// min(a, b), max(a, b), add(a, b), mul(a, b), the intrinsics exp log tanh sqrt rsqrt erf abs and
// relu sigmoid silu gelu (expanded into the intrinsics at parse time).

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "schedules/workload/workload.h"

namespace tessel::schedules {

// The most elements one tensor of a workload may have: 2^40.
inline constexpr int64_t kMaxTensorElements = int64_t{1} << 40;

// Parses a definition in the text format above into a validated Workload named "custom" whose
// spec is `text`. Every error is InvalidArgument with a message that starts with
// "line L, column C: " and says what was expected. Thread-safe (no shared state).
absl::StatusOr<Workload> ParseWorkload(const std::string& text);

// OK when a tensor of this shape has at most kMaxTensorElements elements; otherwise an
// InvalidArgument error that names the tensor and its shape ("tensor A of shape [...] has ...").
// Shared by the parser and the built-in workloads. Thread-safe.
absl::Status CheckTensorElements(const std::string& tensor, const std::vector<int64_t>& shape);

}  // namespace tessel::schedules
