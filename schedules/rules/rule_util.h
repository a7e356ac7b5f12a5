#pragma once

// Small helpers shared by the schedule rules.

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "schedules/schedule/schedule.h"

namespace tessel::schedules::rules {

// Whether the loop iterates a reduction axis.
bool IsReduceLoop(const Schedule& s, LoopRV l);
// Whether the stage has already been given loop structure by a rule (a loop bound, split,
// marked parallel/vectorized/unrolled, or the stage is attached).
bool IsScheduled(const Stage& st);
// A categorical choice among `values`, uniform; values over `max` are dropped (at least the
// smallest is kept). A decision (an index into the kept values, ascending) fixes the value the
// sketch itself is built with; samples draw it anew.
absl::StatusOr<IntRV> SampleUniform(Schedule* s, std::vector<int64_t> values, int64_t max,
                                    std::optional<int64_t> decision = std::nullopt);
// The same with a prior: value i drawn with probability weights[i] / (the kept values' sum).
absl::StatusOr<IntRV> SampleWeighted(Schedule* s, std::vector<int64_t> values,
                                     std::vector<double> weights, int64_t max,
                                     std::optional<int64_t> decision = std::nullopt);
// Powers of two from `lo` to `hi`.
std::vector<int64_t> PowersOfTwo(int64_t lo, int64_t hi);
// A sum over products of loads whose indices are affine in the loop variables (matmul, batch
// matmul, convolution as an implicit GEMM: each operand reused along the axes it does not use);
// at least two spatial axes and two loads.
bool IsContraction(const Stage& st);
// Whether a stage (injective) is read by a contraction that multi-level tiling will schedule:
// such a producer (e.g. a convolution's padding) is left to that rule, which inlines it into the
// contraction's shared-memory copy or, on the host, into the contraction.
bool FeedsContraction(const Schedule& s, const std::string& name);
// The stages that read the buffer of stage `name`.
std::vector<std::string> ConsumersOf(const Schedule& s, const std::string& name);
// The unscheduled reduction that `st` (injective) reads at its own indices and that nothing
// else reads, or "": a reduction that can be computed in a register at each of `st`'s outputs.
std::string FusableReduction(const Schedule& s, const Stage& st);
// CUDA: one output a thread: `fused` (a stage's spatial loops, fused) split over blocks and a
// sampled number of threads (32 to 512); `producer` (FusableReduction of the stage, or "")
// computed in a register at that thread. AutoBind's form for reductions and their epilogues,
// and multi-level tiling's for the combine of a split-K.
absl::Status BindOnePerThread(Schedule* s, LoopRV fused, const std::string& producer);

// ---- Contractions (multi_level_tiling.cc, multi_level_tiling_tensor_core.cc).

// The GEMM view of a contraction's output axes: the "n" axis (threadIdx.x, coalesced stores) is
// the innermost axis; the "m" axis is the innermost other axis that an operand not using n
// depends on (matmul C[m, n]: m; conv NCHW out[n, k, p, q]: n-axis q (data), m-axis k (weight);
// NHWC out[n, p, q, k]: n-axis k (weight), m-axis q (data)); the second innermost axis when
// there is none. Every other axis is a batch axis.
struct GemmAxes {
  int m = 0;
  int n = 0;
  std::vector<int> batch;
};
GemmAxes GemmAxesOf(const Stage& st);
// The workload's output stage (not inlined), or "".
std::string OutputOf(const Schedule& s);

// Loop levels from tiling one loop, outermost first, with the sampled factor of each level but
// the outermost (factors[0] is unused).
struct Levels {
  std::vector<LoopRV> loops;
  std::vector<IntRV> factors;
};
// Splits `loop` in bounds.size() + 1 levels. From the innermost out, each level's factor is the
// innermost of a two-factor sample_perfect_tile of what the inner levels leave, at most its bound
// (`bounds` innermost first); the outermost level takes the rest. With `padded_extent`
// (SamplePaddedExtent), the levels are a tile of that extent: the last tile of the loop runs
// past its extent (guarded, or computed whole by stages annotated kPadTile).
absl::StatusOr<Levels> TileChain(Schedule* s, LoopRV loop, const std::vector<int64_t>& bounds,
                                 std::optional<IntRV> padded_extent = std::nullopt);

// Shapes no tile divides. A loop of extent E may be tiled as if its extent were P >= E, the last
// tile computed past E on zero-filled inputs (kPadTile) and only the output's stores guarded.
// The candidates for P: E itself and, for each unit u of `units`, ceil(E / u) * u, where that
// wastes at most 1/8 of E and has a larger tile (its largest divisor up to `tile_max`) than E
// has. Their prior prefers a large tile and little waste: ((E / P) * t / (t + tile_max / 8))^2,
// t = P's largest divisor up to tile_max (so E, whose tiles are today's perfect tiles, keeps
// the weight its divisors earn it). Empty when no padding beats E (a dividing shape: the sketch
// has no such decision, and is the same as without padding).
struct PaddedExtents {
  std::vector<int64_t> values;  // ascending, values[0] == E
  std::vector<double> weights;
};
PaddedExtents PaddedExtentChoices(int64_t extent, int64_t tile_max,
                                  const std::vector<int64_t>& units);
// The padded extent of a loop of extent `extent` as a sample_categorical over
// PaddedExtentChoices (a decision the categorical mutator re-draws), or nullopt when there is
// none to choose.
absl::StatusOr<std::optional<IntRV>> SamplePaddedExtent(Schedule* s, int64_t extent,
                                                        int64_t tile_max,
                                                        const std::vector<int64_t>& units);

// `loops` (adjacent, outermost first) fused into one; the loop itself, no fuse recorded, when
// there is only one.
absl::StatusOr<LoopRV> FuseAll(Schedule* s, const std::vector<LoopRV>& loops);
// Whether two loop lists name the same loops in the same order.
bool SameOrder(const std::vector<LoopRV>& a, const std::vector<LoopRV>& b);

// ---- Reductions split over blocks (multi_level_tiling.cc's split-K, skinny_contraction.cc).

// The numbers of chunks a reduction of extent `k` may be split into over blocks, 1 first: from 2
// to `max_chunks`, each leaving chunks of at least `min_chunk` elements, the divisors of k and the
// powers of two. A power of two that does not divide k gives chunks of ceil(k / S) and a shorter
// last one (rfactor guards the overhang), so that a k with few divisors (a prime) still splits.
std::vector<int64_t> ChunkCounts(int64_t k, int64_t max_chunks, int64_t min_chunk);
// A prior over `choices` (positive) centred on `want`: 1 / (1 + (log2 c - log2 want)^2), so the
// choices nearest `want` by ratio weigh most and the others keep some weight.
std::vector<double> LogDistanceWeights(const std::vector<int64_t>& choices, double want);
// Split-K: loop `k_loop` of stage `gemm` (a reduction loop, at the stage's root) split into a
// sampled number of chunks (`choices`, drawn with `weights`: sample_categorical), and rfactor of
// the split's outer side at axis 0, so that the partials P[f, ...] are the sum over chunk f (for a
// contraction, a batch of contractions over chunks of k). Returns the partials' stage; `gemm` is
// their combine, C[...] = sum_f P[f, ...], from then on.
absl::StatusOr<std::string> SplitIntoPartials(Schedule* s, const std::string& gemm, int k_loop,
                                              const std::vector<int64_t>& choices,
                                              const std::vector<double>& weights);
// The stage that writes a combine's (SplitIntoPartials) results and the register stage its sums
// are computed in: the combine's epilogue and the combine itself where the epilogue is the
// output and reads it at its own indices (FusableReduction), else the combine (its write-back)
// and a local cache_write of it.
absl::StatusOr<std::pair<std::string, std::string>> CombineWriter(Schedule* s,
                                                                  const std::string& combine);
// CUDA: the combine of partials (SplitIntoPartials), a memory-bound pass with one output a
// thread (BindOnePerThread), the sum of an output's partials in a register at its thread: the
// thread of the epilogue where there is one, else of the combine's own write-back (cache_write
// local).
absl::Status BindCombine(Schedule* s, const std::string& combine);

// ---- Operands whose rows are not whole 16-byte vectors.

// The inputs of `gemm` (an unscheduled contraction) whose contiguous extent's bytes are not a
// multiple of 16 (rows that start at addresses no 16-byte copy can take), each first copied
// (CUDA) into a global buffer of its own whose contiguous axis is padded with zeros to a multiple
// of 16 bytes (reindex to global, then pad_axis): a memory-bound kernel, one element a thread
// (BindOnePerThread). The contraction's tile fetches are then 16-byte copies (vector loads,
// cp.async, or bulk tensor copies, whose global strides must be multiples of 16 bytes) whose
// lanes are all in or all past the extent, and tiles past the old extent read zeros. Returns the
// (input, copy) names of the inputs copied; none (and nothing recorded) where all are aligned.
// Inputs that `read_in_place` accepts are left alone (fetched one element a copy).
absl::StatusOr<std::vector<std::pair<std::string, std::string>>> AlignRows(
    Schedule* s, const std::string& gemm,
    const std::function<bool(const Buffer&)>& read_in_place = nullptr);

// Binds a contraction's block level (CUDA): the batch loops, fused, to blockIdx.z, `m` to
// blockIdx.y and `n` to blockIdx.x.
absl::Status BindBlocks(Schedule* s, const std::vector<LoopRV>& batch, LoopRV m, LoopRV n);
// The same with the blocks in groups of G consecutive m tiles along each n tile (G sampled
// among the divisors of m's extent up to `max_group` in proportion to G, a decision the search
// mutates), as one blockIdx.x: blocks that run at the same time share operand tiles in L2
// (rasterization).
// G = 1 is the row-major order of the two-dimensional grid. With `cluster`, consecutive blocks
// also form thread-block clusters of C (cluster.x; C drawn among 1 and 2, a decision): the
// blocks of a cluster share a tile of one operand, which a pipeline of bulk copies then
// multicasts. A block count C does not divide leaves the last cluster a block past the tiles:
// the caller's stages must compute such a tile harmlessly (padded tiles, guarded stores).
// With `sm_count` > 0 (and no batch), the grid may instead be persistent (a decision among one
// block a tile, up to one and up to two an SM: a sample_categorical capped at the tile count,
// G the fewest blocks that take as few rounds, so 128 of 2048 tiles): its G blocks take the
// ordered tiles in rounds, tile r * G + b in block b's round r (a serial loop around the
// block's work), so that a pipeline inside counts its steps across the rounds and fetches the
// next tile's while this one's is stored. Where G does not divide the tiles, the last round's
// blocks past them compute a padded tile as above.
absl::Status BindBlocksRasterized(Schedule* s, const std::vector<LoopRV>& batch, LoopRV m, LoopRV n,
                                  int64_t max_group, bool cluster = false, int64_t sm_count = 0);

}  // namespace tessel::schedules::rules
