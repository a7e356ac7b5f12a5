#pragma once

// Recorded schedules that together use every instruction kind of the instruction table
// (schedules/schedule/instruction_table.h), for the trace and instruction-table tests: each
// builds a schedule with the public Schedule API, so its trace is what the primitives record.

#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "schedules/lower/lower.h"
#include "schedules/schedule/schedule.h"
#include "schedules/workload/builtins.h"
#include "tests/schedules/test_workloads.h"

namespace tessel::schedules::recorded_schedules {

using namespace test_workloads;  // NOLINT

// CUDA matmul: sampled tiles, blocks and threads, shared caches at the reduction tile,
// storage_align, a sampled unroll annotation.
inline Schedule CudaTiledMatmul(uint64_t seed) {
  Schedule sch = NewSchedule(Matmul(64, 64, 64), seed);
  BlockRV c = BlockOf(sch, "C");
  std::vector<LoopRV> l = LoopsOf(sch, c);
  std::vector<IntRV> ti = ValueOrDie(sch.SamplePerfectTile(l[0], 2, 16));
  std::vector<IntRV> tj = ValueOrDie(sch.SamplePerfectTile(l[1], 2, 16));
  std::vector<LoopRV> i = ValueOrDie(sch.Split(l[0], {ti[0], ti[1]}));
  std::vector<LoopRV> j = ValueOrDie(sch.Split(l[1], {tj[0], tj[1]}));
  std::vector<LoopRV> k = ValueOrDie(sch.Split(l[2], {-1, 8}));
  auto check = [](const absl::Status& st) {
    if (!st.ok()) throw std::runtime_error(st.ToString());
  };
  check(sch.Reorder({i[0], j[0], i[1], j[1], k[0], k[1]}));
  check(sch.Bind(i[0], "blockIdx.y"));
  check(sch.Bind(j[0], "blockIdx.x"));
  check(sch.Bind(i[1], "threadIdx.y"));
  check(sch.Bind(j[1], "threadIdx.x"));
  BlockRV as = ValueOrDie(sch.CacheRead("A", "shared", {c}));
  BlockRV bs = ValueOrDie(sch.CacheRead("B", "shared", {c}));
  check(sch.ComputeAt(as, k[0]));
  check(sch.ComputeAt(bs, k[0]));
  check(sch.StorageAlign(as, 0, 32, 1));
  IntRV unroll = ValueOrDie(sch.SampleCategorical({0, 16, 64}, {0.25, 0.5, 0.25}));
  check(sch.Annotate(c, "auto_unroll_max_step", sch.Value(unroll)));
  check(sch.Annotate(k[0], "pipeline_depth", 2));
  check(sch.Unroll(k[1]));
  return sch;
}

// Host softmax: inline, rfactor, fuse + parallel/vectorize, decompose_reduction, a sampled
// compute location.
inline Schedule HostSoftmax(uint64_t seed) {
  Schedule sch = NewSchedule(Softmax(16, 64), seed);
  auto check = [](const absl::Status& st) {
    if (!st.ok()) throw std::runtime_error(st.ToString());
  };
  BlockRV e = BlockOf(sch, "E");
  check(sch.ComputeInline(e));
  BlockRV sm = BlockOf(sch, "Sm");
  std::vector<LoopRV> sl = LoopsOf(sch, sm);
  std::vector<LoopRV> ks = ValueOrDie(sch.Split(sl[1], {-1, 8}));
  BlockRV rf = ValueOrDie(sch.RFactor(ks[1]));
  check(sch.SplitBufferAxis(rf, 1, {2, -1}));  // the 8 partials of a row as 2 x 4
  BlockRV y = BlockOf(sch, "Y");
  std::vector<LoopRV> yl = LoopsOf(sch, y);
  LoopRV f = ValueOrDie(sch.Fuse({yl[0], yl[1]}));
  std::vector<LoopRV> p = ValueOrDie(sch.Split(f, {-1, 16}));
  check(sch.Parallel(p[0]));
  check(sch.Vectorize(p[1]));
  BlockRV mx = BlockOf(sch, "Mx");
  check(sch.DecomposeReduction(mx, LoopsOf(sch, mx)[0]));
  LoopRV loc = ValueOrDie(sch.SampleComputeLocation(rf));
  check(sch.ComputeAt(rf, loc));
  return sch;
}

// Host matmul + relu: cache_write with the write-back, reverse_compute_at of the consumer.
inline Schedule HostMatmulRelu(uint64_t seed) {
  Schedule sch = NewSchedule(MatmulRelu(32, 32, 16), seed);
  auto check = [](const absl::Status& st) {
    if (!st.ok()) throw std::runtime_error(st.ToString());
  };
  BlockRV c = BlockOf(sch, "C");
  BlockRV cl = ValueOrDie(sch.CacheWrite(c, "local"));
  std::vector<LoopRV> l = LoopsOf(sch, c);
  check(sch.ComputeAt(cl, l[1]));
  BlockRV d = BlockOf(sch, "D");
  check(sch.ReverseComputeAt(d, l[0]));
  return sch;
}

// Host matmul over K = 15 whose A is first copied into a global buffer with its rows padded
// with zeros to 16 (reindex to global, pad_axis), as rules::AlignRows does on CUDA.
inline Schedule HostMatmulPaddedRows(uint64_t seed) {
  Schedule sch = NewSchedule(Matmul(8, 12, 15), seed);
  auto check = [](const absl::Status& st) {
    if (!st.ok()) throw std::runtime_error(st.ToString());
  };
  BlockRV copy = ValueOrDie(sch.ReIndex(BlockOf(sch, "C"), "A", "global"));
  check(sch.PadAxis(copy, 1, 4));
  std::vector<LoopRV> l = LoopsOf(sch, copy);
  check(sch.Parallel(l[0]));
  return sch;
}

// Matmul with a copy of A stored transposed ([k, m], permute_axes) and read by the product.
inline Schedule HostMatmulKMajorCopy(uint64_t seed) {
  Schedule sch = NewSchedule(Matmul(8, 12, 15), seed);
  auto check = [](const absl::Status& st) {
    if (!st.ok()) throw std::runtime_error(st.ToString());
  };
  BlockRV copy = ValueOrDie(sch.ReIndex(BlockOf(sch, "C"), "A", "global"));
  check(sch.PermuteAxes(copy, {1, 0}));
  std::vector<LoopRV> l = LoopsOf(sch, copy);
  check(sch.Parallel(l[0]));
  return sch;
}

// Elementwise chain: a sampled location, back to the root, set_scope and attach.
inline Schedule HostChainScoped(uint64_t seed) {
  Schedule sch = NewSchedule(ElementwiseChain(16, 16), seed);
  auto check = [](const absl::Status& st) {
    if (!st.ok()) throw std::runtime_error(st.ToString());
  };
  BlockRV b = BlockOf(sch, "B");
  LoopRV loc = ValueOrDie(sch.SampleComputeLocation(b, 1));
  check(sch.ComputeAt(b, loc));
  check(sch.ComputeAt(b, LoopRV{Schedule::kRootLoop}));
  check(sch.SetScope(b, "local"));
  std::vector<LoopRV> cl = LoopsOf(sch, "C");
  check(sch.ComputeAt(b, cl[1]));
  return sch;
}

// Elementwise chain merged into one stage.
inline Schedule HostChainMerged(uint64_t seed) {
  Schedule sch = NewSchedule(ElementwiseChain(16, 16), seed);
  BlockRV c = BlockOf(sch, "C");
  if (!sch.ReverseComputeInline(c).ok()) throw std::runtime_error("reverse_compute_inline");
  BlockRV b = BlockOf(sch, "B");
  if (!sch.Split(LoopsOf(sch, b)[1], {-1, 4}).ok()) throw std::runtime_error("split");
  return sch;
}

// Online softmax: the maximum computed in the sum's pass, the sum's reduction split.
inline Schedule HostOnlineSoftmax(uint64_t seed) {
  Schedule sch = NewSchedule(Softmax(16, 64), seed);
  if (!sch.ComputeInline(BlockOf(sch, "E")).ok()) throw std::runtime_error("compute_inline");
  BlockRV sm = BlockOf(sch, "Sm");
  if (!sch.FuseReductions({sm, BlockOf(sch, "Mx")}).ok())
    throw std::runtime_error("fuse_reductions");
  if (!sch.Split(LoopsOf(sch, sm)[1], {-1, 8}).ok()) throw std::runtime_error("split");
  return sch;
}

// Layernorm statistics as one Welford tuple reduction, its partials over chunks (rfactor).
inline Schedule HostFusedLayernorm(uint64_t seed) {
  auto w = schedules::ParseWorkloadSpec("layernorm(rows=2, cols=64)");
  if (!w.ok()) throw std::runtime_error("workload");
  Schedule sch = NewSchedule(*w, seed);
  if (!sch.ComputeInline(BlockOf(sch, "mean")).ok()) throw std::runtime_error("compute_inline");
  if (!sch.FuseReductions({BlockOf(sch, "x_sum"), BlockOf(sch, "sq_sum")}).ok()) {
    throw std::runtime_error("fuse_reductions");
  }
  std::vector<LoopRV> ks = ValueOrDie(sch.Split(LoopsOf(sch, "x_sum")[1], {-1, 16}));
  ValueOrDie(sch.RFactor(ks[0]));
  return sch;
}

// CUDA layernorm statistics in one reduction: ragged chunks of 100 columns over 16 threads.
inline Schedule CudaFusedLayernormStats(uint64_t) {
  auto w = schedules::ParseWorkloadSpec("layernorm(rows=2, cols=300)");
  if (!w.ok()) throw std::runtime_error("workload");
  return FusedLayernormCuda(*w, 100, 16, true);
}

// A recorded schedule: its name, how to build it with a seed, and its target.
struct Recorded {
  std::string name;
  std::function<Schedule(uint64_t)> make;
  bool cuda;
};

// A tensor-core operand's shared copy as the tensor-core rule lays it out: rows padded for
// conflict-free ldmatrix, then copied by the block's 2 x 2 warps in 8-element (16-byte) vectors.
inline void CopyWithTheWarps(Schedule& sch, const BlockRV& sh) {
  auto check = [](const absl::Status& st) {
    if (!st.ok()) throw std::runtime_error(st.ToString());
  };
  check(sch.StorageAlign(sh, 0, 32, 8));
  LoopRV f = ValueOrDie(sch.Fuse(LoopsOf(sch, sh)));
  std::vector<LoopRV> p = ValueOrDie(sch.Split(f, {-1, 2, 2, 32, 8}));
  check(sch.Bind(p[1], "threadIdx.z"));
  check(sch.Bind(p[2], "threadIdx.y"));
  check(sch.Bind(p[3], "threadIdx.x"));
  check(sch.Vectorize(p[4]));
}

// CUDA f16 matmul on the tensor cores, as the tensor-core tiling rule builds it with fixed
// factors: a fragment accumulator at the warp loop (mma_m16n8k16), operands through shared memory
// (a `stages`-stage software pipeline) into fragments (ldmatrix), the write-back tensorized with
// mma_accumulator (or left element-wise when `tensorize_store` is false, which lowering refuses).
// `fragments_across`: the fragments double-buffered over the k steps, the next stage's first ones
// loaded in the last step (pipeline_fragments_across).
inline Schedule CudaTensorCoreMatmul(uint64_t seed, int64_t stages = 3, bool tensorize_store = true,
                                     const std::string& spec =
                                         "matmul(M=64, N=64, K=64, "
                                         "dtype=f16)",
                                     bool spread_fetch = false, bool fragments_across = false) {
  auto w = ParseWorkloadSpec(spec);
  if (!w.ok()) throw std::runtime_error(w.status().ToString());
  Schedule sch = NewSchedule(*w, seed);
  auto check = [](const absl::Status& st) {
    if (!st.ok()) throw std::runtime_error(st.ToString());
  };
  BlockRV c = BlockOf(sch, "C");
  BlockRV acc = ValueOrDie(sch.CacheWrite(c, "fragment"));
  BlockRV out = c;
  if (sch.FindStage("D")) {  // the f16 output: the accumulator's write-back inlined into it
    check(sch.ComputeInline(c));
    out = BlockOf(sch, "D");
  }
  std::vector<LoopRV> ol = LoopsOf(sch, out);
  // 2 x 2 warps of 16 x 16 each (two 8-column tiles): [mb, wm, fm, 16] x [nb, wn, fn, 8].
  std::vector<LoopRV> m = ValueOrDie(sch.Split(ol[ol.size() - 2], {-1, 2, 1, 16}));
  std::vector<LoopRV> n = ValueOrDie(sch.Split(ol.back(), {-1, 2, 2, 8}));
  check(sch.Reorder({m[0], n[0], m[1], n[1], m[2], n[2], m[3], n[3]}));
  check(sch.Bind(m[0], "blockIdx.y"));
  check(sch.Bind(n[0], "blockIdx.x"));
  check(sch.Bind(m[1], "threadIdx.z"));
  check(sch.Bind(n[1], "threadIdx.y"));
  check(sch.Unroll(n[2]));
  if (tensorize_store) check(sch.Tensorize(m[3], "mma_accumulator"));
  check(sch.ComputeAt(acc, n[1]));
  std::vector<LoopRV> cl = LoopsOf(sch, acc);
  const size_t nc = cl.size();
  std::vector<LoopRV> cm = ValueOrDie(sch.Split(cl[nc - 3], {-1, 16}));
  std::vector<LoopRV> cn = ValueOrDie(sch.Split(cl[nc - 2], {-1, 8}));
  IntRV ksteps = ValueOrDie(sch.SampleCategorical({1, 2}, {0.5, 0.5}));
  std::vector<LoopRV> ck = ValueOrDie(sch.Split(cl[nc - 1], {-1, ksteps, 16}));
  check(sch.Reorder({ck[0], ck[1], cm[0], cn[0], cm[1], cn[1], ck[2]}));
  check(sch.DecomposeReduction(acc, ck[0]));
  check(sch.Unroll(cn[0]));
  check(sch.Annotate(ck[0], "software_pipeline", stages));
  if (spread_fetch) check(sch.Annotate(ck[1], "pipeline_fetch_spread", 1));
  if (fragments_across) {
    check(sch.Annotate(ck[1], "software_pipeline", 2));
    check(sch.Annotate(ck[1], "pipeline_fragments_across", 1));
  }
  for (const char* name : {"A", "B"}) {
    BlockRV sh = ValueOrDie(sch.CacheRead(name, "shared", {acc}));
    BlockRV fr = ValueOrDie(sch.CacheRead(sch.GetStage(sh).name, "fragment", {acc}));
    check(sch.ComputeAt(fr, ck[1]));
    check(sch.ComputeAt(sh, ck[0]));
    std::vector<LoopRV> fl = LoopsOf(sch, fr);
    const bool a = std::string(name) == "A";
    std::vector<LoopRV> rows = ValueOrDie(sch.Split(fl[a ? 0 : 1], {-1, a ? 16 : 8}));
    if (a) {
      check(sch.Tensorize(rows[1], "ldmatrix"));
    } else {
      check(sch.Reorder({rows[0], fl[0], rows[1]}));
      check(sch.Tensorize(fl[0], "ldmatrix"));
    }
    CopyWithTheWarps(sch, sh);
  }
  check(sch.Tensorize(cm[1], "mma_m16n8k16"));
  return sch;
}

// CUDA f16 convolution (NHWC, 3 x 3, padding 1) on the tensor cores as an implicit GEMM, as the
// tensor-core tiling rule builds it with fixed factors: the output pixels fused into the GEMM's
// rows and the filter taps and channels into its k (fuse_axes), each operand copied into shared
// memory in that view (reindex, the padding stage computed in the copy), the output's loops over
// the pixels fused likewise. M = 2 * 6 * 6 = 72 rows: the last row tile is padded (pad_tile).
inline Schedule CudaImplicitGemmConv(uint64_t seed) {
  auto w = ParseWorkloadSpec(
      "conv2d(N=2, C=16, H=6, W=6, K=16, R=3, S=3, padding=1, layout=nhwc, dtype=f16)");
  if (!w.ok()) throw std::runtime_error(w.status().ToString());
  Schedule sch = NewSchedule(*w, seed);
  auto check = [](const absl::Status& st) {
    if (!st.ok()) throw std::runtime_error(st.ToString());
  };
  BlockRV conv = BlockOf(sch, "conv");
  check(sch.FuseAxes(conv, {0, 1, 2}));  // n, p, q -> m: conv[m, k]
  check(sch.FuseAxes(conv, {2, 3, 4}));  // r, s, c -> kk
  BlockRV acc = ValueOrDie(sch.CacheWrite(conv, "fragment"));
  check(sch.ComputeInline(conv));
  BlockRV out = BlockOf(sch, "out");
  std::vector<LoopRV> ol = LoopsOf(sch, out);
  LoopRV rows = ValueOrDie(sch.Fuse({ol[0], ol[1], ol[2]}));
  std::vector<LoopRV> m = ValueOrDie(sch.Split(rows, {-1, 2, 1, 16}));
  std::vector<LoopRV> n = ValueOrDie(sch.Split(ol[3], {-1, 2, 1, 8}));
  check(sch.Reorder({m[0], n[0], m[1], n[1], m[2], n[2], m[3], n[3]}));
  check(sch.Bind(m[0], "blockIdx.y"));
  check(sch.Bind(n[0], "blockIdx.x"));
  check(sch.Bind(m[1], "threadIdx.z"));
  check(sch.Bind(n[1], "threadIdx.y"));
  check(sch.Tensorize(m[3], "mma_accumulator"));
  check(sch.ComputeAt(acc, n[1]));
  std::vector<LoopRV> cl = LoopsOf(sch, acc);
  std::vector<LoopRV> cm = ValueOrDie(sch.Split(cl[0], {-1, 16}));
  std::vector<LoopRV> cn = ValueOrDie(sch.Split(cl[1], {-1, 8}));
  IntRV ksteps = ValueOrDie(sch.SampleCategorical({1, 3}, {0.5, 0.5}));
  std::vector<LoopRV> ck = ValueOrDie(sch.Split(cl[2], {-1, ksteps, 16}));
  check(sch.Reorder({ck[0], ck[1], cm[0], cn[0], cm[1], cn[1], ck[2]}));
  check(sch.DecomposeReduction(acc, ck[0]));
  check(sch.Annotate(acc, "pad_tile", 1));
  check(sch.Annotate(ck[0], "software_pipeline", 2));
  for (const char* name : {"padded", "weight"}) {
    BlockRV sh = ValueOrDie(sch.ReIndex(acc, name, "shared"));
    if (sch.FindStage(name)) check(sch.ComputeInline(BlockOf(sch, name)));
    BlockRV fr = ValueOrDie(sch.CacheRead(sch.GetStage(sh).name, "fragment", {acc}));
    check(sch.Annotate(sh, "pad_tile", 1));
    check(sch.Annotate(fr, "pad_tile", 1));
    check(sch.ComputeAt(fr, ck[1]));
    check(sch.ComputeAt(sh, ck[0]));
    std::vector<LoopRV> fl = LoopsOf(sch, fr);
    // Both copies are [rows, kk]: A's rows in 16-row tiles, B's in 8-row tiles.
    const bool a = std::string(name) == "padded";
    std::vector<LoopRV> split = ValueOrDie(sch.Split(fl[0], {-1, a ? 16 : 8}));
    check(sch.Tensorize(split[1], "ldmatrix"));
    CopyWithTheWarps(sch, sh);
  }
  check(sch.Tensorize(cm[1], "mma_m16n8k16"));
  return sch;
}

inline std::vector<Recorded> AllRecorded() {
  return {{"CudaTiledMatmul", CudaTiledMatmul, true},
          {"HostSoftmax", HostSoftmax, false},
          {"HostMatmulRelu", HostMatmulRelu, false},
          {"HostMatmulPaddedRows", HostMatmulPaddedRows, false},
          {"HostMatmulKMajorCopy", HostMatmulKMajorCopy, false},
          {"HostChainScoped", HostChainScoped, false},
          {"HostChainMerged", HostChainMerged, false},
          {"HostOnlineSoftmax", HostOnlineSoftmax, false},
          {"HostFusedLayernorm", HostFusedLayernorm, false},
          {"CudaFusedLayernormStats", CudaFusedLayernormStats, true},
          {"CudaTensorCoreMatmul", [](uint64_t seed) { return CudaTensorCoreMatmul(seed); }, true},
          {"CudaImplicitGemmConv", CudaImplicitGemmConv, true}};
}

// The program lowered for the recorded schedule's target, or the error.
inline std::string ProgramText(const Schedule& sch, bool cuda) {
  absl::StatusOr<Program> p = Lower(sch, cuda ? CudaT() : HostT());
  if (!p.ok()) return "ERROR: " + p.status().ToString();
  return ToString(*p);
}

}  // namespace tessel::schedules::recorded_schedules
