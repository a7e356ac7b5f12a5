#include "schedules/lower/check_limits.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "schedules/ir/substitute.h"
#include "schedules/ir/tensor_intrin.h"

namespace tessel::schedules {

namespace {

// Registers a thread needs beyond its local buffers: indices, pointers, loop counters.
constexpr int64_t kRegisterOverhead = 24;
// Words per thread that may go over the block's register budget. Under __launch_bounds__ ptxas
// caps each thread at registers_per_block / threads and spills the rest to local memory, which
// L1 caches while the spill is small: a hand-written softmax (4096, 65536) holding its row in
// registers spilled 128 bytes a thread and ran at 0.75 of the copy bandwidth on an H100, while
// the same kernel from the IR spilled 332 bytes, which reached DRAM, and ran at 0.60
// (bench/RESULTS.md). More than this is refused.
constexpr int64_t kMaxSpillWords = 32;

// The bytes of the widest element a vectorized loop's body loads or stores in global or shared
// memory (a vector access is that many lanes of it); registers (local buffers) are no access,
// so a vectorized reduction of f16 loads into an f32 accumulator counts 2 bytes a lane.
int64_t WidestMemoryElement(const Stmt& body) {
  int64_t bytes = 0;
  auto access = [&](const Buffer& b) {
    if (b.scope != MemScope::kLocal) bytes = std::max<int64_t>(bytes, DTypeBytes(b.dtype));
  };
  WalkStmt(body, [&](const Stmt& x) {
    if (const auto* st = As<StoreNode>(x)) {
      access(*st->buffer);
      for (const LoadNode* l : CollectLoads(st->value)) access(*l->buffer);
    }
  });
  return bytes;
}

void Walk(const Stmt& s, int64_t live_local, KernelResources* r) {
  if (!s) return;
  switch (s->kind) {
    case StmtKind::kFor: {
      const auto& n = static_cast<const ForNode&>(*s);
      if (n.kind == ForKind::kVectorized) {
        int64_t ext = 0;
        if (IsConstInt(n.extent, &ext)) {
          r->max_vector_bytes = std::max(r->max_vector_bytes, ext * WidestMemoryElement(n.body));
        }
      }
      Walk(n.body, live_local, r);
      return;
    }
    case StmtKind::kAllocate: {
      const auto& n = static_cast<const AllocateNode&>(*s);
      if (n.buffer->scope == MemScope::kShared) {
        r->shared_bytes += n.buffer->AllocatedBytes();
        Walk(n.body, live_local, r);
      } else if (IsRegister(*n.buffer)) {
        // A scalar register of lower_all_reduce: in the overhead (kRegisterOverhead).
        Walk(n.body, live_local, r);
      } else {
        const int64_t words = (n.buffer->AllocatedBytes() + 3) / 4;
        r->local_elements = std::max(r->local_elements, live_local + words);
        Walk(n.body, live_local + words, r);
      }
      return;
    }
    case StmtKind::kIfThenElse: {
      const auto& n = static_cast<const IfThenElseNode&>(*s);
      Walk(n.then_case, live_local, r);
      Walk(n.else_case, live_local, r);
      return;
    }
    case StmtKind::kSeq:
      for (const Stmt& c : static_cast<const SeqNode&>(*s).stmts) Walk(c, live_local, r);
      return;
    case StmtKind::kLetStmt:
      Walk(static_cast<const LetStmtNode&>(*s).body, live_local, r);
      return;
    case StmtKind::kScope:
      Walk(static_cast<const ScopeNode&>(*s).body, live_local, r);
      return;
    default:
      return;
  }
}

}  // namespace

KernelResources EstimateResources(const Kernel& k) {
  KernelResources r;
  r.threads = k.launch.threads_per_block();
  Walk(k.body, 0, &r);
  return r;
}

absl::Status CheckTargetLimits(const Program& p, const Target& t) {
  if (p.kernels.empty()) {
    return absl::FailedPreconditionError(absl::StrCat("program ", p.name, " has no kernel"));
  }
  if (!t.is_cuda()) return absl::OkStatus();
  for (const Kernel& k : p.kernels) {
    const KernelResources r = EstimateResources(k);
    if (r.threads > t.max_threads_per_block) {
      return absl::FailedPreconditionError(absl::StrCat(
          "kernel ", k.name, " uses ", r.threads, " threads per block, over the limit of ",
          t.max_threads_per_block, " by ", r.threads - t.max_threads_per_block));
    }
    for (int d = 0; d < 3; ++d) {
      const int64_t max_grid = d == 0 ? (int64_t{1} << 31) - 1 : 65535;
      if (k.launch.grid[d] > max_grid) {
        return absl::FailedPreconditionError(
            absl::StrCat("kernel ", k.name, " launches ", k.launch.grid[d], " blocks along ",
                         std::string(1, "xyz"[d]), ", over the limit of ", max_grid, " by ",
                         k.launch.grid[d] - max_grid));
      }
    }
    if (r.shared_bytes > t.max_shared_bytes_optin) {
      return absl::FailedPreconditionError(absl::StrCat(
          "kernel ", k.name, " needs ", r.shared_bytes, " bytes of shared memory per block, over ",
          "the ", t.arch, " limit of ", t.max_shared_bytes_optin, " by ",
          r.shared_bytes - t.max_shared_bytes_optin));
    }
    const int64_t regs = r.local_elements + kRegisterOverhead;
    if (regs > t.max_registers_per_thread) {
      return absl::FailedPreconditionError(absl::StrCat(
          "kernel ", k.name, " keeps ", r.local_elements, " words in local buffers, about ", regs,
          " registers per thread, over the limit of ", t.max_registers_per_thread, " by ",
          regs - t.max_registers_per_thread));
    }
    const int64_t budget = t.registers_per_block / std::max<int64_t>(r.threads, 1);
    // wgmma's accumulators are its operands: they cannot spill (ptxas refuses the kernel, C7602).
    const int64_t spill = CallsWgmma(k.body) ? 0 : kMaxSpillWords;
    if (regs - budget > spill) {
      return absl::FailedPreconditionError(
          absl::StrCat("kernel ", k.name, " needs about ", regs, " registers per thread for ",
                       r.threads, " threads: ", regs * r.threads, " per block, over the limit of ",
                       t.registers_per_block, " by ", regs * r.threads - t.registers_per_block,
                       "; a thread may spill at most ", spill, " words over its share of ", budget,
                       spill == 0 ? " (wgmma's accumulators cannot spill)" : "",
                       ": use fewer threads or smaller local buffers"));
    }
    if (k.launch.cluster > 1 && k.launch.cluster > t.max_cluster_ctas) {
      if (t.max_cluster_ctas == 0) {
        return absl::FailedPreconditionError(absl::StrCat(
            "kernel ", k.name, " launches clusters of ", k.launch.cluster, " CTAs, but ", t.arch,
            " has no thread-block clusters; they need sm_90 or sm_90a"));
      }
      return absl::FailedPreconditionError(absl::StrCat(
          "kernel ", k.name, " launches clusters of ", k.launch.cluster,
          " CTAs, over the portable limit of ", t.max_cluster_ctas, " by ",
          k.launch.cluster - t.max_cluster_ctas, "; bind a smaller loop to cluster.x"));
    }
    if (r.max_vector_bytes > t.max_vector_bytes) {
      return absl::FailedPreconditionError(absl::StrCat(
          "kernel ", k.name, " vectorizes ", r.max_vector_bytes, " bytes per access, over the ",
          "limit of ", t.max_vector_bytes, " by ", r.max_vector_bytes - t.max_vector_bytes));
    }
  }
  return absl::OkStatus();
}

}  // namespace tessel::schedules
