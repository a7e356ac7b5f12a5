#pragma once

// Small helpers shared by the schedule rules.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "schedules/schedule/schedule.h"

namespace tessel::schedules::rules {

// Whether the loop iterates a reduction axis.
bool IsReduceLoop(const Schedule& s, LoopRV l);
// Whether the stage has already been given loop structure by a rule (a loop bound, split,
// marked parallel/vectorized/unrolled, or the stage is attached).
bool IsScheduled(const Stage& st);
// A categorical choice among `values`, uniform; values over `max` are dropped (at least the
// smallest is kept). A decision (an index into the kept values, ascending) fixes the value the
// sketch itself is built with; samples draw it anew.
absl::StatusOr<IntRV> SampleUniform(Schedule* s, std::vector<int64_t> values, int64_t max,
                                    std::optional<int64_t> decision = std::nullopt);
// Powers of two from `lo` to `hi`.
std::vector<int64_t> PowersOfTwo(int64_t lo, int64_t hi);
// A sum over products of loads whose indices are affine in the loop variables (matmul, batch
// matmul, convolution as an implicit GEMM: each operand reused along the axes it does not use);
// at least two spatial axes and two loads.
bool IsContraction(const Stage& st);
// Whether a stage (injective) is read by a contraction that multi-level tiling will schedule:
// such a producer (e.g. a convolution's padding) is left to that rule, which inlines it into the
// contraction's shared-memory copy or, on the host, into the contraction.
bool FeedsContraction(const Schedule& s, const std::string& name);
// The stages that read the buffer of stage `name`.
std::vector<std::string> ConsumersOf(const Schedule& s, const std::string& name);

}  // namespace tessel::schedules::rules
