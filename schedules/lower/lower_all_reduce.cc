// lower_all_reduce: expands every AllReduce of a CUDA kernel into the statements that combine
// its tuple across threads: warp butterflies (shuffles), block reductions through the kernel's
// shared scratch, and cluster reductions through distributed shared memory, for any combiner
// (schedules/ir/combiner.h; a plain reduction is a one-component tuple). Code generation prints
// the result as it is built: the nodes here are made without folding, and no pass after this one
// simplifies the bodies.
//
// Components that are the same constant in every thread (UniformComponents, such as a count of
// elements) are folded at compile time: they are not exchanged, and what depends on them folds
// step by step (CombineValues).

#include "schedules/lower/lower_all_reduce.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "schedules/ir/combiner.h"
#include "schedules/ir/stmt_functor.h"
#include "schedules/ir/thread_intrinsics.h"
#include "schedules/lower/passes.h"

namespace tessel::schedules {

namespace {

// ---- Nodes made as written (no folding).

Expr Int(int64_t v) { return std::make_shared<IntImmNode>(v, DType::kInt32); }
Expr Bin(BinaryOp op, Expr a, Expr b) {
  const DType t = IsComparison(op) ? DType::kBool : a->dtype;
  return std::make_shared<BinaryNode>(op, std::move(a), std::move(b), t);
}
Expr Add(Expr a, Expr b) { return Bin(BinaryOp::kAdd, std::move(a), std::move(b)); }
Expr Mul(Expr a, Expr b) { return Bin(BinaryOp::kMul, std::move(a), std::move(b)); }
Expr Call(const char* name, std::vector<Expr> args, DType t = DType::kInt32) {
  return std::make_shared<CallNode>(name, std::move(args), t);
}
Expr Load(const BufferPtr& b, std::vector<Expr> idx) {
  return std::make_shared<LoadNode>(b, std::move(idx));
}
Expr Read(const BufferPtr& reg) { return Load(reg, {}); }
Stmt Write(const BufferPtr& b, std::vector<Expr> idx, Expr v) {
  return MakeStore(b, std::move(idx), std::move(v));
}
Stmt If(Expr cond, Stmt then_case) {
  return std::make_shared<IfThenElseNode>(std::move(cond), std::move(then_case), nullptr);
}
// An integer sum kept whole where it is an operand of another sum: `64 + (a + b)` (an identity
// cast; the printer prints the cast's value in parentheses).
Expr Grouped(const Expr& e) {
  const auto* b = As<BinaryNode>(e);
  return b && b->op == BinaryOp::kAdd ? std::make_shared<CastNode>(e->dtype, e) : e;
}
Expr ThreadIdx(int axis) { return intrinsic::ThreadIndex(axis); }
Expr LaneMaskConstant(uint32_t bits) {
  return Call(intrinsic::kLaneMask, {MakeInt(static_cast<int64_t>(bits))});
}
// A scalar register: a rank-0 local buffer, named as printed.
BufferPtr Register(const std::string& name, DType t) {
  return MakeBuffer(name, t, {}, MemScope::kLocal);
}
BinaryOp CombineOp(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return BinaryOp::kAdd;
    case ReduceOp::kMax:
      return BinaryOp::kMax;
    case ReduceOp::kMin:
      return BinaryOp::kMin;
  }
  return BinaryOp::kAdd;
}

// `e` with the variables of `m` replaced, rebuilt as written.
Expr Replace(const Expr& e, const std::unordered_map<const VarNode*, Expr>& m) {
  switch (e->kind) {
    case ExprKind::kVar: {
      auto it = m.find(static_cast<const VarNode*>(e.get()));
      return it == m.end() ? e : it->second;
    }
    case ExprKind::kBinary: {
      const auto& n = static_cast<const BinaryNode&>(*e);
      return std::make_shared<BinaryNode>(n.op, Replace(n.a, m), Replace(n.b, m), n.dtype);
    }
    case ExprKind::kUnary: {
      const auto& n = static_cast<const UnaryNode&>(*e);
      return std::make_shared<UnaryNode>(n.op, Replace(n.a, m));
    }
    case ExprKind::kSelect: {
      const auto& n = static_cast<const SelectNode&>(*e);
      return std::make_shared<SelectNode>(Replace(n.cond, m), Replace(n.true_value, m),
                                          Replace(n.false_value, m));
    }
    case ExprKind::kCast: {
      const auto& n = static_cast<const CastNode&>(*e);
      return std::make_shared<CastNode>(n.dtype, Replace(n.value, m));
    }
    case ExprKind::kCall: {
      const auto& n = static_cast<const CallNode&>(*e);
      std::vector<Expr> args;
      for (const Expr& a : n.args) args.push_back(Replace(a, m));
      return std::make_shared<CallNode>(n.name, std::move(args), n.dtype);
    }
    case ExprKind::kLoad: {
      const auto& n = static_cast<const LoadNode&>(*e);
      std::vector<Expr> idx;
      for (const Expr& i : n.indices) idx.push_back(Replace(i, m));
      return std::make_shared<LoadNode>(n.buffer, std::move(idx));
    }
    default:
      return e;
  }
}

// Statements in order, where a register or a let covers the statements after it.
class StmtList {
 public:
  void Add(Stmt s) { items_.push_back({std::move(s), nullptr, nullptr, nullptr}); }
  void Alloc(BufferPtr b) { items_.push_back({nullptr, std::move(b), nullptr, nullptr}); }
  void Let(VarPtr v, Expr value) {
    items_.push_back({nullptr, nullptr, std::move(v), std::move(value)});
  }
  Stmt Build() const {
    std::vector<Stmt> tail;
    for (auto it = items_.rbegin(); it != items_.rend(); ++it) {
      if (it->stmt) {
        tail.insert(tail.begin(), it->stmt);
        continue;
      }
      Stmt body = MakeSeq(tail);
      tail = {it->buffer ? MakeAllocate(it->buffer, body) : MakeLet(it->var, it->value, body)};
    }
    return MakeSeq(tail);
  }

 private:
  struct Item {
    Stmt stmt;
    BufferPtr buffer;
    VarPtr var;
    Expr value;
  };
  std::vector<Item> items_;
};

// An all-reduce's running tuple: component c is register regs[c] or, where known[c] is set,
// that constant in every thread (nothing to exchange).
struct Tuple {
  std::vector<BufferPtr> regs;
  std::vector<Expr> known;
};

// The type a reduction of `t` computes in: the half types in f32, i64 in the index type.
DType ComputeDType(DType t, bool int64_indices) {
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

// Scratch in the order of their C type names (double, float, int, long long).
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

// Entries of the block scratch an all-reduce needs (0: none).
int64_t ScratchEntries(const AllReduceNode& r, const LaunchConfig& launch) {
  const auto& block = launch.block;
  const int axis = r.thread == ThreadTag::kThreadX ? 0 : r.thread == ThreadTag::kThreadY ? 1 : 2;
  const int64_t components = static_cast<int64_t>(r.values.size());
  if (r.extent != block[axis] || r.values[0]->dtype == DType::kBool) return 0;
  if (axis != 0) return launch.threads_per_block() * components;
  // One partial a warp of each component.
  if (r.extent > 32 && r.extent % 32 == 0) {
    return block[1] * block[2] * (r.extent / 32) * components;
  }
  return 0;
}

int Axis(ThreadTag t) { return t == ThreadTag::kThreadY ? 1 : t == ThreadTag::kThreadZ ? 2 : 0; }

// What the expansion supports, with the fix in the message.
absl::Status CheckAllReduce(const Kernel& k, const AllReduceNode& r, bool int64_indices) {
  const auto fail = [&](absl::StatusCode code, const std::string& msg) {
    return absl::Status(
        code, absl::StrCat("kernel '", k.name, "': AllReduce over ", ThreadTagName(r.thread),
                           " with extent ", r.extent, msg));
  };
  const auto invalid = [&](const std::string& msg) {
    return fail(absl::StatusCode::kInvalidArgument, msg);
  };
  const DType t = r.values[0]->dtype;
  for (const Expr& v : r.values) {
    if (ComputeDType(v->dtype, int64_indices) != ComputeDType(t, int64_indices)) {
      return invalid(
          ": the components of one all-reduce must be computed in one type; reduce components of "
          "other types in an all-reduce of their own");
    }
  }
  if (r.thread == ThreadTag::kClusterX) {
    if (r.extent != k.launch.cluster) {
      return invalid(absl::StrCat(": the kernel's clusters have ", k.launch.cluster,
                                  " CTAs; the extent must equal the cluster size"));
    }
    if (t == DType::kBool) return invalid(": boolean values cannot be reduced; reduce an integer");
    return absl::OkStatus();
  }
  if (!IsThreadTag(r.thread)) {
    return invalid(
        ": cross-thread reductions combine the threads of threadIdx.x, .y or .z; bind the "
        "reduction loop to a thread axis");
  }
  const int axis = Axis(r.thread);
  if (r.extent != k.launch.block[axis]) {
    return invalid(
        absl::StrCat(": the block has ", k.launch.block[axis],
                     " threads on that axis; the extent must equal the block dimension"));
  }
  if (t == DType::kBool) return invalid(": boolean values cannot be reduced; reduce an integer");
  for (const BufferPtr& res : r.results) {
    if (res->scope != MemScope::kLocal || res->AllocatedElements() < 1) {
      return invalid(absl::StrCat(": its result buffer '", res->name,
                                  "' must be a local buffer of at least one element"));
    }
  }
  const int64_t e = r.extent;
  const bool pow2 = e >= 1 && e <= 32 && (e & (e - 1)) == 0;
  if (axis == 0 && !pow2 && e % 32 != 0) {
    return fail(absl::StatusCode::kUnimplemented,
                " is not supported: threadIdx.x reductions need a power of two up to 32 or a "
                "multiple of 32 threads; split the reduction loop so that threadIdx.x gets such "
                "an extent");
  }
  return absl::OkStatus();
}

// Expands the all-reduces of one kernel, whose scratch buffers are given by compute type.
class Expander {
 public:
  Expander(const Kernel& k, bool int64_indices, std::map<DType, BufferPtr> red,
           std::map<DType, BufferPtr> cluster)
      : block_(k.launch.block),
        threads_(k.launch.threads_per_block()),
        int64_indices_(int64_indices),
        red_scratch_(std::move(red)),
        cluster_scratch_(std::move(cluster)) {}

  // The expansion of `self`, an AllReduceNode.
  Stmt Expand(const Stmt& self);

 private:
  using Exprs = std::vector<Expr>;
  Stmt OverThreadX(const AllReduceNode& n);
  Stmt OverThreadYZ(const AllReduceNode& n);
  Stmt OverCluster(const AllReduceNode& n);
  void Start(const AllReduceNode& n);
  // A register per exchanged component of red_, initialized with value(c).
  void Declare(StmtList* out, const std::function<Expr(size_t)>& value);
  // Component c's entry `i` of `scratch` (a plane of `plane` entries per exchanged component).
  Expr Entry(const BufferPtr& scratch, size_t c, int64_t plane, const Expr& i) const;
  Exprs Each(const std::function<Expr(size_t)>& f) const;
  // acc = acc (+) other with the combiner; `other_known` the other tuple's uniform components.
  void CombineInto(StmtList* out, Tuple* acc, const Exprs& other, const Exprs& other_known);
  void CombineWarpPartials(StmtList* out, int64_t warps,
                           const std::function<Expr(size_t, int64_t)>& entry);
  Exprs LoadRank(StmtList* out, const Expr& local, const Expr& rank);
  void StoreResults(StmtList* out);
  Expr LinearThreadIndex() const;
  Expr LaneMask(int64_t lanes) const;
  Expr WarpRow(int64_t warps, const Expr& i) const;

  const std::array<int64_t, 3> block_;
  const int64_t threads_;
  const bool int64_indices_;
  std::map<DType, BufferPtr> red_scratch_, cluster_scratch_;
  // The all-reduce being expanded.
  Stmt origin_;
  const AllReduceNode* n_ = nullptr;
  DType type_ = DType::kFloat32;
  Tuple red_;
  std::vector<size_t> plane_of_;  // exchanged component c's plane (slot) in the scratch
};

void Expander::Start(const AllReduceNode& n) {
  n_ = &n;
  type_ = ComputeDType(n.values[0]->dtype, int64_indices_);
  const size_t k = n.values.size();
  red_ = Tuple{};
  red_.known = UniformComponents(*n.combiner, n.values);
  for (size_t c = 0; c < k; ++c) {
    red_.regs.push_back(
        Register(k == 1 ? std::string("tessel_red") : absl::StrCat("tessel_red", c), type_));
  }
  plane_of_.assign(k, 0);
  size_t planes = 0;
  for (size_t c = 0; c < k; ++c) {
    if (!red_.known[c]) plane_of_[c] = planes++;
  }
}

Stmt Expander::Expand(const Stmt& self) {
  origin_ = self;
  const auto& n = static_cast<const AllReduceNode&>(*self);
  Start(n);
  if (n.thread == ThreadTag::kClusterX) return OverCluster(n);
  return Axis(n.thread) == 0 ? OverThreadX(n) : OverThreadYZ(n);
}

void Expander::Declare(StmtList* out, const std::function<Expr(size_t)>& value) {
  for (size_t c = 0; c < red_.regs.size(); ++c) {
    if (red_.known[c]) continue;
    out->Alloc(red_.regs[c]);
    out->Add(Write(red_.regs[c], {}, value(c)));
  }
}

Expr Expander::Entry(const BufferPtr& scratch, size_t c, int64_t plane, const Expr& i) const {
  const int64_t p = static_cast<int64_t>(plane_of_[c]);
  return Load(scratch, {p == 0 ? i : Add(Int(p * plane), Grouped(i))});
}

Expander::Exprs Expander::Each(const std::function<Expr(size_t)>& f) const {
  Exprs out;
  for (size_t c = 0; c < red_.regs.size(); ++c) out.push_back(red_.known[c] ? nullptr : f(c));
  return out;
}

Expr Expander::LinearThreadIndex() const {
  Expr s = ThreadIdx(0);
  if (block_[1] > 1) s = Add(s, Mul(Int(block_[0]), ThreadIdx(1)));
  if (block_[2] > 1) s = Add(s, Mul(Int(block_[0] * block_[1]), ThreadIdx(2)));
  return s;
}

Expr Expander::LaneMask(int64_t lanes) const {
  if (lanes >= 32) return LaneMaskConstant(0xffffffffu);
  const uint32_t bits = (1u << lanes) - 1;
  if (block_[1] * block_[2] == 1) return LaneMaskConstant(bits);
  return Call(intrinsic::kShiftLeft,
              {LaneMaskConstant(bits),
               Call(intrinsic::kBitwiseAnd, {LinearThreadIndex(), Int(32 - lanes)})});
}

Expr Expander::WarpRow(int64_t warps, const Expr& i) const {
  if (block_[2] > 1) {
    return Add(Mul(Add(ThreadIdx(1), Mul(Int(block_[1]), ThreadIdx(2))), Int(warps)), i);
  }
  if (block_[1] > 1) return Add(Mul(ThreadIdx(1), Int(warps)), i);
  return i;
}

void Expander::CombineInto(StmtList* out, Tuple* acc, const Exprs& other,
                           const Exprs& other_known) {
  const Combiner& c = *n_->combiner;
  const size_t k = acc->regs.size();
  if (c.op && !acc->known[0]) {
    out->Add(Write(acc->regs[0], {}, Bin(CombineOp(*c.op), Read(acc->regs[0]), other[0])));
    return;
  }
  // The other tuple first (it may read the accumulators), then the combiner's temporaries and
  // results, then the accumulators. Uniform components are constants on both sides.
  StmtList block;
  std::unordered_map<const VarNode*, Expr> sub;
  Exprs lhs, rhs;
  for (size_t i = 0; i < k; ++i) {
    if (acc->known[i]) {
      sub[c.lhs[i].get()] = acc->known[i];
      sub[c.rhs[i].get()] = other_known[i];
    } else {
      VarPtr o = MakeVar(absl::StrCat("tessel_o", i), type_);
      block.Let(o, other[i]);
      sub[c.lhs[i].get()] = Read(acc->regs[i]);
      sub[c.rhs[i].get()] = o;
    }
    lhs.push_back(acc->known[i] ? acc->known[i] : Expr(c.lhs[i]));
    rhs.push_back(acc->known[i] ? other_known[i] : Expr(c.rhs[i]));
  }
  for (const auto& [v, e] : c.lets) {
    VarPtr t = MakeVar(absl::StrCat("tessel_let_", v->name), v->dtype);
    block.Let(t, Replace(e, sub));
    sub[v.get()] = t;
  }
  std::vector<VarPtr> results(k);
  for (size_t i = 0; i < k; ++i) {
    if (acc->known[i]) continue;
    results[i] = MakeVar(absl::StrCat("tessel_c", i), type_);
    block.Let(results[i], Replace(c.combine[i], sub));
  }
  for (size_t i = 0; i < k; ++i) {
    if (!acc->known[i]) block.Add(Write(acc->regs[i], {}, results[i]));
  }
  out->Add(MakeScope("", block.Build()));
  const Exprs combined = CombineValues(c, lhs, rhs);
  for (size_t i = 0; i < k; ++i) {
    if (acc->known[i]) acc->known[i] = combined[i];
  }
}

void Expander::StoreResults(StmtList* out) {
  for (size_t i = 0; i < red_.regs.size(); ++i) {
    out->Add(
        Write(n_->results[i], {MakeInt(0)}, red_.known[i] ? red_.known[i] : Read(red_.regs[i])));
  }
}

Stmt Expander::OverThreadX(const AllReduceNode& n) {
  const int64_t e = n.extent;
  const size_t k = n.values.size();
  StmtList body;
  Declare(&body, [&](size_t c) { return n.values[c]; });
  // Butterflies within each group of min(e, 32) lanes: every lane ends with the same value.
  const int64_t lanes = std::min<int64_t>(e, 32);
  Expr mask = LaneMaskConstant(0xffffffffu);
  if (!(lanes == 32 && e > 32)) {
    VarPtr v = MakeVar("tessel_mask", DType::kInt32);
    if (e <= 32 && e > 1) body.Let(v, LaneMask(e));
    mask = v;
  }
  for (int64_t off = lanes / 2; off >= 1; off /= 2) {
    const Exprs alike = red_.known;  // every lane's uniform components
    CombineInto(&body, &red_, Each([&](size_t c) {
      Exprs args = {mask, Read(red_.regs[c]), Int(off)};
      if (lanes != 32) args.push_back(Int(lanes));
      return Call(intrinsic::kShflXorSync, std::move(args), type_);
    }),
                alike);
  }
  if (e > 32) {
    // One partial per warp through shared memory, then every thread combines its row's
    // partials in the same order.
    const BufferPtr& scratch = red_scratch_.at(type_);
    const int64_t warps = e / 32;
    const int64_t plane = block_[1] * block_[2] * warps;
    const Expr warp = Call(intrinsic::kShiftRight, {ThreadIdx(0), Int(5)});
    body.Add(MakeBarrier(BarrierScope::kBlock, "earlier readers of the scratch are done"));
    StmtList publish;
    for (size_t c = 0; c < k; ++c) {
      if (red_.known[c]) continue;
      const Expr entry = Entry(scratch, c, plane, WarpRow(warps, warp));
      publish.Add(Write(scratch, As<LoadNode>(entry)->indices, Read(red_.regs[c])));
    }
    body.Add(If(Bin(BinaryOp::kEq, Call(intrinsic::kBitwiseAnd, {ThreadIdx(0), Int(31)}), Int(0)),
                publish.Build()));
    body.Add(MakeBarrier(BarrierScope::kBlock));
    if (n.combiner->op && !red_.known[0]) {
      for (size_t c = 0; c < k; ++c) {
        body.Add(Write(red_.regs[c], {}, Entry(scratch, c, plane, WarpRow(warps, Int(0)))));
      }
      VarPtr w = MakeVar("tessel_w", DType::kInt32);
      StmtList loop;
      CombineInto(&loop, &red_,
                  Each([&](size_t c) { return Entry(scratch, c, plane, WarpRow(warps, w)); }),
                  red_.known);
      body.Add(
          MakeFor(w, Int(1), Int(warps - 1), ForKind::kUnrolled, ThreadTag::kNone, loop.Build()));
    } else {
      CombineWarpPartials(&body, warps, [&](size_t c, int64_t i) {
        return Entry(scratch, c, plane, WarpRow(warps, Int(i)));
      });
    }
  }
  StoreResults(&body);
  return MakeScope(absl::StrCat("allreduce_", n.combiner->name, " over ", ThreadTagName(n.thread),
                                " (", e, " threads)"),
                   body.Build(), origin_);
}

Stmt Expander::OverThreadYZ(const AllReduceNode& n) {
  // Every thread writes its values, then combines its group's values.
  const int axis = Axis(n.thread);
  const int64_t e = n.extent;
  const size_t k = n.values.size();
  const BufferPtr& scratch = red_scratch_.at(type_);
  const int64_t plane = threads_;
  Expr base;
  int64_t stride = 0;
  if (axis == 1) {
    base = block_[2] > 1 ? Add(ThreadIdx(0), Mul(Int(block_[0] * block_[1]), ThreadIdx(2)))
                         : ThreadIdx(0);
    stride = block_[0];
  } else {
    base = block_[1] > 1 ? Add(ThreadIdx(0), Mul(Int(block_[0]), ThreadIdx(1))) : ThreadIdx(0);
    stride = block_[0] * block_[1];
  }
  StmtList body;
  body.Add(MakeBarrier(BarrierScope::kBlock, "earlier readers of the scratch are done"));
  for (size_t c = 0; c < k; ++c) {
    if (red_.known[c]) continue;
    const Expr entry = Entry(scratch, c, plane, LinearThreadIndex());
    body.Add(Write(scratch, As<LoadNode>(entry)->indices, n.values[c]));
  }
  body.Add(MakeBarrier(BarrierScope::kBlock));
  VarPtr b = MakeVar("tessel_base", DType::kInt32);
  body.Let(b, base);
  Declare(&body, [&](size_t c) { return Entry(scratch, c, plane, b); });
  if (red_.known == Exprs(k)) {
    VarPtr kv = MakeVar("tessel_k", DType::kInt32);
    StmtList loop;
    CombineInto(&loop, &red_, Each([&](size_t c) {
      return Entry(scratch, c, plane, Add(b, Mul(kv, Int(stride))));
    }),
                red_.known);
    body.Add(MakeFor(kv, Int(1), Int(e - 1), ForKind::kSerial, ThreadTag::kNone, loop.Build()));
  } else {
    // Uniform components change with every step: the steps unrolled, each with its constants.
    const Exprs thread_known = red_.known;  // every thread's alike
    for (int64_t i = 1; i < e; ++i) {
      CombineInto(&body, &red_,
                  Each([&](size_t c) { return Entry(scratch, c, plane, Add(b, Int(i * stride))); }),
                  thread_known);
    }
  }
  StoreResults(&body);
  return MakeScope(absl::StrCat("allreduce_", n.combiner->name, " over ", ThreadTagName(n.thread),
                                " (", e, " threads)"),
                   body.Build(), origin_);
}

void Expander::CombineWarpPartials(StmtList* out, int64_t warps,
                                   const std::function<Expr(size_t, int64_t)>& entry) {
  // In the same order in every thread: independent chains over consecutive warps, then the chains
  // pairwise, so that the combinations form a short dependent chain while only a few partials are
  // held at a time (registers).
  const size_t k = red_.regs.size();
  const Exprs warp_known = red_.known;  // every warp's uniform components alike
  // Chains pay where a combination has a long latency (a Welford weight's division, online
  // softmax's exponential: 1.066 against 1.044 ms for softmax (4096, 65536) online on an H100);
  // otherwise one chain, in warp order, holds the fewest registers (the 1024-thread grid
  // layernorm spilled with four).
  const int64_t chains = CombineIsSlow(*n_->combiner, warp_known) ? std::min<int64_t>(4, warps) : 1;
  std::vector<Tuple> level;
  std::vector<int64_t> begin, end;
  for (int64_t j = 0; j < chains; ++j) {
    begin.push_back(j * warps / chains);
    end.push_back((j + 1) * warps / chains);
    Tuple t;
    t.known = warp_known;
    for (size_t c = 0; c < k; ++c) {
      t.regs.push_back(Register(absl::StrCat("tessel_p", j, "_", c), type_));
      if (t.known[c]) continue;
      out->Alloc(t.regs.back());
      out->Add(Write(t.regs.back(), {}, entry(c, begin[j])));
    }
    level.push_back(std::move(t));
  }
  for (int64_t i = 1; i < warps; ++i) {
    for (int64_t j = 0; j < chains; ++j) {
      if (begin[j] + i >= end[j]) continue;
      Exprs other;
      for (size_t c = 0; c < k; ++c) {
        other.push_back(warp_known[c] ? nullptr : entry(c, begin[j] + i));
      }
      CombineInto(out, &level[j], other, warp_known);
    }
  }
  while (level.size() > 1) {
    std::vector<Tuple> next;
    for (size_t i = 0; i + 1 < level.size(); i += 2) {
      Exprs other;
      for (size_t c = 0; c < k; ++c) {
        other.push_back(level[i + 1].known[c] ? nullptr : Read(level[i + 1].regs[c]));
      }
      CombineInto(out, &level[i], other, level[i + 1].known);
      next.push_back(std::move(level[i]));
    }
    if (level.size() % 2 == 1) next.push_back(std::move(level.back()));
    level = std::move(next);
  }
  for (size_t c = 0; c < k; ++c) {
    if (!level[0].known[c]) out->Add(Write(red_.regs[c], {}, Read(level[0].regs[c])));
  }
  red_.known = level[0].known;
}

Expander::Exprs Expander::LoadRank(StmtList* out, const Expr& local, const Expr& rank) {
  const size_t k = red_.regs.size();
  BufferPtr remote = Register("tessel_remote", DType::kInt32);
  out->Alloc(remote);
  out->Add(Write(remote, {}, Call(intrinsic::kMapSharedRank, {local, rank})));
  Exprs loaded;
  for (size_t c = 0; c < k; ++c) {
    if (red_.known[c]) {
      loaded.push_back(nullptr);
      continue;
    }
    BufferPtr v = Register(k == 1 ? std::string("tessel_v") : absl::StrCat("tessel_v", c), type_);
    out->Alloc(v);
    const int64_t offset = static_cast<int64_t>(plane_of_[c]) * DTypeBytes(type_);
    out->Add(
        Write(v, {}, Call(intrinsic::kLoadSharedCluster, {Read(remote), MakeInt(offset)}, type_)));
    loaded.push_back(Read(v));
  }
  return loaded;
}

Stmt Expander::OverCluster(const AllReduceNode& n) {
  // Every thread of every CTA runs this (the values are the same in all threads of a CTA): thread
  // 0 publishes the CTA's values in its shared slots, the cluster synchronizes, every thread
  // reads the C CTAs' slots in rank order through distributed shared memory (so every CTA
  // combines the same values in the same order), and the cluster synchronizes again before a
  // slot may be rewritten or a CTA exit while others still read it. Uniform components are not
  // exchanged: the ranks are combined one by one, unrolled, each with its constants.
  const size_t k = n.values.size();
  const BufferPtr& slot = cluster_scratch_.at(type_);
  StmtList body, publish;
  for (size_t c = 0; c < k; ++c) {
    if (!red_.known[c]) {
      publish.Add(Write(slot, {Int(static_cast<int64_t>(plane_of_[c]))}, n.values[c]));
    }
  }
  body.Add(If(Bin(BinaryOp::kEq, LinearThreadIndex(), Int(0)), publish.Build()));
  body.Add(MakeBarrier(BarrierScope::kCluster));
  VarPtr local = MakeVar("tessel_local", DType::kInt32);
  body.Let(local, Call(intrinsic::kSharedAddress, {Load(slot, {Int(0)})}));
  if (n.combiner->op && !red_.known[0]) {
    body.Alloc(red_.regs[0]);
    VarPtr r = MakeVar("tessel_r", DType::kInt32);
    StmtList loop;
    const Exprs loaded = LoadRank(&loop, local, r);
    loop.Add(Write(red_.regs[0], {},
                   std::make_shared<SelectNode>(
                       Bin(BinaryOp::kEq, r, Int(0)), loaded[0],
                       Bin(CombineOp(*n.combiner->op), Read(red_.regs[0]), loaded[0]))));
    body.Add(MakeFor(r, Int(0), Int(n.extent), ForKind::kUnrolled, ThreadTag::kNone, loop.Build()));
  } else {
    const Exprs cta_known = red_.known;  // every CTA's uniform components alike
    for (size_t c = 0; c < k; ++c) {
      if (!red_.known[c]) body.Alloc(red_.regs[c]);
    }
    for (int64_t r = 0; r < n.extent; ++r) {
      StmtList rank;
      const Exprs loaded = LoadRank(&rank, local, Int(r));
      if (r == 0) {
        for (size_t c = 0; c < k; ++c) {
          if (!red_.known[c]) rank.Add(Write(red_.regs[c], {}, loaded[c]));
        }
      } else {
        CombineInto(&rank, &red_, loaded, cta_known);
      }
      body.Add(MakeScope("", rank.Build()));
    }
  }
  body.Add(MakeBarrier(BarrierScope::kCluster));
  StoreResults(&body);
  return MakeScope(absl::StrCat("allreduce_", n.combiner->name, " over cluster.x (", n.extent,
                                " CTAs, distributed shared memory)"),
                   body.Build(), origin_);
}

class AllReduceLowerer final : public StmtMutator {
 public:
  explicit AllReduceLowerer(Expander* e) : expander_(e) {}
  Stmt VisitAllReduce(const AllReduceNode&, const Stmt& self) override {
    return expander_->Expand(self);
  }

 private:
  Expander* expander_;
};

}  // namespace

absl::Status LowerKernelAllReduces(Kernel* k, bool int64_indices) {
  // Check every all-reduce, and size the scratch: per compute type, the most entries of a block
  // reduction and the most components of a cluster reduction.
  absl::Status st;
  std::map<DType, int64_t, ByScratchOrder> red_entries, cluster_entries;
  WalkStmt(k->body, [&](const Stmt& s) {
    const auto* r = As<AllReduceNode>(s);
    if (r == nullptr || !st.ok()) return;
    st = CheckAllReduce(*k, *r, int64_indices);
    const DType type = ComputeDType(r->values[0]->dtype, int64_indices);
    if (r->thread == ThreadTag::kClusterX) {
      cluster_entries[type] =
          std::max(cluster_entries[type], static_cast<int64_t>(r->values.size()));
    } else if (const int64_t entries = ScratchEntries(*r, k->launch); entries > 0) {
      red_entries[type] = std::max(red_entries[type], entries);
    }
  });
  if (!st.ok()) return st;
  k->scratch.clear();
  std::map<DType, BufferPtr> red, cluster;
  auto add = [&](SharedSlot::Kind kind, DType type, int64_t entries, const char* stem) {
    SharedSlot slot;
    slot.kind = kind;
    slot.dtype = type;
    slot.elements = entries;
    slot.bytes = entries * DTypeBytes(type);
    slot.buffer = MakeBuffer(absl::StrCat("tessel_", stem, DTypeName(type)), type, {entries},
                             MemScope::kShared);
    k->scratch.push_back(slot);
    return slot.buffer;
  };
  for (const auto& [type, entries] : red_entries) {
    red[type] = add(SharedSlot::Kind::kReduceScratch, type, entries, "red_");
  }
  for (const auto& [type, entries] : cluster_entries) {
    cluster[type] = add(SharedSlot::Kind::kClusterScratch, type, entries, "cluster_red_");
  }
  Expander expander(*k, int64_indices, std::move(red), std::move(cluster));
  k->body = AllReduceLowerer(&expander).Visit(k->body);
  return absl::OkStatus();
}

absl::Status LowerAllReduces(LoweringState* state) {
  if (!state->target.is_cuda()) return absl::OkStatus();
  for (Kernel& k : state->program.kernels) {
    if (absl::Status st = LowerKernelAllReduces(&k, state->program.needs_int64_indices); !st.ok()) {
      return st;
    }
  }
  return absl::OkStatus();
}

}  // namespace tessel::schedules
