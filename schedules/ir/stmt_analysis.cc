#include "schedules/ir/stmt_analysis.h"

#include <algorithm>
#include <limits>

#include "schedules/ir/expr_functor.h"
#include "schedules/ir/stmt_functor.h"
#include "schedules/ir/substitute.h"
#include "schedules/ir/tensor_intrin.h"

namespace tessel::schedules {

void CollectWrittenBuffers(const Stmt& s, std::unordered_set<const Buffer*>* out) {
  WalkStmt(s, [&](const Stmt& x) {
    if (const auto* st = As<StoreNode>(x)) out->insert(st->buffer.get());
    if (const auto* ev = As<EvaluateNode>(x)) {
      // A tensor-core call (ir/tensor_intrin.h) writes its first operand only.
      const auto* call = As<CallNode>(ev->value);
      if (call && IsTensorCall(call->name)) {
        if (const auto* dst = call->args.empty() ? nullptr : As<LoadNode>(call->args[0])) {
          out->insert(dst->buffer.get());
        }
        return;
      }
      for (const LoadNode* l : CollectLoads(ev->value)) out->insert(l->buffer.get());
    }
  });
}

bool StoresIndependentOf(const Stmt& s, const VarNode* v) {
  bool found = false;
  WalkStmt(s, [&](const Stmt& x) {
    const auto* st = As<StoreNode>(x);
    if (!st) return;
    bool uses = false;
    for (const Expr& i : st->indices) uses = uses || UsesVar(i, v);
    if (!uses) found = true;
  });
  return found;
}

bool ContainsSync(const Stmt& s) {
  bool found = false;
  WalkStmt(s, [&](const Stmt& x) {
    if (x->kind == StmtKind::kBarrier || x->kind == StmtKind::kAllReduce) found = true;
  });
  return found;
}

int64_t UnrollSteps(const Stmt& s) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  if (!s) return 0;
  switch (s->kind) {
    case StmtKind::kFor: {
      const auto& n = static_cast<const ForNode&>(*s);
      int64_t extent = 0;
      if (!IsConstInt(n.extent, &extent)) return kMax;
      const int64_t inner = std::max<int64_t>(1, UnrollSteps(n.body));
      if (extent > 0 && inner > kMax / extent) return kMax;
      return extent * inner;
    }
    case StmtKind::kSeq: {
      int64_t total = 0;
      for (const Stmt& c : static_cast<const SeqNode&>(*s).stmts) {
        const int64_t x = UnrollSteps(c);
        if (x == kMax || total > kMax - x) return kMax;
        total += x;
      }
      return total;
    }
    case StmtKind::kAllocate:
      return UnrollSteps(static_cast<const AllocateNode&>(*s).body);
    case StmtKind::kLetStmt:
      return UnrollSteps(static_cast<const LetStmtNode&>(*s).body);
    case StmtKind::kIfThenElse: {
      const auto& n = static_cast<const IfThenElseNode&>(*s);
      return std::max(UnrollSteps(n.then_case), UnrollSteps(n.else_case));
    }
    default:
      return 1;
  }
}

}  // namespace tessel::schedules
