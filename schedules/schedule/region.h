#pragma once

// Region inference: which part of its tensor an attached stage must compute.
//
// A stage attached (compute_at) inside loop L of stage T computes, for each iteration of the
// loops enclosing L, the bounding box of the elements its consumers read inside L. The loops
// enclosing the attach point are fixed (their variables stay symbolic in the region's minimum);
// loops inside it vary over their extents. Buffers shared by several threads relax the thread
// axes: a shared (or global) stage attached inside threadIdx/vthread loops covers what all the
// threads of the block read; a local stage covers one thread's needs. A consumer attached after
// its producer (reverse_compute_at) covers the region the producer writes inside L.
//
// The region's extent must be a constant; when it is not (or the access is not analyzable), the
// stage computes the whole tensor.

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "schedules/ir/expr.h"
#include "schedules/schedule/stage.h"

namespace tessel::schedules {

struct StageBound {
  // Per root iter (spatial axes, then reduction axes): the minimum, an expression of the loop
  // variables enclosing the stage's attach point (0 for root stages and reduction axes), and the
  // extent.
  std::vector<Expr> root_min;
  std::vector<int64_t> root_extent;
};

// Infers the bounds of every stage that is not inlined, and updates each stage's iter extents
// to match (Stage::PropagateExtents). Fails on an attachment cycle.
absl::StatusOr<std::vector<StageBound>> InferBounds(std::vector<Stage>* stages);

// The root extents stage `index` gets where it is attached now (used by compute_at to size the
// stage's fresh loops).
absl::StatusOr<std::vector<int64_t>> InferRootExtents(const std::vector<Stage>& stages, int index);

// The loops that enclose the body of loop `iter` of stage `stage`, outermost first, across
// attachments: (stage index, iter id) pairs, ending with (stage, iter) itself.
std::vector<std::pair<int, int>> EnclosingLoops(const std::vector<Stage>& stages, int stage,
                                                int iter);

int FindStageIndex(const std::vector<Stage>& stages, const std::string& name);
// The index of the root stage of the kernel (or host nest) that computes stage `stage`: the end
// of its chain of attachments.
int KernelRootIndex(const std::vector<Stage>& stages, int stage);

}  // namespace tessel::schedules
