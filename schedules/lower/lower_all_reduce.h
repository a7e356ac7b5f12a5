#pragma once

// lower_all_reduce (the pass LowerAllReduces, passes.h) on one kernel, for tests and tools that
// build kernels by hand: expands every AllReduce of the kernel into warp shuffles, block
// reductions through shared scratch and cluster reductions through distributed shared memory,
// and lists the scratch in Kernel::scratch (plan_shared_memory places it). Errors name the
// kernel and what the expansion does not support.

#include "absl/status/status.h"
#include "schedules/lower/program.h"

namespace tessel::schedules {

absl::Status LowerKernelAllReduces(Kernel* kernel, bool int64_indices);

}  // namespace tessel::schedules
