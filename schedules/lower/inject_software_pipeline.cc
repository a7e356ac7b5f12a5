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
//
// Fragments across the stages (S >= 3, kPipelineFragmentsAcross): where compute(t) runs a
// register pipeline of two slots over E (even) steps that every thread runs (the tensor-core
// fragments loaded from the shared slot, reached through allocations and sequences only), its last
// step waits and passes the barrier instead, then loads the first fragments of t + 1 before its
// own math:
//
//   for s < D: fetch(s); commit
//   wait until at most D - 1 groups are in flight; barrier; fragments(t = 0, step 0)
//   for t < E: fetch(t + D); commit        (spread: over steps 0 .. E - 2, the commit below)
//     for j < E: [j = E - 1: (commit;) wait (D - 1); barrier; fragments(t + 1, step 0)]
//                fragments(t, j + 1) (j + 1 < E); math(t, j)
//
// so the math never waits for the fragments at a stage's start (CUTLASS's multistage main loop).
// The barrier comes after every thread's last read of slot t % S (step E - 2 loaded it), so the
// copies of the next iteration may overwrite it; the fragments' registers live across the loop.
// On an H100 (same traces, mma.sync, 3 or 4 stages) matmul 4096^3 f16's 128 x 256 and 256 x 128
// tiles ran 1.07-1.21x faster; of 16 sampled traces of four families, 7 ran 1.06-2.57x faster and
// 9 ran 0.89-0.98x: whether it pays is the schedule's decision.
//
// Bulk tensor copies (sm_90+): a fetch nest annotated bulk_copy (tensor_intrin.h, kBulkCopy) is a
// box of a global buffer copied whole into a swizzled shared buffer. It becomes one
// cp.async.bulk.tensor per swizzle atom column (tessel_tma_load_<rank>d), issued by thread 0
// through a tensor map the kernel takes as a parameter (LaunchConfig::tensor_maps), completing on
// the slot's mbarrier; the copy engine fills in zeros past the buffer's extents, so a padded
// tile's zero fill comes for free. Each slot s has a "full" mbarrier of one arrival: the
// producer arrives with the stage's bytes (expect-tx) before issuing its copies, and every thread
// waits for the phase of iteration t (parity t / S % 2) where it would wait for its cp.async
// groups. How a slot comes back to the producer is the loop's kPipelineProducer (tensor_intrin.h):
// through the barrier every thread passes at each stage, as above (0, also where some fetch is
// not a bulk copy); or, where every fetch is one, through an "empty" mbarrier a slot on which each
// thread arrives once done reading it, with no barrier in the loop, the copies issued by thread 0
// (1) or by a plane of producer warps of their own (2; see BulkPipeline). The mbarriers are
// initialized by thread 0 between two barriers before the prologue.
//
// Threads taking turns (kPipelineTurns on a thread loop around the pipeline, e.g. the z loop of
// two computing warpgroups, each with its own tile): the plane fetches turn z's stages after turn
// z - 1's into the same slots (the pipeline's steps counted over the turns as over the rounds of
// a persistent block), and turn u's threads start once turn u - 1's have issued their last step:
//
//   [producer]  for round: for z < Z: for t < E: step = (round Z + z) E + t, as above
//   [turn z]    for round: u = round Z + z; (u >= 1: wait turn[(u - 1) % Z], phase (u - 1) / Z)
//                          for t < E: ...as above; arrive on turn[u % Z]; finish the last step
//
// so one warpgroup's epilogue runs while the other's main loop has the tensor cores. The order
// also keeps the parity waits sound: without it, a turn could reach a slot one lap before the
// producer has refilled it, whose phase has the same parity.

#include <algorithm>
#include <array>
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
#include "schedules/ir/thread_intrinsics.h"
#include "schedules/lower/passes.h"
#include "schedules/util/status_macros.h"

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

// The copies of a fetch as cp.async where they fit: a vectorized loop's copy as one, and a lone
// element's copy (a fetch one element a thread, e.g. into a transposed copy) as one of its bytes.
class AsyncCopies : public StmtMutator {
 protected:
  Stmt VisitFor(const ForNode& f, const Stmt& self) override {
    if (f.kind != ForKind::kVectorized) return StmtMutator::VisitFor(f, self);
    int64_t lanes = 0;
    if (!IsConstInt(f.extent, &lanes)) return self;
    Stmt copy = AsyncCopy(f.body, f.var.get(), lanes);
    return copy ? copy : self;
  }
  Stmt VisitStore(const StoreNode& n, const Stmt& self) override {
    Stmt copy = AsyncCopy(self, nullptr, 1);
    return copy ? copy : self;
  }

 private:
  // `body` (a store, or a store under a guard) over the `lanes` lanes of `v` (null: one element)
  // as one cp.async, or null.
  static Stmt AsyncCopy(const Stmt& loop_body, const VarNode* v, int64_t lanes) {
    auto uniform = [&](const Expr& cond) { return v ? UniformOverLanes(cond, v, lanes) : cond; };
    // A guard skips the copy (its destination may lie outside the buffer); a padding select
    // copies zeros instead (cp.async's zero fill: the destination is in the buffer, the source
    // is not read).
    Stmt body = loop_body;
    Expr guard, valid;
    if (const auto* i = As<IfThenElseNode>(body); i && !i->else_case) {
      guard = uniform(i->cond);
      if (!guard) return nullptr;
      body = i->then_case;
    }
    const auto* st = As<StoreNode>(body);
    if (!st || st->buffer->scope != MemScope::kShared) return nullptr;
    Expr value = st->value;
    // Padding: zeros where the input is not (a tile past the extent, a padded input's border,
    // or both).
    while (const auto* sel = As<SelectNode>(value)) {
      Expr cond = uniform(sel->cond);
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
    std::vector<Expr> dst_idx = st->indices, src_idx = src->indices;
    if (v) {
      // Both sides contiguous in the lane and aligned to the copy's size.
      for (const Expr& flat :
           {FlatIndex(*st->buffer, st->indices), FlatIndex(*src->buffer, src->indices)}) {
        int64_t coeff = 0;
        AffineForm rest;
        if (!SplitAffine(flat, v, &coeff, &rest) || coeff != 1 || !AllMultiplesOf(rest, lanes)) {
          return nullptr;
        }
      }
      std::unordered_map<const VarNode*, Expr> zero = {{v, MakeInt(0, v->dtype)}};
      for (Expr& e : dst_idx) e = Substitute(e, zero);
      for (Expr& e : src_idx) e = Substitute(e, zero);
    }
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

// Spreads `units` over the first `spread` iterations of `loop` inside `s` (0: all E of them):
// iteration j issues units [j U / spread, (j + 1) U / spread), each under `guard`, before the
// iteration's own work.
class Interleaver : public StmtMutator {
 public:
  Interleaver(const ForNode* loop, std::vector<Stmt> units, Expr guard, int64_t spread = 0)
      : loop_(loop), units_(std::move(units)), guard_(std::move(guard)), spread_(spread) {}

 protected:
  Stmt VisitFor(const ForNode& f, const Stmt& self) override {
    if (&f != loop_) return StmtMutator::VisitFor(f, self);
    int64_t extent = 0;
    IsConstInt(f.extent, &extent);
    if (spread_ > 0) extent = std::min(extent, spread_);
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
  int64_t spread_;
};

// A register pipeline's first fetch where the shared pipeline around it may load it across the
// stages (see the top of the file): a loop of extent 1 with this annotation around it.
constexpr char kCrossStagePrologue[] = "cross_stage_prologue";

// The marked loop `s`, or null.
const ForNode* CrossStagePrologue(const Stmt& s) {
  const auto* f = As<ForNode>(s);
  if (!f) return nullptr;
  for (const auto& [key, value] : f->annotations) {
    if (key == kCrossStagePrologue) return f;
  }
  return nullptr;
}

// The first fetch inside the mark (its one iteration).
Stmt MarkedFetch(const ForNode& mark) {
  return Substitute(mark.body, {{mark.var.get(), MakeInt(0, mark.var->dtype)}});
}

// The first fetches left where they were (the loop of extent 1 around each taken away).
class CrossStagePrologueUnwrapper : public StmtMutator {
 protected:
  Stmt VisitFor(const ForNode& f, const Stmt& self) override {
    Stmt out = StmtMutator::VisitFor(f, self);
    const ForNode* mark = CrossStagePrologue(out);
    return mark ? MarkedFetch(*mark) : out;
  }
};

// The register pipeline whose first fetch the stages' barrier may take over: found in a shared
// pipeline's computation through allocations and sequences only (every thread runs it), its first
// fetch (the marked loop) just before it. Take() removes the fetch and the register allocations
// on the way, which then live around the shared pipeline.
class CrossStageFinder {
 public:
  const Stmt& fetch() const { return fetch_; }
  const ForNode* loop() const { return loop_; }
  const std::vector<BufferPtr>& registers() const { return registers_; }

  Stmt Take(const Stmt& s) {
    if (const auto* a = As<AllocateNode>(s)) {
      Stmt body = Take(a->body);
      if (!loop_ || a->buffer->scope == MemScope::kShared) return MakeAllocate(a->buffer, body);
      registers_.push_back(a->buffer);
      return body;
    }
    const auto* seq = As<SeqNode>(s);
    if (!seq) return s;
    std::vector<Stmt> out;
    for (size_t i = 0; i < seq->stmts.size(); ++i) {
      const Stmt& x = seq->stmts[i];
      const ForNode* mark = loop_ ? nullptr : CrossStagePrologue(x);
      if (mark && i + 1 < seq->stmts.size() && TwoSlotRegisterPipeline(seq->stmts[i + 1])) {
        fetch_ = MarkedFetch(*mark);
        loop_ = As<ForNode>(seq->stmts[i + 1]);
        continue;
      }
      out.push_back(loop_ ? x : Take(x));
    }
    return MakeSeq(out);
  }

 private:
  // Two register slots (the only ones whose step E - 1 refills the slot step 0 reads when E is
  // even) over a constant, even extent of at least 2, annotated kPipelineFragmentsAcross.
  static bool TwoSlotRegisterPipeline(const Stmt& s) {
    const auto* f = As<ForNode>(s);
    int64_t extent = 0, min = 0;
    return f && PipelineStages(*f) == 2 && PipelineFragmentsAcross(f->annotations) > 0 &&
           IsConstInt(f->extent, &extent) && IsConstInt(f->min, &min) && min == 0 && extent >= 2 &&
           extent % 2 == 0;
  }

  Stmt fetch_;
  const ForNode* loop_ = nullptr;
  std::vector<BufferPtr> registers_;
};

// Prepends `first` to the last iteration of the loop over `var` (constant extent): "if (var ==
// E - 1) first" at the start of its body.
class LastStepPrepender : public StmtMutator {
 public:
  LastStepPrepender(const VarNode* var, Stmt first) : var_(var), first_(std::move(first)) {}

 protected:
  Stmt VisitFor(const ForNode& f, const Stmt& self) override {
    if (f.var.get() != var_) return StmtMutator::VisitFor(f, self);
    int64_t extent = 0;
    IsConstInt(f.extent, &extent);
    Stmt body = MakeSeq({MakeIf(Expr(f.var) == extent - 1, first_), f.body});
    return MakeFor(f.var, f.min, f.extent, f.kind, f.thread, body, f.annotations);
  }

 private:
  const VarNode* var_;
  Stmt first_;
};

// Thread 0 of the block.
Expr FirstThread() {
  Expr out;
  for (int axis = 0; axis < 3; ++axis) out = MakeAnd(out, intrinsic::ThreadIndex(axis) == 0);
  return out;
}

// The mbarriers of a pipelined loop over `t`, one a slot: tessel_<t>_<what>[stages].
BufferPtr MbarrierBuffer(const VarNode& t, const char* what, int64_t stages) {
  return MakeBuffer(absl::StrCat("tessel_", t.name, "_", what), DType::kInt64, {stages},
                    MemScope::kShared);
}

// Waits until the phase `phase` (by its parity) of bar[slot] has completed.
Stmt MbarrierWait(const BufferPtr& bar, const Expr& slot, const Expr& phase) {
  return TensorCallStmt(kCallMbarrierWait, {MakeLoad(bar, {slot}), phase % 2});
}

// Thread 0 initializes every slot's mbarrier of each of `bars` (with its number of arrivals),
// between two barriers: once every thread has left any earlier use of them, and before any uses
// them.
Stmt MbarrierSetup(const std::vector<std::pair<BufferPtr, int64_t>>& bars, DType index) {
  std::vector<Stmt> init;
  int64_t slots = 0;
  for (const auto& bar : bars) slots = std::max(slots, bar.first->shape.at(0));
  for (int64_t s = 0; s < slots; ++s) {
    for (const auto& [bar, arrivals] : bars) {
      if (s >= bar->shape[0]) continue;
      init.push_back(TensorCallStmt(kCallMbarrierInit,
                                    {MakeLoad(bar, {MakeInt(s, index)}), MakeInt(arrivals)}));
    }
  }
  init.push_back(TensorCallStmt(kCallFenceMbarrierInit));
  return MakeSeq({MakeBarrier(), MakeIf(FirstThread(), MakeSeq(init)), MakeBarrier()});
}

// Whether `cond` is `e < bound` with e - bound the distance of `src`'s index to the end of one
// of its axes: "inside the buffer along that axis".
bool IsInsideBound(const Analyzer& an, const Expr& cond, const Buffer& src,
                   const std::vector<Expr>& src_idx) {
  const auto* b = As<BinaryNode>(cond);
  if (!b || b->op != BinaryOp::kLt) return false;
  for (size_t g = 0; g < src_idx.size(); ++g) {
    Expr diff = an.Simplify((b->a - b->b) - (src_idx[g] - src.shape[g]));
    int64_t zero = 1;
    if (IsConstInt(diff, &zero) && zero == 0) return true;
  }
  return false;
}

// Whether `e` reads threadIdx.
bool ReadsThreadIndex(const Expr& e) {
  class Finder : public ExprVisitor {
   public:
    bool found = false;
    void VisitCall(const CallNode& n, const Expr& self) override {
      found |= intrinsic::IsThreadIndex(n.name);
      ExprVisitor::VisitCall(n, self);
    }
  } finder;
  finder.Visit(e);
  return finder.found;
}

// Turns the fetch nests annotated bulk_copy into bulk tensor copies (see the top of the file),
// collected apart from the rest of the fetch: `copies` (thread 0 issues them after its arrival
// with `bytes`). Registers each copy's tensor map in `maps`.
class BulkCopies : public StmtMutator {
 public:
  // `thread_vars`: the variables of the thread-bound loops around the copies, which one thread's
  // copies must not depend on. `rank` (the loop variable bound to cluster.x, of extent `cluster`;
  // null: none): a box every CTA of the cluster copies alike is multicast instead, each CTA
  // issuing a 1 / cluster slice of its rows into them all.
  BulkCopies(const Analyzer& an, const Program& program, std::vector<TensorMapSpec>* maps,
             Expr barrier, const std::vector<const VarNode*>& thread_vars, VarPtr rank = nullptr,
             int64_t cluster = 1)
      : an_(an),
        program_(program),
        maps_(maps),
        barrier_(std::move(barrier)),
        thread_vars_(thread_vars),
        rank_(std::move(rank)),
        cluster_(cluster) {}

  const absl::Status& status() const { return status_; }
  std::vector<Stmt>& copies() { return copies_; }
  int64_t bytes() const { return bytes_; }
  // Whether some box was multicast.
  bool multicast() const { return multicast_; }

 protected:
  Stmt VisitFor(const ForNode& f, const Stmt& self) override {
    if (BulkCopy(f.annotations) == 0) return StmtMutator::VisitFor(f, self);
    if (absl::Status s = Lower(f); !s.ok()) {
      if (status_.ok()) status_ = s;
    }
    return MakeSeq({});
  }

 private:
  absl::Status Refuse(const ForNode& f, const std::string& why) const {
    return absl::FailedPreconditionError(
        absl::StrCat("loop ", f.var->name, " is annotated bulk_copy but ", why,
                     "; annotate only a copy of a box of a global buffer into a whole swizzled "
                     "shared buffer (the same axes in the same order), or fetch it with threads"));
  }

  absl::Status Lower(const ForNode& outer) {
    // The nest: loops of constant extent from 0 around one store.
    std::vector<const ForNode*> loops;
    Stmt body;
    const ForNode* f = &outer;
    while (f) {
      int64_t extent = 0, min = 0;
      if (!IsConstInt(f->extent, &extent) || !IsConstInt(f->min, &min) || min != 0 ||
          f->kind == ForKind::kThreadBinding) {
        return Refuse(outer, "its loop " + f->var->name + " is bound to threads or not constant");
      }
      loops.push_back(f);
      body = f->body;
      f = As<ForNode>(body);
    }
    const auto* st = As<StoreNode>(body);
    if (!st) return Refuse(outer, "its body is not one store (a guarded copy?)");
    const Buffer& dst = *st->buffer;
    if (dst.scope != MemScope::kShared || dst.swizzle_bytes == 0) {
      return Refuse(outer, "it stores to " + dst.name + ", not a swizzled shared buffer");
    }
    std::vector<Expr> conds;
    Expr value = st->value;
    while (const auto* sel = As<SelectNode>(value)) {
      int64_t zero = 1;
      const auto* fz = As<FloatImmNode>(sel->false_value);
      if (!(fz && fz->value == 0.0) && !(IsConstInt(sel->false_value, &zero) && zero == 0)) {
        return Refuse(outer, "it copies something other than zeros where a condition fails");
      }
      conds.push_back(sel->cond);
      value = sel->true_value;
    }
    const auto* src = As<LoadNode>(value);
    if (!src || src->buffer->scope != MemScope::kGlobal || src->buffer->dtype != dst.dtype) {
      return Refuse(outer,
                    "it does not copy a global buffer's elements of " + dst.name + "'s type");
    }
    const Buffer& g = *src->buffer;
    const int64_t eb = DTypeBytes(g.dtype);
    const size_t rank = g.shape.size();
    if (rank < 1 || rank > 5) return Refuse(outer, "its global buffer has rank outside 1..5");
    // Each loop variable indexes one axis of each side as itself (the destination) or plus an
    // offset (the source), the axes in loop order.
    std::vector<int64_t> box(rank, 1);
    std::vector<int> dst_axis, src_axis;
    for (const ForNode* l : loops) {
      int d = -1, a = -1;
      for (size_t i = 0; i < st->indices.size(); ++i) {
        if (!UsesVar(st->indices[i], l->var.get())) continue;
        const auto* v = As<VarNode>(st->indices[i]);
        if (d >= 0 || v != l->var.get()) return Refuse(outer, "its destination is not the box");
        d = static_cast<int>(i);
      }
      for (size_t i = 0; i < rank; ++i) {
        int64_t coeff = 0;
        AffineForm rest;
        if (!UsesVar(src->indices[i], l->var.get())) continue;
        if (a >= 0 || !SplitAffine(src->indices[i], l->var.get(), &coeff, &rest) || coeff != 1) {
          return Refuse(outer, "its source is not a box of " + g.name);
        }
        a = static_cast<int>(i);
      }
      if (d < 0 || a < 0 || (!dst_axis.empty() && (d <= dst_axis.back() || a <= src_axis.back()))) {
        return Refuse(outer, "it transposes or broadcasts the box");
      }
      dst_axis.push_back(d);
      src_axis.push_back(a);
      IsConstInt(l->extent, &box[a]);
      if (dst.shape[d] != box[a]) return Refuse(outer, "it fills part of " + dst.name);
    }
    for (size_t i = dst_axis.front() + 1; i < dst.shape.size(); ++i) {
      bool covered = false;
      for (int d : dst_axis) covered |= d == static_cast<int>(i);
      if (!covered && dst.shape[i] != 1) return Refuse(outer, "it fills part of " + dst.name);
    }
    // The index at the nest's origin.
    std::unordered_map<const VarNode*, Expr> origin;
    for (const ForNode* l : loops) origin[l->var.get()] = MakeInt(0, l->var->dtype);
    std::vector<Expr> dst0, src0;
    for (const Expr& e : st->indices) dst0.push_back(an_.Simplify(Substitute(e, origin)));
    for (const Expr& e : src->indices) src0.push_back(an_.Simplify(Substitute(e, origin)));
    // One thread issues the box for all: it must be the same for every thread.
    for (const std::vector<Expr>* idx : {&dst0, &src0}) {
      for (const Expr& e : *idx) {
        bool per_thread = ReadsThreadIndex(e);
        for (const VarNode* v : thread_vars_) per_thread |= UsesVar(e, v);
        if (per_thread) return Refuse(outer, "its box differs between the block's threads");
      }
    }
    // Zeros only where the source is outside its buffer, which the copy engine fills in.
    for (const Expr& c : conds) {
      std::vector<Expr> parts = {c};
      while (!parts.empty()) {
        Expr p = parts.back();
        parts.pop_back();
        if (const auto* b = As<BinaryNode>(p); b && b->op == BinaryOp::kAnd) {
          parts.push_back(b->a);
          parts.push_back(b->b);
        } else if (!IsInsideBound(an_, p, g, src->indices)) {
          return Refuse(outer, "it copies zeros inside " + g.name + " (a padded border?)");
        }
      }
    }
    // The global layout: rows 16-byte aligned, the innermost axis contiguous.
    const std::vector<int64_t> strides = g.Strides();
    if (strides.back() != 1) return Refuse(outer, g.name + "'s innermost axis is not contiguous");
    for (size_t i = 0; i + 1 < rank; ++i) {
      if (strides[i] * eb % 16 != 0) {
        return Refuse(outer, absl::StrCat(g.name, "'s axis ", i, " steps ", strides[i] * eb,
                                          " bytes, not a multiple of 16"));
      }
    }
    // One copy a swizzle atom column: the box's inner extent is one atom row, its rows a whole
    // number of swizzle periods.
    const int64_t atom = SwizzleAtomElements(dst);
    const int inner = src_axis.back();
    const int64_t columns = box[inner] / atom;
    int64_t rows = 1;
    for (size_t i = 0; i + 1 < loops.size(); ++i) rows *= box[src_axis[i]];
    if (box[inner] % atom != 0 || rows * dst.swizzle_bytes % 1024 != 0 ||
        (columns > 1 && loops.size() > 2 && rows != box[src_axis[loops.size() - 2]])) {
      return Refuse(outer, absl::StrCat("its box of ", rows, " rows of ", box[inner],
                                        " elements is no whole number of swizzle periods"));
    }
    // Multicast: a box that does not depend on the CTA's rank in its cluster, whose rows split
    // into one whole number of swizzle periods a CTA (the slices keep the swizzle's phase).
    bool shared = rank_ != nullptr && cluster_ > 1 && loops.size() >= 2 &&
                  rows == box[src_axis[loops.size() - 2]] && rows % cluster_ == 0 &&
                  rows / cluster_ * dst.swizzle_bytes % 1024 == 0;
    for (const std::vector<Expr>* idx : {&dst0, &src0}) {
      for (const Expr& e : *idx) shared = shared && !UsesVar(e, rank_.get());
    }
    const size_t row_loop = loops.size() >= 2 ? loops.size() - 2 : 0;
    const int row_dst = dst_axis[row_loop], row_src = src_axis[row_loop];
    const int64_t slice = shared ? rows / cluster_ : rows;
    std::vector<int64_t> map_box = box;
    map_box[inner] = atom;
    if (shared) map_box[row_src] = slice;
    for (int64_t e : map_box) {
      if (e > 256) return Refuse(outer, "a side of its box is over 256 elements");
    }
    const int buffer = ProgramBufferIndex(program_.buffers, &g);
    if (buffer < 0) return Refuse(outer, g.name + " is not one of the program's buffers");
    const int64_t map = TensorMapIndex(maps_, TensorMapSpec{buffer, map_box, dst.swizzle_bytes});
    for (int64_t c = 0; c < columns; ++c) {
      std::vector<Expr> at = dst0, from = src0;
      at[dst_axis.back()] = MakeInt(c * atom, at[dst_axis.back()]->dtype);
      from[inner] = an_.Simplify(from[inner] + c * atom);
      if (shared) {
        // This CTA's slice: rows [rank * slice, (rank + 1) * slice) of the box.
        const Expr offset = Expr(rank_) * slice;
        at[row_dst] = an_.Simplify(at[row_dst] + offset);
        from[row_src] = an_.Simplify(from[row_src] + offset);
      }
      std::vector<Expr> args = {MakeLoad(st->buffer, at), barrier_, MakeInt(map)};
      for (size_t i = rank; i-- > 0;) args.push_back(MakeCast(DType::kInt32, from[i]));
      if (shared) args.push_back(MakeInt((int64_t{1} << cluster_) - 1));
      copies_.push_back(TensorCallStmt(shared ? TmaMulticastCall(static_cast<int64_t>(rank))
                                              : TmaLoadCall(static_cast<int64_t>(rank)),
                                       std::move(args)));
    }
    multicast_ |= shared;
    int64_t elements = 1;
    for (int64_t e : box) elements *= e;
    bytes_ += elements * eb;
    return absl::OkStatus();
  }

  const Analyzer& an_;
  const Program& program_;
  std::vector<TensorMapSpec>* maps_;
  Expr barrier_;
  const std::vector<const VarNode*>& thread_vars_;
  VarPtr rank_;
  int64_t cluster_;
  absl::Status status_;
  std::vector<Stmt> copies_;
  int64_t bytes_ = 0;
  bool multicast_ = false;
};

// `body` without the register buffers allocated in its leading allocations (appended to
// `registers`, outermost first); the shared ones stay.
Stmt WithoutRegisterAllocations(const Stmt& body, std::vector<BufferPtr>* registers) {
  const auto* a = As<AllocateNode>(body);
  if (!a) return body;
  if (a->buffer->scope != MemScope::kShared) registers->push_back(a->buffer);
  Stmt inner = WithoutRegisterAllocations(a->body, registers);
  return a->buffer->scope == MemScope::kShared ? MakeAllocate(a->buffer, inner) : inner;
}

// Whether the computation of a pipeline step runs wgmma that may stay in flight past the step:
// not where one reads A from registers (the next step's fragments would overwrite them).
bool WgmmaMayStayInFlight(const Stmt& computed) {
  return CallsWgmma(computed) && !CallsWhere(computed, WgmmaReadsRegisters);
}

// The threads of a producer plane: one warpgroup.
constexpr int64_t kPlaneThreads = 128;

// Whether `f` is a thread loop whose threads take turns at shared memory (kPipelineTurns): two
// or more of them.
bool TakesTurns(const ForNode& f) {
  int64_t extent = 0;
  return IsThreadTag(f.thread) && PipelineTurns(f.annotations) > 0 &&
         IsConstInt(f.extent, &extent) && extent > 1;
}

class Pipeliner : public StmtMutator {
 public:
  Pipeliner(const LoweringState& state, Kernel* kernel) : state_(state), kernel_(kernel) {}
  absl::Status status() const { return status_; }

 protected:
  Stmt VisitFor(const ForNode& f, const Stmt& self) override {
    // A thread loop whose threads take turns (kPipelineTurns) counts the pipelines' runs as a
    // serial loop does: its threads' stages follow one another in the same slots.
    const bool turns = TakesTurns(f);
    const bool thread = IsThreadTag(f.thread) && !turns;
    const bool serial = f.thread == ThreadTag::kNone || turns;
    const bool cluster = f.thread == ThreadTag::kClusterX && IsConstInt(f.extent, &cluster_);
    if (thread) thread_vars_.push_back(f.var.get());
    if (serial) serial_loops_.push_back(&f);
    if (cluster) cluster_rank_ = f.var;
    // A pipeline of 3 or more stages may load its computation's register pipeline's first
    // fragments across the stages; one of 2 would then wait for the stage it just fetched.
    const bool pipelined = PipelineStages(f) >= 2;
    if (pipelined) pipelines_.push_back(PipelineStages(f) >= 3);
    Stmt out = StmtMutator::VisitFor(f, self);
    if (pipelined) pipelines_.pop_back();
    if (thread) thread_vars_.pop_back();
    if (serial) serial_loops_.pop_back();
    if (cluster) cluster_rank_ = nullptr, cluster_ = 1;
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

  // The loop around the visit whose threads take turns (kPipelineTurns), or null.
  const ForNode* TurnsLoop() const {
    for (const ForNode* l : serial_loops_) {
      if (IsThreadTag(l->thread)) return l;
    }
    return nullptr;
  }

  // Refuses pipeline `f` inside the turns loop `turns`: `why`.
  Stmt FailTurns(const ForNode& f, const ForNode& turns, const std::string& why) {
    if (status_.ok()) {
      status_ = absl::FailedPreconditionError(absl::StrCat(
          "loop ", f.var->name, " is a software pipeline inside loop ", turns.var->name,
          ", whose threads take turns at shared memory (", kPipelineTurns, "), but ", why,
          "; only a producer plane of bulk copies fetches the turns' stages one after another, "
          "so fetch with bulk_copy from a block of at most two computing warpgroups or drop ",
          kPipelineTurns));
    }
    return MakeSeq({});
  }

  Stmt Pipeline(const ForNode& f, int64_t stages) {
    // Register buffers allocated among the shared ones (fragments the computation loads from
    // them) are allocated around the pipeline instead, so the body is its shared buffers and
    // their fetch and computation.
    const auto* first = As<AllocateNode>(f.body);
    if (first && first->buffer->scope == MemScope::kShared) {
      std::vector<BufferPtr> registers;
      Stmt body = WithoutRegisterAllocations(f.body, &registers);
      if (!registers.empty()) {
        const Stmt loop = MakeFor(f.var, f.min, f.extent, f.kind, f.thread, body, f.annotations);
        Stmt out = Pipeline(*As<ForNode>(loop), stages);
        for (auto it = registers.rbegin(); it != registers.rend(); ++it) {
          out = MakeAllocate(*it, out);
        }
        return out;
      }
    }
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
    // The register pipeline whose first fragments the stages' barrier loads (see the top of the
    // file): only in the plain cp.async pipeline below, without wgmma; elsewhere the first fetch
    // stays where it was.
    // Bulk copies complete on an mbarrier a slot.
    bool bulk = false;
    for (const Stmt& x : fetches) {
      WalkStmt(x, [&](const Stmt& y) {
        if (const auto* l = As<ForNode>(y)) bulk |= BulkCopy(l->annotations) > 0;
      });
    }
    CrossStageFinder cross;
    if (!registers && stages >= 3 && !bulk && !CallsWgmma(MakeSeq(compute))) {
      Stmt taken = cross.Take(MakeSeq(compute));
      if (cross.loop()) compute = {taken};
    }
    if (!cross.loop()) {
      for (Stmt& c : compute) c = CrossStagePrologueUnwrapper().Visit(c);
    }
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
    if (bulk && !state_.target.Supports(TargetFeature::kBulkTensorCopy)) {
      return Fail(f,
                  absl::StrCat("its bulk_copy fetches need the tensor memory accelerator, which ",
                               state_.target.arch, " lacks (compile for sm_90 or sm_90a)"));
    }
    if (bulk && (PipelineProducer(f.annotations) > 0 || TurnsLoop()) && OnlyBulkCopies(fetches)) {
      return BulkPipeline(f, stages, extent, fetches, slotted, std::move(allocs), compute);
    }
    if (const ForNode* turns = TurnsLoop()) {
      return FailTurns(f, *turns, "its fetches are not all bulk copies");
    }
    BufferPtr full = bulk ? MbarrierBuffer(*t, "full", stages) : nullptr;
    bool async = false;  // some fetch issues cp.async
    auto fetch_at = [&](const Expr& iter) -> Stmt {
      Stmt s = Substitute(MakeSeq(fetches), {{t, iter}});
      SlotRewriter rw(slotted, iter % stages);
      if (registers) return rw.Visit(s);
      s = rw.Visit(s);
      std::vector<Stmt> out;
      if (bulk) out.push_back(MakeIf(FirstThread(), IssueBulk(&s, full, iter % stages)));
      s = AsyncCopies().Visit(s);
      async |= CallsCpAsync(s);
      out.push_back(s);
      return MakeSeq(out);
    };
    SlotRewriter rw(slotted, Expr(f.var) % stages);
    Stmt computed = rw.Visit(MakeSeq(compute));
    // wgmma runs asynchronously: with 3 or more stages, each iteration leaves its own group in
    // flight (waits until at most 1 is) and fetches one stage less far ahead, so the slot it
    // overwrites is that of t - 2, whose wgmma every warpgroup finished before the barrier.
    const bool wgmma = !registers && CallsWgmma(computed);
    const int64_t in_flight = wgmma && stages >= 3 && WgmmaMayStayInFlight(computed) ? 1 : 0;
    const int64_t distance = stages - 1 - in_flight;
    if (in_flight > 0) computed = WgmmaWaitRewriter(in_flight).Visit(computed);
    // Registers: the next iterations' operands are loaded before this one's computation, so
    // their latency hides behind it; no copy is asynchronous, so nothing waits.
    std::vector<Stmt> prologue;
    if (bulk) prologue = {MbarrierSetup({{full, 1}}, t->dtype)};
    for (int64_t s = 0; s < distance; ++s) {
      Expr iter = MakeInt(s, t->dtype);
      prologue.push_back(MakeIf(iter < extent, fetch_at(iter)));
      if (!registers && async) prologue.push_back(TensorCallStmt(kCallCpAsyncCommit));
    }
    if (registers && stages == 2 && PipelineFragmentsAcross(f.annotations) > 0 &&
        !pipelines_.empty() && pipelines_.back()) {
      // The shared pipeline around may load these first fragments across its stages: marked.
      prologue = {MakeFor(MakeVar(t->name + "_first", t->dtype), MakeInt(0, t->dtype),
                          MakeInt(1, t->dtype), ForKind::kSerial, ThreadTag::kNone,
                          MakeSeq(prologue), {{kCrossStagePrologue, 1}})};
    }
    if (cross.loop()) {
      // The first stage's fragments, once every thread's copies of it have landed.
      if (async) prologue.push_back(TensorCallStmt(CpAsyncWaitCall(distance - 1)));
      prologue.push_back(MakeBarrier());
      prologue.push_back(SlotRewriter(slotted, MakeInt(0, t->dtype))
                             .Visit(Substitute(cross.fetch(), {{t, MakeInt(0, t->dtype)}})));
    }
    Expr ahead = Expr(f.var) + distance;
    // Across the stages, the copies spread only over the register pipeline's steps (all but
    // the last, whose wait commits them); spread over another loop, they issue in one burst.
    const ForNode* spread = registers ? nullptr : SpreadLoop(computed);
    if (cross.loop() && spread && spread->var.get() != cross.loop()->var.get()) spread = nullptr;
    std::vector<Stmt> hook;  // the wait and barrier of the register pipeline's last step
    if (cross.loop()) {
      if (async && spread) hook.push_back(TensorCallStmt(kCallCpAsyncCommit));
      if (async) hook.push_back(TensorCallStmt(CpAsyncWaitCall(distance - 1)));
      hook.push_back(MakeBarrier());
      const Expr next = Expr(f.var) + 1;
      hook.push_back(MakeIf(
          next < extent,
          SlotRewriter(slotted, next % stages).Visit(Substitute(cross.fetch(), {{t, next}}))));
      computed = LastStepPrepender(cross.loop()->var.get(), MakeSeq(hook)).Visit(computed);
      if (spread) spread = SpreadLoop(computed);
    }
    // Built before the loop's waits: whether any fetch is a cp.async is known after it.
    Stmt ahead_fetch = fetch_at(ahead);
    if (!status_.ok()) return MakeSeq({});
    std::vector<Stmt> loop_body;
    if (cross.loop()) {
      // The wait and the barrier are in the register pipeline's last step.
    } else if (!registers) {
      if (async) loop_body.push_back(TensorCallStmt(CpAsyncWaitCall(distance - 1)));
      if (bulk) loop_body.push_back(MbarrierWait(full, Expr(f.var) % stages, Expr(f.var) / stages));
      // The tensor cores read wgmma's operands through the async proxy: each thread orders its
      // copies' writes before them ahead of the barrier (the copy engine's writes are already
      // in it).
      if (wgmma && (async || !bulk)) loop_body.push_back(TensorCallStmt(kCallFenceProxyAsync));
      loop_body.push_back(MakeBarrier());
    }
    if (spread) {
      // The copies of t + S - 1 issue a few at a time between the steps of the computation on
      // t, so their address arithmetic and issue overlap the math instead of stalling every warp
      // at once after the barrier; one commit after the computation closes the group.
      int64_t spread_steps = 0;
      if (cross.loop() && IsConstInt(spread->extent, &spread_steps)) --spread_steps;
      loop_body.push_back(Interleaver(spread, FetchUnits(ahead_fetch), ahead < extent, spread_steps)
                              .Visit(computed));
      if (async && !cross.loop()) loop_body.push_back(TensorCallStmt(kCallCpAsyncCommit));
    } else {
      loop_body.push_back(registers ? MakeIf(ahead < extent, ahead_fetch)
                                    : FetchWhen(ahead < extent, ahead_fetch));
      if (!registers && async) loop_body.push_back(TensorCallStmt(kCallCpAsyncCommit));
      loop_body.push_back(computed);
    }
    Stmt loop =
        MakeFor(f.var, f.min, f.extent, f.kind, f.thread, MakeSeq(loop_body), f.annotations);
    Stmt out = MakeSeq({MakeSeq(prologue), loop});
    if (!registers && async) out = MakeSeq({out, TensorCallStmt(CpAsyncWaitCall(0))});
    if (in_flight > 0) out = MakeSeq({out, TensorCallStmt(WgmmaWaitCall(0))});
    if (full) allocs.push_back(full);
    for (const BufferPtr& r : cross.registers()) allocs.push_back(r);
    for (auto it = allocs.rbegin(); it != allocs.rend(); ++it) out = MakeAllocate(*it, out);
    return out;
  }

  // A pipeline whose every fetch is a bulk copy (see the top of the file): slot s has a full
  // mbarrier (one arrival: the producer's, with the stage's bytes) and an empty one (an arrival
  // from each computing thread once it is done reading the slot). No barrier inside the loop:
  //
  //   [producer]  for u < E: (u >= S: wait empty[u % S], phase u / S - 1); fetch(u) into u % S
  //   [compute]   for t < E: wait full[t % S], phase t / S; compute(t);
  //                          arrive on empty[(t - F) % S] (t >= F)
  //
  // F = 1 where compute(t) runs wgmma (its own group stays in flight, the slot of t - 1 is read
  // to the end once it waits for one group), else 0. The producer is a plane of warps of its own
  // (kPipelineProducer 2) or thread 0 after its arrival at iteration t (1), refilling the slot of
  // t - 1 with t + S - 1 (the first S - 1 fetched before the loop).
  Stmt BulkPipeline(const ForNode& f, int64_t stages, int64_t extent,
                    const std::vector<Stmt>& fetches,
                    const std::unordered_map<const Buffer*, BufferPtr>& slotted,
                    std::vector<BufferPtr> allocs, const std::vector<Stmt>& compute) {
    const VarNode* t = f.var.get();
    const Expr it = Expr(f.var);
    const BufferPtr full = MbarrierBuffer(*t, "full", stages);
    const BufferPtr empty = MbarrierBuffer(*t, "empty", stages);
    // In a cluster, the boxes its CTAs copy alike are multicast (BulkCopies): a CTA's producer
    // then writes into the other CTAs' slots too, so a slot comes back only once every CTA's
    // computing threads have left it (each arrives on the empty mbarrier of every CTA). Whether
    // a box is multicast does not depend on the iteration: the first copies issued say.
    bool multicast = false;
    // The copies of iteration `iter` into the slot of pipeline step `step` (the iteration itself,
    // or counted across the enclosing loops' runs of the pipeline).
    auto issue = [&](const Expr& iter, const Expr& step) -> Stmt {
      Stmt s =
          SlotRewriter(slotted, step % stages).Visit(Substitute(MakeSeq(fetches), {{t, iter}}));
      return IssueBulk(&s, full, step % stages, &multicast);
    };
    const std::array<int64_t, 3> block = kernel_->launch.block;
    const int64_t consumers = kernel_->launch.threads_per_block();
    // How many times the enclosing loops have run the pipeline before (their iterations
    // linearized), where they all have constant extents; null where one does not.
    Expr runs = MakeInt(0, t->dtype);
    for (const ForNode* l : serial_loops_) {
      int64_t e = 0;
      if (!IsConstInt(l->extent, &e) || !IsConstInt(l->min)) {
        runs = nullptr;
        break;
      }
      runs = runs * e + (Expr(l->var) - l->min);
    }
    // A producer plane: where nothing else in the kernel synchronizes its threads (the producer
    // takes part in no barrier but the setup's), once a kernel, and where the block is at most
    // two warpgroups and the plane one: ptxas compiles the whole kernel under the register cap of
    // its launch bounds, setmaxnreg or not, and a block of 768 threads (cap 80) could not hold
    // the accumulators (ptxas C7602), one of 512 spilled them. The plane is one warpgroup: a z
    // slice where one is a warpgroup (block (32, 4, z)), else four more warps along y where the
    // block is two warpgroups along y (block (32, 8, 1), 384 threads in all).
    // Its mbarriers are set up once, before the fork, so that their phases run on across the
    // enclosing loops (a persistent block's tiles): each step is counted from the first run.
    const int plane_axis = block[0] * block[1] == 128                         ? 2
                           : block[0] == 32 && block[1] == 8 && block[2] == 1 ? 1
                                                                              : 0;
    // Threads taking turns (below) take a plane whatever the loop's producer form.
    const ForNode* turns = TurnsLoop();
    const bool plane = (PipelineProducer(f.annotations) == 2 || turns) && plane_allowed_ &&
                       !specialized_ && plane_axis > 0 && consumers <= 256 && runs != nullptr;
    // Threads taking turns (kPipelineTurns): the plane fetches turn after turn into the slots,
    // the pipeline's runs counting the turns innermost; each turn's threads wait for the previous
    // turn's last step to be issued (the "turn" mbarrier of its threads), so no turn's wait on a
    // slot can see that slot's phase of one lap before (its parity alike).
    int64_t num_turns = 1;
    if (turns) {
      if (!plane) {
        return FailTurns(f, *turns,
                         "no producer plane can be split off: that needs a kernel that "
                         "synchronizes nowhere else, at most two computing warpgroups (a block "
                         "(32, 4, z) or (32, 8, 1)), and loops of constant extents around the "
                         "pipeline");
      }
      if (serial_loops_.back() != turns) {
        return FailTurns(f, *turns, "a serial loop runs between them");
      }
      IsConstInt(turns->extent, &num_turns);  // constant: TakesTurns
    }
    // The pipeline step of iteration t: t, or (where the plane's barriers outlive the loop) the
    // steps of the earlier runs plus t.
    const Expr step = plane ? state_.analyzer.Simplify(runs * extent) + it : it;
    const BufferPtr turn = turns ? MbarrierBuffer(*t, "turn", num_turns) : nullptr;
    // Each iteration's copies: the plane's of step t, or thread 0's refill of t + S - 1.
    const Expr ahead = it + (stages - 1);
    const Stmt issued = plane ? issue(it, step) : issue(ahead, ahead);
    Stmt computed = SlotRewriter(slotted, step % stages).Visit(MakeSeq(compute));
    const int64_t in_flight = WgmmaMayStayInFlight(computed) ? 1 : 0;
    // Where wgmma computes, a warp is done reading a slot once it has waited for its group (the
    // tensor cores read it; no thread does), so one lane a CTA of each warp arrives for it:
    // lane c on CTA c's empty mbarrier. Else every thread arrives on every CTA's.
    const bool per_warp = in_flight > 0 && block[0] % 32 == 0;
    // This thread's arrival on a slot's empty mbarrier (every CTA's, multicasting).
    auto release = [&](const Expr& slot) -> Stmt {
      if (!multicast) return TensorCallStmt(kCallMbarrierArrive, {MakeLoad(empty, {slot})});
      if (per_warp) {
        const Expr lane =
            block[0] == 32 ? intrinsic::ThreadIndex(0) : intrinsic::ThreadIndex(0) % 32;
        return MakeIf(lane < cluster_,
                      TensorCallStmt(kCallMbarrierArriveCluster, {MakeLoad(empty, {slot}), lane}));
      }
      std::vector<Stmt> out;
      for (int64_t c = 0; c < cluster_; ++c) {
        out.push_back(
            TensorCallStmt(kCallMbarrierArriveCluster, {MakeLoad(empty, {slot}), MakeInt(c)}));
      }
      return MakeSeq(out);
    };
    if (in_flight > 0) computed = WgmmaWaitRewriter(in_flight).Visit(computed);

    std::vector<Stmt> body = {MbarrierWait(full, step % stages, step / stages), computed};
    Stmt arrive = release((step - in_flight) % stages);
    body.push_back(in_flight > 0 ? MakeIf(it >= in_flight, arrive) : arrive);
    if (!plane) {
      Stmt refill = MakeSeq(
          {MakeIf(it >= 1, MbarrierWait(empty, (it - 1) % stages, (it - 1) / stages)), issued});
      body.push_back(MakeIf(ahead < extent, MakeIf(FirstThread(), refill)));
    }
    std::vector<Stmt> consumer = {
        MakeFor(f.var, f.min, f.extent, f.kind, f.thread, MakeSeq(body), f.annotations)};
    if (turns) {
      // Turn u = runs (the turns loop innermost) waits for turn u - 1 to have issued its steps,
      // and says so of itself once it has.
      const Expr u = state_.analyzer.Simplify(runs);
      consumer.insert(consumer.begin(),
                      MakeIf(u >= 1, MbarrierWait(turn, (u - 1) % num_turns, (u - 1) / num_turns)));
      consumer.push_back(TensorCallStmt(kCallMbarrierArrive, {MakeLoad(turn, {u % num_turns})}));
    }
    if (in_flight > 0) {
      consumer.push_back(TensorCallStmt(WgmmaWaitCall(0)));
      // The last step's slot, read to the end now: the plane's next run refills it.
      if (plane) {
        const Expr last = Substitute(step, {{t, MakeInt(extent - 1, t->dtype)}});
        consumer.push_back(release(last % stages));
      }
    }

    // A slot's readers: the computing threads, those of one turn where they take turns.
    const int64_t readers = consumers / num_turns;
    const int64_t arrivals = !multicast ? readers
                             : per_warp ? readers / 32 * cluster_
                                        : readers * cluster_;
    std::vector<std::pair<BufferPtr, int64_t>> bars = {{full, 1}, {empty, arrivals}};
    if (turn) bars.emplace_back(turn, readers);
    Stmt setup = MbarrierSetup(bars, t->dtype);
    if (multicast) {
      // The other CTAs' mbarriers are set up before any multicast or arrival reaches them, and
      // no CTA leaves while another may still write into it (the kernel's end,
      // InjectSoftwarePipeline).
      setup = MakeSeq({setup, MakeBarrier(BarrierScope::kCluster)});
      multicast_ = true;
    }
    allocs.push_back(full);
    allocs.push_back(empty);
    if (turn) allocs.push_back(turn);
    if (!plane) {
      std::vector<Stmt> out = {setup};
      for (int64_t s = 0; s + 1 < stages; ++s) {
        const Expr iter = MakeInt(s, t->dtype);
        out.push_back(MakeIf(iter < extent, MakeIf(FirstThread(), issue(iter, iter))));
      }
      out.insert(out.end(), consumer.begin(), consumer.end());
      return Allocated(allocs, MakeSeq(out));
    }

    // The producer plane: threadIdx.z == block[2] (or threadIdx.y >= block[1]), its first thread
    // issuing every iteration's copies once their slot is free. The buffers and their setup move
    // to the kernel's start, before the fork (InjectSoftwarePipeline), so no barrier is left
    // under a thread loop.
    Stmt produce = MakeFor(
        f.var, f.min, f.extent, ForKind::kSerial, ThreadTag::kNone,
        MakeSeq({MakeIf(step >= stages, MbarrierWait(empty, step % stages, step / stages - 1)),
                 issued}),
        {});
    const Expr first =
        MakeAnd(intrinsic::ThreadIndex(0) == 0,
                intrinsic::ThreadIndex(1) == (plane_axis == 1 ? block[1] : int64_t{0}));
    std::vector<Stmt> producer;
    // Registers move from the producer's warpgroup to the computing ones where the target can
    // and both are whole warpgroups: the cap at entry (__launch_bounds__(threads, 1)) is the
    // register file over the threads, in steps of 8; the producer keeps 40.
    const int64_t threads = consumers + kPlaneThreads;
    std::vector<Stmt> consumer_setup;
    if (state_.target.Supports(TargetFeature::kSetmaxnreg) && consumers % 128 == 0) {
      constexpr int64_t kProducerRegisters = 40, kRegisterFile = 65536;
      const int64_t cap = std::min<int64_t>(kRegisterFile / threads / 8 * 8, 256);
      const int64_t raised = std::min<int64_t>(
          (cap * threads - kProducerRegisters * kPlaneThreads) / consumers / 8 * 8, 256);
      if (cap >= kProducerRegisters && raised > cap) {
        producer_setup_ = TensorCallStmt(SetmaxnregCall(false, kProducerRegisters));
        consumer_setup.push_back(TensorCallStmt(SetmaxnregCall(true, raised)));
      }
    }
    producer.push_back(MakeIf(first, produce));
    // A scope of its own, so that no enclosing sequence flattens it away (the fork finds it).
    Stmt result = MakeScope("the computing warps' pipeline", MakeSeq(consumer));
    specialized_ = true;
    consumer_node_ = result.get();
    producer_ = MakeSeq(producer);
    consumer_setup_ = MakeSeq(consumer_setup);
    setup_ = setup;
    hoisted_ = allocs;
    plane_axis_ = plane_axis;
    producer_plane_ = block[plane_axis];
    kernel_->launch.block[plane_axis] +=
        kPlaneThreads / (block[0] * (plane_axis == 2 ? block[1] : 1));
    return result;
  }

  // The bulk copies of `fetch` (one stage's, in its slot) as thread 0 issues them on
  // full[slot]: its arrival with their bytes, then the copies. `fetch` keeps the rest.
  // In a cluster, boxes its CTAs copy alike are multicast; `multicast` (where given) is set if
  // one was.
  Stmt IssueBulk(Stmt* fetch, const BufferPtr& full, const Expr& slot, bool* multicast = nullptr) {
    BulkCopies copies(state_.analyzer, state_.program, &kernel_->launch.tensor_maps,
                      MakeLoad(full, {slot}), thread_vars_, multicast ? cluster_rank_ : nullptr,
                      cluster_);
    *fetch = copies.Visit(*fetch);
    if (!copies.status().ok() && status_.ok()) status_ = copies.status();
    if (multicast) *multicast |= copies.multicast();
    std::vector<Stmt> out = {
        TensorCallStmt(kCallMbarrierExpectTx, {MakeLoad(full, {slot}), MakeInt(copies.bytes())})};
    for (Stmt& c : copies.copies()) out.push_back(std::move(c));
    return MakeSeq(out);
  }

  // Whether every fetch is a loop nest annotated bulk_copy.
  static bool OnlyBulkCopies(const std::vector<Stmt>& fetches) {
    for (const Stmt& x : fetches) {
      const auto* l = As<ForNode>(x);
      if (!l || BulkCopy(l->annotations) == 0) return false;
    }
    return true;
  }

 public:
  // After Visit: a producer plane was split off (BulkPipeline). The kernel body then forks at its
  // start: the plane runs `producer_setup`, then the way to the pipeline with `producer` in its
  // place; the rest run `consumer_setup`, then the body.
  bool specialized() const { return specialized_; }
  const StmtNode* consumer_node() const { return consumer_node_; }
  const Stmt& producer() const { return producer_; }
  const Stmt& consumer_setup() const { return consumer_setup_; }
  const Stmt& producer_setup() const { return producer_setup_; }
  // The pipeline's buffers, allocated around the whole fork, and the mbarriers' setup before it.
  const std::vector<BufferPtr>& hoisted() const { return hoisted_; }
  const Stmt& setup() const { return setup_; }
  static Stmt Allocated(const std::vector<BufferPtr>& allocs, Stmt s) {
    for (auto it = allocs.rbegin(); it != allocs.rend(); ++it) s = MakeAllocate(*it, s);
    return s;
  }
  // The plane's thread axis (1: y, 2: z) and its first index along it.
  int plane_axis() const { return plane_axis_; }
  // Whether a pipeline multicasts: every CTA of the cluster must stay until all are done.
  bool multicast() const { return multicast_; }
  int64_t producer_plane() const { return producer_plane_; }
  // Whether a producer plane may be split off (set before Visit): the kernel synchronizes nowhere
  // but in its pipelines (the plane takes part in no barrier but the setup's).
  void set_plane_allowed(bool allowed) { plane_allowed_ = allowed; }

 private:
  const LoweringState& state_;
  Kernel* kernel_;
  absl::Status status_;
  bool plane_allowed_ = false;
  std::vector<const VarNode*> thread_vars_;   // of the thread-bound loops around the visit
  std::vector<const ForNode*> serial_loops_;  // the serial loops around the visit, outermost first
  // For each pipelined loop around the visit, innermost last: whether it has 3 or more stages.
  std::vector<bool> pipelines_;
  bool specialized_ = false;
  const StmtNode* consumer_node_ = nullptr;
  Stmt producer_, producer_setup_, consumer_setup_, setup_;
  std::vector<BufferPtr> hoisted_;
  int plane_axis_ = 0;
  int64_t producer_plane_ = 0;
  VarPtr cluster_rank_;  // the loop variable bound to cluster.x around the visit, if any
  int64_t cluster_ = 1;  // its extent
  bool multicast_ = false;
};

// Whether `s` synchronizes its threads outside loops annotated software_pipeline: a barrier, or
// an all-reduce (expanded into barriers later).
bool SynchronizesOutsidePipelines(const Stmt& s) {
  if (!s) return false;
  switch (s->kind) {
    case StmtKind::kBarrier:
    case StmtKind::kAllReduce:
      return true;
    case StmtKind::kFor: {
      const auto* f = As<ForNode>(s);
      return PipelineStages(*f) < 2 && SynchronizesOutsidePipelines(f->body);
    }
    case StmtKind::kSeq:
      for (const Stmt& x : As<SeqNode>(s)->stmts) {
        if (SynchronizesOutsidePipelines(x)) return true;
      }
      return false;
    case StmtKind::kIfThenElse: {
      const auto* i = As<IfThenElseNode>(s);
      return SynchronizesOutsidePipelines(i->then_case) ||
             SynchronizesOutsidePipelines(i->else_case);
    }
    case StmtKind::kAllocate:
      return SynchronizesOutsidePipelines(As<AllocateNode>(s)->body);
    case StmtKind::kLetStmt:
      return SynchronizesOutsidePipelines(As<LetStmtNode>(s)->body);
    case StmtKind::kScope:
      return SynchronizesOutsidePipelines(As<ScopeNode>(s)->body);
    default:
      return false;
  }
}

// The way from `s` to `target` (loops, lets, allocations), with `target` replaced by
// `replacement` and every statement beside the way dropped; null where `target` is not in `s` or
// the way passes a condition (which could leave the producer out).
Stmt WayTo(const Stmt& s, const StmtNode* target, const Stmt& replacement) {
  if (!s) return nullptr;
  if (s.get() == target) return replacement;
  switch (s->kind) {
    case StmtKind::kFor: {
      const auto* f = As<ForNode>(s);
      Stmt b = WayTo(f->body, target, replacement);
      if (!b) return nullptr;
      // The producer fetches every turn of threads that take turns (kPipelineTurns), one after
      // another; it is none of another thread loop's threads, and what it issues depends on none
      // of them.
      if (TakesTurns(*f)) {
        return MakeFor(f->var, f->min, f->extent, ForKind::kSerial, ThreadTag::kNone, b, {});
      }
      if (IsThreadTag(f->thread)) return Substitute(b, {{f->var.get(), MakeInt(0, f->var->dtype)}});
      return MakeFor(f->var, f->min, f->extent, f->kind, f->thread, b, f->annotations);
    }
    case StmtKind::kSeq:
      for (const Stmt& x : As<SeqNode>(s)->stmts) {
        if (Stmt b = WayTo(x, target, replacement)) return b;
      }
      return nullptr;
    case StmtKind::kAllocate: {
      // Shared buffers stay (the producer's copies may fill them); registers are the others'.
      const auto* a = As<AllocateNode>(s);
      Stmt b = WayTo(a->body, target, replacement);
      return b && a->buffer->scope == MemScope::kShared ? MakeAllocate(a->buffer, b) : b;
    }
    case StmtKind::kLetStmt: {
      const auto* l = As<LetStmtNode>(s);
      Stmt b = WayTo(l->body, target, replacement);
      return b ? MakeLet(l->var, l->value, b) : nullptr;
    }
    case StmtKind::kScope:
      return WayTo(As<ScopeNode>(s)->body, target, replacement);
    default:
      return nullptr;
  }
}

// A bulk_copy loop no pipeline took.
absl::Status CheckNoBulkCopyLeft(const Stmt& body) {
  absl::Status status;
  WalkStmt(body, [&](const Stmt& s) {
    const auto* f = As<ForNode>(s);
    if (f && BulkCopy(f->annotations) > 0 && status.ok()) {
      status = absl::FailedPreconditionError(absl::StrCat(
          "loop ", f->var->name,
          " is annotated bulk_copy but is not a shared-memory fetch of a "
          "software_pipeline loop; the copy engine's copies complete on the pipeline's "
          "mbarriers, so compute the copy at a pipelined loop"));
    }
  });
  return status;
}

}  // namespace

absl::Status InjectSoftwarePipeline(LoweringState* state) {
  for (Kernel& k : state->program.kernels) {
    bool annotated = false;
    WalkStmt(k.body, [&](const Stmt& s) {
      if (const auto* f = As<ForNode>(s)) annotated |= PipelineStages(*f) >= 2;
    });
    if (!state->target.is_cuda()) continue;  // the host runs the loop as it is
    if (annotated) {
      // Visit grows the launch (a plane) and adds tensor maps; a second visit starts afresh.
      const LaunchConfig launch = k.launch;
      // A producer plane where one can follow the way to its pipeline; else thread 0 produces.
      for (bool plane : {true, false}) {
        Pipeliner p(*state, &k);
        p.set_plane_allowed(plane && !SynchronizesOutsidePipelines(k.body));
        Stmt body = p.Visit(k.body);
        if (!p.status().ok()) return p.status();
        // A multicasting pipeline's CTAs leave together (BulkPipeline).
        const Stmt leave = p.multicast() ? MakeBarrier(BarrierScope::kCluster) : MakeSeq({});
        if (!p.specialized()) {
          k.body = MakeSeq({state->analyzer.Simplify(body), leave});
          break;
        }
        Stmt producer = WayTo(body, p.consumer_node(), p.producer());
        if (!producer) {
          k.launch = launch;
          continue;
        }
        // The fork, not simplified: the analyzer knows the thread index below the plane's.
        const Expr on_plane = p.plane_axis() == 2 ? intrinsic::ThreadIndex(2) == p.producer_plane()
                                                  : intrinsic::ThreadIndex(1) >= p.producer_plane();
        k.body = Pipeliner::Allocated(
            p.hoisted(),
            MakeSeq(
                {p.setup(),
                 MakeIf(on_plane, MakeSeq({p.producer_setup(), state->analyzer.Simplify(producer)}),
                        MakeSeq({p.consumer_setup(), state->analyzer.Simplify(body)})),
                 leave}));
        break;
      }
    }
    TESSEL_RETURN_IF_ERROR(CheckNoBulkCopyLeft(k.body));
  }
  return absl::OkStatus();
}

}  // namespace tessel::schedules
