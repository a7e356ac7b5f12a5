// inject_software_pipeline: a loop annotated "software_pipeline" = S (S >= 2) whose body fetches
// shared buffers and then computes on them becomes an S-stage pipeline. A loop whose body
// allocates registers (tensor-core fragments) and loads them before computing becomes the same
// pipeline in registers: iteration t loads the operands of t + S - 1, then computes on t's, with
// no barrier and no asynchronous copy.
//
// The loop's body as build_nests makes it: [barrier] fetch... barrier compute..., the fetches
// being the nests that write shared buffers allocated in the body. Each such buffer gets S slots
// (a leading axis); iteration t fetches into slot t % S and computes on slot t % S. A fetch whose
// innermost loop is a vectorized copy of 4, 8 or 16 contiguous bytes from global memory becomes
// one cp.async (tessel_cp_async_<bytes>, zero-filled where the copy's guard or padding select is
// false); others stay synchronous stores. The result:
//
//   for s < D: fetch(s) (when s < E); commit
//   for t < E:
//     wait until at most D - 1 groups are in flight; [fence.proxy.async: compute runs wgmma]
//     barrier
//     fetch(t + D) (when t + D < E: the copies' predicate, not a branch); commit
//     compute(t)
//   wait for every group
//
// D, the distance fetched ahead, is S - 1; S - 2 where compute(t) runs wgmma and S >= 3: its
// wgmma then stay in flight across the barrier (wait_group 1 instead of 0), and the slot fetched
// into is that of t - 2.
//
// Where compute(t) runs a loop annotated pipeline_fetch_spread (the k steps over the tensor-core
// fragments), fetch(t + S - 1) is taken apart into its copies and spread over that loop's
// iterations, the commit following compute(t). Issued in one burst after the barrier, the copies'
// address arithmetic and register hazards stall every warp at the same moment while the math
// pipes idle; spread, they overlap the math (matmul 4096^3 f16 on an H100: 1.13x faster).
// Whether it pays depends on the kernel, so it is the schedule's decision.
//
// One barrier an iteration: the fetch of t + S - 1 overwrites the slot computed on at t - 1, which
// every thread has left once it passes the barrier at t.

#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "absl/strings/str_cat.h"
#include "schedules/ir/affine.h"
#include "schedules/ir/expr_functor.h"
#include "schedules/ir/stmt_analysis.h"
#include "schedules/ir/stmt_functor.h"
#include "schedules/ir/substitute.h"
#include "schedules/ir/tensor_intrin.h"
#include "schedules/lower/passes.h"

namespace tessel::schedules {

namespace {

int64_t PipelineStages(const ForNode& f) { return SoftwarePipelineStages(f.annotations); }

// The waits that end each run of wgmma (lower_tensor_intrinsics: all groups) leave `groups` in
// flight instead.
class WgmmaWaitRewriter : public StmtMutator {
 public:
  explicit WgmmaWaitRewriter(int64_t groups) : groups_(groups) {}

 protected:
  Stmt VisitEvaluate(const EvaluateNode& n, const Stmt& self) override {
    const auto* c = As<CallNode>(n.value);
    if (!c || WgmmaWaitGroups(c->name) != 0) return self;
    return TensorCallStmt(WgmmaWaitCall(groups_));
  }

 private:
  int64_t groups_;
};

// Accesses of the multi-buffered buffers get the slot index first.
class SlotRewriter : public StmtMutator {
 public:
  SlotRewriter(const std::unordered_map<const Buffer*, BufferPtr>& slotted, Expr slot)
      : slotted_(slotted), slot_(std::move(slot)), exprs_(*this) {}

  std::vector<Expr> Indices(const std::vector<Expr>& idx) const {
    std::vector<Expr> out = {slot_};
    out.insert(out.end(), idx.begin(), idx.end());
    return out;
  }
  BufferPtr Slotted(const Buffer* b) const {
    auto it = slotted_.find(b);
    return it == slotted_.end() ? nullptr : it->second;
  }

 protected:
  Expr VisitExpr(const Expr& e) override { return exprs_.Visit(e); }
  Stmt VisitStore(const StoreNode& s, const Stmt& self) override {
    Stmt out = StmtMutator::VisitStore(s, self);
    BufferPtr b = Slotted(s.buffer.get());
    if (!b) return out;
    const auto* st = As<StoreNode>(out);
    return MakeStore(b, Indices(st->indices), st->value);
  }

 private:
  class Exprs : public ExprMutator {
   public:
    explicit Exprs(SlotRewriter& r) : r_(r) {}
    Expr VisitLoad(const LoadNode& l, const Expr& self) override {
      Expr e = ExprMutator::VisitLoad(l, self);
      BufferPtr b = r_.Slotted(l.buffer.get());
      if (!b) return e;
      return MakeLoad(b, r_.Indices(As<LoadNode>(e)->indices));
    }

   private:
    SlotRewriter& r_;
  };
  const std::unordered_map<const Buffer*, BufferPtr>& slotted_;
  Expr slot_;
  Exprs exprs_;
};

// `cond` as a condition of the whole vector of `lanes` lanes of `v`, or null when it may differ
// between them: each conjunct is free of v, or is `x < c` with x = v + terms that are all
// multiples of `lanes`, c too (true for lane 0 exactly when for every lane).
Expr UniformOverLanes(const Expr& cond, const VarNode* v, int64_t lanes) {
  if (!UsesVar(cond, v)) return cond;
  const auto* b = As<BinaryNode>(cond);
  if (b && b->op == BinaryOp::kAnd) {
    Expr x = UniformOverLanes(b->a, v, lanes), y = UniformOverLanes(b->b, v, lanes);
    return x && y ? MakeAnd(x, y) : nullptr;
  }
  int64_t coeff = 0, bound = 0;
  AffineForm rest;
  if (!b || b->op != BinaryOp::kLt || !IsConstInt(b->b, &bound) || bound % lanes != 0 ||
      !SplitAffine(b->a, v, &coeff, &rest) || coeff != 1 || !AllMultiplesOf(rest, lanes)) {
    return nullptr;
  }
  return Substitute(cond, {{v, MakeInt(0, v->dtype)}});
}

// The copy a vectorized fetch loop does, as one cp.async where it fits.
class AsyncCopies : public StmtMutator {
 protected:
  Stmt VisitFor(const ForNode& f, const Stmt& self) override {
    if (f.kind != ForKind::kVectorized) return StmtMutator::VisitFor(f, self);
    Stmt copy = AsyncCopy(f);
    return copy ? copy : self;
  }

 private:
  static Stmt AsyncCopy(const ForNode& f) {
    int64_t lanes = 0;
    if (!IsConstInt(f.extent, &lanes)) return nullptr;
    // A guard skips the copy (its destination may lie outside the buffer); a padding select
    // copies zeros instead (cp.async's zero fill: the destination is in the buffer, the source
    // is not read).
    Stmt body = f.body;
    Expr guard, valid;
    if (const auto* i = As<IfThenElseNode>(body); i && !i->else_case) {
      guard = UniformOverLanes(i->cond, f.var.get(), lanes);
      if (!guard) return nullptr;
      body = i->then_case;
    }
    const auto* st = As<StoreNode>(body);
    if (!st || st->buffer->scope != MemScope::kShared) return nullptr;
    Expr value = st->value;
    // Padding: zeros where the input is not (a tile past the extent, a padded input's border,
    // or both).
    while (const auto* sel = As<SelectNode>(value)) {
      Expr cond = UniformOverLanes(sel->cond, f.var.get(), lanes);
      if (!cond || !IsImmediate(sel->false_value)) return nullptr;
      int64_t zero = 1;
      const auto* fz = As<FloatImmNode>(sel->false_value);
      if (!(fz && fz->value == 0.0) && !(IsConstInt(sel->false_value, &zero) && zero == 0)) {
        return nullptr;
      }
      valid = MakeAnd(valid, cond);
      value = sel->true_value;
    }
    const auto* src = As<LoadNode>(value);
    if (!src || src->buffer->scope != MemScope::kGlobal ||
        src->buffer->dtype != st->buffer->dtype) {
      return nullptr;
    }
    const int64_t bytes = lanes * DTypeBytes(st->buffer->dtype);
    if (bytes != 4 && bytes != 8 && bytes != 16) return nullptr;
    // Both sides contiguous in the lane and aligned to the copy's size.
    for (const Expr& flat :
         {FlatIndex(*st->buffer, st->indices), FlatIndex(*src->buffer, src->indices)}) {
      int64_t coeff = 0;
      AffineForm rest;
      if (!SplitAffine(flat, f.var.get(), &coeff, &rest) || coeff != 1 ||
          !AllMultiplesOf(rest, lanes)) {
        return nullptr;
      }
    }
    std::unordered_map<const VarNode*, Expr> zero = {{f.var.get(), MakeInt(0, f.var->dtype)}};
    std::vector<Expr> dst_idx, src_idx;
    for (const Expr& e : st->indices) dst_idx.push_back(Substitute(e, zero));
    for (const Expr& e : src->indices) src_idx.push_back(Substitute(e, zero));
    Stmt copy =
        MakeEvaluate(MakeCall(CpAsyncCall(bytes),
                              {MakeLoad(st->buffer, dst_idx), MakeLoad(src->buffer, src_idx),
                               valid ? valid : MakeBool(true)},
                              DType::kInt32));
    return guard ? MakeIf(guard, copy) : copy;
  }
};

// A later iteration's fetch under `cond`, without a branch where that pays: every asynchronous
// copy gets `cond` as its predicate (a copy whose predicate is false reads nothing and zero-fills
// its destination, a slot no later iteration reads). The fetch then stays straight-line code that
// the instruction scheduler interleaves with the math; behind a branch, the copies and their
// address arithmetic sat in a block of their own after the barrier, every warp's tensor pipe idle
// meanwhile (H100, 8 tensor-core samples each, same traces: matmul 4096^3 f16 and
// matmul_bias_gelu 2048 x 8192 x 2048 up to 1.15x and 1.25x faster, none more than 2.4% slower).
// A fetch with anything else keeps the branch: a synchronous store, or a copy that has a predicate
// of its own (a padded border: the implicit-GEMM convolutions measured 0.88-1.04x predicated).
class PredicateCopies : public StmtMutator {
 public:
  explicit PredicateCopies(Expr cond) : cond_(std::move(cond)) {}
  bool only_copies() const { return only_copies_; }

 protected:
  Stmt VisitEvaluate(const EvaluateNode& n, const Stmt& self) override {
    const auto* call = As<CallNode>(n.value);
    const auto* always = call && call->args.size() == 3 ? As<IntImmNode>(call->args[2]) : nullptr;
    if (!call || CpAsyncCallBytes(call->name) <= 0 || always == nullptr || always->value != 1) {
      only_copies_ = false;
      return self;
    }
    std::vector<Expr> args = call->args;
    args[2] = MakeAnd(args[2], cond_);
    return MakeEvaluate(MakeCall(call->name, std::move(args), call->dtype));
  }
  Stmt VisitStore(const StoreNode&, const Stmt& self) override { return Other(self); }
  Stmt VisitBarrier(const BarrierNode&, const Stmt& self) override { return Other(self); }
  Stmt VisitAllReduce(const AllReduceNode&, const Stmt& self) override { return Other(self); }

 private:
  Stmt Other(const Stmt& self) {
    only_copies_ = false;
    return self;
  }

  Expr cond_;
  bool only_copies_ = true;
};

Stmt FetchWhen(const Expr& cond, const Stmt& fetch) {
  PredicateCopies predicate(cond);
  Stmt predicated = predicate.Visit(fetch);
  return predicate.only_copies() ? predicated : MakeIf(cond, fetch);
}

// The fetch statements as units of issue: an unrolled or serial loop of constant extent around
// copies is taken apart into its iterations (the code generator would unroll it anyway), any
// other statement is one unit.
std::vector<Stmt> FetchUnits(const Stmt& fetch) {
  std::vector<Stmt> units;
  std::vector<Stmt> stmts = {fetch};
  if (const auto* seq = As<SeqNode>(fetch)) stmts = seq->stmts;
  for (const Stmt& s : stmts) {
    const auto* f = As<ForNode>(s);
    int64_t extent = 0, min = 0;
    if (f && (f->kind == ForKind::kUnrolled || f->kind == ForKind::kSerial) &&
        IsConstInt(f->extent, &extent) && IsConstInt(f->min, &min) && extent <= 64) {
      for (int64_t i = 0; i < extent; ++i) {
        units.push_back(Substitute(f->body, {{f->var.get(), MakeInt(min + i, f->var->dtype)}}));
      }
    } else {
      units.push_back(s);
    }
  }
  return units;
}

// The loop the next stage's copies are spread over: the loop of the computation annotated
// pipeline_fetch_spread, reached through allocations and sequences only (every thread runs it,
// the same number of times), when its extent is a constant >= 2; else none.
const ForNode* SpreadLoop(const Stmt& s) {
  if (const auto* f = As<ForNode>(s)) {
    int64_t extent = 0;
    return PipelineFetchSpread(f->annotations) > 0 && IsConstInt(f->extent, &extent) && extent >= 2
               ? f
               : nullptr;
  }
  if (const auto* a = As<AllocateNode>(s)) return SpreadLoop(a->body);
  if (const auto* seq = As<SeqNode>(s)) {
    for (const Stmt& x : seq->stmts) {
      if (const ForNode* f = SpreadLoop(x)) return f;
    }
  }
  return nullptr;
}

// Spreads `units` over the iterations of `loop` inside `s`: iteration j of its E issues units
// [j U / E, (j + 1) U / E), each under `guard`, before the iteration's own work.
class Interleaver : public StmtMutator {
 public:
  Interleaver(const ForNode* loop, std::vector<Stmt> units, Expr guard)
      : loop_(loop), units_(std::move(units)), guard_(std::move(guard)) {}

 protected:
  Stmt VisitFor(const ForNode& f, const Stmt& self) override {
    if (&f != loop_) return StmtMutator::VisitFor(f, self);
    int64_t extent = 0;
    IsConstInt(f.extent, &extent);
    const int64_t n = static_cast<int64_t>(units_.size());
    std::vector<Stmt> body;
    for (int64_t j = 0; j < extent; ++j) {
      std::vector<Stmt> part(units_.begin() + j * n / extent,
                             units_.begin() + (j + 1) * n / extent);
      if (part.empty()) continue;
      body.push_back(MakeIf(Expr(f.var) == j, FetchWhen(guard_, MakeSeq(part))));
    }
    body.push_back(f.body);
    return MakeFor(f.var, f.min, f.extent, f.kind, f.thread, MakeSeq(body), f.annotations);
  }

 private:
  const ForNode* loop_;
  std::vector<Stmt> units_;
  Expr guard_;
};

class Pipeliner : public StmtMutator {
 public:
  absl::Status status() const { return status_; }

 protected:
  Stmt VisitFor(const ForNode& f, const Stmt& self) override {
    Stmt out = StmtMutator::VisitFor(f, self);
    const int64_t stages = PipelineStages(f);
    if (stages < 2 || !status_.ok()) return out;
    return Pipeline(*As<ForNode>(out), stages);
  }

 private:
  Stmt Fail(const ForNode& f, const std::string& why) {
    if (status_.ok()) {
      status_ = absl::FailedPreconditionError(absl::StrCat(
          "loop ", f.var->name, " is annotated software_pipeline but ", why,
          "; pipeline a loop whose body fetches shared memory, waits at a barrier and computes"));
    }
    return MakeSeq({});
  }

  Stmt Pipeline(const ForNode& f, int64_t stages) {
    int64_t extent = 0;
    if (!IsConstInt(f.extent, &extent) || !IsConstInt(f.min) || As<IntImmNode>(f.min)->value != 0) {
      return Fail(f, "its extent is not a constant");
    }
    // The buffers allocated in the body (all shared, or all registers), and the body inside
    // their allocations.
    std::vector<BufferPtr> shared;
    Stmt body = f.body;
    while (const auto* a = As<AllocateNode>(body)) {
      if (!shared.empty() &&
          (a->buffer->scope == MemScope::kShared) != (shared[0]->scope == MemScope::kShared)) {
        break;
      }
      if (a->buffer->scope != MemScope::kShared && a->buffer->scope != MemScope::kLocal) break;
      shared.push_back(a->buffer);
      body = a->body;
    }
    const auto* seq = As<SeqNode>(body);
    if (shared.empty() || !seq) return Fail(f, "its body allocates no shared or local buffer");
    const bool registers = shared[0]->scope == MemScope::kLocal;
    std::unordered_set<const Buffer*> shared_set;
    for (const BufferPtr& b : shared) shared_set.insert(b.get());
    size_t i = 0;
    if (As<BarrierNode>(seq->stmts[0])) ++i;
    std::vector<Stmt> fetches;
    for (; i < seq->stmts.size() && !As<BarrierNode>(seq->stmts[i]); ++i) {
      std::unordered_set<const Buffer*> written;
      CollectWrittenBuffers(seq->stmts[i], &written);
      bool fetch = !written.empty();
      for (const Buffer* w : written) fetch &= shared_set.count(w) > 0;
      if (!fetch && registers) break;  // register fetches end where the computation starts
      if (!fetch) return Fail(f, "its fetches also write other buffers");
      fetches.push_back(seq->stmts[i]);
    }
    if (fetches.empty() || (!registers && i == seq->stmts.size())) {
      return Fail(f, "its body does not fetch shared memory before a barrier");
    }
    if (registers) --i;  // no barrier to skip: the computation starts at i
    std::vector<Stmt> compute(seq->stmts.begin() + i + 1, seq->stmts.end());
    // S slots a buffer.
    std::unordered_map<const Buffer*, BufferPtr> slotted;
    std::vector<BufferPtr> allocs;
    for (const BufferPtr& b : shared) {
      std::vector<int64_t> shape = {stages};
      shape.insert(shape.end(), b->shape.begin(), b->shape.end());
      // A swizzled buffer's slots are whole atom layouts, one after the other (compact).
      std::vector<int64_t> strides;
      if (b->swizzle_bytes == 0) {
        strides = {b->AllocatedElements()};
        for (int64_t s : b->Strides()) strides.push_back(s);
      }
      BufferPtr nb = Reshaped(*b, shape, strides);
      slotted[b.get()] = nb;
      allocs.push_back(nb);
    }
    const VarNode* t = f.var.get();
    auto fetch_at = [&](const Expr& iter) {
      Stmt s = Substitute(MakeSeq(fetches), {{t, iter}});
      SlotRewriter rw(slotted, iter % stages);
      return registers ? rw.Visit(s) : AsyncCopies().Visit(rw.Visit(s));
    };
    SlotRewriter rw(slotted, Expr(f.var) % stages);
    Stmt computed = rw.Visit(MakeSeq(compute));
    // wgmma runs asynchronously: with 3 or more stages, each iteration leaves its own group in
    // flight (waits until at most 1 is) and fetches one stage less far ahead, so the slot it
    // overwrites is that of t - 2, whose wgmma every warpgroup finished before the barrier.
    const bool wgmma = !registers && CallsWgmma(computed);
    const int64_t in_flight = wgmma && stages >= 3 ? 1 : 0;
    const int64_t distance = stages - 1 - in_flight;
    if (in_flight > 0) computed = WgmmaWaitRewriter(in_flight).Visit(computed);
    // Registers: the next iterations' operands are loaded before this one's computation, so
    // their latency hides behind it; no copy is asynchronous, so nothing waits.
    std::vector<Stmt> prologue;
    for (int64_t s = 0; s < distance; ++s) {
      Expr iter = MakeInt(s, t->dtype);
      prologue.push_back(MakeIf(iter < extent, fetch_at(iter)));
      if (!registers) prologue.push_back(TensorCallStmt(kCallCpAsyncCommit));
    }
    Expr ahead = Expr(f.var) + distance;
    std::vector<Stmt> loop_body;
    if (!registers) {
      loop_body = {TensorCallStmt(CpAsyncWaitCall(distance - 1))};
      // The tensor cores read wgmma's operands through the async proxy: each thread orders its
      // copies' writes before them ahead of the barrier.
      if (wgmma) loop_body.push_back(TensorCallStmt(kCallFenceProxyAsync));
      loop_body.push_back(MakeBarrier());
    }
    const ForNode* spread = registers ? nullptr : SpreadLoop(computed);
    if (spread) {
      // The copies of t + S - 1 issue a few at a time between the steps of the computation on
      // t, so their address arithmetic and issue overlap the math instead of stalling every warp
      // at once after the barrier; one commit after the computation closes the group.
      loop_body.push_back(
          Interleaver(spread, FetchUnits(fetch_at(ahead)), ahead < extent).Visit(computed));
      loop_body.push_back(TensorCallStmt(kCallCpAsyncCommit));
    } else {
      loop_body.push_back(registers ? MakeIf(ahead < extent, fetch_at(ahead))
                                    : FetchWhen(ahead < extent, fetch_at(ahead)));
      if (!registers) loop_body.push_back(TensorCallStmt(kCallCpAsyncCommit));
      loop_body.push_back(computed);
    }
    Stmt loop =
        MakeFor(f.var, f.min, f.extent, f.kind, f.thread, MakeSeq(loop_body), f.annotations);
    Stmt out = MakeSeq({MakeSeq(prologue), loop});
    if (!registers) out = MakeSeq({out, TensorCallStmt(CpAsyncWaitCall(0))});
    if (in_flight > 0) out = MakeSeq({out, TensorCallStmt(WgmmaWaitCall(0))});
    for (auto it = allocs.rbegin(); it != allocs.rend(); ++it) out = MakeAllocate(*it, out);
    return out;
  }

  absl::Status status_;
};

}  // namespace

absl::Status InjectSoftwarePipeline(LoweringState* state) {
  for (Kernel& k : state->program.kernels) {
    bool annotated = false;
    WalkStmt(k.body, [&](const Stmt& s) {
      if (const auto* f = As<ForNode>(s)) annotated |= PipelineStages(*f) >= 2;
    });
    if (!annotated) continue;
    if (!state->target.is_cuda()) continue;  // the host runs the loop as it is
    Pipeliner p;
    Stmt body = p.Visit(k.body);
    if (!p.status().ok()) return p.status();
    k.body = state->analyzer.Simplify(body);
  }
  return absl::OkStatus();
}

}  // namespace tessel::schedules
