#pragma once

// Mutator over statements, generated from TESSEL_STMT_NODES. Expressions inside statements are
// passed through VisitExpr, which by default leaves them alone; override it (for example with an
// ExprMutator) to rewrite every expression of a statement tree.

#include <vector>

#include "schedules/ir/stmt.h"

namespace tessel::schedules {

class StmtMutator {
 public:
  virtual ~StmtMutator() = default;
  Stmt Visit(const Stmt& s) {
    if (!s) return s;
    switch (s->kind) {
#define TESSEL_X(name)    \
  case StmtKind::k##name: \
    return Visit##name(static_cast<const name##Node&>(*s), s);
      TESSEL_STMT_NODES(TESSEL_X)
#undef TESSEL_X
    }
    return s;
  }

 protected:
  virtual Expr VisitExpr(const Expr& e) { return e; }

  virtual Stmt VisitFor(const ForNode& n, const Stmt& self) {
    Expr mn = VisitExpr(n.min), ext = VisitExpr(n.extent);
    Stmt body = Visit(n.body);
    if (mn == n.min && ext == n.extent && body == n.body) return self;
    return MakeFor(n.var, mn, ext, n.kind, n.thread, body, n.annotations);
  }
  virtual Stmt VisitStore(const StoreNode& n, const Stmt& self) {
    std::vector<Expr> idx;
    bool changed = false;
    for (const Expr& i : n.indices) {
      idx.push_back(VisitExpr(i));
      changed |= idx.back() != i;
    }
    Expr v = VisitExpr(n.value);
    if (!changed && v == n.value) return self;
    return MakeStore(n.buffer, std::move(idx), std::move(v));
  }
  virtual Stmt VisitAllocate(const AllocateNode& n, const Stmt& self) {
    Stmt body = Visit(n.body);
    return body == n.body ? self : MakeAllocate(n.buffer, body);
  }
  virtual Stmt VisitIfThenElse(const IfThenElseNode& n, const Stmt& self) {
    Expr c = VisitExpr(n.cond);
    Stmt t = Visit(n.then_case), e = Visit(n.else_case);
    if (c == n.cond && t == n.then_case && e == n.else_case) return self;
    return MakeIf(c, t, e);
  }
  virtual Stmt VisitSeq(const SeqNode& n, const Stmt& self) {
    std::vector<Stmt> out;
    bool changed = false;
    for (const Stmt& c : n.stmts) {
      out.push_back(Visit(c));
      changed |= out.back() != c;
    }
    return changed ? MakeSeq(std::move(out)) : self;
  }
  virtual Stmt VisitLetStmt(const LetStmtNode& n, const Stmt& self) {
    Expr v = VisitExpr(n.value);
    Stmt b = Visit(n.body);
    if (v == n.value && b == n.body) return self;
    return MakeLet(n.var, v, b);
  }
  virtual Stmt VisitBarrier(const BarrierNode&, const Stmt& self) { return self; }
  virtual Stmt VisitAllReduce(const AllReduceNode& n, const Stmt& self) {
    std::vector<Expr> values;
    bool changed = false;
    for (const Expr& v : n.values) {
      values.push_back(VisitExpr(v));
      changed |= values.back() != v;
    }
    return changed ? MakeAllReduce(n.combiner, values, n.results, n.thread, n.extent) : self;
  }
  virtual Stmt VisitEvaluate(const EvaluateNode& n, const Stmt& self) {
    Expr v = VisitExpr(n.value);
    return v == n.value ? self : MakeEvaluate(v);
  }
  virtual Stmt VisitScope(const ScopeNode& n, const Stmt& self) {
    Stmt body = Visit(n.body);
    return body == n.body ? self : MakeScope(n.comment, body, n.origin);
  }
};

}  // namespace tessel::schedules
