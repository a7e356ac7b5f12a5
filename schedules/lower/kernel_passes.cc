// The small kernel passes of passes.h: each walks every kernel of the program once.

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "schedules/ir/expr_functor.h"
#include "schedules/ir/stmt_functor.h"
#include "schedules/ir/substitute.h"
#include "schedules/lower/passes.h"

namespace tessel::schedules {

namespace {

// The buffers a statement loads or stores.
class BufferCollector : public StmtMutator {
 public:
  std::set<const Buffer*> used;

 protected:
  Expr VisitExpr(const Expr& e) override {
    for (const LoadNode* l : CollectLoads(e)) used.insert(l->buffer.get());
    return e;
  }
  Stmt VisitStore(const StoreNode& n, const Stmt& self) override {
    used.insert(n.buffer.get());
    return StmtMutator::VisitStore(n, self);
  }
};

// The local buffer of `body` indexed by a variable of `block_vars`, or nullptr.
const Buffer* LocalBufferIndexedBy(const Stmt& body,
                                   const std::unordered_set<const VarNode*>& block_vars) {
  const Buffer* bad = nullptr;
  WalkStmt(body, [&](const Stmt& s) {
    auto check = [&](const BufferPtr& b, const std::vector<Expr>& idx) {
      if (b->scope != MemScope::kLocal || bad != nullptr) return;
      for (const Expr& e : idx) {
        const auto* v = As<VarNode>(e);
        if (v != nullptr && block_vars.count(v)) bad = b.get();
      }
    };
    if (const auto* st = As<StoreNode>(s)) check(st->buffer, st->indices);
    for (const Expr& e : OwnExprs(s)) {
      for (const LoadNode* l : CollectLoads(e)) check(l->buffer, l->indices);
    }
  });
  return bad;
}

}  // namespace

absl::Status SimplifyKernels(LoweringState* state) {
  for (Kernel& k : state->program.kernels) k.body = state->analyzer.Simplify(k.body);
  return absl::OkStatus();
}

// A local stage written from a loop bound to a block index holds only its own block's part:
// every access must index that axis with a block index so that compaction drops it. One that
// is still indexed by a block index after compaction is also read another way (an unbound
// loop over the blocks' parts), which would read parts no thread of this block wrote.
absl::Status CheckBlockAxesCompacted(LoweringState* state) {
  for (const Kernel& k : state->program.kernels) {
    const Buffer* bad = LocalBufferIndexedBy(k.body, state->attached_block_vars);
    if (bad == nullptr) continue;
    return absl::InvalidArgumentError(absl::StrCat(
        "local buffer ", bad->name,
        " is written from a loop bound to a block index, so each block holds only its own part, "
        "but it is also read at other blocks' parts; bind the readers' loop over that axis to "
        "the same block index, or keep the writer's loop serial"));
  }
  return absl::OkStatus();
}

// The stream_loads / stream_stores annotations of the kernel's stages: the global buffers a
// stage reads, or the one it writes, are accessed with evict-first cache hints.
absl::Status MarkStreamingBuffers(LoweringState* state) {
  if (!state->target.is_cuda()) return absl::OkStatus();
  auto add = [](std::vector<BufferPtr>* v, const BufferPtr& b) {
    if (b->scope == MemScope::kGlobal && std::find(v->begin(), v->end(), b) == v->end()) {
      v->push_back(b);
    }
  };
  for (size_t ki = 0; ki < state->program.kernels.size(); ++ki) {
    Kernel& k = state->program.kernels[ki];
    for (int i : state->KernelStages(state->kernel_roots[ki])) {
      const Stage& s = state->stages[i];
      auto on = [&](const char* key) {
        auto it = s.annotations.find(key);
        return it != s.annotations.end() && it->second > 0;
      };
      if (on("stream_stores")) add(&k.stream_stores, s.buffer);
      if (on("stream_loads")) {
        for (const LoadNode* l : CollectLoads(s.body)) add(&k.stream_loads, l->buffer);
      }
    }
  }
  return absl::OkStatus();
}

absl::Status CollectKernelParams(LoweringState* state) {
  for (Kernel& k : state->program.kernels) {
    BufferCollector bc;
    bc.Visit(k.body);
    for (const ProgramBuffer& b : state->program.buffers) {
      if (bc.used.count(b.buffer.get())) k.params.push_back(b.buffer);
    }
  }
  return absl::OkStatus();
}

}  // namespace tessel::schedules
