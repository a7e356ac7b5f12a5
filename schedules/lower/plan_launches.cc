#include <algorithm>

#include "schedules/ir/tensor_intrin.h"
#include "schedules/lower/passes.h"

namespace tessel::schedules {

namespace {

// Launch dimensions of the kernel rooted at stage `root`.
LaunchConfig LaunchOf(const LoweringState& state, int root) {
  LaunchConfig l;
  for (int i : state.KernelStages(root)) {
    const Stage& s = state.stages[i];
    l.cooperative |= state.WritesAcrossBlocks(i);
    for (int leaf : s.leaves) {
      const IterVar& iv = s.iters[leaf];
      const int64_t e = iv.extent;
      // A tensor-core intrinsic is a warp's: its lanes are threadIdx.x, whether or not another
      // stage binds them (a kernel whose copies are the copy engine's binds none).
      if (state.target.is_cuda() && TensorizedBy(iv.annotations))
        l.block[0] = std::max<int64_t>(l.block[0], 32);
      switch (iv.thread) {
        case ThreadTag::kBlockX:
          l.grid[0] = e;
          break;
        case ThreadTag::kBlockY:
          l.grid[1] = e;
          break;
        case ThreadTag::kBlockZ:
          l.grid[2] = e;
          break;
        case ThreadTag::kThreadX:
          l.block[0] = std::max(l.block[0], e);
          break;
        case ThreadTag::kThreadY:
          l.block[1] = std::max(l.block[1], e);
          break;
        case ThreadTag::kThreadZ:
          l.block[2] = std::max(l.block[2], e);
          break;
        case ThreadTag::kClusterX:
          l.cluster = std::max(l.cluster, e);
          break;
        default:
          break;
      }
    }
  }
  l.grid[0] *= l.cluster;  // blockIdx.x-bound loops index clusters
  return l;
}

}  // namespace

absl::Status PlanLaunches(LoweringState* state) {
  const std::vector<Stage>& stages = state->stages;
  state->launches.assign(stages.size(), LaunchConfig{});
  for (const Stage& s : stages) {
    for (int leaf : s.leaves) {
      if (IsBlockTag(s.iters[leaf].thread)) {
        state->block_vars[s.iters[leaf].var.get()] = s.iters[leaf].thread;
        if (s.attach.kind == AttachPoint::Kind::kAt) {
          state->attached_block_vars.insert(s.iters[leaf].var.get());
        }
      }
    }
  }
  // Loop variables range over their extents, thread indices over the kernel's block size
  // (a stage may use fewer threads than the kernel launches).
  const Target& target = state->target;
  for (size_t i = 0; i < stages.size(); ++i) {
    const Stage& s = stages[i];
    if (!state->IsKernelRoot(static_cast<int>(i))) continue;
    LaunchConfig& launch = state->launches[i];
    launch = LaunchOf(*state, static_cast<int>(i));
    if (auto it = s.annotations.find("max_blocks_per_sm");
        it != s.annotations.end() && it->second > 0 && target.is_cuda()) {
      // An occupancy limit: enough dynamic shared memory per block that no more than this
      // many blocks fit on an SM (fewer rows in flight, so their re-reads stay in L2).
      const int64_t per_block = target.shared_bytes_per_sm / (it->second + 1) + 1024;
      launch.dynamic_shared_bytes = std::min(per_block, target.max_shared_bytes_optin);
    }
    for (int si : state->KernelStages(static_cast<int>(i))) {
      for (int leaf : stages[si].leaves) {
        const IterVar& iv = stages[si].iters[leaf];
        state->analyzer.Bind(iv.var, 0,
                             IsPerThreadTag(iv.thread) ? BlockDim(launch, iv.thread) : iv.extent);
      }
    }
  }
  return absl::OkStatus();
}

absl::Status CollectProgramBuffers(LoweringState* state) {
  Program& p = state->program;
  const Workload& workload = state->schedule.workload();
  p.name = "tessel_" + SanitizeName(workload.name);
  p.target = state->target.kind;
  for (const TensorDef& t : workload.tensors) {
    if (t.is_input) p.buffers.push_back({t.buffer, BufferRole::kInput});
  }
  for (const std::string& o : workload.outputs) {
    for (const Stage& s : state->stages) {
      if (!s.inlined() && s.is_output && s.buffer->name == o) {
        p.buffers.push_back({s.buffer, BufferRole::kOutput});
      }
    }
  }
  for (const Stage& s : state->stages) {
    if (!s.inlined() && !s.is_output && s.buffer->scope == MemScope::kGlobal) {
      p.buffers.push_back({s.buffer, BufferRole::kWorkspace});
    }
  }
  for (const ProgramBuffer& b : p.buffers) {
    if (b.buffer->NumElements() >= (int64_t{1} << 31)) p.needs_int64_indices = true;
  }
  return absl::OkStatus();
}

}  // namespace tessel::schedules
