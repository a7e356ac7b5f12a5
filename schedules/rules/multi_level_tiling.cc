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
// Decisions: every tile factor comes from sample_perfect_tile (factors whose product is the
// loop's extent) with a bounded innermost factor. On CUDA each level is a two-factor perfect tile
// of what the levels inside it leave, so that each level has its own bound (threads per axis at
// most 32, so a block never exceeds 1024 threads); the fetch width is a sample_categorical; the
// caches' levels are sample_compute_location over explicit candidate loops.

#include <algorithm>

#include "schedules/ir/substitute.h"
#include "schedules/rules/rule_util.h"
#include "schedules/rules/schedule_rule.h"
#include "schedules/util/status_macros.h"

namespace tessel::schedules {
namespace {

using rules::GemmAxes;
using rules::GemmAxesOf;
using rules::Levels;
using rules::OutputOf;
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

ReductionGroups GroupReduction(const Schedule& s, const Stage& st,
                               const std::vector<LoopRV>& loops) {
  // A reduction variable is a tap when some index uses it other than as the whole index.
  std::vector<bool> compound(st.reduce_axes.size(), false);
  for (const LoadNode* l : CollectLoads(st.body)) {
    for (const Expr& i : l->indices) {
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

// Whether two loop lists name the same loops in the same order.
bool SameOrder(const std::vector<LoopRV>& a, const std::vector<LoopRV>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].id != b[i].id) return false;
  }
  return true;
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

// Splits `loop` by one n-factor sample_perfect_tile.
absl::StatusOr<std::vector<LoopRV>> PerfectTile(Schedule* s, LoopRV loop, int n,
                                                int64_t max_innermost) {
  TESSEL_ASSIGN_OR_RETURN(std::vector<IntRV> f, s->SamplePerfectTile(loop, n, max_innermost));
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
    Schedule s = sch;
    TESSEL_RETURN_IF_ERROR(target_.is_cuda() ? Cuda(&s, stage) : Host(&s, stage));
    return std::vector<Schedule>{std::move(s)};
  }

 private:
  absl::Status Cuda(Schedule* s, const std::string& gemm) const {
    const GemmAxes ga = GemmAxesOf(*s->FindStage(gemm));
    TESSEL_ASSIGN_OR_RETURN(BlockRV g, s->GetBlock(gemm));
    TESSEL_ASSIGN_OR_RETURN(BlockRV cc, s->CacheWrite(g, "local"));
    // The stage itself becomes the write-back copy, inlined into the epilogue when there is one;
    // the output's loops (the contraction's axes, in its order) are tiled.
    const std::string out = OutputOf(*s);
    if (out != gemm) TESSEL_RETURN_IF_ERROR(s->ComputeInline(g));
    TESSEL_ASSIGN_OR_RETURN(BlockRV ob, s->GetBlock(out));
    TESSEL_ASSIGN_OR_RETURN(std::vector<LoopRV> ol, s->GetLoops(ob));
    // S0 block, S1 vthread, S2 thread, the per-thread tile (split into S3 x S4 below).
    const std::vector<int64_t> bounds = {kCudaTileMax, kCudaThreadsMax, kCudaVThreadMax};
    TESSEL_ASSIGN_OR_RETURN(Levels m, TileChain(s, ol[ga.m], bounds));
    TESSEL_ASSIGN_OR_RETURN(Levels n, TileChain(s, ol[ga.n], bounds));
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
    ReductionGroups rg = GroupReduction(*s, s->GetStage(cc), creduce);
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
    TESSEL_ASSIGN_OR_RETURN(auto is, PerfectTile(s, cspatial[ga.m], 2, kCudaInnerMax));
    TESSEL_ASSIGN_OR_RETURN(auto js, PerfectTile(s, cspatial[ga.n], 2, kCudaInnerMax));
    TESSEL_ASSIGN_OR_RETURN(Levels ks, TileChain(s, k, {kCudaInnerMax, kCudaR1Max}));
    std::vector<LoopRV> order = {ks.loops[0], ks.loops[1]};
    order.insert(order.end(), taps.begin(), taps.end());
    for (int a : ga.batch) order.push_back(cspatial[a]);
    for (LoopRV l : {is[0], js[0], ks.loops[2], is[1], js[1]}) order.push_back(l);
    TESSEL_RETURN_IF_ERROR(s->Reorder(order));
    TESSEL_RETURN_IF_ERROR(s->DecomposeReduction(cc, ks.loops[0]));
    for (size_t i = 1; i < order.size(); ++i) TESSEL_RETURN_IF_ERROR(s->Unroll(order[i]));

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
      if (const Stage* p = s->FindStage(name); p && !p->reduces() && !p->is_output) {
        // A computed operand (a convolution's padding): computed by the shared copy itself, so
        // the fetch evaluates its bounds check and reads only inside the input.
        TESSEL_ASSIGN_OR_RETURN(BlockRV pb, s->GetBlock(name));
        TESSEL_RETURN_IF_ERROR(s->ComputeInline(pb));
      }
      TESSEL_ASSIGN_OR_RETURN(BlockRV lo, s->CacheRead(s->GetStage(sh).name, "local", {cc}));
      TESSEL_ASSIGN_OR_RETURN(LoopRV lo_at,
                              s->SampleComputeLocation(lo, {ks.loops[1], ks.loops[2]}));
      TESSEL_RETURN_IF_ERROR(s->ComputeAt(lo, lo_at));
      TESSEL_ASSIGN_OR_RETURN(LoopRV sh_at,
                              s->SampleComputeLocation(sh, {ks.loops[0], ks.loops[1]}));
      TESSEL_RETURN_IF_ERROR(s->ComputeAt(sh, sh_at));
      TESSEL_ASSIGN_OR_RETURN(std::vector<LoopRV> fl, s->GetLoops(sh));
      LoopRV fused = fl[0];
      if (fl.size() > 1) {
        TESSEL_ASSIGN_OR_RETURN(fused, s->Fuse(fl));
      }
      TESSEL_ASSIGN_OR_RETURN(auto p, s->Split(fused, {-1, ty, tx, vec}));
      TESSEL_RETURN_IF_ERROR(s->Bind(p[1], "threadIdx.y"));
      TESSEL_RETURN_IF_ERROR(s->Bind(p[2], "threadIdx.x"));
      TESSEL_RETURN_IF_ERROR(s->Vectorize(p[3]));
      TESSEL_ASSIGN_OR_RETURN(std::vector<LoopRV> ll, s->GetLoops(lo));
      for (LoopRV l : ll) TESSEL_RETURN_IF_ERROR(s->Unroll(l));
    }
    return absl::OkStatus();
  }

  absl::Status Host(Schedule* s, const std::string& gemm) const {
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
    TESSEL_ASSIGN_OR_RETURN(LoopRV k, FusedReduction(s, g, reduce));
    TESSEL_ASSIGN_OR_RETURN(auto is, PerfectTile(s, spatial[ga.m], 4, kHostIMax));
    TESSEL_ASSIGN_OR_RETURN(auto js, PerfectTile(s, spatial[ga.n], 4, kHostJMax));
    TESSEL_ASSIGN_OR_RETURN(auto ks, PerfectTile(s, k, 2, kHostKMax));
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
                                               const std::vector<LoopRV>& reduce) {
    if (reduce.size() == 1) return reduce[0];
    const ReductionGroups rg = GroupReduction(*s, s->GetStage(b), reduce);
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
