// SkinnyContraction: contractions whose output has few rows or few columns on CUDA (matrix-vector
// products, GEMMs with M or N at most kSkinnyMax, and their batched forms), which are bound by
// streaming their one large operand, not by arithmetic: no tile of the square-GEMM sketch reuses
// it, so its mapping spreads the long reduction over threads instead.
//
// Which mapping depends on the layout of the large operand (the one with the most elements), read
// from its strides, not from the workload's name: its contiguous axis (stride 1) is either
//   - the reduction axis k (y = A x with A row-major, x^T B with B transposed): "rows". The
//     output's axes, fused, go R to a block (threadIdx.y, R sampled) and the rest to blockIdx.x;
//     each output's k is split over T threads (threadIdx.x, T sampled: a sub-warp group, a warp
//     or several) at V lanes a thread (vectorized: V contiguous elements, 16 bytes where the
//     sampled width allows), and the T partial sums are combined across the threads (an
//     all-reduce: warp shuffles, then shared memory past a warp).
//   - an output axis c (x^T B with B row-major, A x with A transposed): "columns". c goes Tx to a
//     block (threadIdx.x, so a warp reads consecutive elements of one row of the operand:
//     coalesced), the output's other axes and the rest of c to blockIdx.x; k is split over Ty
//     threads (threadIdx.y, sampled) combined across them (an all-reduce over threadIdx.y).
// Each thread's loop over k is split once more, U steps unrolled (U sampled) so that U loads are
// in flight. The small operand (the vector) is read through L1 by every row of a block: the R rows
// of a block read the same elements ("rows"), a warp reads one element ("columns").
//
// Few outputs for the GPU (SplitChoices): a second sketch first splits k over blocks
// (rules::SplitIntoPartials: rfactor, the partials P[f, ...] mapped as above with the chunk f as
// one more output axis), then sums the partials in order (rules::BindCombine, one output a
// thread, with the epilogue). The number of chunks is a sample_categorical with a prior centred
// on the split that fills the GPU's threads once.
//
// "columns" reads the large operand one element a thread (a reduction across threads keeps no
// spatial loop inside its reduction, so no vector of outputs a thread). A third sketch has the
// vectors (VectorColumns): k in sampled chunks (1 included) whose partials are computed one
// thread a chunk and V consecutive outputs (16-byte loads along the operand's rows, the V sums
// in registers: cache_write local), chunks Ty to a block (threadIdx.y) and the rest over
// blocks, no reduction across threads; the F partials are then summed in order as above.
//
// A fourth sketch, for "columns", keeps the whole sum in one kernel (BlockColumns): a block owns
// Tx * V consecutive columns and all of k, split in Ty chunks (Ty sampled), one thread
// (threadIdx.y) a chunk and V columns as in VectorColumns; the block's Ty x Tx*V partials go to
// shared memory and its threads then sum each column's Ty partials in order (V x Tx threads,
// with the epilogue). No partials through global memory and no second kernel: for x^T B with
// N = 8192 the columns alone make 128 blocks of 64, one an SM, each streaming its strip of B.
// Its loads may be streaming (evict-first) loads, a sampled choice.
//
// An epilogue of the contraction's shape (bias, activation, cast) takes the output's loops; the
// contraction is computed in a register at the epilogue's thread loop (local scope). The
// square-GEMM sketches stay: this rule forks the space, leaving an untouched copy for
// MultiLevelTiling. A contraction that is not skinny is left alone (no decision, no sketch: its
// space is what it was); a sketch that cannot be formed (a layout of stages not foreseen here)
// is left out rather than failing the space.
//
// Decisions: every thread count, the vector width and the number of chunks are
// sample_categorical (rules::SampleUniform / SampleWeighted), so the categorical mutator moves
// them and traces replay.

#include <algorithm>
#include <functional>
#include <optional>

#include "schedules/ir/substitute.h"
#include "schedules/rules/rule_util.h"
#include "schedules/rules/schedule_rule.h"
#include "schedules/util/status_macros.h"

namespace tessel::schedules {
namespace {

using rules::SampleUniform;

constexpr int64_t kSkinnyMax = 16;       // the smaller of the GEMM view's m and n, at most
constexpr int64_t kMinReduction = 256;   // k, at least: shorter sums are not worth threads
constexpr int64_t kSplitMax = 64;        // chunks of k over blocks, at most
constexpr int64_t kMinChunk = 1024;      // elements of k a chunk, at least
constexpr int64_t kMinColumnChunk = 64;  // elements of k a thread's chunk, at least (VectorColumns)
constexpr int64_t kThreadsPerSm = 2048;  // resident threads an SM (sm_80, sm_90)
constexpr int64_t kRowsThreads = 32;     // typical threads an output ("rows"), for the prior
constexpr int64_t kColumnsThreads = 4;   // typical threads an output ("columns"), for the prior

// How the large operand is streamed (see above).
enum class Stream { kRows, kColumns };

struct SkinnyView {
  Stream stream = Stream::kRows;
  int column_axis = -1;  // kColumns: the output axis the large operand is contiguous along
  int64_t k = 0;         // the reduction's extent
  int64_t outputs = 0;   // the output's elements
  int64_t lanes = 1;     // elements of the large operand in 16 bytes
};

// The view of a skinny contraction (one reduction axis, two operands indexed by plain axis
// variables, the GEMM view's m or n at most kSkinnyMax, k at least kMinReduction), or nullopt.
std::optional<SkinnyView> SkinnyViewOf(const Stage& st) {
  if (!rules::IsContraction(st) || st.reduce_axes.size() != 1) return std::nullopt;
  const rules::GemmAxes ga = rules::GemmAxesOf(st);
  const std::vector<int64_t>& shape = st.buffer->shape;
  if (std::min(shape[ga.m], shape[ga.n]) > kSkinnyMax) return std::nullopt;
  SkinnyView v;
  v.k = st.iters[st.axes.size()].extent;
  if (v.k < kMinReduction) return std::nullopt;
  v.outputs = 1;
  for (int64_t d : shape) v.outputs *= d;
  // The large operand (the first of the largest: either of a dot product's), every operand's
  // indices plain variables.
  const LoadNode* large = nullptr;
  int64_t large_elements = 0;
  for (const LoadNode* l : CollectLoads(st.body)) {
    int64_t elements = 1;
    for (int64_t d : l->buffer->shape) elements *= d;
    for (const Expr& i : l->indices) {
      if (!As<VarNode>(i)) return std::nullopt;
    }
    if (elements > large_elements) {
      large = l;
      large_elements = elements;
    }
  }
  if (!large) return std::nullopt;
  // Its contiguous axis: the smallest stride among the axes longer than one.
  const std::vector<int64_t> strides = large->buffer->Strides();
  int contiguous = -1;
  for (size_t d = 0; d < strides.size(); ++d) {
    if (large->buffer->shape[d] > 1 && (contiguous < 0 || strides[d] < strides[contiguous])) {
      contiguous = static_cast<int>(d);
    }
  }
  if (contiguous < 0) return std::nullopt;
  const VarNode* var = As<VarNode>(large->indices[contiguous]);
  if (var == st.reduce_axes[0].get()) {
    v.stream = Stream::kRows;
  } else {
    for (size_t a = 0; a < st.axes.size(); ++a) {
      if (st.axes[a].get() == var) v.column_axis = static_cast<int>(a);
    }
    if (v.column_axis < 0) return std::nullopt;
    v.stream = Stream::kColumns;
  }
  v.lanes = std::max<int64_t>(1, 16 / DTypeBytes(large->buffer->dtype));
  return v;
}

// The numbers of chunks the split sketch samples (1 first), empty when no split is worth a
// sketch: counts up to kSplitMax leaving chunks of kMinChunk (rules::ChunkCounts), where the
// unsplit mapping has at most the GPU's resident threads (at the mapping's typical threads an
// output).
std::vector<int64_t> SplitChoices(const Target& t, const SkinnyView& v, double* want) {
  const int64_t per_output = v.stream == Stream::kRows ? kRowsThreads : kColumnsThreads;
  *want =
      static_cast<double>(t.sm_count * kThreadsPerSm) / static_cast<double>(v.outputs * per_output);
  if (*want < 1.0) return {};
  std::vector<int64_t> out = rules::ChunkCounts(v.k, kSplitMax, kMinChunk);
  if (out.size() < 2) return {};
  return out;
}

class SkinnyContraction final : public ScheduleRule {
 public:
  explicit SkinnyContraction(const Target& t) : target_(t) {}
  std::string name() const override { return "skinny_contraction"; }

  absl::StatusOr<std::vector<Schedule>> Apply(const Schedule& sch,
                                              const std::string& stage) const override {
    const Stage* st = sch.FindStage(stage);
    if (!target_.is_cuda() || !st || st->inlined() || rules::IsScheduled(*st)) {
      return std::vector<Schedule>{};
    }
    const Stage* out = sch.FindStage(rules::OutputOf(sch));
    if (!out || out->buffer->shape != st->buffer->shape) return std::vector<Schedule>{};
    const std::optional<SkinnyView> view = SkinnyViewOf(*st);
    if (!view) return std::vector<Schedule>{};
    // Each sketch where it can be formed (a stage layout this rule does not foresee leaves the
    // space to the tiling rules rather than failing it).
    std::vector<Schedule> sketches;
    const auto add = [&](const std::function<absl::Status(Schedule*)>& make) {
      Schedule s = sch;
      if (make(&s).ok()) sketches.push_back(std::move(s));
    };
    add([&](Schedule* s) { return Map(s, stage, rules::OutputOf(*s), *view); });
    double want = 1;
    if (std::vector<int64_t> choices = SplitChoices(target_, *view, &want); !choices.empty()) {
      add([&](Schedule* s) { return SplitThenMap(s, stage, *view, choices, want); });
    }
    if (view->stream == Stream::kColumns) {
      add([&](Schedule* s) { return VectorColumns(s, stage, *view); });
      add([&](Schedule* s) { return BlockColumns(s, stage, *view); });
    }
    if (sketches.empty()) return sketches;
    // The square-GEMM sketches stay: MultiLevelTiling schedules the untouched copy.
    sketches.push_back(sch);
    return sketches;
  }

 private:
  // k split over blocks first (rules::SplitIntoPartials: `choices` chunks drawn with a prior
  // centred on `want`), the partials mapped as `v` says with the chunk as one more output axis,
  // then summed in order (rules::BindCombine).
  static absl::Status SplitThenMap(Schedule* s, const std::string& gemm, const SkinnyView& v,
                                   const std::vector<int64_t>& choices, double want) {
    TESSEL_ASSIGN_OR_RETURN(
        std::string partials,
        rules::SplitIntoPartials(s, gemm, static_cast<int>(s->FindStage(gemm)->axes.size()),
                                 choices, rules::LogDistanceWeights(choices, want)));
    SkinnyView pv = v;
    if (pv.stream == Stream::kColumns) ++pv.column_axis;  // the chunk is the partials' axis 0
    TESSEL_RETURN_IF_ERROR(Map(s, partials, partials, pv));
    return rules::BindCombine(s, gemm);
  }

  // Maps the reduction stage `red` (the contraction or its partials, at the root) as `v` says,
  // `consumer`'s loops bound: `red` itself where it writes its own output (the partials, or a
  // contraction without epilogue), else its epilogue, at whose thread loop `red` is then
  // computed in a register.
  static absl::Status Map(Schedule* s, const std::string& red, const std::string& consumer,
                          const SkinnyView& v) {
    TESSEL_ASSIGN_OR_RETURN(BlockRV y, s->GetBlock(consumer));
    TESSEL_ASSIGN_OR_RETURN(std::vector<LoopRV> loops, s->GetLoops(y));
    std::vector<LoopRV> spatial;
    for (LoopRV l : loops) {
      if (!rules::IsReduceLoop(*s, l)) spatial.push_back(l);
    }
    TESSEL_ASSIGN_OR_RETURN(LoopRV at, v.stream == Stream::kRows ? BindRows(s, spatial, v)
                                                                 : BindColumns(s, spatial, v));
    TESSEL_ASSIGN_OR_RETURN(BlockRV r, s->GetBlock(red));
    if (consumer != red) {
      TESSEL_RETURN_IF_ERROR(s->SetScope(r, "local"));
      TESSEL_RETURN_IF_ERROR(s->ComputeAt(r, at));
    }
    TESSEL_ASSIGN_OR_RETURN(std::vector<LoopRV> rl, s->GetLoops(r));
    const LoopRV k = rl.back();
    if (v.stream == Stream::kRows) {
      // k -> [-1, U, T, V]: U steps unrolled (U loads in flight a thread), T threads
      // (threadIdx.x, combined across them), V lanes vectorized.
      TESSEL_ASSIGN_OR_RETURN(IntRV lanes, SampleLanes(s, v));
      TESSEL_ASSIGN_OR_RETURN(IntRV threads,
                              SampleUniform(s, rules::PowersOfTwo(4, 128), v.k / v.lanes));
      TESSEL_ASSIGN_OR_RETURN(IntRV unroll, SampleUnroll(s, v));
      TESSEL_ASSIGN_OR_RETURN(std::vector<LoopRV> p, s->Split(k, {-1, unroll, threads, lanes}));
      TESSEL_RETURN_IF_ERROR(s->Unroll(p[1]));
      TESSEL_RETURN_IF_ERROR(s->Bind(p[2], "threadIdx.x"));
      return s->Vectorize(p[3]);
    }
    // k -> [-1, U, Ty]: U steps unrolled, Ty threads (threadIdx.y, combined across them).
    TESSEL_ASSIGN_OR_RETURN(IntRV threads, SampleUniform(s, {2, 4, 8}, v.k));
    TESSEL_ASSIGN_OR_RETURN(IntRV unroll, SampleUnroll(s, v));
    TESSEL_ASSIGN_OR_RETURN(std::vector<LoopRV> p, s->Split(k, {-1, unroll, threads}));
    TESSEL_RETURN_IF_ERROR(s->Unroll(p[1]));
    return s->Bind(p[2], "threadIdx.y");
  }

  // Steps of a thread's loop over k unrolled (independent loads in flight): 1 to 8.
  static absl::StatusOr<IntRV> SampleUnroll(Schedule* s, const SkinnyView& v) {
    return SampleUniform(s, {1, 2, 4, 8}, std::max<int64_t>(1, v.k / kMinReduction));
  }

  // The vector width along the large operand's contiguous axis: 1 to 16 bytes, 16 favoured.
  static absl::StatusOr<IntRV> SampleLanes(Schedule* s, const SkinnyView& v) {
    std::vector<int64_t> widths = rules::PowersOfTwo(1, v.lanes);
    std::vector<double> weights(widths.size(), 1.0);
    weights.back() = 2.0;
    return rules::SampleWeighted(s, widths, weights, v.lanes);
  }

  // "columns" with vector loads: k in F chunks (F sampled, 1 included) whose partials
  // P[f, ...] (rules::SplitIntoPartials) are computed one thread a chunk and V consecutive
  // columns (V lanes vectorized: 16-byte loads of the large operand's row), in registers
  // (cache_write local, k outside the V lanes), no reduction across threads; the chunks go Ty to
  // a block (threadIdx.y) and the rest to blockIdx.x with the other output loops; the columns Tx
  // to a block (threadIdx.x). The F partials are then summed in order (rules::BindCombine).
  absl::Status VectorColumns(Schedule* s, const std::string& gemm, const SkinnyView& v) const {
    const std::vector<int64_t> choices = rules::ChunkCounts(v.k, kSplitMax, kMinColumnChunk);
    // Centred on the split that gives the GPU's threads one chunk of V columns each.
    const double want = std::min<double>(
        kSplitMax, static_cast<double>(target_.sm_count * kThreadsPerSm * v.lanes) /
                       static_cast<double>(v.outputs));
    TESSEL_ASSIGN_OR_RETURN(
        std::string partials,
        rules::SplitIntoPartials(s, gemm, static_cast<int>(s->FindStage(gemm)->axes.size()),
                                 choices, rules::LogDistanceWeights(choices, std::max(want, 1.0))));
    TESSEL_ASSIGN_OR_RETURN(BlockRV p, s->GetBlock(partials));
    TESSEL_ASSIGN_OR_RETURN(BlockRV acc, s->CacheWrite(p, "local"));
    TESSEL_ASSIGN_OR_RETURN(std::vector<LoopRV> pl, s->GetLoops(p));
    const int column_axis = v.column_axis + 1;  // the chunk is the partials' axis 0
    TESSEL_ASSIGN_OR_RETURN(IntRV lanes, SampleLanes(s, v));
    TESSEL_ASSIGN_OR_RETURN(IntRV tx, SampleUniform(s, {32, 64, 128}, v.outputs));
    TESSEL_ASSIGN_OR_RETURN(IntRV ty, SampleUniform(s, {1, 2, 4, 8}, choices.back()));
    TESSEL_ASSIGN_OR_RETURN(std::vector<LoopRV> c, s->Split(pl[column_axis], {-1, tx, lanes}));
    TESSEL_ASSIGN_OR_RETURN(std::vector<LoopRV> f, s->Split(pl[0], {-1, ty}));
    std::vector<LoopRV> outer = {f[0]};
    for (int a = 1; a < static_cast<int>(pl.size()); ++a) {
      if (a != column_axis) outer.push_back(pl[a]);
    }
    outer.push_back(c[0]);
    std::vector<LoopRV> order = outer;
    for (LoopRV l : {f[1], c[1], c[2]}) order.push_back(l);
    TESSEL_RETURN_IF_ERROR(s->Reorder(order));
    TESSEL_ASSIGN_OR_RETURN(LoopRV blocks, s->Fuse(outer));
    TESSEL_RETURN_IF_ERROR(s->Bind(blocks, "blockIdx.x"));
    TESSEL_RETURN_IF_ERROR(s->Bind(f[1], "threadIdx.y"));
    TESSEL_RETURN_IF_ERROR(s->Bind(c[1], "threadIdx.x"));
    // The partials' stores unrolled: f32 lanes of a 16-byte f16 vector would be 32 bytes.
    TESSEL_RETURN_IF_ERROR(s->Unroll(c[2]));
    // The accumulator at the thread: its V columns inside k, vectorized.
    TESSEL_RETURN_IF_ERROR(s->ComputeAt(acc, c[1]));
    TESSEL_ASSIGN_OR_RETURN(std::vector<LoopRV> al, s->GetLoops(acc));
    const LoopRV columns = al[column_axis];
    TESSEL_ASSIGN_OR_RETURN(IntRV unroll, SampleUnroll(s, v));
    TESSEL_ASSIGN_OR_RETURN(std::vector<LoopRV> k, s->Split(al.back(), {-1, unroll}));
    TESSEL_RETURN_IF_ERROR(s->Reorder({k[0], k[1], columns}));
    TESSEL_RETURN_IF_ERROR(s->DecomposeReduction(acc, k[0]));
    TESSEL_RETURN_IF_ERROR(s->Unroll(k[1]));
    TESSEL_RETURN_IF_ERROR(s->Vectorize(columns));
    return rules::BindCombine(s, gemm);
  }

  // "columns" in one kernel (see the top): k in Ty chunks a block (rules::SplitIntoPartials, Ty
  // sampled), the partials P[f, ...] in shared memory at the consumer's block, one thread a chunk
  // (threadIdx.y) and V columns (threadIdx.x x V lanes, vectorized, in registers); the consumer
  // (the epilogue, or the combine's write-back) takes the output's loops: the column axis split
  // [-1, V, Tx] with V to threadIdx.y and Tx to threadIdx.x, the rest to blockIdx.x, and sums
  // its column's Ty partials in a register at its thread.
  absl::Status BlockColumns(Schedule* s, const std::string& gemm, const SkinnyView& v) const {
    std::vector<int64_t> chunks;
    for (int64_t c : rules::PowersOfTwo(16, 128)) {
      if (v.k / c >= kMinColumnChunk) chunks.push_back(c);
    }
    if (chunks.empty()) return absl::FailedPreconditionError("k is too short for chunks a block");
    // The priors: Tx centred on one block of Tx * V columns an SM, Ty on filling a block of
    // kThreadsPerSm / 2 threads with it (x^T B with N = 8192, f16: Tx = 8, 128 blocks; Ty = 128).
    const std::vector<int64_t> txs = {4, 8};  // with Ty <= 128: at most 1024 threads
    const double tx_want = std::max(
        1.0, static_cast<double>(v.outputs) / static_cast<double>(v.lanes * target_.sm_count));
    const double ty_want = static_cast<double>(kThreadsPerSm / 2) / std::clamp(tx_want, 4.0, 8.0);
    const int axes = static_cast<int>(s->FindStage(gemm)->axes.size());
    TESSEL_ASSIGN_OR_RETURN(std::string partials,
                            rules::SplitIntoPartials(s, gemm, axes, chunks,
                                                     rules::LogDistanceWeights(chunks, ty_want)));
    TESSEL_ASSIGN_OR_RETURN(const auto writer, rules::CombineWriter(s, gemm));
    const auto& [consumer, producer] = writer;
    TESSEL_ASSIGN_OR_RETURN(BlockRV y, s->GetBlock(consumer));
    TESSEL_ASSIGN_OR_RETURN(std::vector<LoopRV> yl, s->GetLoops(y));
    TESSEL_ASSIGN_OR_RETURN(IntRV lanes, SampleLanes(s, v));
    // Tx * 16 bytes of a row a block: 64 or 128.
    TESSEL_ASSIGN_OR_RETURN(IntRV tx,
                            rules::SampleWeighted(s, txs, rules::LogDistanceWeights(txs, tx_want),
                                                  v.outputs / v.lanes));
    TESSEL_ASSIGN_OR_RETURN(ColumnSplit c, BindColumnBlocks(s, yl, v.column_axis, {-1, lanes, tx}));
    const LoopRV blocks = c.blocks;
    TESSEL_RETURN_IF_ERROR(s->Bind(c.inner[0], "threadIdx.y"));
    TESSEL_RETURN_IF_ERROR(s->Bind(c.inner[1], "threadIdx.x"));
    TESSEL_ASSIGN_OR_RETURN(BlockRV sum, s->GetBlock(producer));
    TESSEL_RETURN_IF_ERROR(s->SetScope(sum, "local"));
    TESSEL_RETURN_IF_ERROR(s->ComputeAt(sum, c.inner[1]));
    // The partials: the block's Ty chunks of its columns, in shared memory.
    TESSEL_ASSIGN_OR_RETURN(BlockRV p, s->GetBlock(partials));
    TESSEL_ASSIGN_OR_RETURN(BlockRV acc, s->CacheWrite(p, "local"));
    TESSEL_RETURN_IF_ERROR(s->SetScope(p, "shared"));
    TESSEL_RETURN_IF_ERROR(s->ComputeAt(p, blocks));
    TESSEL_ASSIGN_OR_RETURN(std::vector<LoopRV> pl, s->GetLoops(p));
    // pl: P's axes at the block's extents, the chunk first.
    const LoopRV chunk = pl[0];
    const LoopRV columns = pl[1 + v.column_axis];
    TESSEL_ASSIGN_OR_RETURN(std::vector<LoopRV> pc, s->Split(columns, {tx, lanes}));
    std::vector<LoopRV> porder = {chunk};
    for (size_t i = 1; i < pl.size(); ++i) {
      if (pl[i].id != columns.id) porder.push_back(pl[i]);
    }
    porder.push_back(pc[0]);
    porder.push_back(pc[1]);
    std::vector<LoopRV> pnow = pl;
    pnow[1 + v.column_axis] = pc[0];
    pnow.insert(pnow.begin() + 2 + v.column_axis, pc[1]);
    if (!rules::SameOrder(porder, pnow)) TESSEL_RETURN_IF_ERROR(s->Reorder(porder));
    TESSEL_RETURN_IF_ERROR(s->Bind(chunk, "threadIdx.y"));
    TESSEL_RETURN_IF_ERROR(s->Bind(pc[0], "threadIdx.x"));
    TESSEL_RETURN_IF_ERROR(s->Unroll(pc[1]));
    // The accumulator at the thread: its V columns inside k, vectorized (as VectorColumns).
    TESSEL_RETURN_IF_ERROR(s->ComputeAt(acc, pc[0]));
    TESSEL_ASSIGN_OR_RETURN(std::vector<LoopRV> al, s->GetLoops(acc));
    const LoopRV acc_columns = al[1 + v.column_axis];
    // Rows in flight a thread: its loads are all the block streams (one block an SM), so deeper
    // than SampleUnroll's (a hand-written kernel of this form went from 0.77 to 0.83 of the copy
    // bandwidth between 8 and 16 rows, H200).
    TESSEL_ASSIGN_OR_RETURN(IntRV unroll, SampleUniform(s, {4, 8, 16}, kMinColumnChunk));
    TESSEL_ASSIGN_OR_RETURN(std::vector<LoopRV> k, s->Split(al.back(), {-1, unroll}));
    TESSEL_RETURN_IF_ERROR(s->Reorder({k[0], k[1], acc_columns}));
    TESSEL_RETURN_IF_ERROR(s->DecomposeReduction(acc, k[0]));
    TESSEL_RETURN_IF_ERROR(s->Unroll(k[1]));
    TESSEL_RETURN_IF_ERROR(s->Vectorize(acc_columns));
    // Streaming (evict-first) loads of the operands, or plain ones. (ptxas issues a step's U row
    // loads before their arithmetic when the kernel's launch bounds ask for one block an SM,
    // which cuda_codegen does for grids of at most one block an SM.)
    TESSEL_ASSIGN_OR_RETURN(IntRV stream, SampleUniform(s, {0, 1}, 1));
    return s->Annotate(acc, "stream_loads", stream);
  }

  // "rows": the output's loops fused, R to threadIdx.y (R sampled), the rest to blockIdx.x;
  // returns the threadIdx.y loop.
  static absl::StatusOr<LoopRV> BindRows(Schedule* s, const std::vector<LoopRV>& spatial,
                                         const SkinnyView& v) {
    TESSEL_ASSIGN_OR_RETURN(LoopRV rows, rules::FuseAll(s, spatial));
    TESSEL_ASSIGN_OR_RETURN(IntRV r, SampleUniform(s, {1, 2, 4, 8}, v.outputs));
    TESSEL_ASSIGN_OR_RETURN(std::vector<LoopRV> p, s->Split(rows, {-1, r}));
    TESSEL_RETURN_IF_ERROR(s->Bind(p[0], "blockIdx.x"));
    TESSEL_RETURN_IF_ERROR(s->Bind(p[1], "threadIdx.y"));
    return p[1];
  }

  // "columns": the column axis split [-1, Tx] (Tx sampled) with Tx to threadIdx.x; the other
  // output loops and the rest of the column axis, fused, to blockIdx.x; returns the threadIdx.x
  // loop.
  static absl::StatusOr<LoopRV> BindColumns(Schedule* s, const std::vector<LoopRV>& spatial,
                                            const SkinnyView& v) {
    const LoopRV column = spatial[v.column_axis];
    TESSEL_ASSIGN_OR_RETURN(IntRV tx, SampleUniform(s, {32, 64, 128}, s->LoopExtent(column)));
    TESSEL_ASSIGN_OR_RETURN(ColumnSplit c, BindColumnBlocks(s, spatial, v.column_axis, {-1, tx}));
    TESSEL_RETURN_IF_ERROR(s->Bind(c.inner[0], "threadIdx.x"));
    return c.inner[0];
  }

  // The column loop `spatial[column_axis]` split by `factors` (the rest first); the other loops
  // and that rest, fused, bound to blockIdx.x; the split's inner loops innermost, in order.
  struct ColumnSplit {
    LoopRV blocks;
    std::vector<LoopRV> inner;
  };
  static absl::StatusOr<ColumnSplit> BindColumnBlocks(Schedule* s,
                                                      const std::vector<LoopRV>& spatial,
                                                      int column_axis,
                                                      const std::vector<Factor>& factors) {
    TESSEL_ASSIGN_OR_RETURN(std::vector<LoopRV> c, s->Split(spatial[column_axis], factors));
    std::vector<LoopRV> outer;
    for (int a = 0; a < static_cast<int>(spatial.size()); ++a) {
      if (a != column_axis) outer.push_back(spatial[a]);
    }
    outer.push_back(c[0]);
    const std::vector<LoopRV> inner(c.begin() + 1, c.end());
    std::vector<LoopRV> order = outer;
    order.insert(order.end(), inner.begin(), inner.end());
    // In place, the loops are the others in order with the column's parts where the column was.
    std::vector<LoopRV> now = spatial;
    now.erase(now.begin() + column_axis);
    now.insert(now.begin() + column_axis, c.begin(), c.end());
    if (!rules::SameOrder(order, now)) TESSEL_RETURN_IF_ERROR(s->Reorder(order));
    TESSEL_ASSIGN_OR_RETURN(LoopRV blocks, rules::FuseAll(s, outer));
    TESSEL_RETURN_IF_ERROR(s->Bind(blocks, "blockIdx.x"));
    return ColumnSplit{blocks, inner};
  }

  Target target_;
};

}  // namespace

std::unique_ptr<ScheduleRule> MakeSkinnyContraction(const Target& target) {
  return std::make_unique<SkinnyContraction>(target);
}

}  // namespace tessel::schedules
