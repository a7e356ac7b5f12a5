// build_nests: one kernel per root stage. Each kernel's body is the loop nest of its root stage
// with the stages attached to its loops nested inside, each computing the region its consumers
// need (schedules/schedule/region.h) in its realized buffer. Bodies are guarded where a split does
// not divide, where a region overhangs its tensor, and where a stage uses fewer threads than its
// kernel launches. A reduction loop bound to threadIdx.* becomes a cross-thread reduction (an
// AllReduce statement). Barriers are placed around shared and global producers attached inside a
// kernel: after each, and before each that runs more than once.

#include <algorithm>
#include <optional>
#include <unordered_map>
#include <vector>

#include "absl/strings/str_cat.h"
#include "schedules/ir/expr_functor.h"
#include "schedules/ir/stmt_functor.h"
#include "schedules/ir/substitute.h"
#include "schedules/lower/passes.h"

namespace tessel::schedules {

namespace {

// fuse_centered_sum's first pass: the squares' thread-local nest with each accumulation
// acc += [select(c,] (e - mean) * (e - mean) [, 0)] replaced by sum += [select(c,] e [, 0)], and
// count += [select(c,] 1 [, 0)] when `count` is set (a thread's count that varies).
class CenteredSumPass : public StmtMutator {
 public:
  CenteredSumPass(const Buffer* acc, BufferPtr sum, BufferPtr count)
      : acc_(acc), sum_(std::move(sum)), count_(std::move(count)) {}
  bool ok() const { return ok_; }

 protected:
  Stmt VisitStore(const StoreNode& n, const Stmt& self) override {
    if (n.buffer.get() != acc_) return self;
    const auto* add = As<BinaryNode>(n.value);
    const std::optional<CenteredSquare> sq =
        add != nullptr && add->op == BinaryOp::kAdd ? MatchCenteredSquare(add->b) : std::nullopt;
    if (!sq) {
      ok_ = false;
      return self;
    }
    const DType t = sq->e->dtype;
    auto select = [&](Expr x) { return sq->cond ? MakeSelect(sq->cond, x, MakeFloat(0, t)) : x; };
    auto add_to = [&](const BufferPtr& b, Expr x) {
      return MakeStore(b, {MakeInt(0)}, MakeLoad(b, {MakeInt(0)}) + select(std::move(x)));
    };
    return MakeSeq({add_to(sum_, sq->e), count_ ? add_to(count_, MakeFloat(1, t)) : Stmt()});
  }

 private:
  const Buffer* acc_;
  BufferPtr sum_, count_;
  bool ok_ = true;
};

// Rewrites loads of logical buffers to their realized buffers.
class AccessRewriter : public ExprMutator {
 public:
  explicit AccessRewriter(const std::unordered_map<const Buffer*, Realized>& realized)
      : realized_(realized) {}
  std::vector<Expr> Indices(const Buffer* b, const std::vector<Expr>& idx) {
    auto it = realized_.find(b);
    if (it == realized_.end() || it->second.offset.empty()) return idx;
    std::vector<Expr> out;
    for (size_t d = 0; d < idx.size(); ++d) out.push_back(idx[d] - it->second.offset[d]);
    return out;
  }
  BufferPtr Target(const BufferPtr& b) {
    auto it = realized_.find(b.get());
    return it == realized_.end() ? b : it->second.buffer;
  }

 protected:
  Expr VisitLoad(const LoadNode& n, const Expr& self) override {
    Expr e = ExprMutator::VisitLoad(n, self);
    const auto* l = As<LoadNode>(e);
    auto it = realized_.find(l->buffer.get());
    if (it == realized_.end()) return e;
    return MakeLoad(it->second.buffer, Indices(l->buffer.get(), l->indices));
  }

 private:
  const std::unordered_map<const Buffer*, Realized>& realized_;
};

// A producer attached at a loop, computed before the loop's body.
struct Producer {
  Stmt nest;
  const Stage* stage;
  bool shared;  // writes memory other threads read (CUDA)
  bool grid;    // written by several blocks, read by all: a grid barrier follows
};

// Builds the loop nest of one stage (and, recursively, of the stages attached to its loops).
class NestBuilder {
 public:
  NestBuilder(LoweringState& state, const LaunchConfig& launch, int si)
      : state_(state), launch_(launch), si_(si), s_(state.stages[si]), rw_(state.realized) {}

  absl::StatusOr<Stmt> Build();

 private:
  // The stage's value at its loop variables, and where it is stored.
  void BindValue();
  // fuse_online_max: this sum of exp(x - m) also computes m, the running maximum of x, and
  // rescales its running sum whenever the maximum grows (online softmax normalizer).
  absl::Status MatchOnlineMax();
  // fuse_centered_sum: these squares of deviations from each chunk's mean also compute the
  // chunk sums, in one cross-thread reduction of (sum, squares) pairs.
  absl::Status MatchCenteredSum();
  // Guards. Every split parent must stay within its extent: a root beyond its extent is out of
  // bounds, and an inner loop beyond its parent's extent would alias the next outer iteration.
  void BuildGuards();
  // The cross-thread and cluster reduction loops, and guards for loops bound to fewer threads
  // than the block has.
  absl::Status FindCrossThreadLoops();
  // Unrolling from the stage annotation.
  void PlanUnrolling();
  // The statement at the innermost loop.
  Stmt InnermostStatement();
  // The centred squares' accumulation of a thread (fuse_centered_sum, cross-thread).
  Stmt CenteredSquaresStatement();
  // One step of the online normalizer on (sum, max) held at the given places.
  Stmt OnlineStep(const BufferPtr& sb, const std::vector<Expr>& si, const BufferPtr& mb,
                  const std::vector<Expr>& mi) const;
  // The initialization of a reduction stored in place (not across threads): the output, and
  // with the online normalizer the maximum too.
  Stmt InitInPlace() const;
  // `body` wrapped in the loop at leaf position `p`, with the stages attached there.
  absl::StatusOr<Stmt> WrapLevel(int p, Stmt body);
  // The nests of the stages attached at leaf `iter` (at position `p`): producers, those
  // computed after the body (reverse_compute_at), and the buffers to allocate.
  absl::Status AttachedStages(int p, int iter, std::vector<Producer>* producers,
                              std::vector<Stmt>* after, std::vector<BufferPtr>* allocs);
  // The producers in order with the barriers they need, for the nest at leaf `iter`.
  std::vector<Stmt> PlaceBarriers(std::vector<Producer> producers, int iter) const;
  // The reduction loops at the first reduction position turned into a cross-thread reduction:
  // the thread's accumulation, the all-reduce, the store of the result.
  absl::StatusOr<Stmt> CrossThreadReduction(const Stmt& loop);
  absl::StatusOr<Stmt> CenteredReduceAndStore(const Stmt& loop, const IterVar& tv,
                                              const BufferPtr& res, const Expr& store_cond,
                                              Stmt* init);
  Stmt OnlineReduceAndStore(const IterVar& tv, const BufferPtr& res, const Expr& store_cond,
                            Stmt* init);
  Stmt PlainReduceAndStore(const IterVar& tv, const IterVar* cv, const BufferPtr& res,
                           const Expr& store_cond);
  Stmt MakeLoop(int iter, Stmt body, bool unrolled) const;
  int64_t BlockDim(ThreadTag t) const { return schedules::BlockDim(launch_, t); }
  BufferPtr LocalScalar(const std::string& suffix, DType t) const {
    return MakeBuffer(SanitizeName(s_.name) + suffix, t, {1}, MemScope::kLocal);
  }
  // Whether `reader` reads what `writer` writes to `buffer` only at its own block.
  bool SameBlockOnly(const Stmt& writer, const Stmt& reader, const Buffer* buffer) const;
  // The buffers a stage's nest writes: its own, and a stage it computes in the same pass.
  std::vector<const Buffer*> WrittenBuffers(const Stage& s) const;
  // Whether the nest at (stage, iter) runs more than once per thread.
  bool RunsRepeatedly(int iter) const;

  LoweringState& state_;
  const LaunchConfig& launch_;
  const int si_;
  const Stage& s_;
  AccessRewriter rw_;

  std::vector<Expr> vals_, g_, idx_;
  Expr value_;
  DType vt_ = DType::kFloat32;
  BufferPtr out_;
  std::vector<Expr> out_idx_;
  // fuse_online_max.
  bool online_ = false;
  Expr online_x_;
  BufferPtr max_out_;
  std::vector<Expr> max_idx_;
  // fuse_centered_sum.
  bool centered_ = false;
  BufferPtr sum_out_;
  std::vector<Expr> sum_idx_;
  std::optional<CenteredSquare> centered_term_;

  Expr spatial_cond_, reduce_cond_;
  int cross_ = -1;    // leaf position of a thread-bound reduction loop
  int cluster_ = -1;  // leaf position of a cluster-bound reduction loop
  int first_reduce_ = -1, init_pos_ = -1;
  std::vector<bool> unrolled_;

  bool wide_ = false;
  BufferPtr acc_buf_;
  BufferPtr max_acc_;  // online, cross-thread: the thread's running maximum
  // centered: the thread's sum, its element count when that varies, and the count.
  BufferPtr sum_acc_, count_acc_;
  Expr thread_count_;
};

absl::StatusOr<Stmt> NestBuilder::Build() {
  BindValue();
  if (absl::Status st = MatchOnlineMax(); !st.ok()) return st;
  if (absl::Status st = MatchCenteredSum(); !st.ok()) return st;
  BuildGuards();
  if (absl::Status st = FindCrossThreadLoops(); !st.ok()) return st;
  PlanUnrolling();
  Stmt body = InnermostStatement();
  for (size_t p = 0; p < s_.leaves.size(); ++p) {
    if (s_.iters[s_.leaves[p]].reduce) {
      first_reduce_ = static_cast<int>(p);
      break;
    }
  }
  init_pos_ = s_.init_at >= 0 ? s_.LeafPosition(s_.init_at) : first_reduce_;
  for (int p = static_cast<int>(s_.leaves.size()) - 1; p >= 0; --p) {
    auto wrapped = WrapLevel(p, body);
    if (!wrapped.ok()) return wrapped.status();
    body = *wrapped;
  }
  if (s_.leaves.empty()) {
    // A 0-d stage: the body alone (with the reduction's init if any).
    if (s_.reduce && cross_ < 0) {
      body = MakeSeq({InitInPlace(), body});
    }
  }
  return body;
}

void NestBuilder::BindValue() {
  const StageBound& b = state_.bounds[si_];
  const int naxes = static_cast<int>(s_.axes.size());
  vals_ = s_.IterValues();
  g_.assign(s_.num_root(), Expr());
  std::unordered_map<const VarNode*, Expr> map;
  for (int r = 0; r < s_.num_root(); ++r) {
    g_[r] = state_.analyzer.Simplify(b.root_min[r] + vals_[r]);
    map[r < naxes ? s_.axes[r].get() : s_.reduce_axes[r - naxes].get()] = g_[r];
  }
  value_ = rw_.Visit(Substitute(s_.body, map));
  vt_ = value_->dtype;
  idx_.assign(g_.begin(), g_.begin() + naxes);
  out_ = rw_.Target(s_.buffer);
  out_idx_ = rw_.Indices(s_.buffer.get(), idx_);
}

absl::Status NestBuilder::MatchOnlineMax() {
  online_ = !s_.online_max.empty();
  if (!online_) return absl::OkStatus();
  const Stage& m = state_.stages[FindStageIndex(state_.stages, s_.online_max)];
  max_out_ = rw_.Target(m.buffer);
  max_idx_ = rw_.Indices(m.buffer.get(), idx_);
  std::optional<ExpOfDifference> term = MatchExpOfDifference(value_);
  if (!term || term->max->buffer != max_out_) {
    return absl::FailedPreconditionError(
        absl::StrCat("stage ", s_.name, " computes ", m.name,
                     " in the same pass (fuse_online_max), but its body is no longer exp(x - ",
                     m.name, "[...]); do not cache_read ", m.name, " for it"));
  }
  online_x_ = term->e;
  return absl::OkStatus();
}

absl::Status NestBuilder::MatchCenteredSum() {
  centered_ = !s_.centered_sum.empty();
  if (!centered_) return absl::OkStatus();
  const Stage& ps = state_.stages[FindStageIndex(state_.stages, s_.centered_sum)];
  sum_out_ = rw_.Target(ps.buffer);
  sum_idx_ = rw_.Indices(ps.buffer.get(), idx_);
  centered_term_ = MatchCenteredSquare(value_);
  if (!centered_term_ || CollectLoads(centered_term_->m, sum_out_.get()).empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("stage ", s_.name, " computes ", ps.name,
                     " in the same reduction (fuse_centered_sum), but its body no longer squares "
                     "deviations from ",
                     ps.name, "[...]; do not cache_read ", ps.name, " for it"));
  }
  return absl::OkStatus();
}

//   d = x - max; e = exp(-|d|); sum = d > 0 ? sum * e + 1 : sum + e; max = max(max, x).
Stmt NestBuilder::OnlineStep(const BufferPtr& sb, const std::vector<Expr>& si, const BufferPtr& mb,
                             const std::vector<Expr>& mi) const {
  const DType t = online_x_->dtype;
  VarPtr x = MakeVar(SanitizeName(s_.name) + "_x", t);
  VarPtr d = MakeVar(SanitizeName(s_.name) + "_d", t);
  VarPtr e = MakeVar(SanitizeName(s_.name) + "_e", t);
  Expr sum = MakeLoad(sb, si);
  Expr mx = MakeLoad(mb, mi);
  Stmt update = MakeSeq({MakeStore(sb, si,
                                   MakeSelect(MakeFloat(0, t) < Expr(d),
                                              sum * Expr(e) + MakeFloat(1, t), sum + Expr(e))),
                         MakeStore(mb, mi, MakeMax(mx, x))});
  return MakeLet(
      x, online_x_,
      MakeLet(d, Expr(x) - mx,
              MakeLet(e, MakeCall("exp", {MakeMin(d, MakeUnary(UnaryOp::kNeg, d))}, t), update)));
}

void NestBuilder::BuildGuards() {
  const StageBound& b = state_.bounds[si_];
  const int naxes = static_cast<int>(s_.axes.size());
  const Analyzer& analyzer = state_.analyzer;
  const bool attached = s_.attach.kind == AttachPoint::Kind::kAt;
  for (const IterRelation& rel : s_.relations) {
    if (rel.kind != IterRelation::Kind::kSplit || rel.parent < s_.num_root()) continue;
    const IterVar& parent = s_.iters[rel.parent];
    Expr c = vals_[rel.parent] < parent.extent;
    Expr& acc = parent.reduce ? reduce_cond_ : spatial_cond_;
    if (!analyzer.CanProve(c)) acc = MakeAnd(acc, c);
  }
  for (int r = 0; r < s_.num_root(); ++r) {
    Expr c = vals_[r] < b.root_extent[r];
    Expr& acc = r < naxes ? spatial_cond_ : reduce_cond_;
    if (!analyzer.CanProve(c)) acc = MakeAnd(acc, c);
    if (r < naxes && attached) {
      int64_t lo = 0, hi = 0;
      const int64_t dim = s_.buffer->shape[r];
      if (!analyzer.ConstBounds(g_[r], &lo, &hi) || lo < 0 || hi >= dim) {
        if (!(analyzer.ConstBounds(g_[r], &lo, &hi) && lo >= 0)) acc = MakeAnd(acc, g_[r] >= 0);
        acc = MakeAnd(acc, g_[r] < dim);
      }
    }
  }
}

absl::Status NestBuilder::FindCrossThreadLoops() {
  for (size_t p = 0; p < s_.leaves.size(); ++p) {
    const IterVar& iv = s_.iters[s_.leaves[p]];
    if (iv.reduce && iv.thread == ThreadTag::kClusterX) cluster_ = static_cast<int>(p);
    if (IsPerThreadTag(iv.thread) && iv.extent < BlockDim(iv.thread)) {
      Expr c = Expr(iv.var) < iv.extent;
      if (iv.reduce) {
        reduce_cond_ = MakeAnd(reduce_cond_, c);
      } else {
        spatial_cond_ = MakeAnd(spatial_cond_, c);
      }
    }
    if (iv.reduce && IsThreadTag(iv.thread)) cross_ = static_cast<int>(p);
  }
  if (cross_ >= 0 && s_.buffer->scope == MemScope::kLocal &&
      s_.attach.kind != AttachPoint::Kind::kAt) {
    return absl::FailedPreconditionError(
        absl::StrCat("stage ", s_.name, " is local but not attached"));
  }
  if (centered_ && (cross_ < 0 || cluster_ >= 0 ||
                    s_.iters[s_.leaves[cross_]].thread != ThreadTag::kThreadX || !IsFloat(vt_))) {
    return absl::FailedPreconditionError(absl::StrCat(
        "stage ", s_.name, " computes ", s_.centered_sum,
        " in the same reduction (fuse_centered_sum), which combines (sum, squares) pairs "
        "across the threads of threadIdx.x: bind a reduction loop of ",
        s_.name, " to threadIdx.x (and none to the cluster)"));
  }
  if (cluster_ >= 0 && cross_ < 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "stage ", s_.name, " reduces loop ", s_.iters[s_.leaves[cluster_]].var->name,
        " across the cluster but no loop across threads; bind another reduction loop to "
        "threadIdx.x (the cluster combines one value per CTA)"));
  }
  return absl::OkStatus();
}

void NestBuilder::PlanUnrolling() {
  unrolled_.assign(s_.leaves.size(), false);
  auto it = s_.annotations.find("auto_unroll_max_step");
  if (it == s_.annotations.end()) return;
  int64_t prod = 1;
  for (int p = static_cast<int>(s_.leaves.size()) - 1; p >= 0; --p) {
    const IterVar& iv = s_.iters[s_.leaves[p]];
    if (iv.kind != ForKind::kSerial || iv.thread != ThreadTag::kNone) break;
    prod *= iv.extent;
    if (prod > it->second) break;
    unrolled_[p] = true;
  }
}

Stmt NestBuilder::InitInPlace() const {
  return MakeSeq(
      {MakeStore(out_, out_idx_, ReduceIdentity(*s_.reduce, vt_)),
       online_ ? MakeStore(max_out_, max_idx_, ReduceIdentity(ReduceOp::kMax, max_out_->dtype))
               : Stmt()});
}

Stmt NestBuilder::InnermostStatement() {
  const Expr guard = MakeAnd(spatial_cond_, reduce_cond_);
  wide_ = state_.wide_accumulation && s_.reduce && !online_ && cross_ < 0 && s_.init_at < 0 &&
          IsFloat(vt_);
  if (wide_) {
    acc_buf_ = LocalScalar("_acc", DType::kFloat64);
    Expr acc = MakeLoad(acc_buf_, {MakeInt(0)});
    return MakeIf(guard,
                  MakeStore(acc_buf_, {MakeInt(0)},
                            ReduceCombine(*s_.reduce, acc, MakeCast(DType::kFloat64, value_))));
  }
  if (!s_.reduce) return MakeIf(guard, MakeStore(out_, out_idx_, value_));
  if (cross_ >= 0 && online_) {
    acc_buf_ = LocalScalar("_acc", vt_);
    max_acc_ = LocalScalar("_max", max_out_->dtype);
    return MakeIf(guard, OnlineStep(acc_buf_, {MakeInt(0)}, max_acc_, {MakeInt(0)}));
  }
  if (cross_ >= 0 && centered_) return CenteredSquaresStatement();
  if (cross_ >= 0) {
    acc_buf_ = LocalScalar("_acc", vt_);
    Expr acc = MakeLoad(acc_buf_, {MakeInt(0)});
    return MakeIf(guard, MakeStore(acc_buf_, {MakeInt(0)}, ReduceCombine(*s_.reduce, acc, value_)));
  }
  if (online_) return MakeIf(guard, OnlineStep(out_, out_idx_, max_out_, max_idx_));
  Expr cur = MakeLoad(out_, out_idx_);
  return MakeIf(guard, MakeStore(out_, out_idx_, ReduceCombine(*s_.reduce, cur, value_)));
}

// Each thread sums its elements first (CenteredSumPass), then squares their deviations from its
// own mean. With no guard every thread has the same number of elements, the product of its
// reduction loops' extents; otherwise it counts them.
Stmt NestBuilder::CenteredSquaresStatement() {
  acc_buf_ = LocalScalar("_acc", vt_);
  sum_acc_ = LocalScalar("_sum", vt_);
  Expr guard = MakeAnd(spatial_cond_, reduce_cond_);
  if (guard || centered_term_->cond) {
    count_acc_ = LocalScalar("_count", vt_);
    thread_count_ = MakeLoad(count_acc_, {MakeInt(0)});
  } else {
    int64_t n = 1;
    for (size_t q = 0; q < s_.leaves.size(); ++q) {
      const IterVar& iv = s_.iters[s_.leaves[q]];
      if (iv.reduce && static_cast<int>(q) != cross_) n *= iv.extent;
    }
    thread_count_ = MakeFloat(static_cast<double>(n), vt_);
  }
  Expr dev = centered_term_->e - MakeLoad(sum_acc_, {MakeInt(0)}) / thread_count_;
  Expr square = dev * dev;
  if (centered_term_->cond) square = MakeSelect(centered_term_->cond, square, MakeFloat(0, vt_));
  Expr acc = MakeLoad(acc_buf_, {MakeInt(0)});
  return MakeIf(guard, MakeStore(acc_buf_, {MakeInt(0)}, acc + square));
}

absl::StatusOr<Stmt> NestBuilder::WrapLevel(int p, Stmt body) {
  const int iter = s_.leaves[p];
  std::vector<Producer> producers;
  std::vector<Stmt> after;
  std::vector<BufferPtr> allocs;
  if (absl::Status st = AttachedStages(p, iter, &producers, &after, &allocs); !st.ok()) return st;
  std::vector<Stmt> before = PlaceBarriers(std::move(producers), iter);
  if (!before.empty() || !after.empty()) {
    std::vector<Stmt> seq = before;
    seq.push_back(body);
    seq.insert(seq.end(), after.begin(), after.end());
    body = MakeSeq(seq);
  }
  for (auto it = allocs.rbegin(); it != allocs.rend(); ++it) body = MakeAllocate(*it, body);

  Stmt loop = p == cross_ || p == cluster_ ? body : MakeLoop(iter, body, unrolled_[p]);
  if (wide_ && p == init_pos_) {
    // acc = identity; the reduction loops; out = acc rounded to the output type.
    loop = MakeAllocate(
        acc_buf_,
        MakeSeq(
            {MakeStore(acc_buf_, {MakeInt(0)}, ReduceIdentity(*s_.reduce, DType::kFloat64)), loop,
             MakeIf(spatial_cond_,
                    MakeStore(out_, out_idx_, MakeCast(vt_, MakeLoad(acc_buf_, {MakeInt(0)}))))}));
  } else if (s_.reduce && p == init_pos_ && cross_ < 0) {
    // The initialization nest: the spatial loops at and below this position.
    Stmt init = MakeIf(spatial_cond_, InitInPlace());
    for (int q = static_cast<int>(s_.leaves.size()) - 1; q >= p; --q) {
      if (!s_.iters[s_.leaves[q]].reduce) init = MakeLoop(s_.leaves[q], init, unrolled_[q]);
    }
    loop = MakeSeq({init, loop});
  }
  if (cross_ >= 0 && p == first_reduce_) return CrossThreadReduction(loop);
  return loop;
}

absl::Status NestBuilder::AttachedStages(int p, int iter, std::vector<Producer>* producers,
                                         std::vector<Stmt>* after, std::vector<BufferPtr>* allocs) {
  const std::vector<Stage>& stages = state_.stages;
  for (size_t ai = 0; ai < stages.size(); ++ai) {
    const Stage& a = stages[ai];
    if (a.inlined() || a.attach.kind != AttachPoint::Kind::kAt || a.attach.stage != s_.name ||
        a.attach.iter != iter) {
      continue;
    }
    if (p == cross_ || p == cluster_) {
      return absl::FailedPreconditionError(absl::StrCat(
          "stage ", a.name, " is attached to the cross-thread reduction loop ",
          s_.iters[iter].var->name, " of stage ", s_.name, "; attach it to another loop"));
    }
    auto it = state_.realized.find(a.buffer.get());
    if (it != state_.realized.end()) allocs->push_back(it->second.buffer);
    if (!a.computed_by.empty()) continue;  // written by the stage that computes it
    auto nest = NestBuilder(state_, launch_, static_cast<int>(ai)).Build();
    if (!nest.ok()) return nest.status();
    const bool shared = a.buffer->scope != MemScope::kLocal && state_.target.is_cuda();
    if (a.attach.reverse) {
      after->push_back(*nest);
    } else {
      producers->push_back({*nest, &a, shared, state_.WritesAcrossBlocks(static_cast<int>(ai))});
    }
  }
  return absl::OkStatus();
}

std::vector<Stmt> NestBuilder::PlaceBarriers(std::vector<Producer> producers, int iter) const {
  std::vector<Stmt> before;
  if (std::none_of(producers.begin(), producers.end(),
                   [](const Producer& x) { return x.shared; })) {
    for (const Producer& x : producers) before.push_back(x.nest);
    return before;
  }
  // Everyone waits for the shared producers to be written before anything reads them (the
  // body, or a producer attached here such as a register copy of a shared tile), and
  // (when this nest runs repeatedly) for the previous iteration's readers to finish. The
  // shared producers go first, unless one reads what a non-shared producer here writes;
  // then each keeps its place.
  bool feeds_shared = false;
  for (const Producer& sp : producers) {
    if (!sp.shared) continue;
    for (const LoadNode* l : CollectLoads(sp.stage->body)) {
      for (const Producer& op : producers) {
        feeds_shared |= !op.shared && l->buffer.get() == op.stage->buffer.get();
      }
    }
  }
  if (!feeds_shared) {
    std::stable_partition(producers.begin(), producers.end(),
                          [](const Producer& x) { return x.shared; });
  }
  // A barrier goes before a producer that reads what a shared producer since the last
  // barrier wrote, and before any non-shared producer after one, and one follows the last
  // shared producer. It is a grid barrier (which also synchronizes the block) when what
  // was written across blocks since the last grid barrier is read at other blocks' indices
  // or may be read after the producers. A global buffer is the whole tensor, so one
  // iteration's writes never overwrite what another's readers still read: no grid barrier
  // before.
  // Only shared memory is overwritten by the next iteration while others may still read
  // it: a global stage writes each element of its tensor once.
  if (RunsRepeatedly(iter) &&
      std::any_of(producers.begin(), producers.end(),
                  [](const Producer& x) { return x.stage->buffer->scope == MemScope::kShared; })) {
    before.push_back(MakeBarrier());
  }
  auto barrier = [](bool grid) {
    return MakeBarrier(grid ? BarrierScope::kGrid : BarrierScope::kBlock);
  };
  auto reads = [](const Producer& r, const Buffer* b) {
    return !CollectLoads(r.stage->body, b).empty();
  };
  std::vector<const Producer*> since_barrier, since_grid_barrier;
  for (const Producer& x : producers) {
    bool grid = false, block = false;
    for (const Producer* w : since_grid_barrier) {
      for (const Buffer* b : WrittenBuffers(*w->stage)) {
        grid |= reads(x, b) && !SameBlockOnly(w->nest, x.nest, b);
      }
    }
    for (const Producer* w : since_barrier) {
      for (const Buffer* b : WrittenBuffers(*w->stage)) block |= !x.shared || reads(x, b);
    }
    if (grid || block) {
      before.push_back(barrier(grid));
      since_barrier.clear();
      if (grid) since_grid_barrier.clear();
    }
    before.push_back(x.nest);
    if (x.shared) since_barrier.push_back(&x);
    if (x.grid) since_grid_barrier.push_back(&x);
  }
  if (!since_grid_barrier.empty() || !since_barrier.empty()) {
    before.push_back(barrier(!since_grid_barrier.empty()));
  }
  return before;
}

absl::StatusOr<Stmt> NestBuilder::CrossThreadReduction(const Stmt& loop) {
  const IterVar& tv = s_.iters[s_.leaves[cross_]];
  BufferPtr res = LocalScalar("_red", vt_);
  Expr store_cond = spatial_cond_;
  const IterVar* cv = cluster_ >= 0 ? &s_.iters[s_.leaves[cluster_]] : nullptr;
  if (s_.buffer->scope != MemScope::kLocal) {
    store_cond = MakeAnd(store_cond, Expr(tv.var) == 0);
    if (cv != nullptr) store_cond = MakeAnd(store_cond, Expr(cv->var) == 0);
  }
  if (cv != nullptr && online_) {
    return absl::FailedPreconditionError(
        absl::StrCat("stage ", s_.name, " computes ", s_.online_max,
                     " in the same pass (fuse_online_max), which has no cluster-wide form; "
                     "reduce it within a CTA"));
  }
  Stmt reduce_and_store;
  Stmt init = MakeStore(acc_buf_, {MakeInt(0)}, ReduceIdentity(*s_.reduce, vt_));
  if (centered_) {
    auto r = CenteredReduceAndStore(loop, tv, res, store_cond, &init);
    if (!r.ok()) return r.status();
    reduce_and_store = *r;
  } else if (online_) {
    reduce_and_store = OnlineReduceAndStore(tv, res, store_cond, &init);
  } else {
    reduce_and_store = PlainReduceAndStore(tv, cv, res, store_cond);
  }
  Stmt block = MakeAllocate(acc_buf_, MakeSeq({init, loop, reduce_and_store}));
  if (online_) block = MakeAllocate(max_acc_, block);
  if (count_acc_) block = MakeAllocate(count_acc_, block);
  if (sum_acc_) block = MakeAllocate(sum_acc_, block);
  Stmt out = MakeFor(tv.var, MakeInt(0), MakeInt(BlockDim(tv.thread)), ForKind::kThreadBinding,
                     tv.thread, block, tv.annotations);
  if (cv != nullptr) {
    out = MakeFor(cv->var, MakeInt(0), MakeInt(BlockDim(cv->thread)), ForKind::kThreadBinding,
                  cv->thread, out, cv->annotations);
  }
  return out;
}

// The sums pass, then the squares pass, then one all-reduce of the pairs.
absl::StatusOr<Stmt> NestBuilder::CenteredReduceAndStore(const Stmt& loop, const IterVar& tv,
                                                         const BufferPtr& res,
                                                         const Expr& store_cond, Stmt* init) {
  CenteredSumPass sums(acc_buf_.get(), sum_acc_, count_acc_);
  Stmt sum_loop = sums.Visit(loop);
  if (!sums.ok()) {
    return absl::InternalError(absl::StrCat("stage ", s_.name,
                                            ": the accumulation of its squares did not "
                                            "keep the form (e - mean) * (e - mean)"));
  }
  BufferPtr sum_res = LocalScalar("_sum_red", vt_);
  std::vector<Stmt> first = {MakeStore(sum_acc_, {MakeInt(0)}, MakeFloat(0, vt_))};
  if (count_acc_) first.push_back(MakeStore(count_acc_, {MakeInt(0)}, MakeFloat(0, vt_)));
  first.push_back(sum_loop);
  *init = MakeSeq({MakeSeq(first), *init});
  Expr acc = MakeLoad(acc_buf_, {MakeInt(0)});
  return MakeAllocate(
      sum_res,
      MakeAllocate(
          res, MakeSeq({MakeCenteredAllReduce(MakeLoad(sum_acc_, {MakeInt(0)}), acc, thread_count_,
                                              sum_res, res, tv.thread, BlockDim(tv.thread)),
                        MakeIf(store_cond,
                               MakeSeq({MakeStore(out_, out_idx_, MakeLoad(res, {MakeInt(0)})),
                                        MakeStore(sum_out_, sum_idx_,
                                                  MakeLoad(sum_res, {MakeInt(0)}))}))})));
}

// The block's maximum first; each thread's sum rescaled to it, then summed.
Stmt NestBuilder::OnlineReduceAndStore(const IterVar& tv, const BufferPtr& res,
                                       const Expr& store_cond, Stmt* init) {
  BufferPtr max_res = LocalScalar("_max_red", max_out_->dtype);
  Expr acc = MakeLoad(acc_buf_, {MakeInt(0)});
  Expr mx = MakeLoad(max_acc_, {MakeInt(0)});
  Expr block_max = MakeLoad(max_res, {MakeInt(0)});
  Expr rescaled = acc * MakeCall("exp", {mx - block_max}, vt_);
  *init = MakeSeq(
      {*init, MakeStore(max_acc_, {MakeInt(0)}, ReduceIdentity(ReduceOp::kMax, max_out_->dtype))});
  return MakeAllocate(
      max_res,
      MakeAllocate(
          res, MakeSeq({MakeAllReduce(ReduceOp::kMax, mx, max_res, tv.thread, BlockDim(tv.thread)),
                        MakeAllReduce(*s_.reduce, rescaled, res, tv.thread, BlockDim(tv.thread)),
                        MakeIf(store_cond,
                               MakeSeq({MakeStore(out_, out_idx_, MakeLoad(res, {MakeInt(0)})),
                                        MakeStore(max_out_, max_idx_, block_max)}))})));
}

// The block's value; with a cluster, then the cluster's (one value per CTA, through distributed
// shared memory).
Stmt NestBuilder::PlainReduceAndStore(const IterVar& tv, const IterVar* cv, const BufferPtr& res,
                                      const Expr& store_cond) {
  Expr acc = MakeLoad(acc_buf_, {MakeInt(0)});
  std::vector<Stmt> steps = {MakeAllReduce(*s_.reduce, acc, res, tv.thread, BlockDim(tv.thread))};
  BufferPtr result = res;
  if (cv != nullptr) {
    result = LocalScalar("_cluster_red", vt_);
    steps.push_back(MakeAllReduce(*s_.reduce, MakeLoad(res, {MakeInt(0)}), result, cv->thread,
                                  BlockDim(cv->thread)));
  }
  steps.push_back(MakeIf(store_cond, MakeStore(out_, out_idx_, MakeLoad(result, {MakeInt(0)}))));
  Stmt reduce_and_store = MakeSeq(steps);
  if (result != res) reduce_and_store = MakeAllocate(result, reduce_and_store);
  return MakeAllocate(res, reduce_and_store);
}

Stmt NestBuilder::MakeLoop(int iter, Stmt body, bool unrolled) const {
  const IterVar& iv = s_.iters[iter];
  ForKind kind = iv.kind;
  if (kind == ForKind::kSerial && unrolled) kind = ForKind::kUnrolled;
  if (iv.thread == ThreadTag::kVThread) kind = ForKind::kThreadBinding;
  if (!body) body = MakeSeq({});
  if (iv.extent == 1 && kind != ForKind::kThreadBinding) {
    return Substitute(body, {{iv.var.get(), MakeInt(0, iv.var->dtype)}});
  }
  // A thread index ranges over the whole block, whatever this stage uses (guards cover it).
  const int64_t extent = IsPerThreadTag(iv.thread) ? BlockDim(iv.thread) : iv.extent;
  return MakeFor(iv.var, MakeInt(0), MakeInt(extent), kind, iv.thread, std::move(body),
                 iv.annotations);
}

std::vector<const Buffer*> NestBuilder::WrittenBuffers(const Stage& s) const {
  std::vector<const Buffer*> out = {s.buffer.get()};
  for (const std::string& fused : s.FusedStages()) {
    out.push_back(state_.stages[FindStageIndex(state_.stages, fused)].buffer.get());
  }
  return out;
}

// A shared producer at a nest that runs more than once per thread needs a barrier before it too.
bool NestBuilder::RunsRepeatedly(int iter) const {
  for (auto [st, it] : EnclosingLoops(state_.stages, si_, iter)) {
    const IterVar& iv = state_.stages[st].iters[it];
    if (iv.thread != ThreadTag::kNone && iv.thread != ThreadTag::kVThread) continue;
    if (iv.extent > 1) return true;
  }
  return false;
}

// Whether `reader` reads what `writer` writes to `buffer` only at its own block: some axis of the
// buffer is indexed at every store in `writer` and every load in `reader` by a variable bound to
// one block index (so a block barrier orders them).
bool NestBuilder::SameBlockOnly(const Stmt& writer, const Stmt& reader,
                                const Buffer* buffer) const {
  std::vector<std::vector<Expr>> accesses;
  WalkStmt(writer, [&](const Stmt& s) {
    if (const auto* st = As<StoreNode>(s); st && st->buffer.get() == buffer) {
      accesses.push_back(st->indices);
    }
  });
  if (accesses.empty()) return false;
  const size_t stores = accesses.size();
  WalkStmt(reader, [&](const Stmt& s) {
    for (const Expr& e : OwnExprs(s)) {
      for (const LoadNode* l : CollectLoads(e, buffer)) accesses.push_back(l->indices);
    }
  });
  if (accesses.size() == stores) return false;
  for (size_t d = 0; d < accesses[0].size(); ++d) {
    std::optional<ThreadTag> tag;
    bool all = true;
    for (const std::vector<Expr>& idx : accesses) {
      const auto* v = d < idx.size() ? As<VarNode>(idx[d]) : nullptr;
      auto it = v ? state_.block_vars.find(v) : state_.block_vars.end();
      if (it == state_.block_vars.end() || (tag && *tag != it->second)) {
        all = false;
        break;
      }
      tag = it->second;
    }
    if (all) return true;
  }
  return false;
}

}  // namespace

absl::Status BuildNests(LoweringState* state) {
  for (size_t i = 0; i < state->stages.size(); ++i) {
    if (!state->IsKernelRoot(static_cast<int>(i))) continue;
    Kernel k;
    k.name = absl::StrCat(state->program.name, "_", SanitizeName(state->stages[i].name));
    k.launch = state->launches[i];
    auto body = NestBuilder(*state, k.launch, static_cast<int>(i)).Build();
    if (!body.ok()) return body.status();
    k.body = *body;
    state->program.kernels.push_back(std::move(k));
    state->kernel_roots.push_back(static_cast<int>(i));
  }
  return absl::OkStatus();
}

}  // namespace tessel::schedules
