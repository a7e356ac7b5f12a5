// build_nests: one kernel per root stage. Each kernel's body is the loop nest of its root stage
// with the stages attached to its loops nested inside, each computing the region its consumers
// need (schedules/schedule/region.h) in its realized buffer. Bodies are guarded where a split does
// not divide, where a region overhangs its tensor, and where a stage uses fewer threads than its
// kernel launches. A reduction loop bound to threadIdx.* becomes a cross-thread reduction (an
// AllReduce statement). Barriers are placed around shared and global producers attached inside a
// kernel: after each, and before each that runs more than once.

#include <algorithm>
#include <optional>
#include <set>
#include <unordered_map>
#include <vector>

#include "absl/strings/str_cat.h"
#include "schedules/ir/expr_functor.h"
#include "schedules/ir/simplify.h"
#include "schedules/ir/stmt_analysis.h"
#include "schedules/ir/stmt_functor.h"
#include "schedules/ir/substitute.h"
#include "schedules/ir/tensor_intrin.h"
#include "schedules/lower/passes.h"

namespace tessel::schedules {

namespace {

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
  // A reduction kept in registers (a tuple reduction, or one across threads): its combiner (a
  // plain reduction's is that of its op), its values at a reduction point, and its outputs.
  void BindReduction();
  // Guards. Every split parent must stay within its extent: a root beyond its extent is out of
  // bounds, and an inner loop beyond its parent's extent would alias the next outer iteration.
  void BuildGuards();
  // The cross-thread and cluster reduction loops, and guards for loops bound to fewer threads
  // than the block has.
  absl::Status FindCrossThreadLoops();
  // Unrolling from the stage annotation.
  void PlanUnrolling();
  // The statement at the innermost loop (a reduction in place or no reduction).
  Stmt InnermostStatement();
  // The initialization of a plain reduction stored in place (not in registers).
  Stmt InitInPlace() const;
  // `body` wrapped in the loop at leaf position `p`, with the stages attached there.
  absl::StatusOr<Stmt> WrapLevel(int p, Stmt body);
  // The nests of the stages attached at leaf `iter` (at position `p`): producers, those
  // computed after the body (reverse_compute_at), and the buffers to allocate.
  absl::Status AttachedStages(int p, int iter, std::vector<Producer>* producers,
                              std::vector<Stmt>* after, std::vector<BufferPtr>* allocs);
  // The producers in order with the barriers they need, for the nest at leaf `iter`.
  std::vector<Stmt> PlaceBarriers(std::vector<Producer> producers, int iter) const;
  // A reduction kept in registers, from its first reduction loop on: the accumulators'
  // initialization, one nest of the thread's reduction loops a pass, the all-reduces across
  // threads and the cluster, and the stores of the outputs.
  absl::StatusOr<Stmt> RegisterReduction();
  // The reduction loops (positions from first_reduce_ on) around `innermost`.
  absl::StatusOr<Stmt> ReductionLoops(Stmt innermost);
  // The thread's fold of its elements into `acc_`: one pass with the combiner, or the combiner's
  // two passes (Combiner::steps) where the stage asks for them (annotation "two_pass").
  absl::StatusOr<std::vector<Stmt>> FoldElements(std::vector<BufferPtr>* locals);
  absl::StatusOr<std::vector<Stmt>> FoldOnePass();
  // The steps' buffers go to `locals`; two_pass = 2 reduces each pass across threads.
  absl::StatusOr<std::vector<Stmt>> FoldTwoPasses(int64_t two_pass, std::vector<BufferPtr>* locals);
  // The iterations of the thread's own reduction loops (not those bound to threads or the
  // cluster).
  int64_t ThreadTripCount() const;
  // The points of the stage's reduction domain (the product of its reduction extents).
  int64_t DomainPoints() const;
  // The stores of the outputs from the components in `res`, under `cond`.
  Stmt StoreOutputs(const std::vector<BufferPtr>& res, const Expr& cond) const;
  Stmt MakeLoop(int iter, Stmt body, bool unrolled) const;
  int64_t BlockDim(ThreadTag t) const { return schedules::BlockDim(launch_, t); }
  BufferPtr LocalScalar(const std::string& suffix, DType t) const {
    return MakeBuffer(SanitizeName(s_.name) + suffix, t, {1}, MemScope::kLocal);
  }
  // One local scalar a component of the combiner: `suffix`, with the component's name when the
  // combiner has several.
  std::vector<BufferPtr> ComponentScalars(const std::string& suffix) const;
  // Whether `reader` reads what `writer` writes to `buffer` only at its own block.
  bool SameBlockOnly(const Stmt& writer, const Stmt& reader, const Buffer* buffer) const;
  // The buffers a stage's nest writes: its own, and the other outputs of its tuple reduction.
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

  // A reduction in registers (BindReduction).
  struct Output {
    BufferPtr buffer;
    std::vector<Expr> idx;
    Expr value;  // of the combiner's components (lhs)
  };
  bool in_registers_ = false;
  CombinerPtr comb_;
  std::vector<Expr> values_;
  std::vector<Output> outputs_;
  std::vector<BufferPtr> acc_;
  std::vector<Expr> uniform_;  // components of acc_ folded to the same constant in every thread
  bool reduced_across_threads_ = false;  // two_pass = 2: acc_ holds the whole reduction's tuple

  Expr spatial_cond_, reduce_cond_;
  // kPadTile: the positions in the domain, of a copy that zero-fills the others (null: all).
  Expr pad_cond_;
  int cross_ = -1;    // leaf position of a thread-bound reduction loop
  int cluster_ = -1;  // leaf position of a cluster-bound reduction loop
  int first_reduce_ = -1, init_pos_ = -1;
  std::vector<bool> unrolled_;

  bool wide_ = false;
  BufferPtr acc_buf_;  // wide accumulation of a plain reduction in place
};

absl::StatusOr<Stmt> NestBuilder::Build() {
  BindValue();
  BuildGuards();
  if (absl::Status st = FindCrossThreadLoops(); !st.ok()) return st;
  BindReduction();
  PlanUnrolling();
  for (size_t p = 0; p < s_.leaves.size(); ++p) {
    if (s_.iters[s_.leaves[p]].reduce) {
      first_reduce_ = static_cast<int>(p);
      break;
    }
  }
  init_pos_ = s_.init_at >= 0 ? s_.LeafPosition(s_.init_at) : first_reduce_;
  Stmt body;
  int p = static_cast<int>(s_.leaves.size()) - 1;
  if (in_registers_) {
    auto r = RegisterReduction();
    if (!r.ok()) return r.status();
    body = *r;
    p = first_reduce_ - 1;
  } else {
    body = InnermostStatement();
  }
  for (; p >= 0; --p) {
    auto wrapped = WrapLevel(p, body);
    if (!wrapped.ok()) return wrapped.status();
    body = *wrapped;
  }
  if (s_.leaves.empty()) {
    // A 0-d stage: the body alone (with the reduction's init if any).
    if (s_.reduce && !in_registers_) {
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

void NestBuilder::BindReduction() {
  in_registers_ = s_.combiner != nullptr || (s_.reduce && cross_ >= 0);
  if (!in_registers_) return;
  if (s_.combiner) {
    comb_ = s_.combiner;
    values_ = TupleValues(value_);
    for (const Stage::TupleOutput& o : s_.outputs) {
      const Stage& os = state_.stages[FindStageIndex(state_.stages, o.stage)];
      outputs_.push_back({rw_.Target(os.buffer), rw_.Indices(os.buffer.get(), idx_), o.value});
    }
  } else {
    comb_ = ReduceCombiner(*s_.reduce, vt_);
    values_ = {value_};
    outputs_.push_back({out_, out_idx_, comb_->lhs[0]});
  }
  acc_ = ComponentScalars("_acc");
  uniform_.assign(acc_.size(), nullptr);
}

int64_t NestBuilder::DomainPoints() const {
  const StageBound& b = state_.bounds[si_];
  int64_t n = 1;
  for (size_t r = s_.axes.size(); r < b.root_extent.size(); ++r) n *= b.root_extent[r];
  return n;
}

int64_t NestBuilder::ThreadTripCount() const {
  int64_t n = 1;
  for (size_t p = first_reduce_; p < s_.leaves.size(); ++p) {
    const IterVar& iv = s_.iters[s_.leaves[p]];
    if (iv.reduce && !IsPerThreadTag(iv.thread)) n *= iv.extent;
  }
  return n;
}

std::vector<BufferPtr> NestBuilder::ComponentScalars(const std::string& suffix) const {
  if (comb_->size() == 1) return {LocalScalar(suffix, comb_->type(0))};
  std::vector<BufferPtr> out;
  for (size_t c = 0; c < comb_->size(); ++c) {
    out.push_back(LocalScalar(absl::StrCat(suffix, "_", comb_->lhs[c]->name), comb_->type(c)));
  }
  return out;
}

void NestBuilder::BuildGuards() {
  const StageBound& b = state_.bounds[si_];
  const int naxes = static_cast<int>(s_.axes.size());
  const Analyzer& analyzer = state_.analyzer;
  const bool attached = s_.attach.kind == AttachPoint::Kind::kAt;
  const bool padded = s_.pads_tile() && attached && state_.target.is_cuda() && !s_.is_output;
  for (const IterRelation& rel : s_.relations) {
    if (rel.kind != IterRelation::Kind::kSplit || rel.parent < s_.num_root()) continue;
    const IterVar& parent = s_.iters[rel.parent];
    Expr c = vals_[rel.parent] < parent.extent;
    Expr& acc = parent.reduce ? reduce_cond_ : spatial_cond_;
    // Padded: reduction tiles past the extent run too, on the zeros their operands hold.
    if (!analyzer.CanProve(c) && !(padded && parent.reduce)) acc = MakeAnd(acc, c);
  }
  for (int r = 0; r < s_.num_root(); ++r) {
    Expr c = vals_[r] < b.root_extent[r];
    Expr& acc = r < naxes ? spatial_cond_ : reduce_cond_;
    // Padded: the reduction runs over the whole last tile (its operands hold zeros past the
    // extent); spatial positions keep their bound, which keeps the stores in the buffer.
    if (!analyzer.CanProve(c) && !(padded && r >= naxes)) acc = MakeAnd(acc, c);
    if (r < naxes && attached) {
      int64_t lo = 0, hi = 0;
      const int64_t dim = s_.buffer->shape[r];
      if (!analyzer.ConstBounds(g_[r], &lo, &hi) || lo < 0 || hi >= dim) {
        // Padded: a shared copy selects zeros outside the domain; a fragment computes there.
        Expr& cond = padded ? pad_cond_ : acc;
        if (!(analyzer.ConstBounds(g_[r], &lo, &hi) && lo >= 0)) cond = MakeAnd(cond, g_[r] >= 0);
        cond = MakeAnd(cond, g_[r] < dim);
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
  return MakeStore(out_, out_idx_, ReduceIdentity(*s_.reduce, vt_));
}

Stmt NestBuilder::InnermostStatement() {
  const Expr guard = MakeAnd(spatial_cond_, reduce_cond_);
  wide_ = state_.wide_accumulation && s_.reduce && s_.init_at < 0 && IsFloat(vt_);
  if (wide_) {
    acc_buf_ = LocalScalar("_acc", DType::kFloat64);
    Expr acc = MakeLoad(acc_buf_, {MakeInt(0)});
    return MakeIf(guard,
                  MakeStore(acc_buf_, {MakeInt(0)},
                            ReduceCombine(*s_.reduce, acc, MakeCast(DType::kFloat64, value_))));
  }
  if (!s_.reduce) {
    Expr value = value_;
    if (pad_cond_ && s_.buffer->scope == MemScope::kShared) {
      value = MakeSelect(pad_cond_, value, MakeZero(vt_));
    }
    return MakeIf(guard, MakeStore(out_, out_idx_, value));
  }
  Expr cur = MakeLoad(out_, out_idx_);
  return MakeIf(guard, MakeStore(out_, out_idx_, ReduceCombine(*s_.reduce, cur, value_)));
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
  if (in_registers_) return loop;
  if (wide_ && p == init_pos_) {
    // acc = identity; the reduction loops; out = acc rounded to the output type.
    loop = MakeAllocate(
        acc_buf_,
        MakeSeq(
            {MakeStore(acc_buf_, {MakeInt(0)}, ReduceIdentity(*s_.reduce, DType::kFloat64)), loop,
             MakeIf(spatial_cond_,
                    MakeStore(out_, out_idx_, MakeCast(vt_, MakeLoad(acc_buf_, {MakeInt(0)}))))}));
  } else if (s_.reduce && p == init_pos_) {
    // The initialization nest: the spatial loops at and below this position.
    Stmt init = MakeIf(spatial_cond_, InitInPlace());
    for (int q = static_cast<int>(s_.leaves.size()) - 1; q >= p; --q) {
      if (!s_.iters[s_.leaves[q]].reduce) init = MakeLoop(s_.leaves[q], init, unrolled_[q]);
    }
    loop = MakeSeq({init, loop});
  }
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
    const bool shared = !IsRegisterScope(a.buffer->scope) && state_.target.is_cuda();
    if (!shared && !ContainsSync(*nest)) {
      // A thread's own values (registers) computed only by the threads that use them: the
      // enclosing loops bound to fewer threads than the block has keep the others out, as they
      // do at this stage's own stores (else those threads compute at indices past the loops'
      // extents, reading past the buffers they index).
      Expr in_range;
      for (int q = 0; q <= p; ++q) {
        const IterVar& iv = s_.iters[s_.leaves[q]];
        if (IsThreadTag(iv.thread) && iv.extent < BlockDim(iv.thread)) {
          in_range = MakeAnd(in_range, Expr(iv.var) < iv.extent);
        }
      }
      if (in_range) nest = MakeIf(in_range, *nest);
    }
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

absl::StatusOr<Stmt> NestBuilder::RegisterReduction() {
  for (size_t p = first_reduce_ + 1; p < s_.leaves.size(); ++p) {
    const IterVar& iv = s_.iters[s_.leaves[p]];
    if (!iv.reduce && (iv.thread == ThreadTag::kNone || iv.thread == ThreadTag::kVThread)) {
      return absl::FailedPreconditionError(
          absl::StrCat("stage ", s_.name,
                       " keeps its reduction in registers (a tuple reduction, or one across "
                       "threads) but has spatial loop ",
                       iv.var->name,
                       " inside its reduction loops; move the "
                       "reduction loops inside"));
    }
  }
  std::vector<BufferPtr> locals = acc_;
  auto folded = FoldElements(&locals);
  if (!folded.ok()) return folded.status();
  std::vector<Stmt> seq;
  for (size_t c = 0; c < acc_.size(); ++c) {
    seq.push_back(MakeStore(acc_[c], {MakeInt(0)}, comb_->identity[c]));
  }
  seq.insert(seq.end(), folded->begin(), folded->end());
  // Across threads, then across the cluster (one tuple a CTA, through distributed shared memory).
  std::vector<BufferPtr> res = acc_, results;
  std::vector<Stmt> reduce;
  Expr store_cond = spatial_cond_;
  const IterVar* tv = cross_ >= 0 ? &s_.iters[s_.leaves[cross_]] : nullptr;
  const IterVar* cv = cluster_ >= 0 ? &s_.iters[s_.leaves[cluster_]] : nullptr;
  for (const IterVar* iv : {tv, cv}) {
    if (iv == nullptr) continue;
    if (s_.buffer->scope != MemScope::kLocal) store_cond = MakeAnd(store_cond, Expr(iv->var) == 0);
    if (reduced_across_threads_) continue;
    std::vector<BufferPtr> next = ComponentScalars(iv == tv ? "_red" : "_cluster_red");
    std::vector<Expr> values;
    for (size_t c = 0; c < res.size(); ++c) {
      // A component every thread folded to the same constant goes as that constant.
      values.push_back(res == acc_ && uniform_[c] ? uniform_[c] : MakeLoad(res[c], {MakeInt(0)}));
    }
    reduce.push_back(MakeAllReduce(comb_, values, next, iv->thread, BlockDim(iv->thread)));
    results.insert(results.end(), next.begin(), next.end());
    res = next;
  }
  reduce.push_back(StoreOutputs(res, store_cond));
  // The results' allocations around the all-reduces, the thread's around everything.
  Stmt tail = MakeSeq(reduce);
  for (auto it = results.rbegin(); it != results.rend(); ++it) tail = MakeAllocate(*it, tail);
  seq.push_back(tail);
  Stmt block = MakeSeq(seq);
  for (auto it = locals.rbegin(); it != locals.rend(); ++it) block = MakeAllocate(*it, block);
  for (const IterVar* iv : {tv, cv}) {
    if (iv == nullptr) continue;
    block = MakeFor(iv->var, MakeInt(0), MakeInt(BlockDim(iv->thread)), ForKind::kThreadBinding,
                    iv->thread, block, iv->annotations);
  }
  return block;
}

absl::StatusOr<Stmt> NestBuilder::ReductionLoops(Stmt innermost) {
  Stmt body = std::move(innermost);
  for (int p = static_cast<int>(s_.leaves.size()) - 1; p >= first_reduce_; --p) {
    auto wrapped = WrapLevel(p, body);
    if (!wrapped.ok()) return wrapped.status();
    body = *wrapped;
  }
  return body;
}

absl::StatusOr<std::vector<Stmt>> NestBuilder::FoldElements(std::vector<BufferPtr>* locals) {
  auto it = s_.annotations.find("two_pass");
  const int64_t two_pass = it == s_.annotations.end() ? 0 : it->second;
  if (two_pass == 0 || !comb_->has_two_pass_form()) return FoldOnePass();
  return FoldTwoPasses(two_pass, locals);
}

absl::StatusOr<std::vector<Stmt>> NestBuilder::FoldOnePass() {
  const Expr guard = MakeAnd(spatial_cond_, reduce_cond_);
  std::vector<Expr> acc;
  for (const BufferPtr& b : acc_) acc.push_back(MakeLoad(b, {MakeInt(0)}));
  // acc = acc (+) values: the combiner's temporaries, then the new components (bound first
  // when there are several, since each reads the old ones), then the stores.
  // Each value that is not a constant is bound once: a tuple's combiner may read it several
  // times (an op's reads it once).
  std::vector<std::pair<VarPtr, Expr>> lets;
  std::vector<Expr> values;
  for (size_t i = 0; i < values_.size(); ++i) {
    const Expr& v = values_[i];
    if (comb_->op || IsImmediate(v)) {
      values.push_back(v);
      continue;
    }
    VarPtr x = MakeVar(absl::StrCat(SanitizeName(s_.name), "_", comb_->rhs[i]->name), v->dtype);
    lets.push_back({x, v});
    values.push_back(x);
  }
  Combination c = Combine(*comb_, acc, values, SanitizeName(s_.name));
  std::vector<Stmt> stores;
  lets.insert(lets.end(), c.lets.begin(), c.lets.end());
  for (size_t i = 0; i < acc_.size(); ++i) {
    Expr v = c.values[i];
    if (acc_.size() > 1) {
      VarPtr nv = MakeVar(absl::StrCat(SanitizeName(s_.name), "_", comb_->lhs[i]->name), v->dtype);
      lets.push_back({nv, v});
      v = nv;
    }
    stores.push_back(MakeStore(acc_[i], {MakeInt(0)}, v));
  }
  Stmt update = MakeSeq(stores);
  for (auto it = lets.rbegin(); it != lets.rend(); ++it)
    update = MakeLet(it->first, it->second, update);
  auto loops = ReductionLoops(MakeIf(guard, update));
  if (!loops.ok()) return loops.status();
  return std::vector<Stmt>{*loops};
}

absl::StatusOr<std::vector<Stmt>> NestBuilder::FoldTwoPasses(int64_t two_pass,
                                                             std::vector<BufferPtr>* locals) {
  const Expr guard = MakeAnd(spatial_cond_, reduce_cond_);
  auto load = [](const BufferPtr& b) { return MakeLoad(b, {MakeInt(0)}); };
  // The combiner's two passes: each run of reduction steps that do not read each other is one
  // pass over the elements, each step between them is computed once; the components from the
  // steps' results. With two_pass = 2 the passes go over all the reduction's elements: each
  // pass's results are reduced across the threads before the next pass (no tuple all-reduce
  // follows); with 1, over the thread's own, and the tuples are reduced after.
  const bool across_threads = two_pass == 2 && (cross_ >= 0 || cluster_ >= 0);
  reduced_across_threads_ = across_threads;
  std::vector<Stmt> out;
  std::vector<Expr> results;
  std::vector<std::pair<const Combiner::Step*, BufferPtr>> pass;
  auto flush = [&]() -> absl::Status {
    if (pass.empty()) return absl::OkStatus();
    std::vector<Stmt> updates;
    std::vector<Expr> pass_results;
    std::set<const Combiner::Step*> folded;
    for (const auto& [step, b] : pass) {
      Expr term = Instantiate(*comb_, step->term, {}, values_, results);
      if (IsImmediate(term) && (!guard || across_threads)) {
        // The same term for every element (a count): folded, over the thread's elements (no
        // guard: every thread has as many) or over all the reduction's (two_pass = 2: the guards
        // keep exactly the reduction's domain), so that nothing exchanges or divides by it.
        const double points =
            static_cast<double>(across_threads ? DomainPoints() : ThreadTripCount());
        Expr v =
            *step->op != ReduceOp::kSum ? term : Simplify(term * MakeFloat(points, term->dtype));
        out.push_back(MakeStore(b, {MakeInt(0)}, v));
        pass_results.push_back(v);
        folded.insert(step);
        continue;
      }
      out.push_back(MakeStore(b, {MakeInt(0)}, ReduceIdentity(*step->op, b->dtype)));
      updates.push_back(MakeStore(b, {MakeInt(0)}, ReduceCombine(*step->op, load(b), term)));
      pass_results.push_back(load(b));
    }
    if (!updates.empty()) {
      auto loops = ReductionLoops(MakeIf(guard, MakeSeq(updates)));
      if (!loops.ok()) return loops.status();
      out.push_back(*loops);
    }
    if (across_threads && folded.size() < pass.size()) {
      // The pass's results over all the reduction's elements: reduced across the threads (and
      // the cluster) with their own ops before the next pass reads them.
      std::vector<size_t> reduced;
      std::vector<std::pair<ReduceOp, DType>> ops;
      for (size_t i = 0; i < pass.size(); ++i) {
        if (folded.count(pass[i].first)) continue;
        reduced.push_back(i);
        ops.push_back({*pass[i].first->op, pass[i].second->dtype});
      }
      const CombinerPtr side_by_side = ComponentwiseCombiner(ops);
      for (int pos : {cross_, cluster_}) {
        if (pos < 0) continue;
        const IterVar& iv = s_.iters[s_.leaves[pos]];
        std::vector<BufferPtr> red;
        std::vector<Expr> values;
        for (size_t i : reduced) {
          const auto& [step, b] = pass[i];
          red.push_back(LocalScalar(
              absl::StrCat("_", step->result->name, pos == cross_ ? "_red" : "_cluster_red"),
              b->dtype));
          values.push_back(pass_results[i]);
        }
        out.push_back(MakeAllReduce(side_by_side, values, red, iv.thread, BlockDim(iv.thread)));
        locals->insert(locals->end(), red.begin(), red.end());
        for (size_t j = 0; j < reduced.size(); ++j) pass_results[reduced[j]] = load(red[j]);
      }
    }
    results.insert(results.end(), pass_results.begin(), pass_results.end());
    pass.clear();
    return absl::OkStatus();
  };
  for (const Combiner::Step& step : comb_->steps) {
    BufferPtr b = LocalScalar(absl::StrCat("_", step.result->name), step.result->dtype);
    locals->push_back(b);
    if (step.op) {
      // A step that reads a result of the current pass starts the next pass.
      for (const auto& [earlier, eb] : pass) {
        if (UsesVar(step.term, earlier->result.get())) {
          if (absl::Status st = flush(); !st.ok()) return st;
          break;
        }
      }
      pass.push_back({&step, b});
      continue;
    }
    if (absl::Status st = flush(); !st.ok()) return st;
    out.push_back(MakeStore(b, {MakeInt(0)}, Instantiate(*comb_, step.term, {}, {}, results)));
    results.push_back(load(b));
  }
  if (absl::Status st = flush(); !st.ok()) return st;
  for (size_t c = 0; c < acc_.size(); ++c) {
    Expr v = Instantiate(*comb_, comb_->from_steps[c], {}, {}, results);
    if (IsImmediate(v)) uniform_[c] = v;
    out.push_back(MakeStore(acc_[c], {MakeInt(0)}, v));
  }
  return out;
}

Stmt NestBuilder::StoreOutputs(const std::vector<BufferPtr>& res, const Expr& cond) const {
  std::vector<Expr> components;
  for (const BufferPtr& b : res) components.push_back(MakeLoad(b, {MakeInt(0)}));
  std::vector<Stmt> stores;
  for (const Output& o : outputs_) {
    stores.push_back(MakeStore(
        o.buffer, o.idx, MakeCast(o.buffer->dtype, Instantiate(*comb_, o.value, components, {}))));
  }
  return MakeIf(cond, MakeSeq(stores));
}

Stmt NestBuilder::MakeLoop(int iter, Stmt body, bool unrolled) const {
  const IterVar& iv = s_.iters[iter];
  ForKind kind = iv.kind;
  if (kind == ForKind::kSerial && unrolled) kind = ForKind::kUnrolled;
  if (iv.thread == ThreadTag::kVThread) kind = ForKind::kThreadBinding;
  if (!body) body = MakeSeq({});
  if (iv.extent == 1 && kind != ForKind::kThreadBinding) {
    body = Substitute(body, {{iv.var.get(), MakeInt(0, iv.var->dtype)}});
    // A bulk copy's box is the nest from its marked loop: with that loop gone (one iteration, a
    // batch axis's), the nest starts at the loop inside it, which takes the mark.
    const auto* inner = As<ForNode>(body);
    if (BulkCopy(iv.annotations) > 0 && inner && BulkCopy(inner->annotations) == 0) {
      std::vector<std::pair<std::string, int64_t>> annotations = inner->annotations;
      annotations.emplace_back(kBulkCopy, BulkCopy(iv.annotations));
      body = MakeFor(inner->var, inner->min, inner->extent, inner->kind, inner->thread, inner->body,
                     std::move(annotations));
    }
    return body;
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
