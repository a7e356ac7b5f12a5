#pragma once

// The lowering passes, each a free function over the LoweringState (lowering_state.h). Their
// order, names and one-line summaries are in pipeline.cc (LoweringPasses()); `tessel lower
// --print-after-all` prints the program after each. Stage passes work on the schedule's stages;
// build_nests makes one kernel per root stage; kernel passes rewrite the kernels' bodies and
// fill in what code generation reads (params, streamed buffers, the shared-memory plan).

#include "absl/status/status.h"
#include "schedules/lower/lowering_state.h"

namespace tessel::schedules {

// ---- Stage passes.

// Gives every loop variable of the program a distinct name (uniquify_loop_names.cc).
absl::Status UniquifyLoopNames(LoweringState* state);
// Rejects schedules lowering cannot express, with the fix in the message (check_stages.cc).
absl::Status CheckStages(LoweringState* state);
// Realizes attached shared/local stages as buffers of their region's shape (realize_buffers.cc).
absl::Status RealizeBuffers(LoweringState* state);
// The launch of every kernel, the block-index variables, the analyzer's variable ranges
// (plan_launches.cc).
absl::Status PlanLaunches(LoweringState* state);
// The program's name and global buffers: inputs, outputs, workspace (plan_launches.cc).
absl::Status CollectProgramBuffers(LoweringState* state);

// ---- Stages to kernels.

// One kernel per root stage, its body the loop nest of the stage with its attached stages,
// guards, reduction initialization, cross-thread reductions and barriers (build_nests.cc).
absl::Status BuildNests(LoweringState* state);

// ---- Kernel passes.

// Simplifies every kernel body over the analyzer's variable ranges (kernel_passes.cc).
absl::Status SimplifyKernels(LoweringState* state);
// Refuses a local buffer still indexed by an attached stage's block index (kernel_passes.cc).
absl::Status CheckBlockAxesCompacted(LoweringState* state);
// Loop nests marked by `tensorize` become tensor-core intrinsic calls and fragments per-thread
// register arrays (CUDA; lower_tensor_intrinsics.cc). After it no fragment buffer remains.
absl::Status LowerTensorIntrinsics(LoweringState* state);
// Loops annotated "software_pipeline" = S >= 2 fetch S - 1 iterations ahead into S slots of their
// shared buffers, with cp.async where a fetch is a contiguous copy (CUDA;
// inject_software_pipeline.cc).
absl::Status InjectSoftwarePipeline(LoweringState* state);
// The stream_loads / stream_stores annotations as the kernels' streamed buffers (CUDA).
absl::Status MarkStreamingBuffers(LoweringState* state);
// Each kernel's params: the program buffers its body touches, in program order.
absl::Status CollectKernelParams(LoweringState* state);
// Expands every AllReduce of a CUDA kernel into warp shuffles, block reductions through shared
// scratch (listed in Kernel::scratch) and cluster reductions through distributed shared memory,
// with uniform components folded (lower_all_reduce.cc, lower_all_reduce.h). Assumes the bodies
// are simplified; builds the expansion as it is to be printed, so no pass after it may simplify.
// Rejects all-reduces the expansion does not support, with the fix in the message. After it no
// AllReduce reaches CUDA code generation; host programs keep theirs (host codegen refuses them).
absl::Status LowerAllReduces(LoweringState* state);
// Places every kernel's shared buffers and reduction scratch (CUDA; plan_shared_memory.h).
absl::Status PlanKernelsSharedMemory(LoweringState* state);
// Plans how every vectorized loop is printed (CUDA; plan_vectorization.h): the kernel bodies
// must not change after it, since each plan names its loop node.
absl::Status PlanKernelsVectorization(LoweringState* state);

}  // namespace tessel::schedules
