#include "schedules/ir/substitute.h"

#include <algorithm>
#include <unordered_set>
#include <utility>

#include "schedules/ir/expr_functor.h"
#include "schedules/ir/stmt_functor.h"

namespace tessel::schedules {
namespace {

class VarSubstituter final : public ExprMutator {
 public:
  explicit VarSubstituter(const std::unordered_map<const VarNode*, Expr>& map) : map_(map) {}

 protected:
  Expr VisitVar(const VarNode& node, const Expr& self) override {
    auto it = map_.find(&node);
    return it == map_.end() ? self : it->second;
  }

 private:
  const std::unordered_map<const VarNode*, Expr>& map_;
};

class StmtSubstituter final : public StmtMutator {
 public:
  explicit StmtSubstituter(const std::unordered_map<const VarNode*, Expr>& map) : exprs_(map) {}

 protected:
  Expr VisitExpr(const Expr& e) override { return e ? exprs_.Visit(e) : e; }

 private:
  VarSubstituter exprs_;
};

class BufferRemapper final : public StmtMutator {
 public:
  explicit BufferRemapper(const std::unordered_map<const Buffer*, BufferRemap>& map)
      : map_(map), loads_(map) {}

 protected:
  Expr VisitExpr(const Expr& e) override { return e ? loads_.Visit(e) : e; }
  Stmt VisitStore(const StoreNode& n, const Stmt& self) override {
    Stmt s = StmtMutator::VisitStore(n, self);
    const auto* st = As<StoreNode>(s);
    auto it = map_.find(st->buffer.get());
    if (it == map_.end()) return s;
    return MakeStore(it->second.to, it->second.indices(st->indices), st->value);
  }
  Stmt VisitAllocate(const AllocateNode& n, const Stmt& self) override {
    Stmt s = StmtMutator::VisitAllocate(n, self);
    auto it = map_.find(n.buffer.get());
    if (it == map_.end()) return s;
    return MakeAllocate(it->second.to, static_cast<const AllocateNode&>(*s).body);
  }

 private:
  class Loads final : public ExprMutator {
   public:
    explicit Loads(const std::unordered_map<const Buffer*, BufferRemap>& map) : map_(map) {}

   protected:
    Expr VisitLoad(const LoadNode& n, const Expr& self) override {
      Expr e = ExprMutator::VisitLoad(n, self);
      const auto* l = As<LoadNode>(e);
      auto it = map_.find(l->buffer.get());
      if (it == map_.end()) return e;
      return MakeLoad(it->second.to, it->second.indices(l->indices));
    }

   private:
    const std::unordered_map<const Buffer*, BufferRemap>& map_;
  };

  const std::unordered_map<const Buffer*, BufferRemap>& map_;
  Loads loads_;
};

class VarFinder final : public ExprVisitor {
 public:
  explicit VarFinder(const VarNode* v) : target_(v) {}
  bool Find(const Expr& e) {
    if (e && !found_) Visit(e);
    return found_;
  }

 protected:
  void VisitVar(const VarNode& node, const Expr&) override { found_ |= &node == target_; }
  void VisitBinary(const BinaryNode& n, const Expr& self) override {
    if (!found_) ExprVisitor::VisitBinary(n, self);
  }

 private:
  const VarNode* target_;
  bool found_ = false;
};

class VarCollector final : public ExprVisitor {
 public:
  explicit VarCollector(std::vector<const VarNode*>* out)
      : out_(out), seen_(out->begin(), out->end()) {}
  void Collect(const Expr& e) {
    if (e) Visit(e);
  }

 protected:
  void VisitVar(const VarNode& node, const Expr&) override {
    if (seen_.insert(&node).second) out_->push_back(&node);
  }

 private:
  std::vector<const VarNode*>* out_;
  std::unordered_set<const VarNode*> seen_;
};

// Collects the loads of one buffer, or of every buffer (`all`).
class LoadCollector final : public ExprVisitor {
 public:
  LoadCollector(const Buffer* buffer, bool all) : buffer_(buffer), all_(all) {}
  std::vector<const LoadNode*> Collect(const Expr& e) {
    if (e) Visit(e);
    return std::move(loads_);
  }

 protected:
  void VisitLoad(const LoadNode& n, const Expr& self) override {
    if (all_ || n.buffer.get() == buffer_) loads_.push_back(&n);
    ExprVisitor::VisitLoad(n, self);
  }

 private:
  const Buffer* buffer_;
  bool all_;
  std::vector<const LoadNode*> loads_;
};

bool StmtUsesVar(const Stmt& s, const VarNode* v) {
  if (!s) return false;
  auto uses = [v](const Expr& e) { return VarFinder(v).Find(e); };
  auto any = [&](const std::vector<Expr>& es) { return std::any_of(es.begin(), es.end(), uses); };
  switch (s->kind) {
    case StmtKind::kFor: {
      const auto& n = static_cast<const ForNode&>(*s);
      return n.var.get() == v || uses(n.min) || uses(n.extent) || StmtUsesVar(n.body, v);
    }
    case StmtKind::kStore: {
      const auto& n = static_cast<const StoreNode&>(*s);
      return any(n.indices) || uses(n.value);
    }
    case StmtKind::kAllocate:
      return StmtUsesVar(static_cast<const AllocateNode&>(*s).body, v);
    case StmtKind::kIfThenElse: {
      const auto& n = static_cast<const IfThenElseNode&>(*s);
      return uses(n.cond) || StmtUsesVar(n.then_case, v) || StmtUsesVar(n.else_case, v);
    }
    case StmtKind::kSeq: {
      const auto& n = static_cast<const SeqNode&>(*s);
      return std::any_of(n.stmts.begin(), n.stmts.end(),
                         [v](const Stmt& c) { return StmtUsesVar(c, v); });
    }
    case StmtKind::kLetStmt: {
      const auto& n = static_cast<const LetStmtNode&>(*s);
      return n.var.get() == v || uses(n.value) || StmtUsesVar(n.body, v);
    }
    case StmtKind::kBarrier:
      return false;
    case StmtKind::kScope:
      return StmtUsesVar(static_cast<const ScopeNode&>(*s).body, v);
    case StmtKind::kAllReduce: {
      const auto& n = static_cast<const AllReduceNode&>(*s);
      for (const Expr& v : n.values) {
        if (uses(v)) return true;
      }
      return false;
    }
    case StmtKind::kEvaluate:
      return uses(static_cast<const EvaluateNode&>(*s).value);
  }
  return false;
}

}  // namespace

Expr Substitute(const Expr& e, const std::unordered_map<const VarNode*, Expr>& map) {
  if (!e || map.empty()) return e;
  return VarSubstituter(map).Visit(e);
}

Stmt Substitute(const Stmt& s, const std::unordered_map<const VarNode*, Expr>& map) {
  if (!s || map.empty()) return s;
  return StmtSubstituter(map).Visit(s);
}

Stmt RemapBuffers(const Stmt& s, const std::unordered_map<const Buffer*, BufferRemap>& map) {
  if (!s || map.empty()) return s;
  return BufferRemapper(map).Visit(s);
}

bool UsesVar(const Expr& e, const VarNode* v) { return VarFinder(v).Find(e); }
bool UsesVar(const Stmt& s, const VarNode* v) { return StmtUsesVar(s, v); }

void CollectVars(const Expr& e, std::vector<const VarNode*>* out) { VarCollector(out).Collect(e); }

std::vector<const LoadNode*> CollectLoads(const Expr& e) {
  return LoadCollector(nullptr, /*all=*/true).Collect(e);
}

std::vector<const LoadNode*> CollectLoads(const Expr& e, const Buffer* buffer) {
  return LoadCollector(buffer, /*all=*/false).Collect(e);
}

}  // namespace tessel::schedules
