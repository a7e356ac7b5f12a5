// MultiLevelTiling: contractions with data reuse (Meta-Schedule's multi-level tiling): matmul,
// batch matmul and convolution as an implicit GEMM, with their epilogues.
//
// A contraction is a sum over products of loads whose indices are affine in the loop variables
// (rules::IsContraction). Its GEMM view (GemmAxesOf): the output's innermost axis is n, the
// innermost axis an operand not using n depends on is m, every other output axis is a batch axis
// (conv NCHW out[n, k, p, q]: n = q, m = k, batch n and p; NHWC out[n, p, q, k]: n = k, m = q).
// Computed operands (a convolution's padding) are left alone by auto_inline and placed here: on
// CUDA inlined into the operand's shared-memory copy (the fetch evaluates the bounds check, so it
// never reads outside the input and no padded tensor is written), on the host into the loads.
//
// CUDA, SSSRRSRS: the output's m and n loops are tiled into S0 block / S1 virtual thread / S2
// thread / per-thread tile, ordered [batch] mb nb | mv nv | mt nt | mw nw, bound to blockIdx
// (the batch loops fused on blockIdx.z), vthread and threadIdx, the per-thread tile unrolled. The
// accumulator (cache_write local) is computed at the thread loop; its per-thread tile is split
// again into S3 x S4 and its reduction k into R0 (steps through shared memory) / R1 / R2,
// ordered R0 R1 [taps] [batch] S3 R2 S4 (with the spatial levels above: S S S R R S R S). k is
// the plain reduction loops fused (a convolution's channel); a convolution's filter taps stay
// whole loops inside R1 so that every cache holds an exact box. Every input is cached in shared
// memory at R0 or at R1, fused and spread over the block's threads at a sampled vector width
// (cooperative fetch), and in registers at R1 or at R2: one sketch, both
// levels sample_compute_location decisions.
// Host, SSRSRS: the reduction loops fused into k (plain loops outermost); m and n tiled in four
// levels, k in two, ordered [batch] i0 j0 | i1 j1 | k0 | i2 j2 | k1 | i3 j3; the batch loops and
// the outer tiles fused and parallel, the innermost n tile vectorized.
//
// Split-K (both targets; see kSplitKMax below): a second sketch, where the output has fewer block
// tiles than the GPU's SMs or k is long, splits k into a sampled number of chunks whose partials
// (rfactor) are tiled as above as a batch of contractions, then summed in order by a combine
// pass (CUDA: one output a thread, with the epilogue; host: AutoBind's loops).
//
// Software pipelining (CUDA, more than 16 outputs along n and along m with the batch): each of
// the sketches above again, with every shared copy at R0 and R0 a software pipeline of 2 to 4
// stages (inject_software_pipeline: cp.async into multi-buffered slots where a copy is 4, 8 or 16
// contiguous bytes, one barrier a step). In these sketches a row-major m-side operand of 4-byte
// elements (A[m, k]) has its shared copy stored k-major (permute_axes: [k, m], fetched along k
// one element a copy), so that a thread's register tile reads consecutive words of m instead of
// one scalar a row; the other inputs whose rows are not whole 16-byte vectors (K = 1999 in f32)
// are first copied into zero-padded buffers of their own (rules::AlignRows), so that their
// copies can be 16-byte ones. The pipeline took matmul 4096^3 f32 from 0.81x to 0.85-0.90x
// cuBLAS, 512 x 512 x 262144 from 0.60x to 0.83-0.85x (H100, 128 trials); the k-major copy took
// 4096^3 to 0.97-0.98x (H100, 256 trials).
//
// Shapes no tile divides (both targets): where padding an axis gives it a larger tile than its
// extent's divisors (rules::PaddedExtentChoices: m and n to a multiple of a block tile up to
// 128, the odd multiples of 16 included; k to a multiple of a step up to 32 on CUDA, 16 on the
// host), a sample_categorical chooses the extent the axis is tiled as (the extent itself among
// the choices) and the axis's tiles are a perfect tile of that extent. On CUDA the accumulator
// and the operands' shared and register caches are then annotated kPadTile: the last tiles are
// computed whole on zero-filled shared copies and only the output's stores are guarded; on the
// host every statement keeps its guard. Not in a split-K's chunk of k (a decision of its own).
//
// Decisions: every tile factor comes from sample_perfect_tile (factors whose product is the
// loop's extent, or its padded extent) with a bounded innermost factor. On CUDA each level is a
// two-factor perfect tile of what the levels inside it leave, so that each level has its own bound
// (threads per axis at most 32, so a block never exceeds 1024 threads); the fetch width is a
// sample_categorical; the caches' levels are sample_compute_location over explicit candidate loops.

#include <algorithm>
#include <numeric>
#include <unordered_map>

#include "schedules/ir/simplify.h"
#include "schedules/ir/substitute.h"
#include "schedules/ir/tensor_intrin.h"
#include "schedules/rules/rule_util.h"
#include "schedules/rules/schedule_rule.h"
#include "schedules/util/status_macros.h"

namespace tessel::schedules {
namespace {

using rules::GemmAxes;
using rules::GemmAxesOf;
using rules::Levels;
using rules::OutputOf;
using rules::SameOrder;
using rules::TileChain;

// Bounds of the levels (the innermost factor of each sample_perfect_tile).
constexpr int64_t kCudaTileMax = 8;      // per-thread tile per axis (S3 x S4)
constexpr int64_t kCudaInnerMax = 4;     // S4 (and R2)
constexpr int64_t kCudaThreadsMax = 32;  // S2 per axis
constexpr int64_t kCudaVThreadMax = 2;   // S1 per axis
constexpr int64_t kCudaR1Max = 8;        // R1: the shared-memory step is R1 x R2
constexpr int64_t kHostIMax = 4;
constexpr int64_t kHostJMax = 16;  // the vectorized tile
constexpr int64_t kHostKMax = 16;

// The contraction's reduction loops in two groups, each in loop order: those that index every
// operand as a plain variable (a convolution's channel: the GEMM's k) and the others (its filter
// taps, which combine with output axes in the input's indices).
struct ReductionGroups {
  std::vector<LoopRV> plain;
  std::vector<LoopRV> taps;
};

ReductionGroups GroupReduction(const Schedule& s, const Stage& st, const std::vector<LoopRV>& loops,
                               bool split_k) {
  // A reduction variable is a tap when some index uses it other than as the whole index. In the
  // partials of a split-K (`split_k`: axis 0 is the chunk, rules::SplitIntoPartials), an index is
  // read at chunk 0: k = f * F + kk is the chunk's own plain k.
  std::unordered_map<const VarNode*, Expr> chunk0;
  if (split_k && !st.axes.empty()) chunk0[st.axes[0].get()] = MakeInt(0);
  std::vector<bool> compound(st.reduce_axes.size(), false);
  for (const LoadNode* l : CollectLoads(st.body)) {
    for (const Expr& index : l->indices) {
      const Expr i = chunk0.empty() ? index : Simplify(Substitute(index, chunk0));
      for (size_t r = 0; r < st.reduce_axes.size(); ++r) {
        const VarNode* v = st.reduce_axes[r].get();
        if (UsesVar(i, v) && As<VarNode>(i) != v) compound[r] = true;
      }
    }
  }
  ReductionGroups g;
  for (LoopRV l : loops) {
    const int r = s.LoopIter(l) - static_cast<int>(st.axes.size());
    (r >= 0 && r < static_cast<int>(compound.size()) && compound[r] ? g.taps : g.plain)
        .push_back(l);
  }
  return g;
}

// The stages (injective, computed) whose buffers the contraction reads: a convolution's padding.
std::vector<std::string> ProducersOf(const Schedule& s, const Stage& st) {
  std::vector<std::string> out;
  for (const LoadNode* l : CollectLoads(st.body)) {
    const Stage* p = s.FindStage(l->buffer->name);
    if (p && !p->inlined() && !p->reduces() && !p->is_output &&
        std::find(out.begin(), out.end(), p->name) == out.end()) {
      out.push_back(p->name);
    }
  }
  return out;
}

// Whether `acc` (a contraction) reads `operand` as its m-side operand stored row-major, [..., m,
// k]: the last index a reduction variable, the one before it the GEMM view's m, both plain, with
// 4-byte elements (one cp.async each once stored transposed). A thread's register tile reads such
// a copy along m at each k: as stored, one scalar a row; stored [..., k, m] (permute_axes), rows
// of consecutive words, which the pipelined sketches do.
bool IsRowMajorMOperand(const Stage& acc, const Buffer& operand) {
  if (DTypeBytes(operand.dtype) != 4 || operand.shape.size() < 2) return false;
  const std::vector<const LoadNode*> loads = CollectLoads(acc.body, &operand);
  if (loads.empty()) return false;
  const std::vector<Expr>& idx = loads[0]->indices;
  const auto* k = As<VarNode>(idx.back());
  const auto* m = As<VarNode>(idx[idx.size() - 2]);
  const bool k_reduces = k && std::any_of(acc.reduce_axes.begin(), acc.reduce_axes.end(),
                                          [&](const VarPtr& r) { return r.get() == k; });
  return k_reduces && m == acc.axes[GemmAxesOf(acc).m].get();
}

// Split-K (rules::SplitIntoPartials): a contraction's reduction over blocks (the first plain
// reduction loop k, split into S chunks, S sampled). rfactor of the split's outer side makes the
// partials P[f, ...] = the sum over chunk f (axis 0, so that their GEMM view is a batch of the
// contraction's: f goes to blockIdx.z with the batch axes, and the partials are tiled like any
// contraction); the contraction becomes their combine, C[...] = sum_f P[f, ...], summed in order by
// one thread an output (deterministic: no atomics). S is 1, a divisor of k's extent or a power of
// two (a shorter last chunk, guarded) up to kSplitKMax that leaves chunks of at least
// kSplitKMinChunk (rules::ChunkCounts), drawn with a prior centred on the split that fills the GPU
// (SplitKWeights); the sketch is offered where a split can pay (SplitKChoices).
constexpr int64_t kSplitKMax = 64;
constexpr int64_t kSplitKMinChunk = 128;
constexpr int64_t kTypicalBlockTile = 128;  // per GEMM axis, to count the output's block tiles

// The GEMM view's sizes of a contraction: its output's m, n and batch extents and k, the extent of
// its first plain reduction loop (a convolution's channel).
struct GemmSizes {
  int64_t m = 1, n = 1, batch = 1, k = 0;
};

// The output's block tiles of kTypicalBlockTile x kTypicalBlockTile, over its batch.
int64_t BlockTiles(const GemmSizes& g) {
  const auto tiles = [](int64_t e) { return (e + kTypicalBlockTile - 1) / kTypicalBlockTile; };
  return g.batch * tiles(g.m) * tiles(g.n);
}

// The split factors a contraction may sample (1 first), empty when no split is worth a sketch: it
// needs a chunk count (rules::ChunkCounts) that leaves chunks of kSplitKMinChunk, and either fewer
// output block tiles (kTypicalBlockTile square) than the GPU's SMs or a long reduction (k at least
// 8 times the larger of m and n). Only the last applies on the host, whose parallelism is not the
// target's to read.
std::vector<int64_t> SplitKChoices(const Target& t, const GemmSizes& g) {
  std::vector<int64_t> out = rules::ChunkCounts(g.k, kSplitKMax, kSplitKMinChunk);
  const bool few_tiles = t.is_cuda() && BlockTiles(g) < t.sm_count;
  const bool long_k = g.k >= 8 * std::max(g.m, g.n);
  if (out.size() < 2 || !(few_tiles || long_k)) return {};
  return out;
}

// The prior over `choices`: 1 / (1 + (log2 S - log2 W)^2), centred on W, the split that gives the
// SMs one block tile each (CUDA) or, for a long k, k / (8 max(m, n)); so larger splits are
// favoured the fewer the tiles and the longer the reduction, and 1 keeps some weight.
std::vector<double> SplitKWeights(const Target& t, const GemmSizes& g,
                                  const std::vector<int64_t>& choices) {
  double want = 1;
  if (t.is_cuda()) want = static_cast<double>(t.sm_count) / static_cast<double>(BlockTiles(g));
  want = std::max({want, static_cast<double>(g.k) / (8.0 * std::max(g.m, g.n)), 1.0});
  return rules::LogDistanceWeights(choices, want);
}

// Shapes no tile divides (CUDA): a GEMM axis (m, n) or the reduction k may be tiled as if padded
// to a sampled extent (rules::SamplePaddedExtent): m and n to a multiple of a block tile of up to
// kTypicalBlockTile, the odd multiples of 16 among them (48, 80, 112: CUDA-L2's padding to an
// odd tile size); k to a multiple of a shared-memory step (R1 x R2, at most 32).
absl::StatusOr<std::optional<IntRV>> PaddedBlockExtent(Schedule* s, LoopRV loop) {
  return rules::SamplePaddedExtent(s, s->LoopExtent(loop), kTypicalBlockTile,
                                   {16, 32, 48, 64, 80, 96, 112, 128});
}
absl::StatusOr<std::optional<IntRV>> PaddedStepExtent(Schedule* s, LoopRV loop, int64_t step_max) {
  return rules::SamplePaddedExtent(s, s->LoopExtent(loop), step_max, {8, 16, 24, 32});
}

// Splits `loop` by one n-factor sample_perfect_tile (of `padded_extent` when given).
absl::StatusOr<std::vector<LoopRV>> PerfectTile(Schedule* s, LoopRV loop, int n,
                                                int64_t max_innermost,
                                                std::optional<IntRV> padded_extent = std::nullopt) {
  TESSEL_ASSIGN_OR_RETURN(std::vector<IntRV> f, s->SamplePerfectTile(loop, n, max_innermost,
                                                                     std::nullopt, padded_extent));
  return s->Split(loop, std::vector<Factor>(f.begin(), f.end()));
}

class MultiLevelTiling final : public ScheduleRule {
 public:
  explicit MultiLevelTiling(const Target& t) : target_(t) {}
  std::string name() const override { return "multi_level_tiling"; }

  absl::StatusOr<std::vector<Schedule>> Apply(const Schedule& sch,
                                              const std::string& stage) const override {
    const Stage* st = sch.FindStage(stage);
    if (!st || st->inlined() || !rules::IsContraction(*st) || rules::IsScheduled(*st)) {
      return std::vector<Schedule>{};
    }
    if (const Stage* out = sch.FindStage(OutputOf(sch));
        target_.is_cuda() && (!out || out->buffer->shape != st->buffer->shape)) {
      // The output's loops are tiled as the contraction's axes: only for an epilogue of the
      // contraction's shape.
      return std::vector<Schedule>{};
    }
    std::vector<Schedule> out(1, sch);
    TESSEL_RETURN_IF_ERROR(target_.is_cuda() ? Cuda(&out[0], stage) : Host(&out[0], stage));
    // A second sketch splits the reduction over blocks (split-K) where that can pay.
    const Sizes sizes = SizesOf(sch, *st);
    const std::vector<int64_t> choices = SplitKChoices(target_, sizes.gemm);
    const auto split = [&](Schedule* s, bool pipelined) -> absl::Status {
      TESSEL_ASSIGN_OR_RETURN(
          std::string partials,
          rules::SplitIntoPartials(s, stage, sizes.k_loop, choices,
                                   SplitKWeights(target_, sizes.gemm, choices)));
      if (!target_.is_cuda()) return Host(s, partials, /*split_k=*/true);  // AutoBind: combine
      TESSEL_RETURN_IF_ERROR(Cuda(s, partials, /*split_k=*/true, pipelined));
      return rules::BindCombine(s, stage);
    };
    if (!choices.empty()) {
      out.push_back(sch);
      TESSEL_RETURN_IF_ERROR(split(&out.back(), /*pipelined=*/false));
    }
    // Pipelined sketches only where a block tile has rows and columns to reuse its shared
    // copies over: more than 16 outputs along n and along m with the batch (a convolution's
    // pixels); skinny_contraction maps the others.
    if (!target_.is_cuda() || sizes.gemm.n <= 16 || sizes.gemm.m * sizes.gemm.batch <= 16) {
      return out;
    }
    // The same two with the shared-memory steps software-pipelined (cp.async into
    // multi-buffered slots). Inputs whose rows are not whole 16-byte vectors are then first
    // copied into padded buffers (rules::AlignRows), so that the copies can be 16-byte ones;
    // the search weighs the copies' cost against that.
    // A row-major m-side operand, fetched one element a copy into a k-major copy, stays.
    Schedule base = sch;
    const Stage& gemm = *sch.FindStage(stage);
    TESSEL_RETURN_IF_ERROR(rules::AlignRows(&base, stage, [&](const Buffer& b) {
                             return IsRowMajorMOperand(gemm, b);
                           }).status());
    out.push_back(base);
    TESSEL_RETURN_IF_ERROR(Cuda(&out.back(), stage, /*split_k=*/false, /*pipelined=*/true));
    if (!choices.empty()) {
      out.push_back(base);
      TESSEL_RETURN_IF_ERROR(split(&out.back(), /*pipelined=*/true));
    }
    return out;
  }

 private:
  struct Sizes {
    GemmSizes gemm;
    int k_loop = -1;  // the position of k among the stage's loops; -1: no plain reduction loop
  };
  // The sizes of the (unscheduled) contraction `st` and where its k loop is.
  static Sizes SizesOf(const Schedule& sch, const Stage& st) {
    Sizes out;
    const GemmAxes ga = GemmAxesOf(st);
    out.gemm.m = st.buffer->shape[ga.m];
    out.gemm.n = st.buffer->shape[ga.n];
    for (int a : ga.batch) out.gemm.batch *= st.buffer->shape[a];
    std::vector<LoopRV> reduce;
    Schedule s = sch;  // GetLoops records an instruction
    auto b = s.GetBlock(st.name);
    if (!b.ok()) return out;
    auto loops = s.GetLoops(*b);
    if (!loops.ok()) return out;
    for (LoopRV l : *loops) {
      if (rules::IsReduceLoop(s, l)) reduce.push_back(l);
    }
    const ReductionGroups rg = GroupReduction(s, st, reduce, /*split_k=*/false);
    if (rg.plain.empty()) return out;
    out.gemm.k = s.LoopExtent(rg.plain[0]);
    out.k_loop = s.LoopIter(rg.plain[0]);
    return out;
  }

  // `split_k`: `gemm` is the partials of a split-K (rules::SplitIntoPartials), tiled themselves (a
  // batch of contractions whose first axis is the chunk) and written to global memory for the
  // combine.
  // `pipelined`: the shared copies at R0, whose loop is a software pipeline of a sampled 2 to 4
  // stages (inject_software_pipeline: cp.async copies into multi-buffered slots, one barrier a
  // step); otherwise each shared copy's level is a decision and the steps are synchronous.
  absl::Status Cuda(Schedule* s, const std::string& gemm, bool split_k = false,
                    bool pipelined = false) const {
    const GemmAxes ga = GemmAxesOf(*s->FindStage(gemm));
    TESSEL_ASSIGN_OR_RETURN(BlockRV g, s->GetBlock(gemm));
    TESSEL_ASSIGN_OR_RETURN(BlockRV cc, s->CacheWrite(g, "local"));
    // The stage itself becomes the write-back copy, inlined into the epilogue when there is one;
    // the output's loops (the contraction's axes, in its order) are tiled.
    const std::string out = split_k ? gemm : OutputOf(*s);
    if (out != gemm) TESSEL_RETURN_IF_ERROR(s->ComputeInline(g));
    TESSEL_ASSIGN_OR_RETURN(BlockRV ob, s->GetBlock(out));
    TESSEL_ASSIGN_OR_RETURN(std::vector<LoopRV> ol, s->GetLoops(ob));
    // Shapes no tile divides: m and n tiled as if padded to a sampled extent (PaddedBlockExtent).
    TESSEL_ASSIGN_OR_RETURN(std::optional<IntRV> pad_m, PaddedBlockExtent(s, ol[ga.m]));
    TESSEL_ASSIGN_OR_RETURN(std::optional<IntRV> pad_n, PaddedBlockExtent(s, ol[ga.n]));
    // S0 block, S1 vthread, S2 thread, the per-thread tile (split into S3 x S4 below).
    const std::vector<int64_t> bounds = {kCudaTileMax, kCudaThreadsMax, kCudaVThreadMax};
    TESSEL_ASSIGN_OR_RETURN(Levels m, TileChain(s, ol[ga.m], bounds, pad_m));
    TESSEL_ASSIGN_OR_RETURN(Levels n, TileChain(s, ol[ga.n], bounds, pad_n));
    std::vector<LoopRV> batch;
    for (int a : ga.batch) batch.push_back(ol[a]);
    std::vector<LoopRV> tiles = {m.loops[0], n.loops[0], m.loops[1], n.loops[1],
                                 m.loops[2], n.loops[2], m.loops[3], n.loops[3]};
    // Batch axes outermost (already so when m and n are the two innermost axes).
    const bool batch_first = ga.batch.empty() || ga.batch.back() < std::min(ga.m, ga.n);
    if (!batch_first) tiles.insert(tiles.begin(), batch.begin(), batch.end());
    TESSEL_RETURN_IF_ERROR(s->Reorder(tiles));
    TESSEL_RETURN_IF_ERROR(rules::BindBlocks(s, batch, m.loops[0], n.loops[0]));
    TESSEL_RETURN_IF_ERROR(s->Bind(m.loops[1], "vthread"));
    TESSEL_RETURN_IF_ERROR(s->Bind(n.loops[1], "vthread"));
    TESSEL_RETURN_IF_ERROR(s->Bind(m.loops[2], "threadIdx.y"));
    TESSEL_RETURN_IF_ERROR(s->Bind(n.loops[2], "threadIdx.x"));
    TESSEL_RETURN_IF_ERROR(s->Unroll(m.loops[3]));
    TESSEL_RETURN_IF_ERROR(s->Unroll(n.loops[3]));
    TESSEL_RETURN_IF_ERROR(s->ComputeAt(cc, n.loops[2]));
    const IntRV ty = m.factors[2], tx = n.factors[2];

    // Accumulator: [batch...,] i, j, k...  ->  R0 R1 [taps...] [batch...] S3(i) S3(j) R2 S4(i)
    // S4(j). The reduction is one loop k tiled in three levels: the plain reduction loops fused
    // (a convolution's channel); a convolution's filter taps stay whole loops inside R1, so that
    // every cache holds an exact box (a fused channel-and-tap index would leave region
    // inference with a division of a range it cannot bound, and the cache the whole channel
    // range). Without taps, or without a plain loop, every reduction loop is fused into k.
    TESSEL_ASSIGN_OR_RETURN(std::vector<LoopRV> cl, s->GetLoops(cc));
    std::vector<LoopRV> cspatial, creduce;
    for (LoopRV l : cl) (rules::IsReduceLoop(*s, l) ? creduce : cspatial).push_back(l);
    ReductionGroups rg = GroupReduction(*s, s->GetStage(cc), creduce, split_k);
    std::vector<LoopRV> taps;
    LoopRV k = creduce[0];
    if (rg.plain.empty() || rg.taps.empty()) {
      if (creduce.size() > 1) {
        TESSEL_ASSIGN_OR_RETURN(k, s->Fuse(creduce));
      }
    } else {
      taps = rg.taps;
      k = rg.plain[0];
      if (rg.plain.size() > 1) {
        std::vector<LoopRV> grouped = rg.plain;
        grouped.insert(grouped.end(), rg.taps.begin(), rg.taps.end());
        if (!SameOrder(grouped, creduce)) TESSEL_RETURN_IF_ERROR(s->Reorder(grouped));
        TESSEL_ASSIGN_OR_RETURN(k, s->Fuse(rg.plain));
      }
    }
    // k padded too, except in a split-K's partials: their chunk's extent is a decision of its
    // own (the split-K), which a padded extent sampled now would not follow.
    std::optional<IntRV> pad_k;
    if (!split_k) {
      TESSEL_ASSIGN_OR_RETURN(pad_k, PaddedStepExtent(s, k, kCudaInnerMax * kCudaR1Max));
    }
    TESSEL_ASSIGN_OR_RETURN(auto is, PerfectTile(s, cspatial[ga.m], 2, kCudaInnerMax));
    TESSEL_ASSIGN_OR_RETURN(auto js, PerfectTile(s, cspatial[ga.n], 2, kCudaInnerMax));
    TESSEL_ASSIGN_OR_RETURN(Levels ks, TileChain(s, k, {kCudaInnerMax, kCudaR1Max}, pad_k));
    std::vector<LoopRV> order = {ks.loops[0], ks.loops[1]};
    order.insert(order.end(), taps.begin(), taps.end());
    for (int a : ga.batch) order.push_back(cspatial[a]);
    for (LoopRV l : {is[0], js[0], ks.loops[2], is[1], js[1]}) order.push_back(l);
    TESSEL_RETURN_IF_ERROR(s->Reorder(order));
    TESSEL_RETURN_IF_ERROR(s->DecomposeReduction(cc, ks.loops[0]));
    for (size_t i = 1; i < order.size(); ++i) TESSEL_RETURN_IF_ERROR(s->Unroll(order[i]));
    // A padded tile is computed whole: the accumulator and the operands' caches hold it also past
    // the extents (the shared copies zero-filled there), and only the output's stores are
    // guarded. Annotated whenever a padded extent is sampled (the trace's shape may not depend
    // on its value); where it is the extent itself, nothing lies past it.
    const bool pads = pad_m || pad_n || pad_k;
    if (pads) TESSEL_RETURN_IF_ERROR(s->Annotate(cc, kPadTile, 1));

    // Operands through shared memory (cooperative fetch) and registers, each at a sampled
    // location (sample_compute_location over explicit candidates, so mutators can move them).
    // The register cache goes first (compute_at of the shared one needs its reader inside the
    // accumulator): at R1 or at R2; then the shared cache at R0 or R1. Every pair is valid and
    // keeps the register cache inside or at the shared one's loop (at the same loop, lowering
    // puts a barrier between the shared fetch and the register copy).
    TESSEL_ASSIGN_OR_RETURN(IntRV vec, rules::SampleUniform(s, {1, 2, 4}, 4));
    std::vector<std::string> operands;
    for (const LoadNode* l : CollectLoads(s->GetStage(cc).body)) {
      if (std::find(operands.begin(), operands.end(), l->buffer->name) == operands.end()) {
        operands.push_back(l->buffer->name);
      }
    }
    for (const std::string& name : operands) {
      TESSEL_ASSIGN_OR_RETURN(BlockRV sh, s->CacheRead(name, "shared", {cc}));
      if (const Stage* p = s->FindStage(name);
          p && !p->reduces() && !p->is_output && !rules::IsScheduled(*p)) {
        // A computed operand (a convolution's padding): computed by the shared copy itself, so
        // the fetch evaluates its bounds check and reads only inside the input. (A copy with
        // its own kernel, rules::AlignRows, stays.)
        TESSEL_ASSIGN_OR_RETURN(BlockRV pb, s->GetBlock(name));
        TESSEL_RETURN_IF_ERROR(s->ComputeInline(pb));
      }
      // Pipelined: a row-major m-side operand's copy stored k-major (its last two axes
      // swapped), each row's stride 4 words past a multiple of 8 (16-byte aligned rows; the 16
      // k of a step land in 8 banks, not one).
      const int sh_rank = static_cast<int>(s->GetStage(sh).axes.size());
      const bool k_major =
          pipelined && IsRowMajorMOperand(s->GetStage(cc), *s->GetStage(sh).buffer);
      if (k_major) {
        std::vector<int> order(sh_rank);
        std::iota(order.begin(), order.end(), 0);
        std::swap(order[sh_rank - 1], order[sh_rank - 2]);
        TESSEL_RETURN_IF_ERROR(s->PermuteAxes(sh, order));
        TESSEL_RETURN_IF_ERROR(s->StorageAlign(sh, sh_rank - 2, 8, 4));
      }
      TESSEL_ASSIGN_OR_RETURN(BlockRV lo, s->CacheRead(s->GetStage(sh).name, "local", {cc}));
      if (pads) {
        TESSEL_RETURN_IF_ERROR(s->Annotate(sh, kPadTile, 1));
        TESSEL_RETURN_IF_ERROR(s->Annotate(lo, kPadTile, 1));
      }
      TESSEL_ASSIGN_OR_RETURN(LoopRV lo_at,
                              s->SampleComputeLocation(lo, {ks.loops[1], ks.loops[2]}));
      TESSEL_RETURN_IF_ERROR(s->ComputeAt(lo, lo_at));
      if (pipelined) {
        TESSEL_RETURN_IF_ERROR(s->ComputeAt(sh, ks.loops[0]));
      } else {
        TESSEL_ASSIGN_OR_RETURN(LoopRV sh_at,
                                s->SampleComputeLocation(sh, {ks.loops[0], ks.loops[1]}));
        TESSEL_RETURN_IF_ERROR(s->ComputeAt(sh, sh_at));
      }
      TESSEL_ASSIGN_OR_RETURN(std::vector<LoopRV> fl, s->GetLoops(sh));
      if (k_major) {
        // Fetched along the rows of the input (k innermost: coalesced), one element a copy.
        std::swap(fl[fl.size() - 1], fl[fl.size() - 2]);
        TESSEL_RETURN_IF_ERROR(s->Reorder(fl));
      }
      TESSEL_ASSIGN_OR_RETURN(LoopRV fused, rules::FuseAll(s, fl));
      // Vectors along the copy's rows; a k-major copy's rows are not the input's (one element a
      // copy: a 4-byte cp.async).
      TESSEL_ASSIGN_OR_RETURN(auto p,
                              s->Split(fused, {-1, ty, tx, k_major ? Factor(1) : Factor(vec)}));
      TESSEL_RETURN_IF_ERROR(s->Bind(p[1], "threadIdx.y"));
      TESSEL_RETURN_IF_ERROR(s->Bind(p[2], "threadIdx.x"));
      TESSEL_RETURN_IF_ERROR(s->Vectorize(p[3]));
      TESSEL_ASSIGN_OR_RETURN(std::vector<LoopRV> ll, s->GetLoops(lo));
      for (LoopRV l : ll) TESSEL_RETURN_IF_ERROR(s->Unroll(l));
    }
    if (pipelined) {
      TESSEL_ASSIGN_OR_RETURN(IntRV stages, rules::SampleWeighted(s, {2, 3, 4}, {2, 2, 1}, 4, 0));
      TESSEL_RETURN_IF_ERROR(s->Annotate(ks.loops[0], kSoftwarePipeline, stages));
    }
    return absl::OkStatus();
  }

  absl::Status Host(Schedule* s, const std::string& gemm, bool split_k = false) const {
    // Computed operands (a convolution's padding) are inlined: the loads evaluate the bounds
    // check in place.
    for (const std::string& p : ProducersOf(*s, *s->FindStage(gemm))) {
      TESSEL_ASSIGN_OR_RETURN(BlockRV pb, s->GetBlock(p));
      TESSEL_RETURN_IF_ERROR(s->ComputeInline(pb));
    }
    const GemmAxes ga = GemmAxesOf(*s->FindStage(gemm));
    TESSEL_ASSIGN_OR_RETURN(BlockRV g, s->GetBlock(gemm));
    TESSEL_ASSIGN_OR_RETURN(std::vector<LoopRV> loops, s->GetLoops(g));
    std::vector<LoopRV> spatial, reduce;
    for (LoopRV l : loops) (rules::IsReduceLoop(*s, l) ? reduce : spatial).push_back(l);
    TESSEL_ASSIGN_OR_RETURN(LoopRV k, FusedReduction(s, g, reduce, split_k));
    // Shapes no tile divides: i, j and k (but a split-K's chunk) tiled as if padded, the tiles
    // past the extents guarded (the host has no caches to compute them whole).
    TESSEL_ASSIGN_OR_RETURN(std::optional<IntRV> pad_m, PaddedBlockExtent(s, spatial[ga.m]));
    TESSEL_ASSIGN_OR_RETURN(std::optional<IntRV> pad_n, PaddedBlockExtent(s, spatial[ga.n]));
    std::optional<IntRV> pad_k;
    if (!split_k) {
      TESSEL_ASSIGN_OR_RETURN(pad_k, PaddedStepExtent(s, k, kHostKMax));
    }
    TESSEL_ASSIGN_OR_RETURN(auto is, PerfectTile(s, spatial[ga.m], 4, kHostIMax, pad_m));
    TESSEL_ASSIGN_OR_RETURN(auto js, PerfectTile(s, spatial[ga.n], 4, kHostJMax, pad_n));
    TESSEL_ASSIGN_OR_RETURN(auto ks, PerfectTile(s, k, 2, kHostKMax, pad_k));
    // [batch] S S R S R S.
    std::vector<LoopRV> order;
    for (int a : ga.batch) order.push_back(spatial[a]);
    const size_t nouter = order.size() + 2;
    for (LoopRV l : {is[0], js[0], is[1], js[1], ks[0], is[2], js[2], ks[1], is[3], js[3]}) {
      order.push_back(l);
    }
    TESSEL_RETURN_IF_ERROR(s->Reorder(order));
    TESSEL_RETURN_IF_ERROR(s->DecomposeReduction(g, ks[0]));
    // The batch loops and the outer tiles, fused and parallel.
    TESSEL_ASSIGN_OR_RETURN(LoopRV outer, s->Fuse({order.begin(), order.begin() + nouter}));
    TESSEL_RETURN_IF_ERROR(s->Parallel(outer));
    TESSEL_RETURN_IF_ERROR(s->Vectorize(js[3]));
    return absl::OkStatus();
  }

  // Fuses the stage's reduction loops `reduce` (its last loops, outermost first) into one, the
  // plain loops outermost (GroupReduction); the one loop itself when there is one.
  static absl::StatusOr<LoopRV> FusedReduction(Schedule* s, BlockRV b,
                                               const std::vector<LoopRV>& reduce, bool split_k) {
    if (reduce.size() == 1) return reduce[0];
    const ReductionGroups rg = GroupReduction(*s, s->GetStage(b), reduce, split_k);
    std::vector<LoopRV> fo = rg.plain;
    fo.insert(fo.end(), rg.taps.begin(), rg.taps.end());
    if (!SameOrder(fo, reduce)) TESSEL_RETURN_IF_ERROR(s->Reorder(fo));
    return s->Fuse(fo);
  }

  Target target_;
};

}  // namespace

std::unique_ptr<ScheduleRule> MakeMultiLevelTiling(const Target& target) {
  return std::make_unique<MultiLevelTiling>(target);
}

}  // namespace tessel::schedules
