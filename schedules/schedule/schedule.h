#pragma once

// The schedule state of a workload and the schedule primitives. Every successful primitive is
// recorded in the trace (trace.h); Replay() re-applies a trace to a fresh schedule of the same
// workload. Each primitive checks its preconditions first and, when one fails, returns an error
// that names the stage or loop and the problem, and leaves the state unchanged:
//   kInvalidArgument     a bad argument (unknown name, non-positive factor, wrong thread tag)
//   kFailedPrecondition  the state does not allow it (loop already bound, stage has consumers
//                        outside the loop it would be attached to, ...)
//
// Model (TVM tensor-expression style): a stage computes one tensor. Its loop nest is derived
// from the tensor's axes by split/fuse relations; compute_at attaches a producer inside a loop of
// a consumer and computes only the region that loop needs (region inference, region.h);
// cache_read/cache_write insert copy stages in shared or local memory. Binding a reduction loop
// to threadIdx.* makes a cross-thread reduction (warp shuffles and shared memory); rfactor splits
// a reduction in two stages so that several blocks can share one reduction.
//
// Threads: a Schedule is a value; use one from one thread at a time. Copies are independent.
//
// Code layout: Schedule is both the schedule state and the recording facade. schedule.cc holds
// the state and its bookkeeping (handles, stage lookup, loop resets); the primitives are member
// functions defined one family per file in primitive/ (sampling.cc, loop_transformation.cc,
// loop_kind.cc, cache.cc, compute_at.cc, compute_inline.cc, layout.cc, annotation.cc,
// reduction.cc, reduction_fusion.cc, lookup.cc). Each family file also names its instructions
// once and registers how a trace applies them (instruction_table.h), which is what Replay uses.

#include <cstdint>
#include <functional>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "schedules/schedule/stage.h"
#include "schedules/schedule/trace.h"
#include "schedules/workload/workload.h"

namespace tessel::schedules {

struct BlockRV {
  int id = -1;
};
struct LoopRV {
  int id = -1;
};
struct IntRV {
  int id = -1;
};

// A split factor: a literal (-1: inferred from the extent) or a sampled value.
struct Factor {
  Factor(int64_t v) : value(v) {}  // NOLINT: implicit by design
  Factor(int v) : value(v) {}      // NOLINT
  Factor(IntRV r) : rv(r) {}       // NOLINT
  int64_t value = 0;
  IntRV rv;
};

class Schedule {
 public:
  // The initial schedule: one root stage per computed tensor, loops in axis order (spatial, then
  // reduction), nothing bound. `seed` drives the sampling instructions.
  static absl::StatusOr<Schedule> Create(const Workload& workload, uint64_t seed = 0);

  const Workload& workload() const { return *workload_; }
  const std::vector<Stage>& stages() const { return stages_; }
  const Stage* FindStage(const std::string& name) const;
  const Trace& trace() const { return trace_; }

  // ---- Random variables.
  const Stage& GetStage(BlockRV b) const;
  const Stage& LoopStage(LoopRV l) const;
  int LoopIter(LoopRV l) const;
  int64_t LoopExtent(LoopRV l) const;
  std::string LoopName(LoopRV l) const;  // "C.i_0"
  int64_t Value(IntRV v) const;

  // ---- Lookup.
  absl::StatusOr<BlockRV> GetBlock(const std::string& stage_name);
  absl::StatusOr<std::vector<LoopRV>> GetLoops(BlockRV block);  // leaves, outermost first

  // ---- Sampling. A decision, when given, is used instead of sampling (and validated).
  // n factors whose product is the loop's extent, the innermost at most max_innermost. With
  // `padded_extent` (a sampled value at least the loop's extent), factors of that extent instead:
  // a split by them covers the loop with a padded last tile (guarded, or computed whole where
  // the stage is annotated kPadTile). The innermost factor is drawn uniformly among the divisors
  // within max_innermost, or, with `innermost_by_size`, in proportion to its size (recorded in the
  // instruction, so that replays and fresh draws of the trace do the same).
  absl::StatusOr<std::vector<IntRV>> SamplePerfectTile(
      LoopRV loop, int n, int64_t max_innermost,
      std::optional<std::vector<int64_t>> decision = std::nullopt,
      std::optional<IntRV> padded_extent = std::nullopt, bool innermost_by_size = false);
  // With `cap`, a candidate c stands for a count of the loop's iterations as it is when drawn or
  // replayed (extent E, whatever earlier decisions made it): the loop in P = ceil(E / c) equal
  // parts, the value is ceil(E / P), the fewest iterations a part that keep P parts (0 or c >= E:
  // E itself). A split by it leaves fewer than P iterations past E, none where P divides E
  // (132 of 2048 gives 128: 16 parts either way).
  absl::StatusOr<IntRV> SampleCategorical(std::vector<int64_t> candidates,
                                          std::vector<double> probs,
                                          std::optional<int64_t> decision = std::nullopt,
                                          std::optional<LoopRV> cap = std::nullopt);
  // A loop of the stage's consumer to compute the stage at, or the root (LoopRV{kRootLoop}) or
  // inline (LoopRV{kInlineLoop}) markers. The decision is the position: -2 root, -1 inline, or an
  // index into the consumer's loops.
  static constexpr int kRootLoop = -2;
  static constexpr int kInlineLoop = -3;
  absl::StatusOr<LoopRV> SampleComputeLocation(BlockRV block,
                                               std::optional<int64_t> decision = std::nullopt);
  // One of `candidates`, loops where compute_at accepts the stage now (loops of its consumers or
  // of a stage attached above them, e.g. an accumulator's reduction levels); the decision is the
  // index into the list. The candidates are the instruction's inputs after the stage, so the
  // trace replays the same list; a candidate that compute_at would refuse is an error naming the
  // stage and the loop (the list is checked whole, whatever the decision). The result is a fresh
  // handle on the chosen loop, for compute_at.
  absl::StatusOr<LoopRV> SampleComputeLocation(BlockRV block, const std::vector<LoopRV>& candidates,
                                               std::optional<int64_t> decision = std::nullopt);

  // ---- Loop transformations.
  // Splits a loop into factors.size() loops, outermost first. At most one factor may be -1
  // (inferred); the product must cover the extent, and a product larger than the extent (or a
  // factor that does not divide) leaves guarded tail iterations.
  absl::StatusOr<std::vector<LoopRV>> Split(LoopRV loop, const std::vector<Factor>& factors);
  // Fuses adjacent loops of one stage (outermost first) into one.
  absl::StatusOr<LoopRV> Fuse(const std::vector<LoopRV>& loops);
  // Puts the given loops of one stage in the given order, in the positions they occupy.
  absl::Status Reorder(const std::vector<LoopRV>& loops);
  // thread: "blockIdx.x|y|z", "threadIdx.x|y|z" or "vthread". Binding a reduction loop to
  // threadIdx.* makes a cross-thread reduction.
  absl::Status Bind(LoopRV loop, const std::string& thread);
  absl::Status Parallel(LoopRV loop);
  // On a reduction loop: the operands are read as vectors and the lanes accumulated in order
  // (the same result as the serial loop).
  absl::Status Vectorize(LoopRV loop);
  absl::Status Unroll(LoopRV loop);

  // ---- Stage transformations.
  // A stage that copies `tensor` into scope ("shared" or "local"); the readers read the copy.
  absl::StatusOr<BlockRV> CacheRead(std::string tensor, const std::string& scope,
                                    const std::vector<BlockRV>& readers);
  // A stage that copies what `reader` reads of `tensor` into `scope`, indexed by the reader's
  // root variables that the access uses (ordered by the first dimension of the tensor each
  // appears in) instead of the tensor's: a read data[n, p + r, q + s, c] becomes copy[n, p, q, r,
  // s, c] (after fuse_axes, copy[m, kk] of a convolution: the GEMM operand a tensor core reads).
  // Every read of `tensor` in `reader` must use the same indices. Meta-Schedule's reindex.
  absl::StatusOr<BlockRV> ReIndex(BlockRV reader, std::string tensor, const std::string& scope);
  // The stage's computation moves to a new stage writing `scope`; the stage becomes a copy of it.
  absl::StatusOr<BlockRV> CacheWrite(BlockRV block, const std::string& scope);
  absl::Status ComputeAt(BlockRV block, LoopRV loop);
  absl::Status ReverseComputeAt(BlockRV block, LoopRV loop);
  absl::Status ComputeInline(BlockRV block);
  absl::Status ReverseComputeInline(BlockRV block);
  absl::Status SetScope(BlockRV block, const std::string& scope);
  // Pads the stride of `axis` of the stage's buffer so that stride % factor == offset.
  absl::Status StorageAlign(BlockRV block, int axis, int64_t factor, int64_t offset);
  // Stores axis `axis` of the stage's buffer as factors.size() axes of the given extents,
  // outermost first (at most one -1, inferred; the product must equal the axis's extent): element
  // e of the axis lives at (e / (f1 * f2 ...), ..., e / f_last % f_{last-1}, e % f_last). The
  // stage computes the same values; its loops are the new root axes, and every read of the
  // buffer is rewritten. Used to give a cache a layout whose thread-owned part is an axis of its
  // own: a row read as col = j * (T * V) + t * V + v and split as {J, T, V} is, in a local cache
  // computed outside the threadIdx loop of t, an axis that lowering drops (each thread holds
  // only its own J x V elements: compact_thread_axes.h). The stage must not be an output, must be
  // a root stage with untransformed loops, and must not be padded with storage_align yet.
  // Factors may be sampled (IntRVs), like split's.
  absl::Status SplitBufferAxis(BlockRV block, int axis, const std::vector<Factor>& factors);
  // Fuses root axes `axes` of the stage (all spatial or all reduction, at least two) into one
  // axis, their row-major linearization in the listed order, in the position of the smallest of
  // them: the stage computes the same values over the fused domain (each listed axis becomes
  // fused / stride % extent in its body). Fused spatial axes change the stage's buffer the same
  // way (one dimension of the product's extent) and every read of it is rewritten; reduction
  // axes change only the domain. The view a tensor-core GEMM needs of a convolution (batch and
  // output pixels as its rows, filter taps and channels as its k; Meta-Schedule's
  // transform_block_layout). The stage must have its root loops untouched and nothing attached;
  // spatial axes only of a non-output stage that is not padded with storage_align.
  absl::Status FuseAxes(BlockRV block, const std::vector<int>& axes);
  // Grows spatial axis `axis` of the stage's domain and buffer to the next multiple of
  // `multiple`; the stage computes zeros at the new positions, and its readers keep their
  // indices. A copy of an operand whose rows are not whole 16-byte vectors (a GEMM over K = 1999
  // in f16) becomes one whose rows are, so that tile fetches stay 16-byte copies (cp.async, bulk
  // tensor copies) and tiles past the old extent read zeros. Same conditions as fuse_axes: a
  // non-output, non-reduction stage with its root loops untouched, nothing attached, not padded
  // with storage_align.
  absl::Status PadAxis(BlockRV block, int axis, int64_t multiple);
  // Stores the stage's buffer with its spatial axes in the order `order` (axis i of the new
  // buffer is axis order[i] of the old): the stage computes the same values, its root loops
  // follow the new order, and every read of the buffer is rewritten (Meta-Schedule's
  // transform_layout, for a permutation). A GEMM operand's shared copy A[m, k] stored as
  // [k, m], so that a thread's consecutive rows m of one k are consecutive words (vector reads
  // into registers). Same conditions as fuse_axes.
  absl::Status PermuteAxes(BlockRV block, const std::vector<int>& order);
  // The value may be sampled (an IntRV), e.g. the unroll step.
  absl::Status Annotate(LoopRV loop, const std::string& key, Factor value);
  absl::Status Annotate(BlockRV block, const std::string& key, Factor value);
  // Places the reduction's initialization in its own loop nest just before `loop`.
  absl::Status DecomposeReduction(BlockRV block, LoopRV loop);
  // `loop` must come from splitting a reduction axis; it becomes a spatial axis of a new stage
  // (returned) that computes partial results, and the stage reduces those partials. The new axis
  // is axis `factor_axis` of the partials (0 to the stage's axis count; -1: the last): at 0, a
  // contraction's partials [f, m, n] are a batch of contractions over chunks of its reduction
  // (split-K), whose GEMM view keeps m and n innermost.
  absl::StatusOr<BlockRV> RFactor(LoopRV loop, int factor_axis = -1);

  // Several reductions over one domain become one tuple reduction (Stage::combiner), computed in
  // one pass over their input by the first of `blocks`; the others have no loops of their own
  // from then on and follow its attachment. The combiner comes from what the reductions compute:
  //   - a max m of e and a sum of exp(e - m): online softmax (m, s), rescaling the sum whenever
  //     the maximum grows;
  //   - a sum S of e and a sum of (e - S / N)^2, N the reduction's extent (a variance about the
  //     mean): Welford's (count, mean, m2), with Chan et al.'s pairwise combination;
  //   - reductions that do not read each other: their ops side by side.
  // The reductions must have the same shape and reduction extents and no loops scheduled yet;
  // nothing they read may be computed between the first of them and the last. rfactor splits a
  // tuple reduction into tuple partials. Where the combiner has a two-pass form
  // (Combiner::steps), the stage annotation "two_pass" = 1 folds each thread's elements in two
  // passes, then reduces the tuples across threads (one all-reduce of the tuple); = 2 makes two
  // passes over all the reduction's elements, each pass's sums reduced across threads before
  // the next (an all-reduce a pass, no division: a variance's sum, then its squares about the
  // mean).
  absl::Status FuseReductions(const std::vector<BlockRV>& blocks);

  // ---- Tensor cores (ir/tensor_intrin.h). Marks `loop` and the loops inside it (the stage's
  // next leaves, perfectly nested) to be replaced by intrinsic `intrin` ("mma_m16n8k16",
  // "ldmatrix", "mma_accumulator") when lowered for CUDA. Checks the loops' extents and kinds
  // (serial or unrolled, unbound), and the stage: mma sums products of two f16/bf16 fragments
  // into an f32/f16 fragment, ldmatrix copies a shared buffer into a fragment, mma_accumulator
  // reads or writes a fragment element by element. The accesses themselves are matched by
  // lowering (lower_tensor_intrinsics), whose errors name the mismatch.
  absl::Status Tensorize(LoopRV loop, const std::string& intrin);

  // Annotation keys with a meaning for lowering: stage "auto_unroll_max_step" (unroll inner loops
  // whose total trip count is at most the value), "two_pass" (a tuple reduction in the combiner's
  // two passes; see FuseReductions), a kernel's root stage "max_blocks_per_sm" (CUDA:
  // at most that many blocks per SM, by padding the dynamic shared memory), loop
  // "pipeline_depth" (reserved).

 private:
  struct RVEntry {
    char kind;  // 'b', 'l', 'v'
    std::string stage;
    int iter = -1;
    int64_t value = 0;
    int generation = 0;    // loops: the stage's loop_generation when the handle was made
    std::string loop_var;  // loops: the loop variable's name then (for messages)
  };
  Schedule() = default;

  // The stage a handle of `kind` ('b' stage, 'l' loop) names, if it can still be scheduled.
  absl::StatusOr<Stage*> HandleStage(int id, char kind, const char* prim);
  absl::StatusOr<Stage*> MutableStage(BlockRV b, const char* prim);
  // The other outputs of a tuple reduction (fuse_reductions) follow its attachment.
  void SyncFused(const Stage& s);
  // The other outputs of tuple reduction `leader` made its copies: the same root loops (fresh
  // variables), body and combiner, computed_by the leader, its attachment.
  void MirrorMembers(const Stage& leader);
  // The first stage attached to a loop of stage `name`, or nullptr.
  const Stage* AttachedTo(const std::string& name) const;
  // The root extents `s` would get attached at `at` (region inference); s->attach is unchanged.
  absl::StatusOr<std::vector<int64_t>> RegionAt(Stage* s, const AttachPoint& at, const char* prim);
  // compute_at / reverse_compute_at: attaches `s`, sizes its fresh loops to the region it must
  // compute there and records the instruction; on failure the attachment is unchanged.
  absl::Status AttachAt(Stage* s, AttachPoint at, BlockRV block, LoopRV loop, const char* prim);
  // compute_at's checks of attaching `s` inside a loop of `t` (all but region inference).
  absl::Status CheckComputeAt(const Stage* s, const Stage* t, const char* prim) const;
  // Whether compute_at accepts `s` at loop `iter` of `t` now: its checks and region inference.
  absl::Status CheckComputeAtLoop(Stage* s, const Stage* t, int iter);
  // Writes a factor list into inst.attrs["factors"], like split's: literals as given (-1 stays
  // inferred), null for each sampled factor, whose handle is appended to inst->inputs
  // (InstructionReader::AttrFactors reads it back).
  void RecordFactors(const std::vector<Factor>& factors, Instruction* inst) const;
  void RecordAnnotate(const char* kind, const std::string& target, const std::string& key,
                      Factor value);
  // parallel / vectorize / unroll: marks the loop and records the instruction.
  absl::Status MarkLoopKind(LoopRV loop, ForKind kind, const char* prim);
  absl::StatusOr<std::pair<Stage*, int>> MutableLoop(LoopRV l, const char* prim);
  // A stage and a loop (of it or of another stage) for primitives that take both.
  struct StageAndLoop {
    Stage* stage;
    Stage* loop_stage;
    int iter;
  };
  absl::StatusOr<StageAndLoop> MutableStageAndLoop(BlockRV b, LoopRV l, const char* prim);
  int StageIndex(const std::string& name) const;
  // What cache_read and reindex copy: the tensor's buffer and the first stage position after its
  // producer; errors (prim: ...) name a tensor that is inlined or unknown ("no tensor ... to
  // verb").
  struct CopySource {
    BufferPtr buffer;
    int insert_at = 0;
  };
  absl::StatusOr<CopySource> CopySourceOf(const std::string& tensor, const char* prim,
                                          const char* verb) const;
  std::string NewRV(char kind, RVEntry entry);
  // A handle on iter `iter` of `s` under the stage's current loop generation.
  std::string NewLoopRV(const Stage& s, int iter);
  std::string RVName(int id) const { return rv_names_[id]; }
  // Instructions are built as Instruction{kind, inputs, {}, outputs, {}}, where `{}` makes attrs
  // JSON null; the trace always holds an object, as Trace::FromJson gives back.
  void Record(Instruction inst) {
    if (inst.attrs.is_null()) inst.attrs = nlohmann::json::object();
    trace_.insts.push_back(std::move(inst));
  }
  std::string UniqueStageName(const std::string& base) const;
  std::string LoopDesc(const Stage& s, int iter) const;  // "loop i_0 of stage C"
  // Stages whose bodies read `buffer`.
  std::vector<int> Consumers(const Buffer* buffer) const;
  // Every read of `from` (stage bodies and tuple outputs) reads `to`, at the indices `reindex`
  // makes of the old ones where given (a new layout); the stage that computes `from` computes `to`.
  void ReplaceBuffer(
      const BufferPtr& from, const BufferPtr& to,
      const std::function<std::vector<Expr>(const std::vector<Expr>&)>& reindex = nullptr);
  // Resets a stage's loops to its root iters with the given extents; bumps its loop generation
  // and detaches stages attached to a dropped (derived) loop of it.
  void ResetLoops(Stage* s, const std::vector<int64_t>& root_extents);
  bool IsAttachedWithin(const Stage& s, const std::string& ancestor) const;
  std::string NewVarName(const Stage& s, const std::string& base) const;

  std::shared_ptr<const Workload> workload_;
  std::vector<Stage> stages_;
  std::vector<BufferPtr> inputs_;
  Trace trace_;
  std::vector<RVEntry> rvs_;
  std::vector<std::string> rv_names_;
  std::mt19937_64 rng_;
};

// Applies `trace` to a fresh schedule of `workload`. Sampling instructions use their recorded
// decisions; those without one are sampled with `seed`.
absl::StatusOr<Schedule> Replay(const Workload& workload, const Trace& trace, uint64_t seed = 0);

}  // namespace tessel::schedules
