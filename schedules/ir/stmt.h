#pragma once

// Statements of the lowered program. As for expressions, the node list below is the single
// definition of the statement kinds; stmt_functor.h generates the mutator from it.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "schedules/ir/buffer.h"
#include "schedules/ir/combiner.h"
#include "schedules/ir/expr.h"

namespace tessel::schedules {

#define TESSEL_STMT_NODES(X) \
  X(For)                     \
  X(Store)                   \
  X(Allocate)                \
  X(IfThenElse)              \
  X(Seq)                     \
  X(LetStmt)                 \
  X(Barrier)                 \
  X(AllReduce)               \
  X(Evaluate)                \
  X(Scope)

enum class StmtKind : uint8_t {
#define TESSEL_X(name) k##name,
  TESSEL_STMT_NODES(TESSEL_X)
#undef TESSEL_X
};

class StmtNode {
 public:
  virtual ~StmtNode() = default;
  const StmtKind kind;

 protected:
  explicit StmtNode(StmtKind k) : kind(k) {}
};
using Stmt = std::shared_ptr<const StmtNode>;

template <typename T>
const T* As(const Stmt& s) {
  return s && s->kind == T::kKind ? static_cast<const T*>(s.get()) : nullptr;
}

enum class ForKind : uint8_t { kSerial, kParallel, kVectorized, kUnrolled, kThreadBinding };
const char* ForKindName(ForKind k);  // "serial", "parallel", "vectorized", "unrolled", "bound"

// Thread axes a loop can be bound to. A vthread loop runs inside one thread (emitted as an
// unrolled loop); for shared-memory regions it is relaxed like a thread axis.
enum class ThreadTag : uint8_t {
  kNone,
  kBlockX,
  kBlockY,
  kBlockZ,
  kThreadX,
  kThreadY,
  kThreadZ,
  kVThread,
  // The CTA's rank in its thread-block cluster along x (CUDA sm_90): a kernel with a loop bound
  // to it of extent C launches clusters of C CTAs, blockIdx.x-bound loops index clusters, and
  // a reduction loop bound to it is reduced across the cluster through distributed shared
  // memory.
  kClusterX
};
const char* ThreadTagName(ThreadTag t);  // "blockIdx.x", ..., "threadIdx.z", "vthread", "cluster.x"
bool ParseThreadTag(const std::string& name, ThreadTag* out);
inline bool IsBlockTag(ThreadTag t) { return t >= ThreadTag::kBlockX && t <= ThreadTag::kBlockZ; }
inline bool IsThreadTag(ThreadTag t) {
  return t >= ThreadTag::kThreadX && t <= ThreadTag::kThreadZ;
}
// A binding whose value is fixed for each thread of a kernel: threadIdx.* and cluster.x.
inline bool IsPerThreadTag(ThreadTag t) { return IsThreadTag(t) || t == ThreadTag::kClusterX; }

// for (var = min; var < min + extent; ++var) body. A kThreadBinding loop is not a loop: its
// variable is the thread or block index named by `thread` (extent gives the launch dimension).
struct ForNode final : StmtNode {
  static constexpr StmtKind kKind = StmtKind::kFor;
  ForNode(VarPtr v, Expr mn, Expr ext, ForKind k, ThreadTag t, Stmt b,
          std::vector<std::pair<std::string, int64_t>> ann)
      : StmtNode(kKind),
        var(std::move(v)),
        min(std::move(mn)),
        extent(std::move(ext)),
        kind(k),
        thread(t),
        body(std::move(b)),
        annotations(std::move(ann)) {}
  const VarPtr var;
  const Expr min, extent;
  const ForKind kind;
  const ThreadTag thread;
  const Stmt body;
  // Free-form hints carried to code generation (e.g. "pipeline_depth", "unroll_max_step").
  const std::vector<std::pair<std::string, int64_t>> annotations;
};

struct StoreNode final : StmtNode {
  static constexpr StmtKind kKind = StmtKind::kStore;
  StoreNode(BufferPtr b, std::vector<Expr> idx, Expr v)
      : StmtNode(kKind), buffer(std::move(b)), indices(std::move(idx)), value(std::move(v)) {}
  const BufferPtr buffer;
  const std::vector<Expr> indices;
  const Expr value;
};

// A shared or local buffer that lives for the duration of body.
struct AllocateNode final : StmtNode {
  static constexpr StmtKind kKind = StmtKind::kAllocate;
  AllocateNode(BufferPtr b, Stmt s) : StmtNode(kKind), buffer(std::move(b)), body(std::move(s)) {}
  const BufferPtr buffer;
  const Stmt body;
};

struct IfThenElseNode final : StmtNode {
  static constexpr StmtKind kKind = StmtKind::kIfThenElse;
  IfThenElseNode(Expr c, Stmt t, Stmt e)
      : StmtNode(kKind), cond(std::move(c)), then_case(std::move(t)), else_case(std::move(e)) {}
  const Expr cond;
  const Stmt then_case;
  const Stmt else_case;  // may be null
};

struct SeqNode final : StmtNode {
  static constexpr StmtKind kKind = StmtKind::kSeq;
  explicit SeqNode(std::vector<Stmt> s) : StmtNode(kKind), stmts(std::move(s)) {}
  const std::vector<Stmt> stmts;
};

struct LetStmtNode final : StmtNode {
  static constexpr StmtKind kKind = StmtKind::kLetStmt;
  LetStmtNode(VarPtr v, Expr val, Stmt b)
      : StmtNode(kKind), var(std::move(v)), value(std::move(val)), body(std::move(b)) {}
  const VarPtr var;
  const Expr value;
  const Stmt body;
};

// Who waits at a barrier: the threads of a block (__syncthreads), every thread of the grid
// (a software grid barrier; the kernel is then launched cooperatively, LaunchConfig::cooperative),
// or the threads of the CTAs of a cluster (release/acquire: orders distributed shared memory).
enum class BarrierScope : uint8_t { kBlock, kGrid, kCluster };

// A barrier; a no-op on the host. A grid barrier also orders global memory: what any block wrote
// before it, every block reads after it. `comment` is printed after it (why it is there).
struct BarrierNode final : StmtNode {
  static constexpr StmtKind kKind = StmtKind::kBarrier;
  BarrierNode(BarrierScope s, std::string c) : StmtNode(kKind), scope(s), comment(std::move(c)) {}
  const BarrierScope scope;
  const std::string comment;
};

// Combines a tuple of values (one per component of `combiner`) across the `extent` threads of
// axis `thread` (each group of threads that share the other thread indices separately), or across
// the `extent` CTAs of a cluster (thread kClusterX), and writes component i of the result to
// results[i][0] in every thread. Every thread of the block must execute it. A plain reduction is
// the one-component combiner of its ReduceOp.
struct AllReduceNode final : StmtNode {
  static constexpr StmtKind kKind = StmtKind::kAllReduce;
  AllReduceNode(CombinerPtr c, std::vector<Expr> v, std::vector<BufferPtr> r, ThreadTag t,
                int64_t e)
      : StmtNode(kKind),
        combiner(std::move(c)),
        values(std::move(v)),
        results(std::move(r)),
        thread(t),
        extent(e) {}
  const CombinerPtr combiner;
  const std::vector<Expr> values;
  const std::vector<BufferPtr> results;
  const ThreadTag thread;
  const int64_t extent;
};

// A block of statements: a C scope for the registers and lets of `body`, with a comment. `origin`,
// where set, is the statement the block expands (lower_all_reduce: the AllReduce), for analyses
// that model it as one operation (the cost model's features); it is not part of the program.
struct ScopeNode final : StmtNode {
  static constexpr StmtKind kKind = StmtKind::kScope;
  ScopeNode(std::string c, Stmt b, Stmt o)
      : StmtNode(kKind), comment(std::move(c)), body(std::move(b)), origin(std::move(o)) {}
  const std::string comment;
  const Stmt body;
  const Stmt origin;  // may be null
};

// Evaluates an expression for its effect (tensor-core intrinsic calls).
struct EvaluateNode final : StmtNode {
  static constexpr StmtKind kKind = StmtKind::kEvaluate;
  explicit EvaluateNode(Expr v) : StmtNode(kKind), value(std::move(v)) {}
  const Expr value;
};

Stmt MakeFor(VarPtr var, Expr min, Expr extent, ForKind kind, ThreadTag thread, Stmt body,
             std::vector<std::pair<std::string, int64_t>> annotations = {});
Stmt MakeStore(BufferPtr buffer, std::vector<Expr> indices, Expr value);
Stmt MakeAllocate(BufferPtr buffer, Stmt body);
Stmt MakeIf(Expr cond, Stmt then_case, Stmt else_case = nullptr);  // folds constant conditions
Stmt MakeSeq(std::vector<Stmt> stmts);  // flattens nested sequences, drops nulls
Stmt MakeLet(VarPtr var, Expr value, Stmt body);
Stmt MakeBarrier(BarrierScope scope = BarrierScope::kBlock, std::string comment = "");
Stmt MakeAllReduce(ReduceOp op, Expr value, BufferPtr result, ThreadTag thread, int64_t extent);
Stmt MakeAllReduce(CombinerPtr combiner, std::vector<Expr> values, std::vector<BufferPtr> results,
                   ThreadTag thread, int64_t extent);
Stmt MakeEvaluate(Expr value);
Stmt MakeScope(std::string comment, Stmt body, Stmt origin = nullptr);

// The statements directly inside `s` (a loop's, allocation's or let's body, both branches of
// an if, a sequence's statements), in order; none for the leaves. An absent else is left out.
std::vector<Stmt> ChildStmts(const Stmt& s);
// The expressions `s` holds itself, not those of its children: a loop's bounds, a store's
// indices and value, a condition, a let's value, an all-reduce's or evaluate's value.
std::vector<Expr> OwnExprs(const Stmt& s);
// Calls `fn` on every statement of `s`, parents first.
void WalkStmt(const Stmt& s, const std::function<void(const Stmt&)>& fn);

// Indented pseudo-code, used by `tessel lower --emit ir`.
std::string ToString(const Stmt& s);

}  // namespace tessel::schedules
