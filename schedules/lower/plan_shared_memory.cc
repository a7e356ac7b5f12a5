#include "schedules/lower/plan_shared_memory.h"

#include <algorithm>
#include <map>
#include <set>
#include <unordered_set>

#include "schedules/lower/passes.h"

namespace tessel::schedules {

namespace {

constexpr int64_t kStaticSharedLimit = 48 * 1024;
constexpr int64_t kSharedAlign = 16;

// The type a reduction of `t` computes in, as code generation prints it: the half types compute
// in f32, and i64 in the index type.
DType ScratchType(DType t, bool int64_indices) {
  switch (t) {
    case DType::kFloat16:
    case DType::kBFloat16:
      return DType::kFloat32;
    case DType::kInt64:
      return int64_indices ? DType::kInt64 : DType::kInt32;
    default:
      return t;
  }
}

// Scratch slots in the order of their C type names (double, float, int, long long).
int ScratchOrder(DType t) {
  switch (t) {
    case DType::kFloat64:
      return 0;
    case DType::kFloat32:
      return 1;
    case DType::kInt32:
      return 2;
    default:
      return 3;
  }
}

struct ByScratchOrder {
  bool operator()(DType a, DType b) const { return ScratchOrder(a) < ScratchOrder(b); }
};

// Entries of the block scratch an all-reduce needs (0: none, or one code generation refuses).
int64_t ScratchEntries(const AllReduceNode& r, const LaunchConfig& launch) {
  const auto& block = launch.block;
  const int axis = r.thread == ThreadTag::kThreadX ? 0 : r.thread == ThreadTag::kThreadY ? 1 : 2;
  const int64_t components = static_cast<int64_t>(r.values.size());
  if (r.extent != block[axis] || r.values[0]->dtype == DType::kBool) return 0;
  if (axis != 0) return launch.threads_per_block() * components;
  // One partial a warp of each component.
  if (r.extent > 32 && r.extent % 32 == 0)
    return block[1] * block[2] * (r.extent / 32) * components;
  return 0;
}

}  // namespace

SharedPlan PlanSharedMemory(const Kernel& kernel, bool int64_indices) {
  SharedPlan plan;
  std::unordered_set<const Buffer*> seen;
  std::map<DType, int64_t, ByScratchOrder> red_entries;
  // Value types reduced across a cluster, and the most components of one reduction.
  std::map<DType, int64_t, ByScratchOrder> cluster_entries;
  WalkStmt(kernel.body, [&](const Stmt& s) {
    if (const auto* a = As<AllocateNode>(s)) {
      if (a->buffer->scope == MemScope::kShared && seen.insert(a->buffer.get()).second) {
        SharedSlot slot;
        slot.buffer = a->buffer;
        slot.dtype = a->buffer->dtype;
        slot.elements = std::max<int64_t>(1, a->buffer->AllocatedElements());
        slot.bytes = slot.elements * DTypeBytes(slot.dtype);
        plan.slots.push_back(slot);
      }
      return;
    }
    const auto* r = As<AllReduceNode>(s);
    if (r == nullptr || r->values[0]->dtype == DType::kBool) return;
    const DType type = ScratchType(r->values[0]->dtype, int64_indices);
    if (r->thread == ThreadTag::kClusterX) {
      if (r->extent == kernel.launch.cluster) {
        cluster_entries[type] =
            std::max(cluster_entries[type], static_cast<int64_t>(r->values.size()));
      }
      return;
    }
    if (!IsThreadTag(r->thread)) return;
    if (const int64_t entries = ScratchEntries(*r, kernel.launch); entries > 0) {
      red_entries[type] = std::max(red_entries[type], entries);
    }
  });
  for (const auto& [type, entries] : red_entries) {
    SharedSlot slot;
    slot.kind = SharedSlot::Kind::kReduceScratch;
    slot.dtype = type;
    slot.elements = entries;
    slot.bytes = entries * DTypeBytes(type);
    plan.slots.push_back(slot);
  }
  for (const auto& [type, entries] : cluster_entries) {
    // One slot a component in each CTA: its values, which the cluster's CTAs read through
    // distributed shared memory.
    SharedSlot slot;
    slot.kind = SharedSlot::Kind::kClusterScratch;
    slot.dtype = type;
    slot.elements = entries;
    slot.bytes = entries * DTypeBytes(type);
    plan.slots.push_back(slot);
  }
  for (SharedSlot& slot : plan.slots) {
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
