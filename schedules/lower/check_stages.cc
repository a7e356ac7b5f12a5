#include "absl/strings/str_cat.h"
#include "schedules/ir/tensor_intrin.h"
#include "schedules/lower/passes.h"

namespace tessel::schedules {

namespace {

// An attached stage's loop bound to a block index splits that stage's work over the kernel's
// blocks, each block taking its own iteration: the kernel root binds the same index with the
// same extent (bind refuses reduction loops). A global stage's results are read by every block
// after a grid barrier; a local one's block axis is per thread anyway and is compacted away
// (compact_thread_axes.h).
absl::Status CheckGridLoop(const LoweringState& state, int si, const IterVar& iv) {
  const Stage& s = state.stages[si];
  const Stage& root = state.stages[KernelRootIndex(state.stages, si)];
  const std::string what =
      absl::StrCat("stage ", s.name, " binds loop ", iv.var->name, " (extent ", iv.extent, ") to ",
                   ThreadTagName(iv.thread), " inside stage ", root.name);
  int64_t root_extent = 0;
  bool cluster = false;
  for (int leaf : root.leaves) {
    if (root.iters[leaf].thread == iv.thread) root_extent = root.iters[leaf].extent;
  }
  for (int i : state.KernelStages(KernelRootIndex(state.stages, si))) {
    for (int leaf : state.stages[i].leaves) {
      cluster |= state.stages[i].iters[leaf].thread == ThreadTag::kClusterX;
    }
  }
  if (root_extent != iv.extent) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ", whose ",
        root_extent == 0 ? absl::StrCat("loops bind no ", ThreadTagName(iv.thread))
                         : absl::StrCat(ThreadTagName(iv.thread), " has extent ", root_extent),
        "; an attached stage may bind a block index only to split its work over the kernel's "
        "blocks: bind a loop of ",
        root.name, " to it with the same extent"));
  }
  if (s.buffer->scope == MemScope::kShared) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ", but ", s.name,
        " is in shared memory, of which each block has its own: the other blocks' parts would "
        "stay unwritten; use local or global memory"));
  }
  if (cluster && s.buffer->scope == MemScope::kGlobal) {
    return absl::InvalidArgumentError(
        absl::StrCat(what,
                     ", which needs a grid barrier, and the kernel uses thread-block "
                     "clusters; the two do not combine"));
  }
  return absl::OkStatus();
}

// Tensor-core marks first: on the host they are the reason, whatever else the schedule binds.
absl::Status CheckNoTensorCoresOnHost(const LoweringState& state) {
  if (state.target.is_cuda()) return absl::OkStatus();
  for (const Stage& s : state.stages) {
    for (const IterVar& iv : s.iters) {
      if (const TensorIntrinInfo* intrin = TensorizedBy(iv.annotations)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "stage ", s.name, " has loop ", iv.var->name, " tensorized with ", intrin->name,
            "; tensor-core intrinsics (", TensorIntrinNames(),
            ") exist only on CUDA targets: lower the schedule for a cuda target, or tune for "
            "the host with its own design space (it never tensorizes)"));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckStages(LoweringState* state_ptr) {
  const LoweringState& state = *state_ptr;
  if (absl::Status st = CheckNoTensorCoresOnHost(state); !st.ok()) return st;
  for (size_t si = 0; si < state.stages.size(); ++si) {
    const Stage& s = state.stages[si];
    if (s.inlined() || !s.computed_by.empty()) continue;
    const bool attached = s.attach.kind == AttachPoint::Kind::kAt;
    if (!attached && s.buffer->scope != MemScope::kGlobal) {
      return absl::FailedPreconditionError(absl::StrCat(
          "stage ", s.name, " is in ", MemScopeName(s.buffer->scope),
          " memory but not attached to any loop; compute_at it inside the loop that uses it"));
    }
    for (int leaf : s.leaves) {
      const IterVar& iv = s.iters[leaf];
      if (!state.target.is_cuda() && iv.thread != ThreadTag::kNone &&
          iv.thread != ThreadTag::kVThread) {
        return absl::InvalidArgumentError(absl::StrCat(
            "stage ", s.name, " binds loop ", iv.var->name, " to ", ThreadTagName(iv.thread),
            ", but the host target has no thread axes; use parallel instead"));
      }
      if (state.target.is_cuda() && iv.kind == ForKind::kParallel) {
        return absl::InvalidArgumentError(absl::StrCat(
            "stage ", s.name, " marks loop ", iv.var->name,
            " parallel, which is for the host target; bind it to blockIdx/threadIdx instead"));
      }
      if (attached && IsBlockTag(iv.thread)) {
        if (absl::Status st = CheckGridLoop(state, static_cast<int>(si), iv); !st.ok()) return st;
      }
    }
    if (s.reduces() && s.init_at < 0) {
      int first_reduce = -1;
      for (size_t p = 0; p < s.leaves.size(); ++p) {
        const IterVar& iv = s.iters[s.leaves[p]];
        if (iv.reduce && first_reduce < 0) first_reduce = static_cast<int>(p);
        if (!iv.reduce && first_reduce >= 0 && iv.thread == ThreadTag::kNone) {
          return absl::FailedPreconditionError(absl::StrCat(
              "stage ", s.name, " has spatial loop ", iv.var->name, " inside reduction loop ",
              s.iters[s.leaves[first_reduce]].var->name,
              "; use decompose_reduction to place the initialization before the reduction"));
        }
      }
    }
    if (s.reduces() && s.init_at >= 0) {
      const int pos = s.LeafPosition(s.init_at);
      if (pos < 0) {
        return absl::FailedPreconditionError(absl::StrCat("the decompose_reduction loop of stage ",
                                                          s.name, " was later transformed"));
      }
      for (int p = 0; p < pos; ++p) {
        if (s.iters[s.leaves[p]].reduce) {
          return absl::FailedPreconditionError(
              absl::StrCat("stage ", s.name, ": reduction loop ", s.iters[s.leaves[p]].var->name,
                           " is outside the loop its initialization was placed before"));
        }
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace tessel::schedules
