#pragma once

// Tensor-core intrinsics: what `tensorize` (schedule.h) may replace a loop nest with, and the
// calls the lowering pass lower_tensor_intrinsics (lower/passes.h) leaves in the IR for code
// generation to print. One table describes each intrinsic once: its name in traces, the loop
// nests it replaces, and the helper functions the CUDA printer defines for its calls.
//
// The register layouts are those of PTX `mma.sync.aligned.m16n8k16` (row.col): per warp, an A
// tile of 16 x 16 (rows m, columns k) is 8 16-bit values a lane, a B tile of 16 x 8 (k x n) is 4,
// and a 16 x 8 accumulator tile is 4 values: lane l holds rows l/4 and l/4 + 8, columns
// 2 (l % 4) and 2 (l % 4) + 1. Fragment buffers (MemScope::kFragment) hold such tiles; they are
// read and written only by the intrinsics and by loop nests tensorized with `mma_accumulator`,
// which lowering distributes over the warp's lanes in the accumulator layout.

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "schedules/ir/expr.h"
#include "schedules/ir/stmt.h"

namespace tessel::schedules {

enum class TensorIntrin : uint8_t {
  // acc[m, n] += A[m, k] * B[k, n] over one 16 x 8 x 16 tile (loops m, n, k; m outermost), A and
  // B 16-bit fragments (f16 or bf16, both the same), acc an f32 (or, when the workload
  // accumulates in f16, f16) fragment. The nest that initializes acc (the reduction's init at
  // the same loops m, n) is lowered like mma_accumulator.
  kMma,
  // A fragment tile loaded from shared memory with ldmatrix (loops of the tile's two axes:
  // 16 x 16 for an A operand, 16 x 8 or 8 x 16 for a B operand), transposed on the way where the
  // shared copy's contiguous axis is the tile's row axis.
  kLdmatrix,
  // A 16 x 8 nest (rows, columns) that reads or writes an accumulator fragment element by
  // element (its initialization, the write-back with a fused epilogue): each lane runs the 4
  // elements it holds.
  kAccumulator,
  // Hopper's warpgroup MMA, wgmma.mma_async m64nNk16 (sm_90a): acc[m, n] += A[m, k] * B[k, n]
  // over one warp's 16 x N x 16 share of it (loops m 16, n N, k 16; N a multiple of 8 up to
  // 256), A and B read from swizzled shared memory (Buffer::swizzle_bytes) through matrix
  // descriptors, acc an f32 fragment (N / 8 accumulator tiles of 16 x 8 in a row). The warps
  // threadIdx.y = 4g .. 4g + 3 are warpgroup g; their A rows must be 16 apart, so that the group
  // multiplies 64 rows of A by the same B. Lowering issues the group's wgmma from the first
  // warp's A rows and fences, commits and waits around each run of them.
  kWgmma,
};

struct TensorIntrinInfo {
  TensorIntrin kind;
  const char* name;  // as in traces: "mma_m16n8k16", "ldmatrix", "mma_accumulator"
  // Extents of the loops tensorized, from the marked loop inward; one row a form.
  std::vector<std::vector<int64_t>> forms;
};

// The table of intrinsics, in enum order.
const std::vector<TensorIntrinInfo>& TensorIntrins();
// The intrinsic called `name`, or nullptr.
const TensorIntrinInfo* FindTensorIntrin(std::string_view name);
// "mma_m16n8k16, ldmatrix, mma_accumulator": for messages.
std::string TensorIntrinNames();

// The loop annotation `tensorize` leaves: "tensorize.<name>" = 1.
std::string TensorizeAnnotation(const TensorIntrinInfo& intrin);
// The intrinsic a loop annotation key names, or nullptr when it is not a tensorize annotation.
const TensorIntrinInfo* TensorizedBy(std::string_view annotation_key);
// The intrinsic a loop's annotations tensorize it with, or nullptr.
const TensorIntrinInfo* TensorizedBy(
    const std::vector<std::pair<std::string, int64_t>>& annotations);

// The loop annotation that makes a loop an S-stage software pipeline (inject_software_pipeline);
// 0 or 1: none.
inline constexpr char kSoftwarePipeline[] = "software_pipeline";
// Its value among a loop's annotations (0 when absent).
int64_t SoftwarePipelineStages(const std::vector<std::pair<std::string, int64_t>>& annotations);
// The loop annotation that spreads the copies of the enclosing software pipeline's next stage
// over this loop's iterations (1) instead of issuing them in one burst after the barrier (0 or
// absent). Honoured on a loop of constant extent that every thread runs in the pipelined loop's
// computation (reached through allocations and sequences only); elsewhere it has no effect.
inline constexpr char kPipelineFetchSpread[] = "pipeline_fetch_spread";
// Its value among a loop's annotations (0 when absent).
int64_t PipelineFetchSpread(const std::vector<std::pair<std::string, int64_t>>& annotations);
// The loop annotation that lets a register pipeline of two slots (the fragments' k steps, an even
// number of them) inside a software pipeline of 3 or more stages load its first fragments across
// the stages (1): the enclosing pipeline's wait and barrier move into this loop's last step,
// which then loads the next stage's first fragments before its own math, so the math never waits
// for fragments at a stage's start. 0 (or absent): each stage's first fragments are loaded after
// its barrier. Honoured where every thread runs the loop (reached through allocations and
// sequences only) and the pipeline copies with cp.async or plain stores and runs no wgmma.
inline constexpr char kPipelineFragmentsAcross[] = "pipeline_fragments_across";
// Its value among a loop's annotations (0 when absent).
int64_t PipelineFragmentsAcross(const std::vector<std::pair<std::string, int64_t>>& annotations);

// The loop annotation that makes a shared-memory copy nest, fetched by a software pipeline, one or
// a few bulk tensor copies (the tensor memory accelerator, sm_90+: cp.async.bulk.tensor) issued
// by one thread and completing on an mbarrier (inject_software_pipeline). On the copy's outermost
// loop; its value is 1. The nest must copy a box of a global buffer into a whole swizzled shared
// buffer, the same axes in the same order (no transpose), zeros only past the global buffer's
// extents (which the copy engine fills in).
inline constexpr char kBulkCopy[] = "bulk_copy";
// Its value among a loop's annotations (0 when absent).
int64_t BulkCopy(const std::vector<std::pair<std::string, int64_t>>& annotations);

// The loop annotation that says who produces the stages of a software pipeline whose fetches are
// all bulk copies, and how their slots are handed back (inject_software_pipeline):
//   0 (or absent): thread 0 issues the copies after the barrier that every thread passes at each
//      stage (the slot refilled is one every thread has left);
//   1: thread 0 issues them between its computations, waiting for each slot's "empty" mbarrier,
//      on which every thread arrives once done with it (no barrier a stage);
//   2: a plane of producer warps of its own (threadIdx.z one past the block's; the launch grows by
//      it), its first thread issuing the copies, each group of 4 of its warps giving registers to
//      the computing warpgroups where the target can (setmaxnreg); honoured where the kernel
//      synchronizes nowhere else, else as 1.
// Which is fastest depends on the kernel (occupancy, registers, stages), so it is a decision.
inline constexpr char kPipelineProducer[] = "pipeline_producer";
// Its value among a loop's annotations (0 when absent).
int64_t PipelineProducer(const std::vector<std::pair<std::string, int64_t>>& annotations);

// The loop annotation that makes the threads of a thread-bound loop take turns at the shared
// memory computed inside it (1; 0 or absent: they share it at once), as the two computing
// warpgroups of a ping-pong kernel do: while one runs its own tile's main loop, the other stores
// its tile, so the epilogue's arithmetic overlaps the tensor cores' work. Region inference keeps
// the loop's index fixed for the shared buffers inside it (each holds one turn's share). Every
// software pipeline inside it must fetch with bulk copies only, and takes a producer plane
// whatever its pipeline_producer: the plane fetches the turns' stages one turn after another
// into one ring of slots (inject_software_pipeline), and a turn's computation starts once the
// previous turn's has issued its last step. Lowering refuses anything else. A loop of one
// iteration takes no turns.
inline constexpr char kPipelineTurns[] = "pipeline_turns";
// Its value among a loop's annotations (0 when absent).
int64_t PipelineTurns(const std::vector<std::pair<std::string, int64_t>>& annotations);

// The loop annotation that makes an accumulator write-back nest (mma_accumulator, the marked
// loop) store through shared memory and the copy engine (1; 0 or absent: each lane stores its
// elements, or quad stores, directly): each warp writes its 16 rows into a staging buffer of its
// own, two 16 x 64 chunks, 128-byte swizzled, and one lane stores each chunk with a bulk tensor
// store (cp.async.bulk.tensor, global <- shared) through a tensor map over the output
// (lower_tensor_intrinsics). Honoured where the nest's body is one store of a 16-bit element to a
// global buffer whose last two axes are the nest's columns and rows (coefficient 1, no other axis
// using them), its columns a multiple of 64 and its rows whole 16-byte vectors, under conditions
// that are the warp's as a whole or bounds of the buffer's extents (which the copy engine keeps),
// on a target with bulk tensor copies; elsewhere it has no effect.
inline constexpr char kBulkStore[] = "bulk_store";
// Its value among a loop's annotations (0 when absent).
int64_t BulkStore(const std::vector<std::pair<std::string, int64_t>>& annotations);

// ---- Calls left by lowering (CallNode names). Their arguments are Loads of the first element
// of each operand (the printer passes its address) followed by plain values.
inline constexpr char kCallMma[] = "tessel_mma_m16n8k16";   // (acc, a, b): types in name
inline constexpr char kCallLdmatrix[] = "tessel_ldmatrix";  // (dst, src), .x2/.x4/.trans
inline constexpr char kCallCpAsync[] = "tessel_cp_async";   // (dst, src, bytes, valid)
inline constexpr char kCallCpAsyncCommit[] = "tessel_cp_async_commit";  // ()
inline constexpr char kCallCpAsyncWait[] = "tessel_cp_async_wait";      // (groups in flight)
// tessel_wgmma_m64n<N>k16_f32_<ab>_<trans a><trans b>(acc, a, b, a_lbo, a_sbo, a_mode, b_lbo,
// b_sbo, b_mode): a and b the first elements of the warpgroup's A and B tiles in shared memory,
// the descriptors' leading and stride byte offsets and swizzle modes (1: 128, 2: 64, 3: 32 bytes);
// ..._r<trans b>(acc, a, b, b_lbo, b_sbo, b_mode): a the warp's A fragment registers.
inline constexpr char kCallWgmma[] = "tessel_wgmma";
inline constexpr char kCallWgmmaFence[] = "tessel_wgmma_fence";    // () before a run of wgmma
inline constexpr char kCallWgmmaCommit[] = "tessel_wgmma_commit";  // () after it
inline constexpr char kCallWgmmaWait[] = "tessel_wgmma_wait";      // _<groups still in flight>
// Orders this thread's ordinary shared-memory writes (cp.async too) before the tensor cores'
// reads of them (wgmma operands): each writer, before the barrier.
inline constexpr char kCallFenceProxyAsync[] = "tessel_fence_proxy_async";
// tessel_tma_load_<rank>d(dst, barrier, map, c0, ..., c<rank-1>): a bulk tensor copy of the box of
// tensor map `map` (an integer immediate: the kernel's LaunchConfig::tensor_maps index) at
// coordinates c (innermost dimension first) into shared memory at dst, completing on the mbarrier
// `barrier` (a Load of its i64 word).
inline constexpr char kCallTmaLoad[] = "tessel_tma_load";
// tessel_tma_multicast_<rank>d(dst, barrier, map, c0, ..., c<rank-1>, mask): the same box copied
// into the shared memory of every CTA of the cluster that `mask` (an integer) names, at dst's
// offset, each completing on its own mbarrier at `barrier`'s offset.
inline constexpr char kCallTmaMulticast[] = "tessel_tma_multicast";
inline constexpr char kCallMbarrierInit[] = "tessel_mbarrier_init";  // (barrier, arrivals)
// (barrier, bytes): this thread's arrival, and the bytes the phase waits for besides.
inline constexpr char kCallMbarrierExpectTx[] = "tessel_mbarrier_expect_tx";
inline constexpr char kCallMbarrierArrive[] = "tessel_mbarrier_arrive";  // (barrier)
// (barrier, cta): an arrival on the mbarrier at `barrier`'s offset in CTA `cta` of the cluster.
inline constexpr char kCallMbarrierArriveCluster[] = "tessel_mbarrier_arrive_cluster";
// (barrier, parity): waits until the phase of that parity has completed.
inline constexpr char kCallMbarrierWait[] = "tessel_mbarrier_wait";
// () after initializing mbarriers, before the barrier that publishes them.
inline constexpr char kCallFenceMbarrierInit[] = "tessel_fence_mbarrier_init";
// tessel_quad_store_<f16|bf16>(dst, pred, q, v0, ..., v7): an accumulator write-back of four
// 8-column tiles by the four lanes of a row (q: the lane's index among them), lane q holding
// columns 2 q, 2 q + 1 of each tile (v[2 t], v[2 t + 1]: tile t, in f32): the lanes trade them so
// that lane q stores tile q's 8 columns, rounded to the element type, as one 16-byte vector at
// dst where `pred` holds. Every lane of the warp calls it (shuffles).
inline constexpr char kCallQuadStore[] = "tessel_quad_store";
// tessel_tma_store_<rank>d(map, src, c0, ..., c<rank-1>): a bulk tensor store of the box of
// tensor map `map` (an integer immediate, as for a load) at coordinates c (innermost first) from
// shared memory at src (a Load of its first element), in this thread's bulk async-group; the copy
// engine writes nothing past the global buffer's extents.
inline constexpr char kCallTmaStore[] = "tessel_tma_store";
// () closes this thread's bulk async-group of stores.
inline constexpr char kCallBulkCommit[] = "tessel_bulk_commit";
// tessel_bulk_wait_read_<groups>(): waits until at most `groups` of this thread's bulk groups
// still read shared memory (their sources may be written again).
inline constexpr char kCallBulkWaitRead[] = "tessel_bulk_wait_read";
// () the warp's lanes meet, and their shared-memory writes are visible to each other (__syncwarp).
inline constexpr char kCallSyncwarp[] = "tessel_syncwarp";
// tessel_setmaxnreg_<inc|dec>_<registers>(): the warpgroup's registers a thread (sm_90a).
inline constexpr char kCallSetmaxnreg[] = "tessel_setmaxnreg";
// Not a call of the IR: the CUDA printer's helper for a swizzled buffer's offsets,
// tessel_swizzle_<W>_<element bytes>(offset) (Buffer::swizzle_bytes).
inline constexpr char kCallSwizzle[] = "tessel_swizzle";

// Whether `name` is one of the calls above (with its suffixes).
bool IsTensorCall(std::string_view name);
// The call names that carry a number: a cp.async of `bytes` (4, 8 or 16), and a wait until at
// most `groups` commit groups are in flight.
std::string CpAsyncCall(int64_t bytes);
std::string CpAsyncWaitCall(int64_t groups);
// The number a call of those two kinds carries (bytes, groups); -1 for any other name.
int64_t CpAsyncCallBytes(std::string_view name);
int64_t CpAsyncWaitGroups(std::string_view name);
std::string WgmmaWaitCall(int64_t groups);
// The bulk tensor copy of a box of `rank` dimensions (1 to 5), and the rank such a name carries
// (-1 for any other name).
std::string TmaLoadCall(int64_t rank);
// The quad store of elements of `t` (f16 or bf16), and whether `name` is one.
std::string QuadStoreCall(DType t);
bool IsQuadStoreCall(std::string_view name);
// The bulk tensor store of a box of `rank` dimensions, and the rank such a name carries (-1 for
// any other name); the wait for at most `groups` bulk groups reading, and the groups it names.
std::string TmaStoreCall(int64_t rank);
int64_t TmaStoreRank(std::string_view name);
std::string BulkWaitReadCall(int64_t groups);
int64_t BulkWaitReadGroups(std::string_view name);
// Its multicast form (kCallTmaMulticast), whose rank TmaLoadRank gives too.
std::string TmaMulticastCall(int64_t rank);
bool IsTmaMulticastCall(std::string_view name);
// setmaxnreg to `registers` (a multiple of 8 from 24 to 256): up (inc) or down.
std::string SetmaxnregCall(bool increase, int64_t registers);
int64_t TmaLoadRank(std::string_view name);
int64_t WgmmaWaitGroups(std::string_view name);
// Whether `name` is a wgmma.mma_async call (not its fence, commit or wait).
bool IsWgmmaCall(std::string_view name);
// The wgmma call of N columns, operands of `ab` (f16, bf16), A and B MN-major or not
// (kCallWgmma's form), and the N such a name carries (-1 for any other name). With
// `a_registers`, A is the warp's fragment registers (mma.sync's A layout, loaded by ldmatrix)
// instead of a shared tile: (acc, a, b, b_lbo, b_sbo, b_mode), the name ending "_r<tb>".
std::string WgmmaCall(int64_t n, DType ab, bool a_mn_major, bool b_mn_major,
                      bool a_registers = false);
// Whether a wgmma call reads A from registers (WgmmaCall's `a_registers`).
bool WgmmaReadsRegisters(std::string_view name);
int64_t WgmmaCallN(std::string_view name);
// Whether `s` makes a call (as a statement) whose name `pred` accepts; one that issues
// wgmma.mma_async, one that issues cp.async.
bool CallsWhere(const Stmt& s, const std::function<bool(std::string_view)>& pred);
bool CallsWgmma(const Stmt& s);
bool CallsCpAsync(const Stmt& s);
// A statement calling `name` (commit, wait, fence: no arguments; the mbarrier calls).
Stmt TensorCallStmt(const std::string& name, std::vector<Expr> args = {});
// The N sizes of wgmma m64nNk16: 8, 16, ..., 256.
inline constexpr int64_t kWgmmaMaxN = 256;

// The operand types of mma_m16n8k16: f16 and bf16.
bool IsMmaOperandType(DType t);
// The load `e` is, directly or under one cast (an mma operand f32(A[m, k])), or nullptr.
const LoadNode* LoadUnderCast(const Expr& e);

}  // namespace tessel::schedules
