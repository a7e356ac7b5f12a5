// MultiLevelTilingTensorCore: f16/bf16 contractions on the tensor cores (mma.sync.m16n8k16),
// in the spirit of Meta-Schedule's rule of the same name. It forks the space: the contraction is
// also left to MultiLevelTiling (CUDA cores), and the search and the cost model choose.
//
// The output's m and n loops (rules::GemmAxesOf) are split into 16 (m) and 8 (n) element tiles,
// and the tile counts into block / warp / per-warp levels, ordered [batch] mb nb | wm wn | fm |
// m16 (fn n8), bound to blockIdx.y/x (batch fused on blockIdx.z) and threadIdx.z/y (warps);
// threadIdx.x is the warp's 32 lanes. The accumulator (cache_write "fragment") is computed at the
// warp level: k is split into 16-element steps, ordered k0 (shared-memory step) k1 | fm fn | m16 n8
// k16, the innermost three tensorized with mma_m16n8k16. Each operand goes through shared memory at
// k0 (cooperative fetch over all the block's threads, vectors of a sampled width, rows padded for
// conflict-free ldmatrix, or XOR-swizzled) and into fragments at k1 (ldmatrix, transposed where the
// operand's contiguous axis is not k). The write-back, with the epilogue inlined (bias, GELU,
// casts), is tensorized with mma_accumulator over 16 rows by the warp's fn * 8 columns (fn and n8
// fused): each lane stores the accumulator elements it holds, groups of four 8-column tiles of a
// 16-bit output as one 16-byte vector a lane.
//
// Decisions: warps per block along m and n (up to 4 each), 16 x 8 tiles per warp along m and n
// (up to 4 and 8), k steps per shared-memory stage (up to 8 steps of 16), the fetch width, and
// the software pipeline's stages (annotation "software_pipeline" on k0: 1 = no pipeline), and
// whether the fragments are double-buffered across k steps (the same annotation on k1), and the
// shared copies' layout (padded rows or the widest XOR swizzle the tiles allow).
// Applies to any M, N and K (tiles past them are zero-padded, kPadTile); an operand whose
// contiguous extent is not a multiple of 8 is first copied with that axis padded
// (rules::AlignRows).
//
// Implicit GEMM: a contraction whose operands are not plain GEMM operands (a convolution reads
// data[n, p + r, q + s, c] and weight[k, r, s, c]) is first given the GEMM view: the spatial
// axes only one operand uses are fused into that operand's rows (fuse_axes: n, p, q into m; k
// stays n), the reduction axes into one k, each in the order of the operand's dimensions, and
// each operand is copied into shared memory in that view (reindex: A[m, kk], B[k, kk], a padding
// stage computed in the copy, its zeros cp.async's zero fill). The output stage's loops over a
// fused axis are fused the same way, so it writes the accumulator's rows where they belong.

#include <algorithm>
#include <tuple>

#include "schedules/ir/substitute.h"
#include "schedules/ir/tensor_intrin.h"
#include "schedules/rules/rule_util.h"
#include "schedules/rules/schedule_rule.h"
#include "schedules/util/status_macros.h"

namespace tessel::schedules {
namespace {

constexpr int64_t kWarpsMax = 4;        // warps along m and along n
constexpr int64_t kTilesMMax = 4;       // 16-row tiles a warp along m
constexpr int64_t kTilesNMax = 8;       // 8-column tiles a warp along n
constexpr int64_t kKStepsMax = 8;       // 16-element k steps a shared-memory stage
constexpr int64_t kStagesMax = 4;       // software pipeline stages
constexpr int64_t kRasterGroupMax = 8;  // m tiles a group of consecutive blocks

// An operand of the contraction: its buffer, and which of its axes is k and which the tile's
// rows (m for A, n for B).
struct Operand {
  std::string name;
  int64_t contiguous_extent = 0;  // of the buffer's last (contiguous) axis
  int k_axis = -1;
  int row_axis = -1;
  bool is_a = false;
};

// The two operands of a product of 16-bit loads with one reduction axis, or none.
std::vector<Operand> OperandsOf(const Stage& st, const rules::GemmAxes& ga) {
  const auto* mul = As<BinaryNode>(st.body);
  if (!mul || mul->op != BinaryOp::kMul || st.reduce_axes.size() != 1) return {};
  const LoadNode* loads[2] = {LoadUnderCast(mul->a), LoadUnderCast(mul->b)};
  if (!loads[0] || !loads[1] || loads[0]->buffer == loads[1]->buffer) return {};
  if (!IsMmaOperandType(loads[0]->buffer->dtype) ||
      loads[0]->buffer->dtype != loads[1]->buffer->dtype) {
    return {};
  }
  const VarNode* k = st.reduce_axes[0].get();
  const VarNode* m = st.axes[ga.m].get();
  const VarNode* n = st.axes[ga.n].get();
  std::vector<Operand> out;
  for (const LoadNode* l : loads) {
    Operand op{l->buffer->name, l->buffer->shape.back()};
    for (size_t d = 0; d < l->indices.size(); ++d) {
      const auto* v = As<VarNode>(l->indices[d]);
      if (!v) return {};  // plain axis variables only (no convolution taps)
      if (v == k) op.k_axis = static_cast<int>(d);
      if (v == m || v == n) op.row_axis = static_cast<int>(d);
      if (v == m) op.is_a = true;
    }
    if (op.k_axis < 0 || op.row_axis < 0) return {};
    out.push_back(op);
  }
  if (out[0].is_a == out[1].is_a) return {};
  if (!out[0].is_a) std::swap(out[0], out[1]);
  return out;
}

// The GEMM view of a contraction whose operands are not plain (OperandsOf found none): the root
// axes to fuse, as groups of the stage's axis indices (spatial) and reduction indices, each
// group in the order of the dimensions of the operand that uses it. Empty when there is none.
struct ImplicitGemm {
  std::vector<std::vector<int>> spatial;  // groups of two or more axes used by one operand only
  std::vector<int> reduce;                // the reduction axes (indices into reduce_axes)
  std::vector<std::string> operands;      // the two tensors the products read
  bool ok() const { return operands.size() == 2; }
};

// The first dimension of `l` whose index uses `v`, or -1.
int FirstDimUsing(const LoadNode& l, const VarNode* v) {
  for (size_t d = 0; d < l.indices.size(); ++d) {
    if (UsesVar(l.indices[d], v)) return static_cast<int>(d);
  }
  return -1;
}

// `vars` (indices into `all`) sorted by the first dimension of `l` that uses each (stable).
std::vector<int> ByDimension(const LoadNode& l, std::vector<int> idx,
                             const std::vector<VarPtr>& all) {
  std::stable_sort(idx.begin(), idx.end(), [&](int a, int b) {
    return FirstDimUsing(l, all[a].get()) < FirstDimUsing(l, all[b].get());
  });
  return idx;
}

ImplicitGemm ImplicitGemmOf(const Stage& st) {
  ImplicitGemm out;
  const auto* mul = As<BinaryNode>(st.body);
  if (!mul || mul->op != BinaryOp::kMul) return out;
  const LoadNode* loads[2] = {LoadUnderCast(mul->a), LoadUnderCast(mul->b)};
  if (!loads[0] || !loads[1] || loads[0]->buffer == loads[1]->buffer) return out;
  if (!IsMmaOperandType(loads[0]->buffer->dtype) ||
      loads[0]->buffer->dtype != loads[1]->buffer->dtype) {
    return out;
  }
  std::vector<int> only[2];
  for (int a = 0; a < static_cast<int>(st.axes.size()); ++a) {
    const bool u0 = FirstDimUsing(*loads[0], st.axes[a].get()) >= 0;
    const bool u1 = FirstDimUsing(*loads[1], st.axes[a].get()) >= 0;
    if (!u0 && !u1) return out;  // a broadcast output axis: no GEMM
    if (u0 != u1) only[u0 ? 0 : 1].push_back(a);
  }
  if (only[0].empty() || only[1].empty()) return out;
  std::vector<int> red;
  for (int r = 0; r < static_cast<int>(st.reduce_axes.size()); ++r) {
    if (FirstDimUsing(*loads[0], st.reduce_axes[r].get()) < 0 ||
        FirstDimUsing(*loads[1], st.reduce_axes[r].get()) < 0) {
      return out;  // a sum over one operand's axis alone
    }
    red.push_back(r);
  }
  for (int o = 0; o < 2; ++o) {
    if (only[o].size() > 1) out.spatial.push_back(ByDimension(*loads[o], only[o], st.axes));
  }
  // k in the order of the operand whose contiguous dimension it is, so that the copy's rows are
  // contiguous in memory where that operand is.
  const int kop = FirstDimUsing(*loads[0], st.reduce_axes.back().get()) ==
                          static_cast<int>(loads[0]->indices.size()) - 1
                      ? 0
                      : 1;
  out.reduce = ByDimension(*loads[kop], red, st.reduce_axes);
  out.operands = {loads[0]->buffer->name, loads[1]->buffer->name};
  return out;
}

// Whether `out` reads stage `gemm` only at exactly its axes, one load or several alike.
bool ReadsOnlyAtIdentity(const Stage& out, const Stage& gemm) {
  return !CollectLoads(out.body, gemm.buffer.get()).empty() &&
         ReadsAtIdentity(out, gemm.buffer.get());
}

class MultiLevelTilingTensorCore final : public ScheduleRule {
 public:
  explicit MultiLevelTilingTensorCore(const Target& t) : target_(t) {}
  std::string name() const override { return "multi_level_tiling_tensor_core"; }

  absl::StatusOr<std::vector<Schedule>> Apply(const Schedule& sch,
                                              const std::string& stage) const override {
    const Stage* st = sch.FindStage(stage);
    if (!target_.is_cuda() || !st || st->inlined() || !rules::IsContraction(*st) ||
        rules::IsScheduled(*st)) {
      return std::vector<Schedule>{};
    }
    const Stage* out = sch.FindStage(rules::OutputOf(sch));
    if (!out || out->buffer->shape != st->buffer->shape || st->buffer->dtype == DType::kFloat64) {
      return std::vector<Schedule>{};
    }
    const rules::GemmAxes ga = rules::GemmAxesOf(*st);
    const std::vector<Operand> ops = OperandsOf(*st, ga);
    if (ops.empty()) {
      // Not a plain GEMM: its implicit-GEMM view, where it has one.
      const ImplicitGemm view = ImplicitGemmOf(*st);
      if (!view.ok() || out == st || !ReadsOnlyAtIdentity(*out, *st)) {
        return std::vector<Schedule>{};
      }
      // A view whose tiles cannot be formed (e.g. a copy that is not 16-byte aligned) is no
      // tensor-core candidate; the CUDA-core sketch stays either way.
      std::vector<Schedule> sketches;
      for (bool wgmma : {false, true}) {
        if (wgmma && !target_.Supports(TargetFeature::kWgmma)) continue;
        Schedule s = sch;
        if (Implicit(&s, stage, view, wgmma).ok()) sketches.push_back(std::move(s));
      }
      sketches.push_back(sch);
      return sketches;
    }
    for (const Operand& op : ops) {
      // A computed operand (a padding stage) would need a fetch that computes it.
      if (sch.FindStage(op.name)) return std::vector<Schedule>{};
    }
    Schedule s = sch;
    TESSEL_ASSIGN_OR_RETURN(std::vector<Operand> aligned, AlignRows(&s, stage, ops));
    TESSEL_RETURN_IF_ERROR(Cuda(&s, stage, ga, aligned, {}));
    std::vector<Schedule> sketches = {std::move(s)};
    if (target_.Supports(TargetFeature::kWgmma)) {
      // sm_90a: the warpgroup sketch too, where its tiles can be formed, its operands fetched by
      // the block's threads (cp.async) or by the copy engine (bulk tensor copies).
      for (bool bulk : {false, true}) {
        if (bulk && !target_.Supports(TargetFeature::kBulkTensorCopy)) continue;
        Schedule h = sch;
        TESSEL_ASSIGN_OR_RETURN(aligned, AlignRows(&h, stage, ops));
        if (Cuda(&h, stage, ga, aligned, {}, {}, /*wgmma=*/true, bulk).ok()) {
          sketches.push_back(std::move(h));
        }
      }
    }
    // The CUDA-core sketch stays: MultiLevelTiling schedules the untouched copy.
    sketches.push_back(sch);
    return sketches;
  }

 private:
  // The implicit-GEMM view (fuse_axes), then the GEMM with its operands reindexed.
  absl::Status Implicit(Schedule* s, const std::string& gemm, const ImplicitGemm& view,
                        bool wgmma) const {
    // Groups of the output's axes that each of the GEMM's axes covers (the gemm's axes are the
    // output's: it reads the gemm at identity).
    const Stage* st = s->FindStage(gemm);
    std::vector<std::vector<int>> out_groups;
    for (int a = 0; a < static_cast<int>(st->axes.size()); ++a) {
      bool grouped = false;
      for (const std::vector<int>& g : view.spatial) {
        if (g[0] == a) out_groups.push_back(g);
        if (std::find(g.begin(), g.end(), a) != g.end()) grouped = true;
      }
      if (!grouped) out_groups.push_back({a});
    }
    // Fuse: the indices shift as groups merge, so each group is found again by its variables.
    std::vector<std::vector<const VarNode*>> spatial_vars;
    for (const std::vector<int>& g : view.spatial) {
      spatial_vars.emplace_back();
      for (int a : g) spatial_vars.back().push_back(st->axes[a].get());
    }
    std::vector<const VarNode*> reduce_vars;
    for (int r : view.reduce) reduce_vars.push_back(st->reduce_axes[r].get());
    TESSEL_ASSIGN_OR_RETURN(BlockRV g, s->GetBlock(gemm));
    auto root_index = [&](const VarNode* v) {
      const Stage* cur = s->FindStage(gemm);
      for (int i = 0; i < cur->num_root(); ++i) {
        if (cur->iters[i].var.get() == v) return i;
      }
      return -1;
    };
    for (const auto& vars : spatial_vars) {
      std::vector<int> idx;
      for (const VarNode* v : vars) idx.push_back(root_index(v));
      TESSEL_RETURN_IF_ERROR(s->FuseAxes(g, idx));
    }
    if (reduce_vars.size() > 1) {
      std::vector<int> idx;
      for (const VarNode* v : reduce_vars) idx.push_back(root_index(v));
      TESSEL_RETURN_IF_ERROR(s->FuseAxes(g, idx));
    }
    const Stage* fused = s->FindStage(gemm);
    return Cuda(s, gemm, rules::GemmAxesOf(*fused), {}, out_groups, view.operands, wgmma);
  }

  // The operand `tensor` of the accumulator stage `acc` in shared memory as the GEMM reads it
  // (reindex), a padding stage computed in the copy; its Operand description in that copy.
  absl::StatusOr<std::pair<BlockRV, Operand>> Reindexed(Schedule* s, BlockRV acc,
                                                        const std::string& tensor,
                                                        const rules::GemmAxes& ga) const {
    TESSEL_ASSIGN_OR_RETURN(BlockRV sh, s->ReIndex(acc, tensor, "shared"));
    if (const Stage* producer = s->FindStage(tensor)) {
      if (producer->reduces()) {
        return absl::FailedPreconditionError(
            absl::StrCat("operand ", tensor, " is a reduction; it cannot be computed in a copy"));
      }
      TESSEL_ASSIGN_OR_RETURN(BlockRV pb, s->GetBlock(tensor));
      TESSEL_RETURN_IF_ERROR(s->ComputeInline(pb));
    }
    const Stage& copy = s->GetStage(sh);
    const Stage& a = s->GetStage(acc);
    Operand op{copy.name, copy.buffer->shape.back()};
    const LoadNode* l = CollectLoads(a.body, copy.buffer.get()).at(0);
    for (size_t d = 0; d < l->indices.size(); ++d) {
      const auto* v = As<VarNode>(l->indices[d]);
      if (v == a.reduce_axes[0].get()) op.k_axis = static_cast<int>(d);
      if (v == a.axes[ga.m].get() || v == a.axes[ga.n].get()) op.row_axis = static_cast<int>(d);
      if (v == a.axes[ga.m].get()) op.is_a = true;
    }
    if (op.k_axis < 0 || op.row_axis < 0 || op.contiguous_extent % 8 != 0) {
      return absl::FailedPreconditionError(
          absl::StrCat("the copy of ", tensor, " is no 16-byte aligned GEMM operand"));
    }
    return std::make_pair(sh, op);
  }

  // `out_groups`: for each of the GEMM stage's axes, the output stage's axes it covers (empty:
  // one each, in order); `reindex`: the operands to copy in the GEMM's view (empty: `ops`, cached
  // as they are).
  // `wgmma`: the warpgroup sketch (Wgmma below) instead of mma.sync's; `bulk`: its operands
  // fetched by bulk tensor copies.
  absl::Status Cuda(Schedule* s, const std::string& gemm, const rules::GemmAxes& ga,
                    const std::vector<Operand>& ops,
                    const std::vector<std::vector<int>>& out_groups,
                    const std::vector<std::string>& reindex = {}, bool wgmma = false,
                    bool bulk = false) const {
    TESSEL_ASSIGN_OR_RETURN(BlockRV g, s->GetBlock(gemm));
    TESSEL_ASSIGN_OR_RETURN(BlockRV acc, s->CacheWrite(g, "fragment"));
    const std::string out = rules::OutputOf(*s);
    if (out != gemm) TESSEL_RETURN_IF_ERROR(s->ComputeInline(g));
    TESSEL_ASSIGN_OR_RETURN(BlockRV ob, s->GetBlock(out));
    TESSEL_ASSIGN_OR_RETURN(std::vector<LoopRV> ol, s->GetLoops(ob));
    if (!out_groups.empty()) {
      // One loop per GEMM axis: the output's loops over a fused axis, fused in its order.
      std::vector<LoopRV> order;
      for (const std::vector<int>& grp : out_groups) {
        for (int a : grp) order.push_back(ol[a]);
      }
      TESSEL_RETURN_IF_ERROR(s->Reorder(order));
      std::vector<LoopRV> per_axis;
      for (const std::vector<int>& grp : out_groups) {
        std::vector<LoopRV> loops;
        for (int a : grp) loops.push_back(ol[a]);
        if (loops.size() == 1) {
          per_axis.push_back(loops[0]);
        } else {
          TESSEL_ASSIGN_OR_RETURN(LoopRV f, s->Fuse(loops));
          per_axis.push_back(f);
        }
      }
      ol = per_axis;
    }
    if (wgmma) return Wgmma(s, acc, ol, ga, ops, reindex, bulk);
    // Output: [batch] mb nb wm wn fm m16 (fn n8).
    TESSEL_ASSIGN_OR_RETURN(auto m_split, s->Split(ol[ga.m], {-1, 16}));
    TESSEL_ASSIGN_OR_RETURN(auto n_split, s->Split(ol[ga.n], {-1, 8}));
    TESSEL_ASSIGN_OR_RETURN(rules::Levels m,
                            rules::TileChain(s, m_split[0], {kTilesMMax, kWarpsMax}));
    TESSEL_ASSIGN_OR_RETURN(rules::Levels n,
                            rules::TileChain(s, n_split[0], {kTilesNMax, kWarpsMax}));
    std::vector<LoopRV> batch;
    for (int b : ga.batch) batch.push_back(ol[b]);
    std::vector<LoopRV> order = batch;
    for (LoopRV l : {m.loops[0], n.loops[0], m.loops[1], n.loops[1], m.loops[2], m_split[1],
                     n.loops[2], n_split[1]}) {
      order.push_back(l);
    }
    TESSEL_RETURN_IF_ERROR(s->Reorder(order));
    // The write-back's nest: 16 rows by the warp's columns, as in the warpgroup sketch (groups of
    // four 8-column tiles are stored as 16-byte vectors).
    TESSEL_RETURN_IF_ERROR(s->Fuse({n.loops[2], n_split[1]}).status());
    TESSEL_RETURN_IF_ERROR(
        rules::BindBlocksRasterized(s, batch, m.loops[0], n.loops[0], kRasterGroupMax));
    TESSEL_RETURN_IF_ERROR(s->Bind(m.loops[1], "threadIdx.z"));
    TESSEL_RETURN_IF_ERROR(s->Bind(n.loops[1], "threadIdx.y"));
    TESSEL_RETURN_IF_ERROR(s->Unroll(m.loops[2]));
    TESSEL_RETURN_IF_ERROR(s->Tensorize(m_split[1], "mma_accumulator"));
    TESSEL_RETURN_IF_ERROR(s->ComputeAt(acc, n.loops[1]));
    const IntRV wm = m.factors[1], wn = n.factors[1];

    // Accumulator: [batch] m n k -> k0 k1 [batch] fm fn m16 n8 k16.
    TESSEL_ASSIGN_OR_RETURN(std::vector<LoopRV> cl, s->GetLoops(acc));
    std::vector<LoopRV> cspatial, creduce;
    for (LoopRV l : cl) (rules::IsReduceLoop(*s, l) ? creduce : cspatial).push_back(l);
    TESSEL_ASSIGN_OR_RETURN(auto cm, s->Split(cspatial[ga.m], {-1, 16}));
    TESSEL_ASSIGN_OR_RETURN(auto cn, s->Split(cspatial[ga.n], {-1, 8}));
    TESSEL_ASSIGN_OR_RETURN(auto ck, s->Split(creduce[0], {-1, 16}));
    TESSEL_ASSIGN_OR_RETURN(std::vector<IntRV> kf, s->SamplePerfectTile(ck[0], 2, kKStepsMax));
    TESSEL_ASSIGN_OR_RETURN(auto k01, s->Split(ck[0], {kf[0], kf[1]}));
    std::vector<LoopRV> corder = {k01[0], k01[1]};
    for (int b : ga.batch) corder.push_back(cspatial[b]);
    for (LoopRV l : {cm[0], cn[0], cm[1], cn[1], ck[1]}) corder.push_back(l);
    TESSEL_RETURN_IF_ERROR(s->Reorder(corder));
    TESSEL_RETURN_IF_ERROR(s->DecomposeReduction(acc, k01[0]));
    // Tiles past M, N or K (shapes the tiles do not divide) are computed whole, on zeros; only
    // the output stage's stores are guarded.
    TESSEL_RETURN_IF_ERROR(s->Annotate(acc, kPadTile, 1));
    for (LoopRV l : {k01[1], cm[0], cn[0]}) TESSEL_RETURN_IF_ERROR(s->Unroll(l));
    // Priors (samples and mutations draw with them): deeper pipelines, double-buffered
    // fragments, spread copies and 16-byte copies hide more latency and are usually faster; the
    // other choices stay reachable for the shapes where they win.
    TESSEL_ASSIGN_OR_RETURN(IntRV stages,
                            rules::SampleWeighted(s, {1, 2, 3, 4}, {1, 2, 3, 3}, kStagesMax, 0));
    TESSEL_RETURN_IF_ERROR(s->Annotate(k01[0], kSoftwarePipeline, stages));
    // The fragments of the next k step loaded while this one's mma run (2: double-buffered).
    TESSEL_ASSIGN_OR_RETURN(IntRV frag_stages, rules::SampleWeighted(s, {1, 2}, {1, 2}, 2, 0));
    TESSEL_RETURN_IF_ERROR(s->Annotate(k01[1], kSoftwarePipeline, frag_stages));
    // The next shared stage's copies issued in one burst after the barrier (0) or spread over
    // the k steps (1).
    TESSEL_ASSIGN_OR_RETURN(IntRV spread, rules::SampleWeighted(s, {0, 1}, {1, 2}, 1, 0));
    TESSEL_RETURN_IF_ERROR(s->Annotate(k01[1], kPipelineFetchSpread, spread));
    // The next shared stage's first fragments loaded during this stage's last k step, its wait
    // and barrier moved there (1; kPipelineFragmentsAcross: with 3 or more stages, double-
    // buffered fragments and an even number of k steps), or after the barrier at the stage's
    // start (0). On an H100 the 4096^3 f16 GEMM's large tiles ran 1.07-1.21x faster across, while
    // about half of the sampled traces ran up to 11% slower, so it is an even draw.
    TESSEL_ASSIGN_OR_RETURN(IntRV across, rules::SampleWeighted(s, {0, 1}, {1, 1}, 1, 0));
    TESSEL_RETURN_IF_ERROR(s->Annotate(k01[1], kPipelineFragmentsAcross, across));

    // Operands: shared memory at k0, fragments at k1.
    TESSEL_ASSIGN_OR_RETURN(IntRV vec, rules::SampleWeighted(s, {2, 4, 8}, {1, 1, 2}, 8));
    // The shared copies' layout: rows padded (0) or XOR-swizzled at the widest width their tiles
    // allow (kSwizzleWidest; the padding where none does). Both keep ldmatrix free of bank
    // conflicts; the swizzle also keeps a copied row within the 128-byte lines cp.async writes.
    // On an H100 (bench/RESULTS.md, session 8) 128 x 128 tiles of 4 warps ran 1.2x faster
    // swizzled, 256 x 128 tiles of 8 warps 4% slower; 20 sampled traces 1.055x faster (geomean);
    // in two 256-trial tunes the swizzled records' median was 0.80-0.83 of the padded ones'. So
    // the prior favours the swizzle, 2 to 1.
    TESSEL_ASSIGN_OR_RETURN(
        IntRV swizzle, rules::SampleWeighted(s, {0, kSwizzleWidest}, {1, 2}, kSwizzleWidest, 0));
    const size_t num_ops = reindex.empty() ? ops.size() : reindex.size();
    for (size_t o = 0; o < num_ops; ++o) {
      BlockRV sh;
      Operand op;
      TESSEL_ASSIGN_OR_RETURN(std::tie(sh, op), SharedOperand(s, acc, ga, ops, reindex, o));
      TESSEL_ASSIGN_OR_RETURN(BlockRV fr, s->CacheRead(s->GetStage(sh).name, "fragment", {acc}));
      TESSEL_RETURN_IF_ERROR(s->Annotate(sh, kPadTile, 1));
      TESSEL_RETURN_IF_ERROR(s->Annotate(fr, kPadTile, 1));
      TESSEL_RETURN_IF_ERROR(s->ComputeAt(fr, k01[1]));
      TESSEL_RETURN_IF_ERROR(s->ComputeAt(sh, k01[0]));
      // Fragment: the row axis split into tiles; the tile's two loops innermost, in the
      // operand's axis order, the outer of them tensorized with ldmatrix.
      TESSEL_ASSIGN_OR_RETURN(std::vector<LoopRV> fl, s->GetLoops(fr));
      std::vector<LoopRV> rows;
      if (op.is_a) {
        TESSEL_ASSIGN_OR_RETURN(rows, s->Split(fl[op.row_axis], {-1, 16}));
      } else {
        // B: one 8-column tile or two (ldmatrix.x2 or .x4) at a time, two only where they
        // divide the warp's tiles: a sampled divisor p <= 2 of the tile count, the p tiles
        // fused with their 8 rows into the loop ldmatrix replaces.
        TESSEL_ASSIGN_OR_RETURN(auto r8, s->Split(fl[op.row_axis], {-1, 8}));
        TESSEL_ASSIGN_OR_RETURN(std::vector<IntRV> pf, s->SamplePerfectTile(r8[0], 2, 2));
        TESSEL_ASSIGN_OR_RETURN(auto tp, s->Split(r8[0], {pf[0], pf[1]}));
        TESSEL_ASSIGN_OR_RETURN(LoopRV tile_rows, s->Fuse({tp[1], r8[1]}));
        rows = {tp[0], tile_rows};
      }
      std::vector<LoopRV> forder;
      for (size_t d = 0; d < fl.size(); ++d) {
        if (static_cast<int>(d) != op.row_axis && static_cast<int>(d) != op.k_axis) {
          forder.push_back(fl[d]);
        }
      }
      forder.push_back(rows[0]);
      LoopRV first = op.row_axis < op.k_axis ? rows[1] : fl[op.k_axis];
      LoopRV second = op.row_axis < op.k_axis ? fl[op.k_axis] : rows[1];
      forder.push_back(first);
      forder.push_back(second);
      TESSEL_RETURN_IF_ERROR(s->Reorder(forder));
      TESSEL_RETURN_IF_ERROR(s->Unroll(rows[0]));
      TESSEL_RETURN_IF_ERROR(s->Tensorize(first, "ldmatrix"));
      // Shared copy: rows padded by 8 elements (16 bytes) past a multiple of 32, so the 8 rows
      // an ldmatrix reads fall in distinct banks; the fetch spread over all the block's threads.
      const int ndim = static_cast<int>(s->GetStage(sh).axes.size());
      TESSEL_RETURN_IF_ERROR(s->StorageAlign(sh, ndim - 2, 32, 8));
      TESSEL_RETURN_IF_ERROR(s->Annotate(sh, kStorageSwizzle, swizzle));
      TESSEL_RETURN_IF_ERROR(
          CooperativeFetch(s, sh, {wm, "threadIdx.z"}, {wn, "threadIdx.y"}, vec));
    }
    return s->Tensorize(cm[1], "mma_m16n8k16");
  }

  // A shared copy fetched by all the block's threads: its loops fused and split over the two warp
  // loops (their extents and thread tags, in that order), the lanes and vectors of `vec`.
  static absl::Status CooperativeFetch(Schedule* s, BlockRV sh, std::pair<IntRV, const char*> w0,
                                       std::pair<IntRV, const char*> w1, Factor vec) {
    TESSEL_ASSIGN_OR_RETURN(std::vector<LoopRV> sl, s->GetLoops(sh));
    LoopRV fused = sl[0];
    if (sl.size() > 1) {
      TESSEL_ASSIGN_OR_RETURN(fused, s->Fuse(sl));
    }
    TESSEL_ASSIGN_OR_RETURN(auto p, s->Split(fused, {-1, w0.first, w1.first, 32, vec}));
    TESSEL_RETURN_IF_ERROR(s->Bind(p[1], w0.second));
    TESSEL_RETURN_IF_ERROR(s->Bind(p[2], w1.second));
    TESSEL_RETURN_IF_ERROR(s->Bind(p[3], "threadIdx.x"));
    TESSEL_RETURN_IF_ERROR(s->Vectorize(p[4]));
    return s->Unroll(p[0]);
  }

  // The operands as the GEMM reads them once those whose rows are not whole 16-byte vectors
  // are copied into padded global buffers (rules::AlignRows; a contiguous extent of K = 1999).
  static absl::StatusOr<std::vector<Operand>> AlignRows(Schedule* s, const std::string& gemm,
                                                        std::vector<Operand> ops) {
    TESSEL_ASSIGN_OR_RETURN(auto copies, rules::AlignRows(s, gemm));
    for (const auto& [input, copy] : copies) {
      for (Operand& op : ops) {
        if (op.name != input) continue;
        op.name = copy;
        op.contiguous_extent = s->FindStage(copy)->buffer->shape.back();
      }
    }
    return ops;
  }

  // The operand `o` of the accumulator `acc` in shared memory: cached as it is (`ops`) or copied
  // in the GEMM's view (`reindex`).
  absl::StatusOr<std::pair<BlockRV, Operand>> SharedOperand(Schedule* s, BlockRV acc,
                                                            const rules::GemmAxes& ga,
                                                            const std::vector<Operand>& ops,
                                                            const std::vector<std::string>& reindex,
                                                            size_t o) const {
    if (!reindex.empty()) return Reindexed(s, acc, reindex[o], ga);
    TESSEL_ASSIGN_OR_RETURN(BlockRV sh, s->CacheRead(ops[o].name, "shared", {acc}));
    return std::make_pair(sh, ops[o]);
  }

  // The warpgroup sketch (sm_90a): wgmma.mma_async m64nNk16 from swizzled shared memory.
  //
  // The output's m and n loops are split into 16-row and 8-column tiles, the tile counts into
  // block / warp levels, ordered [batch] mb nb | wy wz | fn | m16 n8: wy (threadIdx.y) 4 or 8 warps
  // along m, one 16-row strip each, so that 4 consecutive warps form a warpgroup over 64 rows; wz
  // (threadIdx.z) 1 or 2 warpgroups along n, each N = 64 to 256 columns. The accumulator is
  // computed at the warp (16 x N), k split into 16-element steps, ordered k0 k1 | m16 n k16, the
  // nest tensorized with wgmma_m64nNk16; its initialization and the write-back with the epilogue
  // are accumulator nests as in mma.sync's sketch. Each operand is copied into shared memory at k0
  // (cp.async, 16-byte vectors over all the block's threads) and stored with the 128-byte swizzle
  // that wgmma's descriptors read; k0 is a software pipeline of 2 to 5 stages. With `bulk` (plain
  // operands only) each copy is instead one box of the input, annotated bulk_copy: the copy engine
  // moves it (cp.async.bulk.tensor, one thread issuing) and the pipeline waits on mbarriers;
  // consecutive blocks may form clusters of two, a tile both read multicast to both.
  //
  // Decisions: warps along m (4, 8), warpgroups along n (1, 2), N (64, 128, 192, 256), k steps a
  // stage (4, 8: 64 or 128 elements, whole swizzle rows), stages; with bulk copies, the producer
  // form, the cluster size and whether the write-back goes through bulk tensor stores.
  absl::Status Wgmma(Schedule* s, BlockRV acc, const std::vector<LoopRV>& ol,
                     const rules::GemmAxes& ga, const std::vector<Operand>& ops,
                     const std::vector<std::string>& reindex, bool bulk) const {
    if (bulk && !reindex.empty()) {
      return absl::FailedPreconditionError("bulk tensor copies fetch plain operands only");
    }
    TESSEL_ASSIGN_OR_RETURN(auto m_split, s->Split(ol[ga.m], {-1, 16}));
    TESSEL_ASSIGN_OR_RETURN(auto n_split, s->Split(ol[ga.n], {-1, 8}));
    // Priors: two warpgroups along m and the widest N keep the tensor cores busiest per byte of
    // shared memory read; the others stay reachable.
    // Two warpgroups along n with N = 256 each rarely fit the registers, so they are unlikely.
    TESSEL_ASSIGN_OR_RETURN(IntRV wy, rules::SampleWeighted(s, {4, 8}, {1, 2}, 8, 1));
    TESSEL_ASSIGN_OR_RETURN(IntRV wz, rules::SampleWeighted(s, {1, 2}, {3, 1}, 2, 0));
    TESSEL_ASSIGN_OR_RETURN(IntRV fn,
                            rules::SampleWeighted(s, {8, 16, 24, 32}, {1, 3, 1, 2}, 32, 1));
    TESSEL_ASSIGN_OR_RETURN(auto mt, s->Split(m_split[0], {-1, wy}));
    TESSEL_ASSIGN_OR_RETURN(auto nt, s->Split(n_split[0], {-1, wz, fn}));
    std::vector<LoopRV> batch;
    for (int b : ga.batch) batch.push_back(ol[b]);
    std::vector<LoopRV> order = batch;
    for (LoopRV l : {mt[0], nt[0], mt[1], nt[1], m_split[1], nt[2], n_split[1]}) {
      order.push_back(l);
    }
    TESSEL_RETURN_IF_ERROR(s->Reorder(order));
    // The write-back's nest: the warp's 16 rows by its N columns (lowering stores groups of four
    // 8-column tiles as 16-byte vectors, the lanes of a row trading their columns).
    TESSEL_RETURN_IF_ERROR(s->Fuse({nt[2], n_split[1]}).status());
    // Bulk copies: pairs of blocks in a cluster, whose shared operand tile is multicast, and
    // persistent blocks, whose producer fetches the next tile while this one is stored.
    TESSEL_RETURN_IF_ERROR(rules::BindBlocksRasterized(s, batch, mt[0], nt[0], kRasterGroupMax,
                                                       /*cluster=*/bulk,
                                                       /*sm_count=*/bulk ? target_.sm_count : 0));
    TESSEL_RETURN_IF_ERROR(s->Bind(mt[1], "threadIdx.y"));
    TESSEL_RETURN_IF_ERROR(s->Bind(nt[1], "threadIdx.z"));
    if (bulk) {
      // Warpgroups along n may take turns (kPipelineTurns: a ping-pong kernel), each at its own
      // tile's main loop while the other stores its tile, so the epilogue overlaps the tensor
      // cores' work; they take a producer plane, so only a block of one warpgroup along m can
      // (with two, lowering refuses the sample). On an H100, same traces, 64 x 256 tiles a
      // warpgroup in turns against 128 x 256 ones of two warpgroups at once: bias + GELU
      // 8192 x 8192 x 512 and x 1024 1.07x faster (clusters of two), where the epilogue weighs;
      // plain GEMMs and long k (4096 and more) 1.2-1.4x slower, the smaller tiles reading more
      // operand bytes a flop. So the search decides, the prior against.
      TESSEL_ASSIGN_OR_RETURN(IntRV turns, rules::SampleWeighted(s, {0, 1}, {3, 1}, 1, 0));
      TESSEL_RETURN_IF_ERROR(s->Annotate(nt[1], kPipelineTurns, turns));
    }
    TESSEL_RETURN_IF_ERROR(s->Tensorize(m_split[1], "mma_accumulator"));
    TESSEL_RETURN_IF_ERROR(s->ComputeAt(acc, nt[1]));

    // Accumulator: [batch] m n k -> k0 k1 [batch] m16 n k16.
    TESSEL_ASSIGN_OR_RETURN(std::vector<LoopRV> cl, s->GetLoops(acc));
    std::vector<LoopRV> cspatial, creduce;
    for (LoopRV l : cl) (rules::IsReduceLoop(*s, l) ? creduce : cspatial).push_back(l);
    TESSEL_ASSIGN_OR_RETURN(auto ck, s->Split(creduce[0], {-1, 16}));
    TESSEL_ASSIGN_OR_RETURN(IntRV ksteps, rules::SampleWeighted(s, {4, 8}, {3, 1}, 8, 0));
    TESSEL_ASSIGN_OR_RETURN(auto k01, s->Split(ck[0], {-1, ksteps}));
    std::vector<LoopRV> corder = {k01[0], k01[1]};
    for (int b : ga.batch) corder.push_back(cspatial[b]);
    for (LoopRV l : {cspatial[ga.m], cspatial[ga.n], ck[1]}) corder.push_back(l);
    TESSEL_RETURN_IF_ERROR(s->Reorder(corder));
    TESSEL_RETURN_IF_ERROR(s->DecomposeReduction(acc, k01[0]));
    TESSEL_RETURN_IF_ERROR(s->Annotate(acc, kPadTile, 1));
    TESSEL_RETURN_IF_ERROR(s->Unroll(k01[1]));
    TESSEL_ASSIGN_OR_RETURN(IntRV stages,
                            rules::SampleWeighted(s, {2, 3, 4, 5}, {1, 3, 3, 1}, 5, 2));
    TESSEL_RETURN_IF_ERROR(s->Annotate(k01[0], kSoftwarePipeline, stages));
    if (bulk) {
      // Who issues the copies and how slots come back (kPipelineProducer): thread 0 after a
      // barrier, thread 0 on empty mbarriers, or a plane of producer warps. Each wins on some
      // kernels by up to 1.2x (4096^3 f16 on an H200, the same traces), so the search decides;
      // the plane is the likelier: where the block is two warpgroups along m (the likeliest
      // tiles) it beat thread 0 on every trace tried (1.08x geomean, nine traces of three
      // shapes on an H100).
      TESSEL_ASSIGN_OR_RETURN(IntRV producer, rules::SampleWeighted(s, {0, 1, 2}, {1, 1, 2}, 2, 1));
      TESSEL_RETURN_IF_ERROR(s->Annotate(k01[0], kPipelineProducer, producer));
      // The write-back through shared memory and bulk tensor stores (kBulkStore: each warp's rows
      // in 64-column chunks, one store a chunk) or by the lanes' 16-byte stores. On an H200, same
      // persistent 128 x 256 traces with and without (bench/RESULTS.md, session 14): bias + GELU
      // f16 1.04-1.05x faster with k = 1024, where the epilogue weighs, 1.013-1.016x with k of
      // 4096 and 8192; plain GEMMs 0.98-0.99x (their stores cost little either way, and the
      // chunks' waits and fences do). It also takes 4 KB of shared memory a warp, which a deep
      // pipeline of wide tiles may not have. So the search decides, an even draw.
      TESSEL_ASSIGN_OR_RETURN(IntRV bulk_store, rules::SampleWeighted(s, {0, 1}, {1, 1}, 1, 1));
      TESSEL_RETURN_IF_ERROR(s->Annotate(m_split[1], kBulkStore, bulk_store));
    }

    const size_t num_ops = reindex.empty() ? ops.size() : reindex.size();
    for (size_t o = 0; o < num_ops; ++o) {
      TESSEL_ASSIGN_OR_RETURN(auto shared, SharedOperand(s, acc, ga, ops, reindex, o));
      const BlockRV sh = shared.first;
      TESSEL_RETURN_IF_ERROR(s->Annotate(sh, kPadTile, 1));
      TESSEL_RETURN_IF_ERROR(s->Annotate(sh, kStorageSwizzle, 128));
      TESSEL_RETURN_IF_ERROR(s->ComputeAt(sh, k01[0]));
      if (bulk) {
        TESSEL_ASSIGN_OR_RETURN(std::vector<LoopRV> sl, s->GetLoops(sh));
        TESSEL_RETURN_IF_ERROR(s->Annotate(sl.at(0), kBulkCopy, 1));
      } else {
        TESSEL_RETURN_IF_ERROR(
            CooperativeFetch(s, sh, {wy, "threadIdx.y"}, {wz, "threadIdx.z"}, 8));
      }
    }
    return s->Tensorize(cspatial[ga.m], "wgmma_m64nNk16");
  }

  Target target_;
};

}  // namespace

std::unique_ptr<ScheduleRule> MakeMultiLevelTilingTensorCore(const Target& target) {
  return std::make_unique<MultiLevelTilingTensorCore>(target);
}

}  // namespace tessel::schedules
