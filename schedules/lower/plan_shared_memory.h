#pragma once

// Shared-memory planning of a CUDA kernel: every shared buffer the body allocates, then the
// scratch its cross-thread reductions combine through, each placed at a 16-byte aligned offset of
// the kernel's shared memory (Kernel::shared). Code generation declares what the plan says: one
// static array a slot, or slices of one dynamic array past 48 KiB.
//
// Scratch: lower_all_reduce lists the scratch of the all-reduces it expands in Kernel::scratch
// (a block all-reduce over threadIdx.x of more than 32 threads keeps one partial per warp and
// component of its tuple; one over threadIdx.y or .z one value per thread and component; one slot
// per component in each CTA for a cluster all-reduce; reductions of values with the same compute
// type share the scratch, sized for the largest).

#include "schedules/lower/program.h"

namespace tessel::schedules {

// `int64_indices` is unused since lower_all_reduce sizes the scratch (by compute type).
SharedPlan PlanSharedMemory(const Kernel& kernel, bool int64_indices);

}  // namespace tessel::schedules
