#pragma once

// Visitor and mutator over expressions, generated from TESSEL_EXPR_NODES. A pass derives from
// ExprMutator and overrides the Visit methods of the nodes it cares about; the defaults rebuild
// a node only when a child changed, so untouched subtrees are shared.

#include <vector>

#include "schedules/ir/expr.h"

namespace tessel::schedules {

template <typename R>
class ExprFunctor {
 public:
  virtual ~ExprFunctor() = default;
  R Visit(const Expr& e) {
    switch (e->kind) {
#define TESSEL_X(name)    \
  case ExprKind::k##name: \
    return Visit##name(static_cast<const name##Node&>(*e), e);
      TESSEL_EXPR_NODES(TESSEL_X)
#undef TESSEL_X
    }
    return R();
  }

 protected:
#define TESSEL_X(name) virtual R Visit##name(const name##Node& node, const Expr& self) = 0;
  TESSEL_EXPR_NODES(TESSEL_X)
#undef TESSEL_X
};

// Walks every node; override to collect.
class ExprVisitor : public ExprFunctor<void> {
 protected:
  void VisitIntImm(const IntImmNode&, const Expr&) override {}
  void VisitFloatImm(const FloatImmNode&, const Expr&) override {}
  void VisitVar(const VarNode&, const Expr&) override {}
  void VisitBinary(const BinaryNode& n, const Expr&) override {
    Visit(n.a);
    Visit(n.b);
  }
  void VisitUnary(const UnaryNode& n, const Expr&) override { Visit(n.a); }
  void VisitSelect(const SelectNode& n, const Expr&) override {
    Visit(n.cond);
    Visit(n.true_value);
    Visit(n.false_value);
  }
  void VisitCast(const CastNode& n, const Expr&) override { Visit(n.value); }
  void VisitCall(const CallNode& n, const Expr&) override {
    for (const Expr& a : n.args) Visit(a);
  }
  void VisitLoad(const LoadNode& n, const Expr&) override {
    for (const Expr& i : n.indices) Visit(i);
  }
};

class ExprMutator : public ExprFunctor<Expr> {
 protected:
  Expr VisitIntImm(const IntImmNode&, const Expr& self) override { return self; }
  Expr VisitFloatImm(const FloatImmNode&, const Expr& self) override { return self; }
  Expr VisitVar(const VarNode&, const Expr& self) override { return self; }
  Expr VisitBinary(const BinaryNode& n, const Expr& self) override {
    Expr a = Visit(n.a), b = Visit(n.b);
    if (a == n.a && b == n.b) return self;
    return MakeBinary(n.op, std::move(a), std::move(b));
  }
  Expr VisitUnary(const UnaryNode& n, const Expr& self) override {
    Expr a = Visit(n.a);
    return a == n.a ? self : MakeUnary(n.op, std::move(a));
  }
  Expr VisitSelect(const SelectNode& n, const Expr& self) override {
    Expr c = Visit(n.cond), t = Visit(n.true_value), f = Visit(n.false_value);
    if (c == n.cond && t == n.true_value && f == n.false_value) return self;
    return MakeSelect(std::move(c), std::move(t), std::move(f));
  }
  Expr VisitCast(const CastNode& n, const Expr& self) override {
    Expr v = Visit(n.value);
    return v == n.value ? self : MakeCast(n.dtype, std::move(v));
  }
  Expr VisitCall(const CallNode& n, const Expr& self) override {
    std::vector<Expr> args;
    bool changed = false;
    for (const Expr& a : n.args) {
      args.push_back(Visit(a));
      changed |= args.back() != a;
    }
    return changed ? MakeCall(n.name, std::move(args), n.dtype) : self;
  }
  Expr VisitLoad(const LoadNode& n, const Expr& self) override {
    std::vector<Expr> idx;
    bool changed = false;
    for (const Expr& i : n.indices) {
      idx.push_back(Visit(i));
      changed |= idx.back() != i;
    }
    return changed ? MakeLoad(n.buffer, std::move(idx)) : self;
  }
};

}  // namespace tessel::schedules
