#include "schedules/rules/rule_util.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "schedules/ir/substitute.h"
#include "schedules/util/status_macros.h"

namespace tessel::schedules::rules {

bool IsReduceLoop(const Schedule& s, LoopRV l) {
  return s.LoopStage(l).iters[s.LoopIter(l)].reduce;
}

bool IsScheduled(const Stage& st) {
  if (st.attach.kind != AttachPoint::Kind::kRoot || !st.relations.empty()) return true;
  for (const IterVar& iv : st.iters) {
    if (iv.thread != ThreadTag::kNone || iv.kind != ForKind::kSerial) return true;
  }
  return false;
}

absl::StatusOr<IntRV> SampleUniform(Schedule* s, std::vector<int64_t> values, int64_t max,
                                    std::optional<int64_t> decision) {
  std::vector<double> weights(values.size(), 1.0);
  return SampleWeighted(s, std::move(values), std::move(weights), max, decision);
}

absl::StatusOr<IntRV> SampleWeighted(Schedule* s, std::vector<int64_t> values,
                                     std::vector<double> weights, int64_t max,
                                     std::optional<int64_t> decision) {
  std::vector<std::pair<int64_t, double>> vw;
  for (size_t i = 0; i < values.size(); ++i) {
    vw.emplace_back(values[i], i < weights.size() ? weights[i] : 1.0);
  }
  std::sort(vw.begin(), vw.end());
  std::vector<int64_t> kept;
  std::vector<double> probs;
  double total = 0;
  for (const auto& [v, w] : vw) {
    if (v <= max || kept.empty()) {
      kept.push_back(v);
      probs.push_back(w);
      total += w;
    }
  }
  for (double& p : probs) p /= total;
  return s->SampleCategorical(kept, probs, decision);
}

std::vector<int64_t> PowersOfTwo(int64_t lo, int64_t hi) {
  std::vector<int64_t> out;
  for (int64_t v = lo; v <= hi; v *= 2) out.push_back(v);
  return out;
}

namespace {

// var, const, var * const, const * var, and sums and differences of those.
bool IsAffine(const Expr& e) {
  if (As<VarNode>(e) || IsConstInt(e)) return true;
  const auto* b = As<BinaryNode>(e);
  if (!b) return false;
  switch (b->op) {
    case BinaryOp::kAdd:
    case BinaryOp::kSub:
      return IsAffine(b->a) && IsAffine(b->b);
    case BinaryOp::kMul:
      return (IsConstInt(b->a) && IsAffine(b->b)) || (IsConstInt(b->b) && IsAffine(b->a));
    default:
      return false;
  }
}

}  // namespace

bool IsContraction(const Stage& st) {
  if (st.reduce != ReduceOp::kSum || st.axes.size() < 2 || st.reduce_axes.empty()) return false;
  const std::vector<const LoadNode*> loads = CollectLoads(st.body);
  if (loads.size() < 2) return false;
  for (const LoadNode* l : loads) {
    for (const Expr& i : l->indices) {
      if (!IsAffine(i)) return false;
    }
  }
  return true;
}

bool FeedsContraction(const Schedule& s, const std::string& name) {
  for (const std::string& c : ConsumersOf(s, name)) {
    const Stage* st = s.FindStage(c);
    if (st && IsContraction(*st) && !IsScheduled(*st)) return true;
  }
  return false;
}

std::vector<std::string> ConsumersOf(const Schedule& s, const std::string& name) {
  std::vector<std::string> out;
  const Stage* p = s.FindStage(name);
  if (!p) return out;
  for (const Stage& st : s.stages()) {
    if (!st.inlined() && !CollectLoads(st.body, p->buffer.get()).empty()) out.push_back(st.name);
  }
  return out;
}

std::string FusableReduction(const Schedule& s, const Stage& st) {
  std::string found;
  for (const LoadNode* l : CollectLoads(st.body)) {
    const Stage* p = s.FindStage(l->buffer->name);
    if (!p || p->inlined() || !p->reduces()) continue;
    if (!found.empty() && found != p->name) return "";
    if (IsScheduled(*p) || ConsumersOf(s, p->name).size() != 1 ||
        p->buffer->shape != st.buffer->shape || !ReadsAtIdentity(st, p->buffer.get())) {
      return "";
    }
    found = p->name;
  }
  return found;
}

absl::Status BindOnePerThread(Schedule* s, LoopRV fused, const std::string& producer) {
  const int64_t extent = s->LoopExtent(fused);
  TESSEL_ASSIGN_OR_RETURN(IntRV threads, SampleUniform(s, PowersOfTwo(32, 512), extent));
  TESSEL_ASSIGN_OR_RETURN(auto p, s->Split(fused, {-1, threads}));
  TESSEL_RETURN_IF_ERROR(s->Bind(p[0], "blockIdx.x"));
  TESSEL_RETURN_IF_ERROR(s->Bind(p[1], "threadIdx.x"));
  if (producer.empty()) return absl::OkStatus();
  TESSEL_ASSIGN_OR_RETURN(BlockRV r, s->GetBlock(producer));
  TESSEL_RETURN_IF_ERROR(s->SetScope(r, "local"));
  return s->ComputeAt(r, p[1]);
}

GemmAxes GemmAxesOf(const Stage& st) {
  const int na = static_cast<int>(st.axes.size());
  GemmAxes g;
  g.n = na - 1;
  g.m = na - 2;
  // Axes used per operand (loads of one buffer together).
  std::vector<std::pair<const Buffer*, std::vector<bool>>> ops;
  for (const LoadNode* l : CollectLoads(st.body)) {
    auto it = std::find_if(ops.begin(), ops.end(),
                           [&](const auto& o) { return o.first == l->buffer.get(); });
    if (it == ops.end()) {
      ops.emplace_back(l->buffer.get(), std::vector<bool>(na, false));
      it = ops.end() - 1;
    }
    for (const Expr& i : l->indices) {
      for (int a = 0; a < na; ++a) {
        if (UsesVar(i, st.axes[a].get())) it->second[a] = true;
      }
    }
  }
  int best = -1;
  for (const auto& o : ops) {
    if (o.second[g.n]) continue;  // an operand of the n side
    for (int a = na - 2; a > best; --a) {
      if (o.second[a]) {
        best = a;
        break;
      }
    }
  }
  if (best >= 0) g.m = best;
  for (int a = 0; a < na; ++a) {
    if (a != g.m && a != g.n) g.batch.push_back(a);
  }
  return g;
}

std::string OutputOf(const Schedule& s) {
  for (const Stage& st : s.stages()) {
    if (st.is_output && !st.inlined()) return st.name;
  }
  return "";
}

absl::StatusOr<Levels> TileChain(Schedule* s, LoopRV loop, const std::vector<int64_t>& bounds,
                                 std::optional<IntRV> padded_extent) {
  Levels out;
  LoopRV cur = loop;
  for (int64_t bound : bounds) {
    // Only the innermost level sees the padding: the loops outside it have padded extents.
    TESSEL_ASSIGN_OR_RETURN(std::vector<IntRV> f,
                            s->SamplePerfectTile(cur, 2, bound, std::nullopt,
                                                 cur.id == loop.id ? padded_extent : std::nullopt));
    TESSEL_ASSIGN_OR_RETURN(std::vector<LoopRV> p, s->Split(cur, {f[0], f[1]}));
    out.loops.insert(out.loops.begin(), p[1]);
    out.factors.insert(out.factors.begin(), f[1]);
    cur = p[0];
  }
  out.loops.insert(out.loops.begin(), cur);
  out.factors.insert(out.factors.begin(), IntRV{});
  return out;
}

namespace {

// The largest divisor of `e` up to `cap`.
int64_t LargestTile(int64_t e, int64_t cap) {
  for (int64_t d = std::min(e, cap); d > 1; --d) {
    if (e % d == 0) return d;
  }
  return 1;
}

}  // namespace

PaddedExtents PaddedExtentChoices(int64_t extent, int64_t tile_max,
                                  const std::vector<int64_t>& units) {
  PaddedExtents out;
  if (extent < 1 || tile_max < 1) return out;
  const int64_t own = LargestTile(extent, tile_max);
  std::vector<int64_t> values = {extent};
  for (int64_t u : units) {
    if (u < 2) continue;
    const int64_t p = (extent + u - 1) / u * u;
    if (p == extent || (p - extent) * 8 > extent || LargestTile(p, tile_max) <= own ||
        std::find(values.begin(), values.end(), p) != values.end()) {
      continue;
    }
    values.push_back(p);
  }
  if (values.size() < 2) return out;
  std::sort(values.begin(), values.end());
  for (int64_t p : values) {
    const double t = static_cast<double>(LargestTile(p, tile_max));
    const double eff = static_cast<double>(extent) / static_cast<double>(p) * t /
                       (t + static_cast<double>(tile_max) / 8.0);
    out.weights.push_back(eff * eff);
  }
  out.values = std::move(values);
  return out;
}

absl::StatusOr<std::optional<IntRV>> SamplePaddedExtent(Schedule* s, int64_t extent,
                                                        int64_t tile_max,
                                                        const std::vector<int64_t>& units) {
  PaddedExtents c = PaddedExtentChoices(extent, tile_max, units);
  if (c.values.empty()) return std::optional<IntRV>();
  TESSEL_ASSIGN_OR_RETURN(IntRV v, SampleWeighted(s, c.values, c.weights, c.values.back()));
  return std::optional<IntRV>(v);
}

absl::StatusOr<LoopRV> FuseAll(Schedule* s, const std::vector<LoopRV>& loops) {
  if (loops.size() == 1) return loops[0];
  return s->Fuse(loops);
}

bool SameOrder(const std::vector<LoopRV>& a, const std::vector<LoopRV>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].id != b[i].id) return false;
  }
  return true;
}

std::vector<double> LogDistanceWeights(const std::vector<int64_t>& choices, double want) {
  std::vector<double> w;
  for (int64_t c : choices) {
    const double d = std::log2(static_cast<double>(c)) - std::log2(want);
    w.push_back(1.0 / (1.0 + d * d));
  }
  return w;
}

std::vector<int64_t> ChunkCounts(int64_t k, int64_t max_chunks, int64_t min_chunk) {
  std::vector<int64_t> out = {1};
  for (int64_t d = 2; d <= max_chunks && k / d >= min_chunk; ++d) {
    if (k % d == 0 || (d & (d - 1)) == 0) out.push_back(d);
  }
  return out;
}

absl::StatusOr<std::string> SplitIntoPartials(Schedule* s, const std::string& gemm, int k_loop,
                                              const std::vector<int64_t>& choices,
                                              const std::vector<double>& weights) {
  TESSEL_ASSIGN_OR_RETURN(BlockRV g, s->GetBlock(gemm));
  TESSEL_ASSIGN_OR_RETURN(std::vector<LoopRV> loops, s->GetLoops(g));
  TESSEL_ASSIGN_OR_RETURN(IntRV splits, SampleWeighted(s, choices, weights, choices.back()));
  TESSEL_ASSIGN_OR_RETURN(std::vector<LoopRV> ks, s->Split(loops[k_loop], {splits, -1}));
  TESSEL_ASSIGN_OR_RETURN(BlockRV rf, s->RFactor(ks[0], /*factor_axis=*/0));
  return s->GetStage(rf).name;
}

absl::StatusOr<std::pair<std::string, std::string>> CombineWriter(Schedule* s,
                                                                  const std::string& combine) {
  const std::string out = OutputOf(*s);
  if (out != combine && FusableReduction(*s, *s->FindStage(out)) == combine) {
    return std::make_pair(out, combine);
  }
  TESSEL_ASSIGN_OR_RETURN(BlockRV c, s->GetBlock(combine));
  TESSEL_ASSIGN_OR_RETURN(BlockRV acc, s->CacheWrite(c, "local"));
  return std::make_pair(combine, s->GetStage(acc).name);
}

absl::Status BindCombine(Schedule* s, const std::string& combine) {
  TESSEL_ASSIGN_OR_RETURN(const auto writer, CombineWriter(s, combine));
  const auto& [stage, producer] = writer;
  TESSEL_ASSIGN_OR_RETURN(BlockRV b, s->GetBlock(stage));
  TESSEL_ASSIGN_OR_RETURN(std::vector<LoopRV> loops, s->GetLoops(b));
  std::vector<LoopRV> spatial;
  for (LoopRV l : loops) {
    if (!IsReduceLoop(*s, l)) spatial.push_back(l);
  }
  TESSEL_ASSIGN_OR_RETURN(LoopRV fused, FuseAll(s, spatial));
  return BindOnePerThread(s, fused, producer);
}

absl::StatusOr<std::vector<std::pair<std::string, std::string>>> AlignRows(
    Schedule* s, const std::string& gemm, const std::function<bool(const Buffer&)>& read_in_place) {
  // Inputs (not stages' buffers) whose rows are not whole 16-byte vectors, each once.
  std::vector<BufferPtr> unaligned;
  for (const LoadNode* l : CollectLoads(s->FindStage(gemm)->body)) {
    const Buffer& b = *l->buffer;
    if (!s->FindStage(b.name) && !b.shape.empty() &&
        b.shape.back() * DTypeBytes(b.dtype) % 16 != 0 && !(read_in_place && read_in_place(b)) &&
        std::find(unaligned.begin(), unaligned.end(), l->buffer) == unaligned.end()) {
      unaligned.push_back(l->buffer);
    }
  }
  std::vector<std::pair<std::string, std::string>> out;
  for (const BufferPtr& b : unaligned) {
    const int64_t multiple = 16 / std::gcd<int64_t>(16, DTypeBytes(b->dtype));
    TESSEL_ASSIGN_OR_RETURN(BlockRV g, s->GetBlock(gemm));
    TESSEL_ASSIGN_OR_RETURN(BlockRV copy, s->ReIndex(g, b->name, "global"));
    const int last = static_cast<int>(s->GetStage(copy).axes.size()) - 1;
    TESSEL_RETURN_IF_ERROR(s->PadAxis(copy, last, multiple));
    out.emplace_back(b->name, s->GetStage(copy).name);
    TESSEL_ASSIGN_OR_RETURN(std::vector<LoopRV> loops, s->GetLoops(copy));
    TESSEL_ASSIGN_OR_RETURN(LoopRV fused, FuseAll(s, loops));
    TESSEL_RETURN_IF_ERROR(BindOnePerThread(s, fused, ""));
  }
  return out;
}

absl::Status BindBlocks(Schedule* s, const std::vector<LoopRV>& batch, LoopRV m, LoopRV n) {
  if (!batch.empty()) {
    TESSEL_ASSIGN_OR_RETURN(LoopRV bz, FuseAll(s, batch));
    TESSEL_RETURN_IF_ERROR(s->Bind(bz, "blockIdx.z"));
  }
  TESSEL_RETURN_IF_ERROR(s->Bind(m, "blockIdx.y"));
  return s->Bind(n, "blockIdx.x");
}

absl::Status BindBlocksRasterized(Schedule* s, const std::vector<LoopRV>& batch, LoopRV m, LoopRV n,
                                  int64_t max_group, bool cluster, int64_t sm_count) {
  if (!batch.empty()) {
    TESSEL_ASSIGN_OR_RETURN(LoopRV bz, FuseAll(s, batch));
    TESSEL_RETURN_IF_ERROR(s->Bind(bz, "blockIdx.z"));
  }
  // G is drawn in proportion to its size. The tiles in flight span G m tiles by (blocks in
  // flight) / G n tiles, so the operand bytes a k step reads grow as G shrinks below
  // sqrt(blocks x BN / BM), past 8 on large grids: on an H100 (persistent 128 x 256 wgmma tiles,
  // same traces) G = 1, 2, 4 took 1.52, 1.13 and 1.03 times G = 8's time on bias + GELU
  // 4096 x 16384 x 4096, and 1.27, 1.07, 1.04 on matmul 8192^3 (G = 2: DRAM at 81% of its
  // bandwidth, L2 hits 49%). Drawn uniformly, half the draws there were G <= 2.
  TESSEL_ASSIGN_OR_RETURN(std::vector<IntRV> g,
                          s->SamplePerfectTile(m, 2, max_group, std::nullopt, std::nullopt,
                                               /*innermost_by_size=*/true));
  TESSEL_ASSIGN_OR_RETURN(std::vector<LoopRV> mg, s->Split(m, {g[0], g[1]}));
  TESSEL_RETURN_IF_ERROR(s->Reorder({mg[0], n, mg[1]}));
  TESSEL_ASSIGN_OR_RETURN(LoopRV blocks, s->Fuse({mg[0], n, mg[1]}));
  if (sm_count > 0 && batch.empty()) {
    // The blocks: one a tile (0: the extent), or up to one or two an SM, as few as take the
    // same rounds. Prior: one an SM is the likeliest; on the same traces it was faster than a
    // block a tile on all eight tried (1.02-1.16x, H100: 128-row tiles, four GEMM shapes).
    TESSEL_ASSIGN_OR_RETURN(IntRV grid, s->SampleCategorical({0, sm_count, 2 * sm_count},
                                                             {0.25, 0.5, 0.25}, 0, blocks));
    TESSEL_ASSIGN_OR_RETURN(std::vector<LoopRV> rounds, s->Split(blocks, {-1, grid}));
    blocks = rounds[1];
  }
  if (!cluster) return s->Bind(blocks, "blockIdx.x");
  TESSEL_ASSIGN_OR_RETURN(IntRV c, SampleUniform(s, {1, 2}, 2, 0));
  TESSEL_ASSIGN_OR_RETURN(std::vector<LoopRV> cb, s->Split(blocks, {-1, c}));
  TESSEL_RETURN_IF_ERROR(s->Bind(cb[0], "blockIdx.x"));
  return s->Bind(cb[1], "cluster.x");
}

}  // namespace tessel::schedules::rules
