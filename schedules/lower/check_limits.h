#pragma once

// Checks a lowered program against a target's limits before it is compiled: threads per block,
// shared memory per block, an estimate of registers per thread (local buffers live in
// registers), and vector width. The message names the kernel, the limit and by how much it is
// exceeded.

#include "absl/status/status.h"
#include "schedules/lower/program.h"
#include "schedules/target/target.h"

namespace tessel::schedules {

struct KernelResources {
  int64_t threads = 1;
  int64_t shared_bytes = 0;      // all shared allocations of the kernel
  int64_t local_elements = 0;    // 32-bit words of local buffers live at once (upper bound)
  int64_t max_vector_bytes = 0;  // widest vectorized loop
};

KernelResources EstimateResources(const Kernel& k);

// kFailedPrecondition (the candidate is over a limit; not a user error) with a message such as
// "kernel tessel_matmul_C uses 1536 threads per block, over the limit of 1024 by 512".
absl::Status CheckTargetLimits(const Program& p, const Target& t);

}  // namespace tessel::schedules
