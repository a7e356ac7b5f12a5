#include "schedules/ir/structural.h"

#include <bit>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "schedules/util/fnv1a.h"

namespace tessel::schedules {
namespace {

const char* ExprKindName(ExprKind k) {
  switch (k) {
#define TESSEL_X(name)    \
  case ExprKind::k##name: \
    return #name;
    TESSEL_EXPR_NODES(TESSEL_X)
#undef TESSEL_X
  }
  return "?";
}

const char* StmtKindName(StmtKind k) {
  switch (k) {
#define TESSEL_X(name)    \
  case StmtKind::k##name: \
    return #name;
    TESSEL_STMT_NODES(TESSEL_X)
#undef TESSEL_X
  }
  return "?";
}

const char* UnaryOpName(UnaryOp op) { return op == UnaryOp::kNeg ? "neg" : "not"; }

// ---- Equality.

// Structural equality, or (`identity`) syntactic identity: variables and buffers by pointer.
class EqualChecker {
 public:
  explicit EqualChecker(bool identity = false) : identity_(identity) {}

  bool Equal(const Expr& a, const Expr& b) {
    if (identity_ && a == b) return true;  // shared subtree
    if (!a || !b) return !a && !b;
    if (a->kind != b->kind || a->dtype != b->dtype) return false;
    switch (a->kind) {
      case ExprKind::kIntImm:
        return static_cast<const IntImmNode&>(*a).value == static_cast<const IntImmNode&>(*b).value;
      case ExprKind::kFloatImm:
        return std::bit_cast<uint64_t>(static_cast<const FloatImmNode&>(*a).value) ==
               std::bit_cast<uint64_t>(static_cast<const FloatImmNode&>(*b).value);
      case ExprKind::kVar:
        return EqualVar(static_cast<const VarNode*>(a.get()), static_cast<const VarNode*>(b.get()));
      case ExprKind::kBinary: {
        const auto& x = static_cast<const BinaryNode&>(*a);
        const auto& y = static_cast<const BinaryNode&>(*b);
        return x.op == y.op && Equal(x.a, y.a) && Equal(x.b, y.b);
      }
      case ExprKind::kUnary: {
        const auto& x = static_cast<const UnaryNode&>(*a);
        const auto& y = static_cast<const UnaryNode&>(*b);
        return x.op == y.op && Equal(x.a, y.a);
      }
      case ExprKind::kSelect: {
        const auto& x = static_cast<const SelectNode&>(*a);
        const auto& y = static_cast<const SelectNode&>(*b);
        return Equal(x.cond, y.cond) && Equal(x.true_value, y.true_value) &&
               Equal(x.false_value, y.false_value);
      }
      case ExprKind::kCast:
        return Equal(static_cast<const CastNode&>(*a).value,
                     static_cast<const CastNode&>(*b).value);
      case ExprKind::kCall: {
        const auto& x = static_cast<const CallNode&>(*a);
        const auto& y = static_cast<const CallNode&>(*b);
        return x.name == y.name && Equal(x.args, y.args);
      }
      case ExprKind::kLoad: {
        const auto& x = static_cast<const LoadNode&>(*a);
        const auto& y = static_cast<const LoadNode&>(*b);
        return EqualBuffer(x.buffer, y.buffer) && Equal(x.indices, y.indices);
      }
    }
    return false;
  }

  bool Equal(const std::vector<Expr>& a, const std::vector<Expr>& b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i) {
      if (!Equal(a[i], b[i])) return false;
    }
    return true;
  }

  bool Equal(const Stmt& a, const Stmt& b) {
    if (!a || !b) return !a && !b;
    if (a->kind != b->kind) return false;
    switch (a->kind) {
      case StmtKind::kFor: {
        const auto& x = static_cast<const ForNode&>(*a);
        const auto& y = static_cast<const ForNode&>(*b);
        return EqualVar(x.var.get(), y.var.get()) && Equal(x.min, y.min) &&
               Equal(x.extent, y.extent) && x.kind == y.kind && x.thread == y.thread &&
               x.annotations == y.annotations && Equal(x.body, y.body);
      }
      case StmtKind::kStore: {
        const auto& x = static_cast<const StoreNode&>(*a);
        const auto& y = static_cast<const StoreNode&>(*b);
        return EqualBuffer(x.buffer, y.buffer) && Equal(x.indices, y.indices) &&
               Equal(x.value, y.value);
      }
      case StmtKind::kAllocate: {
        const auto& x = static_cast<const AllocateNode&>(*a);
        const auto& y = static_cast<const AllocateNode&>(*b);
        return EqualBuffer(x.buffer, y.buffer) && Equal(x.body, y.body);
      }
      case StmtKind::kIfThenElse: {
        const auto& x = static_cast<const IfThenElseNode&>(*a);
        const auto& y = static_cast<const IfThenElseNode&>(*b);
        return Equal(x.cond, y.cond) && Equal(x.then_case, y.then_case) &&
               Equal(x.else_case, y.else_case);
      }
      case StmtKind::kSeq: {
        const auto& x = static_cast<const SeqNode&>(*a);
        const auto& y = static_cast<const SeqNode&>(*b);
        if (x.stmts.size() != y.stmts.size()) return false;
        for (size_t i = 0; i < x.stmts.size(); ++i) {
          if (!Equal(x.stmts[i], y.stmts[i])) return false;
        }
        return true;
      }
      case StmtKind::kLetStmt: {
        const auto& x = static_cast<const LetStmtNode&>(*a);
        const auto& y = static_cast<const LetStmtNode&>(*b);
        return EqualVar(x.var.get(), y.var.get()) && Equal(x.value, y.value) &&
               Equal(x.body, y.body);
      }
      case StmtKind::kBarrier:
        return static_cast<const BarrierNode&>(*a).scope ==
               static_cast<const BarrierNode&>(*b).scope;
      case StmtKind::kScope:
        return static_cast<const ScopeNode&>(*a).comment ==
                   static_cast<const ScopeNode&>(*b).comment &&
               Equal(static_cast<const ScopeNode&>(*a).body,
                     static_cast<const ScopeNode&>(*b).body);
      case StmtKind::kAllReduce: {
        const auto& x = static_cast<const AllReduceNode&>(*a);
        const auto& y = static_cast<const AllReduceNode&>(*b);
        if (x.combiner != y.combiner && ToString(*x.combiner) != ToString(*y.combiner)) {
          return false;
        }
        if (x.values.size() != y.values.size() || x.results.size() != y.results.size()) {
          return false;
        }
        for (size_t i = 0; i < x.values.size(); ++i) {
          if (!Equal(x.values[i], y.values[i])) return false;
        }
        for (size_t i = 0; i < x.results.size(); ++i) {
          if (!EqualBuffer(x.results[i], y.results[i])) return false;
        }
        return x.thread == y.thread && x.extent == y.extent;
      }
      case StmtKind::kEvaluate:
        return Equal(static_cast<const EvaluateNode&>(*a).value,
                     static_cast<const EvaluateNode&>(*b).value);
    }
    return false;
  }

 private:
  bool EqualBuffer(const BufferPtr& a, const BufferPtr& b) const {
    if (a == b) return true;
    if (identity_ || !a || !b) return false;
    return a->name == b->name && a->dtype == b->dtype && a->shape == b->shape &&
           a->scope == b->scope && a->strides == b->strides;
  }

  bool EqualVar(const VarNode* a, const VarNode* b) {
    if (identity_) return a == b;
    if (a->dtype != b->dtype) return false;
    auto ia = a_to_b_.find(a);
    auto ib = b_to_a_.find(b);
    if (ia == a_to_b_.end() && ib == b_to_a_.end()) {
      a_to_b_.emplace(a, b);
      b_to_a_.emplace(b, a);
      return true;
    }
    return ia != a_to_b_.end() && ib != b_to_a_.end() && ia->second == b && ib->second == a;
  }

  const bool identity_;
  std::unordered_map<const VarNode*, const VarNode*> a_to_b_, b_to_a_;
};

// ---- Hashing (see structural.h for the byte stream).

class Hasher {
 public:
  uint64_t value() const { return h_; }

  void Hash(const Expr& e) {
    if (!e) {
      Str("e:null");
      return;
    }
    Tag("e:", ExprKindName(e->kind));
    Str(DTypeName(e->dtype));
    switch (e->kind) {
      case ExprKind::kIntImm:
        Int(static_cast<const IntImmNode&>(*e).value);
        return;
      case ExprKind::kFloatImm:
        Int(std::bit_cast<uint64_t>(static_cast<const FloatImmNode&>(*e).value));
        return;
      case ExprKind::kVar:
        HashVar(static_cast<const VarNode*>(e.get()));
        return;
      case ExprKind::kBinary: {
        const auto& n = static_cast<const BinaryNode&>(*e);
        Str(BinaryOpName(n.op));
        Hash(n.a);
        Hash(n.b);
        return;
      }
      case ExprKind::kUnary: {
        const auto& n = static_cast<const UnaryNode&>(*e);
        Str(UnaryOpName(n.op));
        Hash(n.a);
        return;
      }
      case ExprKind::kSelect: {
        const auto& n = static_cast<const SelectNode&>(*e);
        Hash(n.cond);
        Hash(n.true_value);
        Hash(n.false_value);
        return;
      }
      case ExprKind::kCast:
        Hash(static_cast<const CastNode&>(*e).value);
        return;
      case ExprKind::kCall: {
        const auto& n = static_cast<const CallNode&>(*e);
        Str(n.name);
        Hash(n.args);
        return;
      }
      case ExprKind::kLoad: {
        const auto& n = static_cast<const LoadNode&>(*e);
        HashBuffer(n.buffer);
        Hash(n.indices);
        return;
      }
    }
  }

  void Hash(const std::vector<Expr>& es) {
    Int(es.size());
    for (const Expr& e : es) Hash(e);
  }

  void Hash(const Stmt& s) {
    if (!s) {
      Str("s:null");
      return;
    }
    Tag("s:", StmtKindName(s->kind));
    switch (s->kind) {
      case StmtKind::kFor: {
        const auto& n = static_cast<const ForNode&>(*s);
        HashVar(n.var.get());
        Hash(n.min);
        Hash(n.extent);
        Str(ForKindName(n.kind));
        Str(ThreadTagName(n.thread));
        Int(n.annotations.size());
        for (const auto& [key, value] : n.annotations) {
          Str(key);
          Int(value);
        }
        Hash(n.body);
        return;
      }
      case StmtKind::kStore: {
        const auto& n = static_cast<const StoreNode&>(*s);
        HashBuffer(n.buffer);
        Hash(n.indices);
        Hash(n.value);
        return;
      }
      case StmtKind::kAllocate: {
        const auto& n = static_cast<const AllocateNode&>(*s);
        HashBuffer(n.buffer);
        Hash(n.body);
        return;
      }
      case StmtKind::kIfThenElse: {
        const auto& n = static_cast<const IfThenElseNode&>(*s);
        Hash(n.cond);
        Hash(n.then_case);
        Hash(n.else_case);
        return;
      }
      case StmtKind::kSeq: {
        const auto& n = static_cast<const SeqNode&>(*s);
        Int(n.stmts.size());
        for (const Stmt& c : n.stmts) Hash(c);
        return;
      }
      case StmtKind::kLetStmt: {
        const auto& n = static_cast<const LetStmtNode&>(*s);
        HashVar(n.var.get());
        Hash(n.value);
        Hash(n.body);
        return;
      }
      case StmtKind::kBarrier:
        // Block barriers hash as before grid barriers existed.
        if (static_cast<const BarrierNode&>(*s).scope == BarrierScope::kGrid) Str("grid");
        if (static_cast<const BarrierNode&>(*s).scope == BarrierScope::kCluster) Str("cluster");
        return;
      case StmtKind::kScope:
        Str("scope");
        Hash(static_cast<const ScopeNode&>(*s).body);
        return;
      case StmtKind::kAllReduce: {
        const auto& n = static_cast<const AllReduceNode&>(*s);
        // A one-component reduction hashes as before tuple reductions existed.
        Str(n.combiner->op ? ReduceOpName(*n.combiner->op) : ToString(*n.combiner));
        Hash(n.values[0]);
        HashBuffer(n.results[0]);
        Str(ThreadTagName(n.thread));
        Int(n.extent);
        for (size_t i = 1; i < n.values.size(); ++i) {
          Hash(n.values[i]);
          HashBuffer(n.results[i]);
        }
        return;
      }
      case StmtKind::kEvaluate:
        Hash(static_cast<const EvaluateNode&>(*s).value);
        return;
    }
  }

 private:
  void Int(uint64_t v) {
    char bytes[8];
    for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>(v >> (8 * i));  // little endian
    h_ = Fnv1a64(std::string_view(bytes, sizeof(bytes)), h_);
  }
  void Int(int64_t v) { Int(static_cast<uint64_t>(v)); }
  void Str(std::string_view s) {
    Int(static_cast<uint64_t>(s.size()));
    h_ = Fnv1a64(s, h_);
  }
  void Tag(const char* prefix, const char* kind) {
    std::string tag = prefix;
    tag += kind;
    Str(tag);
  }
  void HashVar(const VarNode* v) {
    Str("var");
    Str(DTypeName(v->dtype));
    auto it = numbering_.emplace(v, numbering_.size()).first;
    Int(static_cast<uint64_t>(it->second));
  }
  void HashBuffer(const BufferPtr& b) {
    if (!b) {
      Str("buffer:null");
      return;
    }
    Str("buffer");
    Str(b->name);
    Str(DTypeName(b->dtype));
    Int(static_cast<uint64_t>(b->shape.size()));
    for (int64_t d : b->shape) Int(d);
    Str(MemScopeName(b->scope));
    Int(static_cast<uint64_t>(b->strides.size()));
    for (int64_t d : b->strides) Int(d);
  }

  uint64_t h_ = kFnv1a64Offset;
  std::unordered_map<const VarNode*, uint64_t> numbering_;
};

}  // namespace

bool StructuralEqual(const Expr& a, const Expr& b) { return EqualChecker().Equal(a, b); }
bool StructuralEqual(const Stmt& a, const Stmt& b) { return EqualChecker().Equal(a, b); }

bool Identical(const Expr& a, const Expr& b) { return EqualChecker(/*identity=*/true).Equal(a, b); }

uint64_t StructuralHash(const Expr& e) {
  Hasher h;
  h.Hash(e);
  return h.value();
}

uint64_t StructuralHash(const Stmt& s) {
  Hasher h;
  h.Hash(s);
  return h.value();
}

}  // namespace tessel::schedules
