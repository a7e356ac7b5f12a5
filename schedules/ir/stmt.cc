#include "schedules/ir/stmt.h"

#include <sstream>

namespace tessel::schedules {

const char* ForKindName(ForKind k) {
  switch (k) {
    case ForKind::kSerial:
      return "serial";
    case ForKind::kParallel:
      return "parallel";
    case ForKind::kVectorized:
      return "vectorized";
    case ForKind::kUnrolled:
      return "unrolled";
    case ForKind::kThreadBinding:
      return "bound";
  }
  return "?";
}

const char* ThreadTagName(ThreadTag t) {
  switch (t) {
    case ThreadTag::kNone:
      return "none";
    case ThreadTag::kBlockX:
      return "blockIdx.x";
    case ThreadTag::kBlockY:
      return "blockIdx.y";
    case ThreadTag::kBlockZ:
      return "blockIdx.z";
    case ThreadTag::kThreadX:
      return "threadIdx.x";
    case ThreadTag::kThreadY:
      return "threadIdx.y";
    case ThreadTag::kThreadZ:
      return "threadIdx.z";
    case ThreadTag::kVThread:
      return "vthread";
    case ThreadTag::kClusterX:
      return "cluster.x";
  }
  return "?";
}

bool ParseThreadTag(const std::string& name, ThreadTag* out) {
  for (ThreadTag t :
       {ThreadTag::kBlockX, ThreadTag::kBlockY, ThreadTag::kBlockZ, ThreadTag::kThreadX,
        ThreadTag::kThreadY, ThreadTag::kThreadZ, ThreadTag::kVThread, ThreadTag::kClusterX}) {
    if (name == ThreadTagName(t)) {
      *out = t;
      return true;
    }
  }
  return false;
}

Stmt MakeFor(VarPtr var, Expr min, Expr extent, ForKind kind, ThreadTag thread, Stmt body,
             std::vector<std::pair<std::string, int64_t>> annotations) {
  return std::make_shared<ForNode>(std::move(var), std::move(min), std::move(extent), kind, thread,
                                   std::move(body), std::move(annotations));
}
Stmt MakeStore(BufferPtr buffer, std::vector<Expr> indices, Expr value) {
  return std::make_shared<StoreNode>(std::move(buffer), std::move(indices), std::move(value));
}
Stmt MakeAllocate(BufferPtr buffer, Stmt body) {
  return std::make_shared<AllocateNode>(std::move(buffer), std::move(body));
}
Stmt MakeIf(Expr cond, Stmt then_case, Stmt else_case) {
  if (!cond) return then_case;
  if (const auto* c = As<IntImmNode>(cond)) return c->value ? then_case : else_case;
  return std::make_shared<IfThenElseNode>(std::move(cond), std::move(then_case),
                                          std::move(else_case));
}
Stmt MakeSeq(std::vector<Stmt> stmts) {
  std::vector<Stmt> flat;
  for (Stmt& s : stmts) {
    if (!s) continue;
    if (const auto* seq = As<SeqNode>(s)) {
      flat.insert(flat.end(), seq->stmts.begin(), seq->stmts.end());
    } else {
      flat.push_back(std::move(s));
    }
  }
  if (flat.empty()) return nullptr;
  if (flat.size() == 1) return flat[0];
  return std::make_shared<SeqNode>(std::move(flat));
}
Stmt MakeLet(VarPtr var, Expr value, Stmt body) {
  return std::make_shared<LetStmtNode>(std::move(var), std::move(value), std::move(body));
}
Stmt MakeBarrier(BarrierScope scope, std::string comment) {
  return std::make_shared<BarrierNode>(scope, std::move(comment));
}
Stmt MakeAllReduce(ReduceOp op, Expr value, BufferPtr result, ThreadTag thread, int64_t extent) {
  CombinerPtr c = ReduceCombiner(op, value->dtype);
  return MakeAllReduce(std::move(c), {std::move(value)}, {std::move(result)}, thread, extent);
}
Stmt MakeAllReduce(CombinerPtr combiner, std::vector<Expr> values, std::vector<BufferPtr> results,
                   ThreadTag thread, int64_t extent) {
  return std::make_shared<AllReduceNode>(std::move(combiner), std::move(values), std::move(results),
                                         thread, extent);
}
Stmt MakeEvaluate(Expr value) { return std::make_shared<EvaluateNode>(std::move(value)); }
Stmt MakeScope(std::string comment, Stmt body, Stmt origin) {
  return std::make_shared<ScopeNode>(std::move(comment), std::move(body), std::move(origin));
}

namespace {

void PrintIndices(std::ostream& os, const std::vector<Expr>& idx) {
  os << "[";
  for (size_t i = 0; i < idx.size(); ++i) os << (i ? ", " : "") << ToString(idx[i]);
  os << "]";
}

void Print(std::ostream& os, const Stmt& s, int indent) {
  const std::string pad(indent * 2, ' ');
  if (!s) return;
  switch (s->kind) {
    case StmtKind::kFor: {
      const auto& n = static_cast<const ForNode&>(*s);
      os << pad;
      if (n.kind == ForKind::kThreadBinding) {
        os << n.var->name << " = " << ThreadTagName(n.thread) << "  // extent "
           << ToString(n.extent) << "\n";
        Print(os, n.body, indent);
        return;
      }
      if (n.kind != ForKind::kSerial) os << ForKindName(n.kind) << " ";
      os << "for " << n.var->name << " in [" << ToString(n.min) << ", "
         << ToString(n.min + n.extent) << ")";
      for (const auto& [k, v] : n.annotations) os << " @" << k << "=" << v;
      os << ":\n";
      Print(os, n.body, indent + 1);
      return;
    }
    case StmtKind::kStore: {
      const auto& n = static_cast<const StoreNode&>(*s);
      os << pad << n.buffer->name;
      PrintIndices(os, n.indices);
      os << " = " << ToString(n.value) << "\n";
      return;
    }
    case StmtKind::kAllocate: {
      const auto& n = static_cast<const AllocateNode&>(*s);
      os << pad << "alloc " << MemScopeName(n.buffer->scope) << " " << DTypeName(n.buffer->dtype)
         << " " << n.buffer->name << "[";
      for (size_t i = 0; i < n.buffer->shape.size(); ++i)
        os << (i ? ", " : "") << n.buffer->shape[i];
      os << "]\n";
      Print(os, n.body, indent);
      return;
    }
    case StmtKind::kIfThenElse: {
      const auto& n = static_cast<const IfThenElseNode&>(*s);
      os << pad << "if " << ToString(n.cond) << ":\n";
      Print(os, n.then_case, indent + 1);
      if (n.else_case) {
        os << pad << "else:\n";
        Print(os, n.else_case, indent + 1);
      }
      return;
    }
    case StmtKind::kSeq:
      for (const Stmt& c : static_cast<const SeqNode&>(*s).stmts) Print(os, c, indent);
      return;
    case StmtKind::kLetStmt: {
      const auto& n = static_cast<const LetStmtNode&>(*s);
      os << pad << "let " << n.var->name << " = " << ToString(n.value) << "\n";
      Print(os, n.body, indent);
      return;
    }
    case StmtKind::kBarrier: {
      const auto& n = static_cast<const BarrierNode&>(*s);
      os << pad
         << (n.scope == BarrierScope::kGrid      ? "grid_barrier"
             : n.scope == BarrierScope::kCluster ? "cluster_barrier"
                                                 : "barrier");
      if (!n.comment.empty()) os << "  // " << n.comment;
      os << "\n";
      return;
    }
    case StmtKind::kScope: {
      const auto& n = static_cast<const ScopeNode&>(*s);
      os << pad << "{";
      if (!n.comment.empty()) os << "  // " << n.comment;
      os << "\n";
      Print(os, n.body, indent + 1);
      os << pad << "}\n";
      return;
    }
    case StmtKind::kAllReduce: {
      const auto& n = static_cast<const AllReduceNode&>(*s);
      for (size_t i = 0; i < n.results.size(); ++i) {
        os << (i ? ", " : pad) << n.results[i]->name << "[0]";
      }
      os << " = allreduce_" << n.combiner->name << "(";
      for (size_t i = 0; i < n.values.size(); ++i) os << (i ? ", " : "") << ToString(n.values[i]);
      os << ") over " << ThreadTagName(n.thread) << " x" << n.extent << "\n";
      if (!n.combiner->op) os << pad << "  // " << ToString(*n.combiner) << "\n";
      return;
    }
    case StmtKind::kEvaluate:
      os << pad << ToString(static_cast<const EvaluateNode&>(*s).value) << "\n";
      return;
  }
}

}  // namespace

std::string ToString(const Stmt& s) {
  std::ostringstream os;
  Print(os, s, 0);
  return os.str();
}

std::vector<Stmt> ChildStmts(const Stmt& s) {
  switch (s->kind) {
    case StmtKind::kFor:
      return {static_cast<const ForNode&>(*s).body};
    case StmtKind::kAllocate:
      return {static_cast<const AllocateNode&>(*s).body};
    case StmtKind::kIfThenElse: {
      const auto& n = static_cast<const IfThenElseNode&>(*s);
      if (!n.else_case) return {n.then_case};
      return {n.then_case, n.else_case};
    }
    case StmtKind::kSeq:
      return static_cast<const SeqNode&>(*s).stmts;
    case StmtKind::kLetStmt:
      return {static_cast<const LetStmtNode&>(*s).body};
    case StmtKind::kScope:
      return {static_cast<const ScopeNode&>(*s).body};
    case StmtKind::kStore:
    case StmtKind::kBarrier:
    case StmtKind::kAllReduce:
    case StmtKind::kEvaluate:
      return {};
  }
  return {};
}

void WalkStmt(const Stmt& s, const std::function<void(const Stmt&)>& fn) {
  if (!s) return;
  fn(s);
  for (const Stmt& c : ChildStmts(s)) WalkStmt(c, fn);
}

std::vector<Expr> OwnExprs(const Stmt& s) {
  switch (s->kind) {
    case StmtKind::kFor: {
      const auto& n = static_cast<const ForNode&>(*s);
      return {n.min, n.extent};
    }
    case StmtKind::kStore: {
      const auto& n = static_cast<const StoreNode&>(*s);
      std::vector<Expr> out = n.indices;
      out.push_back(n.value);
      return out;
    }
    case StmtKind::kIfThenElse:
      return {static_cast<const IfThenElseNode&>(*s).cond};
    case StmtKind::kLetStmt:
      return {static_cast<const LetStmtNode&>(*s).value};
    case StmtKind::kAllReduce: {
      return static_cast<const AllReduceNode&>(*s).values;
    }
    case StmtKind::kEvaluate:
      return {static_cast<const EvaluateNode&>(*s).value};
    case StmtKind::kAllocate:
    case StmtKind::kSeq:
    case StmtKind::kBarrier:
    case StmtKind::kScope:
      return {};
  }
  return {};
}

}  // namespace tessel::schedules
