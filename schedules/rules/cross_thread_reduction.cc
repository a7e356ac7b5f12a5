// CrossThreadReduction: row reductions without data reuse on CUDA (softmax, layernorm, reduce).
//
// Applied at the injective stage that consumes the reductions (or at a reduction that is itself
// an output). With enough rows to fill the GPU: the consumer's rows go to blocks and its columns
// to a sampled number of threads at a sampled vector width; every reduction it reads is computed
// at the consumer's row, in registers, reduced across the same threads (warp shuffles, then
// shared memory) with its loads unrolled. Reductions that fuse fork: separate, or one tuple
// reduction (fuse_reductions: softmax's online maximum and sum); and where every reduction reads
// one operand of the consumer's shape, a third sketch keeps each row of it in registers, split over
// a sampled thread-block cluster on GPUs that have them (rules::RowInRegisters). With few rows
// (fewer than the SMs): each reduction splits into sampled chunks reduced by separate blocks
// (rfactor), then combined, as one tuple reduction where they fuse (a variance's Welford triples);
// the consumer is left to AutoBind. Where they fuse, a second sketch does all of it in one
// grid-synchronized kernel that reads each row once (rules::GridRows).

#include <algorithm>
#include <set>

#include "schedules/ir/substitute.h"
#include "schedules/rules/row_schedules.h"
#include "schedules/rules/rule_util.h"
#include "schedules/rules/schedule_rule.h"
#include "schedules/util/check.h"
#include "schedules/util/status_macros.h"

namespace tessel::schedules {
namespace {

using rules::IsReduceLoop;
using rules::SampleUniform;

class CrossThreadReduction final : public ScheduleRule {
 public:
  explicit CrossThreadReduction(const Target& t) : target_(t) {}
  std::string name() const override { return "cross_thread_reduction"; }

  absl::StatusOr<std::vector<Schedule>> Apply(const Schedule& sch,
                                              const std::string& stage) const override {
    const Stage* st = sch.FindStage(stage);
    if (!target_.is_cuda() || !st || st->inlined() || rules::IsScheduled(*st)) {
      return std::vector<Schedule>{};
    }
    const std::vector<std::string> reds = Reductions(sch, *st);
    if (reds.empty()) return std::vector<Schedule>{};
    const Stage& first = *sch.FindStage(reds.front());
    const int64_t rows = RowsOf(first);
    if (rows < target_.sm_count) {
      // Few long rows: partial reductions over blocks, all of them as one tuple reduction where
      // they fuse (fuse_reductions: a variance's partials are Welford triples, a softmax's
      // online pairs) so that the statistics read the input once.
      Schedule s = sch;
      bool fused = false;
      if (reds.size() > 1) {
        Schedule c = sch;
        if (Fused(&c, reds).ok()) {
          s = std::move(c);
          fused = true;
        }
      }
      if (!fused) {
        for (const std::string& r : reds) TESSEL_RETURN_IF_ERROR(Partial(&s, r));
      }
      if (!st->reduces()) TESSEL_RETURN_IF_ERROR(ColumnsOuter(&s, stage));
      std::vector<Schedule> out = {std::move(s)};
      if (const Buffer* x = fused ? RowOperand(sch, *st, reds) : nullptr) {
        Schedule g = sch;
        if (InGrid(&g, *st, reds, *x).ok()) out.push_back(std::move(g));
      }
      return out;
    }
    if (st->reduces()) {
      // An output reduction: rows to blocks.
      Schedule s = sch;
      TESSEL_ASSIGN_OR_RETURN(BlockRV b, s.GetBlock(stage));
      TESSEL_ASSIGN_OR_RETURN(IntRV threads, Threads(&s, ReduceExtent(*st)));
      TESSEL_RETURN_IF_ERROR(CrossThread(&s, b, threads, /*bind_rows=*/true));
      return std::vector<Schedule>{std::move(s)};
    }
    std::vector<Schedule> out;
    const bool fusable = reds.size() > 1 && Fusable(sch, reds);
    for (bool fuse : {false, true}) {
      if (fuse && !fusable) continue;
      Schedule s = sch;
      TESSEL_RETURN_IF_ERROR(AtConsumer(&s, stage, reds, fuse));
      out.push_back(std::move(s));
    }
    if (const Buffer* x = RowOperand(sch, *st, reds); x && InRegistersFits(*st, *x)) {
      Schedule s = sch;
      TESSEL_RETURN_IF_ERROR(InRegisters(&s, *st, reds, *x));
      out.push_back(std::move(s));
    }
    return out;
  }

 private:
  // The reductions without reuse that `st` reads, directly or through each other, in stage
  // order; empty when `st` is not their consumer (or they are contractions).
  static std::vector<std::string> Reductions(const Schedule& s, const Stage& st) {
    std::set<std::string> found;
    std::vector<const Stage*> work = {&st};
    if (st.reduces()) found.insert(st.name);
    while (!work.empty()) {
      const Stage* cur = work.back();
      work.pop_back();
      for (const LoadNode* l : CollectLoads(cur->body)) {
        const Stage* p = s.FindStage(l->buffer->name);
        if (!p || p->inlined() || !p->reduces() || found.count(p->name)) continue;
        if (rules::IsScheduled(*p) || p->axes.size() != 1 || p->reduce_axes.size() != 1) {
          return {};
        }
        found.insert(p->name);
        work.push_back(p);
      }
    }
    if (st.reduces() && (st.axes.empty() || st.reduce_axes.size() != 1)) return {};
    std::vector<std::string> out;
    for (const Stage& x : s.stages()) {
      if (found.count(x.name)) out.push_back(x.name);
    }
    return out;
  }

  static int64_t RowsOf(const Stage& st) {
    int64_t rows = 1;
    for (int64_t d : st.buffer->shape) rows *= d;
    return rows;
  }
  static int64_t ReduceExtent(const Stage& st) { return st.iters[st.axes.size()].extent; }

  absl::StatusOr<IntRV> Threads(Schedule* s, int64_t extent) const {
    return SampleUniform(s, rules::PowersOfTwo(32, target_.max_threads_per_block),
                         std::max<int64_t>(32, extent));
  }

  // Reduction loop (the stage's last) -> [-1, threads, vec]; threads bound, vec vectorized
  // (vector loads, the lanes accumulated in order; unrolled when vec is 1); with
  // `bind_rows` the spatial loops fused and bound to blocks.
  static absl::Status CrossThread(Schedule* s, BlockRV b, IntRV threads, bool bind_rows) {
    TESSEL_ASSIGN_OR_RETURN(std::vector<LoopRV> loops, s->GetLoops(b));
    TESSEL_ASSIGN_OR_RETURN(IntRV vec, SampleUniform(s, {1, 2, 4}, 4));
    TESSEL_ASSIGN_OR_RETURN(auto p, s->Split(loops.back(), {-1, threads, vec}));
    TESSEL_RETURN_IF_ERROR(s->Bind(p[1], "threadIdx.x"));
    TESSEL_RETURN_IF_ERROR(s->Vectorize(p[2]));
    if (bind_rows) {
      std::vector<LoopRV> spatial(loops.begin(), loops.end() - 1);
      TESSEL_ASSIGN_OR_RETURN(LoopRV rows, rules::FuseAll(s, spatial));
      TESSEL_RETURN_IF_ERROR(s->Bind(rows, "blockIdx.x"));
    }
    return absl::OkStatus();
  }

  // Partial sums over chunks by many blocks (rfactor), then one block per row combines them.
  absl::Status Partial(Schedule* s, const std::string& name) const {
    TESSEL_ASSIGN_OR_RETURN(BlockRV b, s->GetBlock(name));
    TESSEL_ASSIGN_OR_RETURN(std::vector<LoopRV> loops, s->GetLoops(b));
    const int64_t cols = s->LoopExtent(loops.back());
    TESSEL_ASSIGN_OR_RETURN(IntRV chunk, SampleUniform(s, {2048, 4096, 8192, 16384}, cols));
    TESSEL_ASSIGN_OR_RETURN(auto ks, s->Split(loops.back(), {-1, chunk}));
    TESSEL_ASSIGN_OR_RETURN(BlockRV rf, s->RFactor(ks[0]));
    TESSEL_ASSIGN_OR_RETURN(std::vector<LoopRV> rl, s->GetLoops(rf));
    TESSEL_ASSIGN_OR_RETURN(LoopRV fused, s->Fuse({rl[0], rl[1]}));
    TESSEL_RETURN_IF_ERROR(s->Bind(fused, "blockIdx.x"));
    TESSEL_ASSIGN_OR_RETURN(IntRV rf_threads, SampleUniform(s, {128, 256, 512}, cols));
    TESSEL_RETURN_IF_ERROR(CrossThread(s, rf, rf_threads, /*bind_rows=*/false));
    TESSEL_ASSIGN_OR_RETURN(IntRV threads, SampleUniform(s, {32, 64, 128, 256}, 256));
    return CrossThread(s, b, threads, /*bind_rows=*/true);
  }

  // The reductions as one tuple reduction (fuse_reductions), its partials over chunks by many
  // blocks, each folded in one pass or in the combiner's two (sampled); fails
  // (leaving a partly changed schedule) when the reductions do not fuse.
  absl::Status Fused(Schedule* s, const std::vector<std::string>& reds) const {
    std::vector<BlockRV> blocks;
    for (const std::string& name : reds) {
      TESSEL_ASSIGN_OR_RETURN(BlockRV b, s->GetBlock(name));
      blocks.push_back(b);
    }
    TESSEL_RETURN_IF_ERROR(s->FuseReductions(blocks));
    // How the partials and then their combination fold (Schedule::FuseReductions): one pass, two
    // passes a thread, or two passes over all (rfactor copies the first to the partials).
    TESSEL_ASSIGN_OR_RETURN(IntRV partials, SampleUniform(s, {0, 1, 2}, 2));
    TESSEL_RETURN_IF_ERROR(s->Annotate(blocks[0], "two_pass", partials));
    TESSEL_RETURN_IF_ERROR(Partial(s, reds[0]));
    TESSEL_ASSIGN_OR_RETURN(IntRV combination, SampleUniform(s, {0, 1, 2}, 2));
    return s->Annotate(blocks[0], "two_pass", combination);
  }

  // The consumer of few rows: columns over blocks and a sampled number of threads at a sampled
  // vector width, all rows of a column chunk in one thread (per-column operands such as
  // layernorm's weight and bias loaded once for every row).
  absl::Status ColumnsOuter(Schedule* s, const std::string& consumer) const {
    TESSEL_ASSIGN_OR_RETURN(BlockRV y, s->GetBlock(consumer));
    TESSEL_ASSIGN_OR_RETURN(std::vector<LoopRV> yl, s->GetLoops(y));
    if (yl.size() < 2) return absl::OkStatus();  // AutoBind takes it
    LoopRV rows = yl[0];
    if (yl.size() > 2) {
      TESSEL_ASSIGN_OR_RETURN(rows, s->Fuse({yl.begin(), yl.end() - 1}));
    }
    TESSEL_ASSIGN_OR_RETURN(IntRV threads, SampleUniform(s, {64, 128, 256, 512}, 512));
    TESSEL_ASSIGN_OR_RETURN(IntRV vec, SampleUniform(s, {1, 2, 4}, 4));
    TESSEL_ASSIGN_OR_RETURN(auto js, s->Split(yl.back(), {-1, threads, vec}));
    TESSEL_RETURN_IF_ERROR(s->Reorder({js[0], js[1], rows, js[2]}));
    TESSEL_RETURN_IF_ERROR(s->Bind(js[0], "blockIdx.x"));
    TESSEL_RETURN_IF_ERROR(s->Bind(js[1], "threadIdx.x"));
    TESSEL_RETURN_IF_ERROR(s->Vectorize(js[2]));
    return absl::OkStatus();
  }

  // Whether the reductions fuse into one tuple reduction (tried on a copy).
  static bool Fusable(const Schedule& sch, const std::vector<std::string>& reds) {
    Schedule s = sch;
    std::vector<BlockRV> blocks;
    for (const std::string& r : reds) {
      auto b = s.GetBlock(r);
      if (!b.ok()) return false;
      blocks.push_back(*b);
    }
    return s.FuseReductions(blocks).ok();
  }

  absl::Status AtConsumer(Schedule* s, const std::string& consumer,
                          const std::vector<std::string>& reds, bool fuse) const {
    TESSEL_ASSIGN_OR_RETURN(BlockRV y, s->GetBlock(consumer));
    TESSEL_ASSIGN_OR_RETURN(std::vector<LoopRV> yl, s->GetLoops(y));
    LoopRV row = yl[0];
    if (yl.size() == 1) {
      // One value per row (a mean): the block's threads reduce, the row is written once.
      TESSEL_ASSIGN_OR_RETURN(IntRV threads, Threads(s, ReduceExtent(*s->FindStage(reds.front()))));
      TESSEL_RETURN_IF_ERROR(s->Bind(row, "blockIdx.x"));
      return AttachReductions(s, reds, row, threads, fuse);
    }
    if (yl.size() > 2) {
      TESSEL_ASSIGN_OR_RETURN(row, s->Fuse({yl.begin(), yl.end() - 1}));
    }
    LoopRV cols = yl.back();
    TESSEL_ASSIGN_OR_RETURN(IntRV threads, Threads(s, s->LoopExtent(cols)));
    TESSEL_ASSIGN_OR_RETURN(IntRV vec, SampleUniform(s, {1, 2, 4}, 4));
    TESSEL_ASSIGN_OR_RETURN(auto js, s->Split(cols, {-1, threads, vec}));
    TESSEL_RETURN_IF_ERROR(s->Bind(row, "blockIdx.x"));
    TESSEL_RETURN_IF_ERROR(s->Bind(js[1], "threadIdx.x"));
    TESSEL_RETURN_IF_ERROR(s->Vectorize(js[2]));
    return AttachReductions(s, reds, row, threads, fuse);
  }

  // Every reduction computed at the consumer's row loop, in registers, across `threads`; with
  // `fuse`, all of them as one tuple reduction (fuse_reductions, the first leads; in local scope
  // first, since the others follow it from then on), each thread's elements folded in one pass
  // (they are read from memory: two passes would read them twice, as separate reductions do).
  static absl::Status AttachReductions(Schedule* s, const std::vector<std::string>& reds,
                                       LoopRV row, IntRV threads, bool fuse) {
    std::vector<BlockRV> blocks;
    for (const std::string& r : reds) {
      TESSEL_ASSIGN_OR_RETURN(BlockRV b, s->GetBlock(r));
      TESSEL_RETURN_IF_ERROR(s->SetScope(b, "local"));
      blocks.push_back(b);
    }
    if (fuse) {
      TESSEL_RETURN_IF_ERROR(s->FuseReductions(blocks));
      blocks.resize(1);
    }
    for (auto it = blocks.rbegin(); it != blocks.rend(); ++it) {  // consumers first
      TESSEL_RETURN_IF_ERROR(s->ComputeAt(*it, row));
      TESSEL_RETURN_IF_ERROR(CrossThread(s, *it, threads, /*bind_rows=*/false));
    }
    return absl::OkStatus();
  }

  // The input every reduction and the consumer read with the consumer's shape (softmax's and
  // layernorm's X), when the consumer is a (row, column) stage: the operand whose row
  // RowInRegisters keeps in registers; nullptr otherwise.
  static const Buffer* RowOperand(const Schedule& s, const Stage& consumer,
                                  const std::vector<std::string>& reds) {
    if (consumer.axes.size() != 2 || !consumer.reduce_axes.empty()) return nullptr;
    for (const LoadNode* l : CollectLoads(consumer.body)) {
      const Buffer* x = l->buffer.get();
      if (s.FindStage(x->name) || x->shape != consumer.buffer->shape) continue;
      bool all = true;
      for (const std::string& r : reds) all = all && !CollectLoads(s.FindStage(r)->body, x).empty();
      if (all) return x;
    }
    return nullptr;
  }

  // Lanes of a 16-byte vector of `x`.
  static int64_t VectorLanes(const Buffer& x) {
    return std::max<int64_t>(1, 16 / DTypeBytes(x.dtype));
  }

  // The smallest split of the register-row sketch (128 threads, one vector each) divides the row.
  static bool InRegistersFits(const Stage& y, const Buffer& x) {
    return y.iters[1].extent % (128 * VectorLanes(x)) == 0;
  }

  // Every row read once into registers (rules::RowInRegisters): 16-byte vectors, a sampled
  // number of threads and of vectors a thread; on GPUs with thread-block clusters the row is
  // split over a cluster of as many CTAs as the rest leaves (a sample whose cluster is not a
  // whole number of CTAs, or too large, is rejected before it is measured). The sketch itself is
  // built with the smallest choices, which InRegistersFits guarantees divide the row.
  absl::Status InRegisters(Schedule* s, const Stage& y, const std::vector<std::string>& reds,
                           const Buffer& x) const {
    const int64_t lanes = VectorLanes(x), cols = y.iters[1].extent;
    TESSEL_ASSIGN_OR_RETURN(
        IntRV threads, SampleUniform(s, {128, 256, 512, 1024},
                                     std::min(target_.max_threads_per_block, cols / lanes), 0));
    std::vector<Factor> split = {threads, lanes};
    if (target_.max_cluster_ctas > 1) {
      TESSEL_ASSIGN_OR_RETURN(
          IntRV vectors,
          SampleUniform(s, {1, 2, 4, 8, 16}, std::min<int64_t>(16, cols / (128 * lanes)), 0));
      split.insert(split.begin(), {-1, vectors});
    } else {
      split.insert(split.begin(), -1);
    }
    return rules::RowInRegisters(s, y.name, reds, x.name, split);
  }

  // Few long rows whose statistics fuse into one tuple reduction (layernorm's Welford triple,
  // softmax's online pair) in one grid-synchronized kernel (rules::GridRows): a sampled number of
  // blocks (at most one an SM, so that all are resident) and of threads, 16-byte vectors, each
  // thread's share of the row in registers; the first per-column operand of the consumer
  // (layernorm's weight) in shared memory (one slice is 1/G of a row: two would not fit for long
  // rows). Fails, leaving a partly changed schedule, where the statistics are not of that form or
  // the sketch's own choices (the fewest blocks and threads) do not divide the row.
  absl::Status InGrid(Schedule* s, const Stage& y, const std::vector<std::string>& reds,
                      const Buffer& x) const {
    const int64_t lanes = VectorLanes(x), cols = y.iters[1].extent;
    const std::vector<int64_t> blocks = rules::PowersOfTwo(16, target_.sm_count);
    if (blocks.empty() || cols % (blocks[0] * 256 * lanes) != 0) {
      return absl::FailedPreconditionError("the row does not divide into the smallest grid");
    }
    std::vector<std::string> per_column;
    for (const LoadNode* l : CollectLoads(y.body)) {
      if (!s->FindStage(l->buffer->name) && l->buffer->shape == std::vector<int64_t>{cols}) {
        per_column.push_back(l->buffer->name);
        break;
      }
    }
    TESSEL_ASSIGN_OR_RETURN(IntRV g, SampleUniform(s, blocks, target_.sm_count, 0));
    TESSEL_ASSIGN_OR_RETURN(IntRV threads,
                            SampleUniform(s, {256, 512, 1024}, target_.max_threads_per_block, 0));
    return rules::GridRows(s, y.name, reds, x.name, per_column, {g, -1, threads, lanes});
  }

  Target target_;
};

}  // namespace

std::unique_ptr<ScheduleRule> MakeCrossThreadReduction(const Target& target) {
  return std::make_unique<CrossThreadReduction>(target);
}

}  // namespace tessel::schedules
