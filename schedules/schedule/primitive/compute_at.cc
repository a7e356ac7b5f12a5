// compute_at and reverse_compute_at: attach a stage inside a loop of its consumer (or, reversed,
// of its producer), where it computes only the region that loop needs (region inference,
// schedules/schedule/region.h).

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "schedules/schedule/instruction_table.h"
#include "schedules/schedule/primitive/common.h"
#include "schedules/schedule/primitive/register.h"
#include "schedules/schedule/region.h"
#include "schedules/schedule/schedule.h"
#include "schedules/util/status_macros.h"

namespace tessel::schedules {

namespace {

constexpr char kComputeAt[] = "compute_at";
constexpr char kReverseComputeAt[] = "reverse_compute_at";

}  // namespace

absl::StatusOr<std::vector<int64_t>> Schedule::RegionAt(Stage* s, const AttachPoint& at,
                                                        const char* prim) {
  const AttachPoint saved = s->attach;
  s->attach = at;
  auto region = InferRootExtents(stages_, StageIndex(s->name));
  s->attach = saved;
  if (!region.ok()) return Precondition(prim, std::string(region.status().message()));
  return region;
}

absl::Status Schedule::AttachAt(Stage* s, AttachPoint at, BlockRV block, LoopRV loop,
                                const char* prim) {
  TESSEL_ASSIGN_OR_RETURN(std::vector<int64_t> region, RegionAt(s, at, prim));
  s->attach = std::move(at);
  ResetLoops(s, region);
  SyncFused(*s);
  Record(Instruction{prim, {RVName(block.id), RVName(loop.id)}, {}, {}, {}});
  return absl::OkStatus();
}

absl::Status Schedule::CheckComputeAt(const Stage* s, const Stage* t, const char* prim) const {
  if (s == t) return Invalid(prim, absl::StrCat("cannot attach stage ", s->name, " to itself"));
  if (s->is_output) {
    return Precondition(prim, absl::StrCat("stage ", s->name,
                                           " is an output; attach its producers to it instead, "
                                           "or use reverse_compute_at"));
  }
  if (IsAttachedWithin(*t, s->name)) {
    return Precondition(prim, absl::StrCat("stage ", t->name, " is attached inside stage ", s->name,
                                           "; attaching back would make a cycle"));
  }
  // A stage in global memory that the target reads at its own indices is computed whole over the
  // target's kernel (one point per iteration of the target's loops), so readers in later kernels
  // see all of it.
  const bool whole = s->buffer->scope == MemScope::kGlobal &&
                     s->buffer->shape == t->buffer->shape && ReadsAtIdentity(*t, s->buffer.get());
  const int target_root = KernelRootIndex(stages_, StageIndex(t->name));
  for (int c : Consumers(s->buffer.get())) {
    const Stage& cs = stages_[c];
    if (cs.name == t->name || IsAttachedWithin(cs, t->name)) continue;
    if (whole && KernelRootIndex(stages_, c) > target_root) continue;
    return Precondition(prim,
                        absl::StrCat("stage ", s->name, " is also read by stage ", cs.name,
                                     ", which is not inside stage ", t->name,
                                     "; cache_read it for each reader or attach that reader too"));
  }
  if (Consumers(s->buffer.get()).empty()) {
    return Precondition(prim, absl::StrCat("stage ", s->name, " has no consumer"));
  }
  return absl::OkStatus();
}

absl::Status Schedule::CheckComputeAtLoop(Stage* s, const Stage* t, int iter) {
  TESSEL_RETURN_IF_ERROR(CheckComputeAt(s, t, kComputeAt));
  return RegionAt(s, AttachPoint{AttachPoint::Kind::kAt, t->name, iter, false}, kComputeAt)
      .status();
}

absl::Status Schedule::ComputeAt(BlockRV block, LoopRV loop) {
  const char* prim = kComputeAt;
  if (loop.id == kRootLoop || loop.id == kInlineLoop) {
    // Markers from sample_compute_location.
    auto st = MutableStage(block, prim);
    if (!st.ok()) return st.status();
    if (loop.id == kInlineLoop) return ComputeInline(block);
    Stage* s = *st;
    if (s->attach.kind == AttachPoint::Kind::kAt) {
      s->attach = AttachPoint{};
      std::vector<int64_t> ext(s->buffer->shape.begin(), s->buffer->shape.end());
      for (const IterVar& iv : s->iters) {
        if (iv.reduce && static_cast<int>(ext.size()) < s->num_root()) ext.push_back(iv.extent);
      }
      ResetLoops(s, ext);
      SyncFused(*s);
    }
    Record(Instruction{prim, {RVName(block.id), "root"}, {}, {}, {}});
    return absl::OkStatus();
  }
  TESSEL_ASSIGN_OR_RETURN(StageAndLoop sl, MutableStageAndLoop(block, loop, prim));
  auto [s, t, iter] = sl;
  TESSEL_RETURN_IF_ERROR(CheckComputeAt(s, t, prim));
  return AttachAt(s, AttachPoint{AttachPoint::Kind::kAt, t->name, iter, false}, block, loop, prim);
}

absl::Status Schedule::ReverseComputeAt(BlockRV block, LoopRV loop) {
  const char* prim = kReverseComputeAt;
  TESSEL_ASSIGN_OR_RETURN(StageAndLoop sl, MutableStageAndLoop(block, loop, prim));
  auto [s, t, iter] = sl;
  if (s == t) return Invalid(prim, absl::StrCat("cannot attach stage ", s->name, " to itself"));
  if (s->reduces()) {
    return Precondition(prim, absl::StrCat("stage ", s->name,
                                           " is a reduction; only injective consumers can be "
                                           "attached after their producer"));
  }
  if (!ReadsAtIdentity(*s, t->buffer.get())) {
    return Precondition(prim, absl::StrCat("stage ", s->name, " must read ", t->name,
                                           " at its own indices (an elementwise consumer)"));
  }
  if (t->buffer->scope != MemScope::kGlobal && Consumers(t->buffer.get()).size() > 1) {
    return Precondition(prim,
                        absl::StrCat("stage ", t->name, " is in ", MemScopeName(t->buffer->scope),
                                     " memory and has other consumers than ", s->name));
  }
  if (IsAttachedWithin(*t, s->name)) {
    return Precondition(prim, absl::StrCat("stage ", t->name, " is attached inside stage ", s->name,
                                           "; attaching back would make a cycle"));
  }
  return AttachAt(s, AttachPoint{AttachPoint::Kind::kAt, t->name, iter, true}, block, loop, prim);
}

// ---------------------------------------------------------------------------------------------
// Instruction table entries.

void RegisterComputeAtInstructions(InstructionTable* table) {
  table->Register(kComputeAt, ApplyBlockLoopPrimitive<&Schedule::ComputeAt>);
  table->Register(kReverseComputeAt, ApplyBlockLoopPrimitive<&Schedule::ReverseComputeAt>);
}

}  // namespace tessel::schedules
