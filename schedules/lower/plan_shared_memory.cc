#include "schedules/lower/plan_shared_memory.h"

#include <algorithm>
#include <unordered_set>

#include "schedules/lower/passes.h"

namespace tessel::schedules {

namespace {

constexpr int64_t kStaticSharedLimit = 48 * 1024;
constexpr int64_t kSharedAlign = 16;

}  // namespace

SharedPlan PlanSharedMemory(const Kernel& kernel, bool /*int64_indices*/) {
  SharedPlan plan;
  std::unordered_set<const Buffer*> seen;
  WalkStmt(kernel.body, [&](const Stmt& s) {
    const auto* a = As<AllocateNode>(s);
    if (a && a->buffer->scope == MemScope::kShared && seen.insert(a->buffer.get()).second) {
      SharedSlot slot;
      slot.buffer = a->buffer;
      slot.dtype = a->buffer->dtype;
      slot.elements = std::max<int64_t>(1, a->buffer->AllocatedElements());
      slot.bytes = slot.elements * DTypeBytes(slot.dtype);
      plan.slots.push_back(slot);
    }
  });
  // The all-reduces' scratch, as lower_all_reduce sized it.
  plan.slots.insert(plan.slots.end(), kernel.scratch.begin(), kernel.scratch.end());
  for (SharedSlot& slot : plan.slots) {
    const int64_t align = slot.Alignment();
    plan.bytes = (plan.bytes + align - 1) / align * align;
    slot.offset = plan.bytes;
    plan.bytes += (slot.bytes + kSharedAlign - 1) / kSharedAlign * kSharedAlign;
  }
  plan.dynamic = plan.bytes > kStaticSharedLimit;
  return plan;
}

absl::Status PlanKernelsSharedMemory(LoweringState* state) {
  if (!state->target.is_cuda()) return absl::OkStatus();
  for (Kernel& k : state->program.kernels) {
    k.shared = PlanSharedMemory(k, state->program.needs_int64_indices);
  }
  return absl::OkStatus();
}

}  // namespace tessel::schedules
