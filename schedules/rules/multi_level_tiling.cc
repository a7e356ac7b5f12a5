// MultiLevelTiling: contractions with data reuse (Meta-Schedule's multi-level tiling).
//
// CUDA, SSSRRSRS: the output's spatial loops m and n are tiled into S0 block / S1 virtual thread
// / S2 thread / per-thread tile, ordered mb nb | mv nv | mt nt | mw nw, bound to blockIdx,
// vthread and threadIdx, the per-thread tile unrolled. The accumulator (cache_write local) is
// computed at the thread loop; its per-thread tile is split again into S3 x S4 and its reduction
// into R0 (steps through shared memory) / R1 / R2, ordered R0 R1 S3 R2 S4 (with the spatial
// levels above: S S S R R S R S). Every input is cached in shared memory at R0 or at R1, fused and
// spread over the block's threads at a sampled vector width (cooperative fetch), and in registers
// at the loop just inside R1 or at R2: one sketch, both levels sample_compute_location decisions.
// Host, SSRSRS: i and j tiled in four levels, k in two, ordered i0 j0 | i1 j1 | k0 | i2 j2 | k1 |
// i3 j3; the outer tiles fused and parallel, the innermost j tile vectorized.
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

// Bounds of the levels (the innermost factor of each sample_perfect_tile).
constexpr int64_t kCudaTileMax = 8;      // per-thread tile per axis (S3 x S4)
constexpr int64_t kCudaInnerMax = 4;     // S4 (and R2)
constexpr int64_t kCudaThreadsMax = 32;  // S2 per axis
constexpr int64_t kCudaVThreadMax = 2;   // S1 per axis
constexpr int64_t kCudaR1Max = 8;        // R1: the shared-memory step is R1 x R2
constexpr int64_t kHostIMax = 4;
constexpr int64_t kHostJMax = 16;  // the vectorized tile
constexpr int64_t kHostKMax = 16;

// A sum over a product of loads whose indices are loop variables (matmul-like: each operand
// reused along the axes it does not use); at least two spatial axes.
bool IsContraction(const Stage& st) {
  if (st.reduce != ReduceOp::kSum || st.axes.size() < 2 || st.reduce_axes.empty()) return false;
  const std::vector<const LoadNode*> loads = CollectLoads(st.body);
  if (loads.size() < 2) return false;
  for (const LoadNode* l : loads) {
    for (const Expr& i : l->indices) {
      if (!As<VarNode>(i)) return false;
    }
  }
  return true;
}

std::string OutputOf(const Schedule& s) {
  for (const Stage& st : s.stages()) {
    if (st.is_output && !st.inlined()) return st.name;
  }
  return "";
}

// Loop levels from tiling one loop, outermost first, with the sampled factor of each level but
// the outermost (factors[0] is unused).
struct Levels {
  std::vector<LoopRV> loops;
  std::vector<IntRV> factors;
};

// Splits `loop` in bounds.size() + 1 levels. From the innermost out, each level's factor is the
// innermost of a two-factor sample_perfect_tile of what the inner levels leave, at most its bound
// (`bounds` innermost first); the outermost level takes the rest.
absl::StatusOr<Levels> TileChain(Schedule* s, LoopRV loop, const std::vector<int64_t>& bounds) {
  Levels out;
  LoopRV cur = loop;
  for (int64_t bound : bounds) {
    TESSEL_ASSIGN_OR_RETURN(std::vector<IntRV> f, s->SamplePerfectTile(cur, 2, bound));
    TESSEL_ASSIGN_OR_RETURN(std::vector<LoopRV> p, s->Split(cur, {f[0], f[1]}));
    out.loops.insert(out.loops.begin(), p[1]);
    out.factors.insert(out.factors.begin(), f[1]);
    cur = p[0];
  }
  out.loops.insert(out.loops.begin(), cur);
  out.factors.insert(out.factors.begin(), IntRV{});
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
    if (!st || st->inlined() || !IsContraction(*st) || rules::IsScheduled(*st)) {
      return std::vector<Schedule>{};
    }
    Schedule s = sch;
    TESSEL_RETURN_IF_ERROR(target_.is_cuda() ? Cuda(&s, stage) : Host(&s, stage));
    return std::vector<Schedule>{std::move(s)};
  }

 private:
  absl::Status Cuda(Schedule* s, const std::string& gemm) const {
    TESSEL_ASSIGN_OR_RETURN(BlockRV g, s->GetBlock(gemm));
    TESSEL_ASSIGN_OR_RETURN(BlockRV cc, s->CacheWrite(g, "local"));
    // The stage itself becomes the write-back copy, inlined into the epilogue when there is one;
    // the output's loops are tiled.
    const std::string out = OutputOf(*s);
    if (out != gemm) TESSEL_RETURN_IF_ERROR(s->ComputeInline(g));
    TESSEL_ASSIGN_OR_RETURN(BlockRV ob, s->GetBlock(out));
    TESSEL_ASSIGN_OR_RETURN(std::vector<LoopRV> ol, s->GetLoops(ob));
    const size_t nl = ol.size();
    // S0 block, S1 vthread, S2 thread, the per-thread tile (split into S3 x S4 below).
    const std::vector<int64_t> bounds = {kCudaTileMax, kCudaThreadsMax, kCudaVThreadMax};
    TESSEL_ASSIGN_OR_RETURN(Levels m, TileChain(s, ol[nl - 2], bounds));
    TESSEL_ASSIGN_OR_RETURN(Levels n, TileChain(s, ol[nl - 1], bounds));
    TESSEL_RETURN_IF_ERROR(s->Reorder({m.loops[0], n.loops[0], m.loops[1], n.loops[1], m.loops[2],
                                       n.loops[2], m.loops[3], n.loops[3]}));
    if (nl > 2) {
      std::vector<LoopRV> batch(ol.begin(), ol.end() - 2);
      LoopRV bz = batch[0];
      if (batch.size() > 1) {
        TESSEL_ASSIGN_OR_RETURN(bz, s->Fuse(batch));
      }
      TESSEL_RETURN_IF_ERROR(s->Bind(bz, "blockIdx.z"));
    }
    TESSEL_RETURN_IF_ERROR(s->Bind(m.loops[0], "blockIdx.y"));
    TESSEL_RETURN_IF_ERROR(s->Bind(n.loops[0], "blockIdx.x"));
    TESSEL_RETURN_IF_ERROR(s->Bind(m.loops[1], "vthread"));
    TESSEL_RETURN_IF_ERROR(s->Bind(n.loops[1], "vthread"));
    TESSEL_RETURN_IF_ERROR(s->Bind(m.loops[2], "threadIdx.y"));
    TESSEL_RETURN_IF_ERROR(s->Bind(n.loops[2], "threadIdx.x"));
    TESSEL_RETURN_IF_ERROR(s->Unroll(m.loops[3]));
    TESSEL_RETURN_IF_ERROR(s->Unroll(n.loops[3]));
    TESSEL_RETURN_IF_ERROR(s->ComputeAt(cc, n.loops[2]));
    const IntRV ty = m.factors[2], tx = n.factors[2];

    // Accumulator: [batch...,] i, j, k...  ->  R0 R1 [batch...] S3(i) S3(j) R2 S4(i) S4(j).
    TESSEL_ASSIGN_OR_RETURN(std::vector<LoopRV> cl, s->GetLoops(cc));
    std::vector<LoopRV> cspatial, creduce;
    for (LoopRV l : cl) (rules::IsReduceLoop(*s, l) ? creduce : cspatial).push_back(l);
    LoopRV k = creduce[0];
    if (creduce.size() > 1) {
      TESSEL_ASSIGN_OR_RETURN(k, s->Fuse(creduce));
    }
    const size_t nc = cspatial.size();
    TESSEL_ASSIGN_OR_RETURN(auto is, PerfectTile(s, cspatial[nc - 2], 2, kCudaInnerMax));
    TESSEL_ASSIGN_OR_RETURN(auto js, PerfectTile(s, cspatial[nc - 1], 2, kCudaInnerMax));
    TESSEL_ASSIGN_OR_RETURN(Levels ks, TileChain(s, k, {kCudaInnerMax, kCudaR1Max}));
    std::vector<LoopRV> order = {ks.loops[0], ks.loops[1]};
    order.insert(order.end(), cspatial.begin(), cspatial.end() - 2);
    for (LoopRV l : {is[0], js[0], ks.loops[2], is[1], js[1]}) order.push_back(l);
    TESSEL_RETURN_IF_ERROR(s->Reorder(order));
    TESSEL_RETURN_IF_ERROR(s->DecomposeReduction(cc, ks.loops[0]));
    for (size_t i = 1; i < order.size(); ++i) TESSEL_RETURN_IF_ERROR(s->Unroll(order[i]));

    // Operands through shared memory (cooperative fetch) and registers, each at a sampled
    // location (sample_compute_location over explicit candidates, so mutators can move them).
    // The register cache goes first (compute_at of the shared one needs its reader inside the
    // accumulator): at the loop just inside R1 or at R2; then the shared cache at R0 or R1. Every
    // pair is valid and keeps the register cache inside the shared one's loop; the register cache
    // is never at R1 itself, since a shared producer and its reader attached to one loop would
    // share one barrier (the reader would read before the fetch is published).
    TESSEL_ASSIGN_OR_RETURN(IntRV vec, rules::SampleUniform(s, {1, 2, 4}, 4));
    std::vector<std::string> operands;
    for (const LoadNode* l : CollectLoads(s->GetStage(cc).body)) {
      if (std::find(operands.begin(), operands.end(), l->buffer->name) == operands.end()) {
        operands.push_back(l->buffer->name);
      }
    }
    for (const std::string& name : operands) {
      TESSEL_ASSIGN_OR_RETURN(BlockRV sh, s->CacheRead(name, "shared", {cc}));
      TESSEL_ASSIGN_OR_RETURN(BlockRV lo, s->CacheRead(s->GetStage(sh).name, "local", {cc}));
      TESSEL_ASSIGN_OR_RETURN(LoopRV lo_at, s->SampleComputeLocation(lo, {order[2], ks.loops[2]}));
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
    TESSEL_ASSIGN_OR_RETURN(BlockRV g, s->GetBlock(gemm));
    TESSEL_ASSIGN_OR_RETURN(std::vector<LoopRV> loops, s->GetLoops(g));
    std::vector<LoopRV> spatial, reduce;
    for (LoopRV l : loops) (rules::IsReduceLoop(*s, l) ? reduce : spatial).push_back(l);
    const size_t ns = spatial.size();
    LoopRV k = reduce[0];
    if (reduce.size() > 1) {
      TESSEL_ASSIGN_OR_RETURN(k, s->Fuse(reduce));
    }
    TESSEL_ASSIGN_OR_RETURN(auto is, PerfectTile(s, spatial[ns - 2], 4, kHostIMax));
    TESSEL_ASSIGN_OR_RETURN(auto js, PerfectTile(s, spatial[ns - 1], 4, kHostJMax));
    TESSEL_ASSIGN_OR_RETURN(auto ks, PerfectTile(s, k, 2, kHostKMax));
    // S S R S R S.
    std::vector<LoopRV> order(spatial.begin(), spatial.end() - 2);
    for (LoopRV l : {is[0], js[0], is[1], js[1], ks[0], is[2], js[2], ks[1], is[3], js[3]}) {
      order.push_back(l);
    }
    TESSEL_RETURN_IF_ERROR(s->Reorder(order));
    TESSEL_RETURN_IF_ERROR(s->DecomposeReduction(g, ks[0]));
    // The batch loops and the outer tiles, fused and parallel.
    TESSEL_ASSIGN_OR_RETURN(LoopRV outer, s->Fuse({order.begin(), order.begin() + ns}));
    TESSEL_RETURN_IF_ERROR(s->Parallel(outer));
    TESSEL_RETURN_IF_ERROR(s->Vectorize(js[3]));
    return absl::OkStatus();
  }

  Target target_;
};

}  // namespace

std::unique_ptr<ScheduleRule> MakeMultiLevelTiling(const Target& target) {
  return std::make_unique<MultiLevelTiling>(target);
}

}  // namespace tessel::schedules
