#include "schedules/lower/pipeline.h"

#include "schedules/lower/compact_thread_axes.h"
#include "schedules/lower/inject_vthread.h"
#include "schedules/lower/passes.h"

namespace tessel::schedules {

namespace {

// A pass that rewrites each kernel body with a pure function of the body.
template <Stmt (*kRewrite)(const Stmt&)>
absl::Status RewriteKernelBodies(LoweringState* state) {
  for (Kernel& k : state->program.kernels) k.body = kRewrite(k.body);
  return absl::OkStatus();
}

// Region inference (schedules/schedule/region.h): the region each stage computes, into
// state->bounds.
absl::Status InferStageBounds(LoweringState* state) {
  auto bounds = InferBounds(&state->stages);
  if (!bounds.ok()) return bounds.status();
  state->bounds = std::move(*bounds);
  return absl::OkStatus();
}

Stmt InjectAllVirtualThreads(const Stmt& body) { return InjectVirtualThreads(body); }

}  // namespace

const std::vector<LoweringPass>& LoweringPasses() {
  static const std::vector<LoweringPass>* const kPasses = new std::vector<LoweringPass>{
      {"uniquify_loop_names", "gives every loop variable of the program a distinct name",
       UniquifyLoopNames},
      {"infer_bounds", "infers the region each stage computes for its consumers", InferStageBounds},
      {"check_stages", "rejects placements and bindings that lowering cannot express", CheckStages},
      {"realize_buffers", "realizes attached stages as buffers of their region's shape",
       RealizeBuffers},
      {"plan_launches", "sets each kernel's grid, block and cluster and the index ranges",
       PlanLaunches},
      {"collect_program_buffers", "lists the program's global buffers: inputs, outputs, workspace",
       CollectProgramBuffers},
      {"build_nests", "makes one kernel per root stage: loop nests, guards, reductions, barriers",
       BuildNests},
      {"simplify", "simplifies every kernel body over the loop and thread index ranges",
       SimplifyKernels},
      // A local cache computed outside its readers' threadIdx loops holds one thread's share
      // (compact_thread_axes.h).
      {"compact_thread_axes", "drops the thread-owned axes of local buffers",
       RewriteKernelBodies<CompactThreadAxes>},
      // Virtual threads: what does not depend on the virtual thread (shared-memory fetches and
      // their barriers) runs once, the rest once per virtual thread (inject_vthread.h).
      {"inject_vthread", "pushes vthread loops inward around what depends on them",
       RewriteKernelBodies<InjectAllVirtualThreads>},
      {"check_block_axes_compacted", "refuses local buffers read at other blocks' parts",
       CheckBlockAxesCompacted},
      {"lower_tensor_intrinsics",
       "turns tensorized nests into mma/ldmatrix calls and fragments into registers",
       LowerTensorIntrinsics},
      {"inject_software_pipeline",
       "multi-buffers pipelined loops' shared fetches, issued ahead with cp.async",
       InjectSoftwarePipeline},
      {"mark_streaming_buffers", "records the buffers read or written with evict-first hints",
       MarkStreamingBuffers},
      {"collect_kernel_params", "sets each kernel's params: the global buffers it touches",
       CollectKernelParams},
      {"lower_all_reduce", "expands all-reduces: shuffles, shared and cluster scratch, barriers",
       LowerAllReduces},
      {"plan_shared_memory", "places shared buffers and all-reduce scratch in shared memory",
       PlanKernelsSharedMemory},
      {"plan_vectorization", "decides how each vectorized loop is printed: vectors or scalars",
       PlanKernelsVectorization},
  };
  return *kPasses;
}

absl::StatusOr<Program> RunLoweringPasses(LoweringState* state, const AfterPassFn& after_pass) {
  for (const LoweringPass& pass : LoweringPasses()) {
    if (absl::Status st = pass.run(state); !st.ok()) return st;
    if (after_pass) after_pass(pass, state->program);
  }
  return std::move(state->program);
}

}  // namespace tessel::schedules
