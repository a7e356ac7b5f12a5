#pragma once

// CUDA C++ from a lowered Program, for NVRTC (--std=c++17, the toolkit's include directory on the
// include path). One `extern "C" __global__` function per kernel, launched in order.
//
// Conventions of the generated code:
// - Kernel parameters are the kernel's params (Kernel::params order): `const T* __restrict__`
//   for buffers the kernel only reads, `T* __restrict__` otherwise. KernelSource::params gives
//   their indices in GeneratedSource::buffers (= Program::buffers).
// - f16 and bf16 are stored as half / __nv_bfloat16 and computed in float.
// - Shared allocations are hoisted to the top of the kernel (16-byte aligned). When a kernel
//   needs more than 48 KiB of shared memory it all becomes dynamic shared memory and
//   KernelSource::launch.dynamic_shared_bytes says how much (the runner must raise the kernel's
//   limit with cuFuncSetAttribute). Otherwise dynamic_shared_bytes is 0.
// - Vectorized loops are printed as their plan says (Kernel::vectors, made by the
//   plan_vectorization pass): float4 / float2 / uint4 ... accesses, or unrolled scalar loops with
//   the reason in a comment. A vectorized loop without a plan is an error.

#include "absl/status/statusor.h"
#include "schedules/codegen/source.h"
#include "schedules/lower/program.h"
#include "schedules/target/target.h"

namespace tessel::schedules {

// Errors (InvalidArgument / Unimplemented) name the kernel and the construct: a parallel loop, a
// host-only construct, an unsupported AllReduce extent, a buffer outside its kernel's params,
// shared memory over the target's limit, a vectorized loop without a plan, ... Thread-safe: may be
// called from any thread.
absl::StatusOr<GeneratedSource> GenerateCuda(const Program& p, const Target& t);

}  // namespace tessel::schedules
