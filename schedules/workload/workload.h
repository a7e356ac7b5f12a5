#pragma once

// A workload: a compute definition with concrete shapes and dtypes. Each tensor is either an input
// or computed from earlier tensors by an index expression (optionally reduced with sum/max/min
// over reduction axes). Built by the text parser (parser.h) or the built-in helpers
// (builtins.h); the same structure feeds scheduling, lowering and the workload key.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "schedules/ir/buffer.h"
#include "schedules/ir/expr.h"

namespace tessel::schedules {

struct TensorDef {
  std::string name;
  // The global buffer that holds the tensor; its shape and dtype are the tensor's.
  BufferPtr buffer;
  bool is_input = false;
  // Compute tensors only: one spatial axis per dimension (extent = shape[i]), the reduction axes
  // with their extents, the reduction (nullopt for an injective tensor) and the body. The body
  // reads other tensors through Load of their buffers, indexed by expressions of the axes. For a
  // reduction the buffer's dtype is the body's dtype (accumulation happens in that type).
  std::vector<VarPtr> axes;
  std::vector<VarPtr> reduce_axes;
  std::vector<int64_t> reduce_extents;
  std::optional<ReduceOp> reduce;
  Expr body;
};

struct Workload {
  // Family name ("matmul", "softmax", ... or "custom" for text definitions) and the text it was
  // made from (a one-line spec or a definition), for display.
  std::string name;
  std::string spec;
  // Topologically ordered: every tensor comes after the tensors it reads.
  std::vector<TensorDef> tensors;
  std::vector<std::string> outputs;

  const TensorDef* Find(const std::string& tensor_name) const;
  int IndexOf(const std::string& tensor_name) const;  // -1 when absent
  bool IsOutput(const std::string& tensor_name) const;
  // Floating-point operations of one evaluation (a multiply-add counts two), for GFLOP/s.
  double Flops() const;
  // Bytes of inputs read once plus outputs written once: the compulsory traffic.
  int64_t CompulsoryBytes() const;
};

// Checks the invariants above (names unique, reads only of earlier tensors, index ranks match,
// outputs exist and are computed, extents positive); the message names the tensor and the fix.
absl::Status ValidateWorkload(const Workload& w);

}  // namespace tessel::schedules
