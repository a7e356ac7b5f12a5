#include "schedules/templates/templates.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "schedules/ir/substitute.h"
#include "schedules/rules/row_schedules.h"
#include "schedules/util/status_macros.h"

namespace tessel::schedules {

namespace {

int64_t FloorPow2(int64_t x) {
  int64_t p = 1;
  while (p * 2 <= x) p *= 2;
  return p;
}

// Threads for a dimension of `extent` elements: a power of two, at least 32 (a warp; guards
// cover the rest), at most `max`.
int64_t ThreadsFor(int64_t extent, int64_t max) {
  return std::max<int64_t>(32, std::min(max, FloorPow2(std::max<int64_t>(extent, 1))));
}

bool ReadsBuffer(const Expr& body, const std::string& name) {
  const std::vector<const LoadNode*> loads = CollectLoads(body);
  return std::any_of(loads.begin(), loads.end(),
                     [&](const LoadNode* l) { return l->buffer->name == name; });
}

bool IsLeafReduce(const Schedule& s, LoopRV l) {
  return s.LoopStage(l).iters[s.LoopIter(l)].reduce;
}

// Inlines every injective workload stage that is not an output (cache stages stay).
absl::Status InlineInjective(Schedule* s) {
  std::vector<std::string> names;
  for (const Stage& st : s->stages()) {
    if (!st.inlined() && !st.reduces() && !st.is_output && st.origin == "compute" &&
        st.attach.kind == AttachPoint::Kind::kRoot) {
      names.push_back(st.name);
    }
  }
  for (const std::string& n : names) {
    TESSEL_ASSIGN_OR_RETURN(auto b, s->GetBlock(n));
    TESSEL_RETURN_IF_ERROR(s->ComputeInline(b));
  }
  return absl::OkStatus();
}

// An injective root stage on CUDA: all spatial loops fused, `vec` elements per thread when the
// innermost extent allows, 256 threads per block.
absl::Status BindInjectiveCuda(Schedule* s, const std::string& name) {
  TESSEL_ASSIGN_OR_RETURN(auto b, s->GetBlock(name));
  TESSEL_ASSIGN_OR_RETURN(auto loops, s->GetLoops(b));
  const int64_t inner = s->LoopExtent(loops.back());
  LoopRV fused = loops[0];
  if (loops.size() > 1) {
    TESSEL_ASSIGN_OR_RETURN(auto f, s->Fuse(loops));
    fused = f;
  }
  const int64_t vec = (inner % 4 == 0) ? 4 : 1;
  const int64_t threads = std::min<int64_t>(256, std::max<int64_t>(1, s->LoopExtent(fused) / vec));
  if (vec > 1) {
    TESSEL_ASSIGN_OR_RETURN(auto p, s->Split(fused, {-1, threads, vec}));
    TESSEL_RETURN_IF_ERROR(s->Bind(p[0], "blockIdx.x"));
    TESSEL_RETURN_IF_ERROR(s->Bind(p[1], "threadIdx.x"));
    TESSEL_RETURN_IF_ERROR(s->Vectorize(p[2]));
  } else {
    TESSEL_ASSIGN_OR_RETURN(auto p, s->Split(fused, {-1, threads}));
    TESSEL_RETURN_IF_ERROR(s->Bind(p[0], "blockIdx.x"));
    TESSEL_RETURN_IF_ERROR(s->Bind(p[1], "threadIdx.x"));
  }
  return absl::OkStatus();
}

// A reduction stage with one output element per thread (spatial loops fused and bound).
absl::Status BindOnePerThreadCuda(Schedule* s, const std::string& name) {
  TESSEL_ASSIGN_OR_RETURN(auto b, s->GetBlock(name));
  TESSEL_ASSIGN_OR_RETURN(auto loops, s->GetLoops(b));
  std::vector<LoopRV> spatial;
  for (LoopRV l : loops) {
    if (!IsLeafReduce(*s, l)) spatial.push_back(l);
  }
  if (spatial.empty()) return absl::OkStatus();
  LoopRV fused = spatial[0];
  if (spatial.size() > 1) {
    TESSEL_ASSIGN_OR_RETURN(auto f, s->Fuse(spatial));
    fused = f;
  }
  const int64_t threads = std::min<int64_t>(128, s->LoopExtent(fused));
  TESSEL_ASSIGN_OR_RETURN(auto p, s->Split(fused, {-1, threads}));
  TESSEL_RETURN_IF_ERROR(s->Bind(p[0], "blockIdx.x"));
  TESSEL_RETURN_IF_ERROR(s->Bind(p[1], "threadIdx.x"));
  return absl::OkStatus();
}

// Cross-thread reduction of a stage over its last (reduction) loop with `threads` threads, the
// stage's spatial loops left as they are (the stage is attached at a row loop, or its single
// spatial loop is bound to blockIdx.x when `bind_rows`).
absl::Status CrossThreadReduce(Schedule* s, BlockRV b, int64_t threads, bool bind_rows,
                               int64_t unroll) {
  TESSEL_ASSIGN_OR_RETURN(auto loops, s->GetLoops(b));
  LoopRV red = loops.back();
  // Each thread strides over the row, kVec adjacent elements at a time (a vectorized reduction
  // loop: one 16-byte load), kUnroll such loads in flight; coalesced across the warp.
  const int64_t kUnroll = std::max<int64_t>(1, unroll);
  constexpr int64_t kVec = 4;
  const int64_t extent = s->LoopExtent(red);
  const int64_t per_thread = (extent + threads - 1) / threads;
  if (extent % (threads * kVec) == 0 && per_thread >= kUnroll * kVec) {
    TESSEL_ASSIGN_OR_RETURN(auto p, s->Split(red, {-1, kUnroll, threads, kVec}));
    TESSEL_RETURN_IF_ERROR(s->Bind(p[2], "threadIdx.x"));
    TESSEL_RETURN_IF_ERROR(s->Unroll(p[1]));
    TESSEL_RETURN_IF_ERROR(s->Vectorize(p[3]));
  } else if (per_thread >= 2 * kUnroll) {
    TESSEL_ASSIGN_OR_RETURN(auto p, s->Split(red, {-1, kUnroll, threads}));
    TESSEL_RETURN_IF_ERROR(s->Bind(p[2], "threadIdx.x"));
    TESSEL_RETURN_IF_ERROR(s->Unroll(p[1]));
  } else {
    TESSEL_ASSIGN_OR_RETURN(auto p, s->Split(red, {-1, threads}));
    TESSEL_RETURN_IF_ERROR(s->Bind(p[1], "threadIdx.x"));
  }
  if (bind_rows) {
    std::vector<LoopRV> spatial(loops.begin(), loops.end() - 1);
    LoopRV rows = spatial[0];
    if (spatial.size() > 1) {
      TESSEL_ASSIGN_OR_RETURN(auto f, s->Fuse(spatial));
      rows = f;
    }
    TESSEL_RETURN_IF_ERROR(s->Bind(rows, "blockIdx.x"));
  }
  return absl::OkStatus();
}

// Fuses a cache stage's loops and spreads them over the block's threads (ty x tx), `vec`
// consecutive elements per thread when the innermost region extent allows.
absl::Status CooperativeFetch(Schedule* s, BlockRV b, int64_t ty, int64_t tx, int64_t vec) {
  TESSEL_ASSIGN_OR_RETURN(auto loops, s->GetLoops(b));
  if (s->LoopExtent(loops.back()) % vec != 0) vec = 1;
  LoopRV fused = loops[0];
  if (loops.size() > 1) {
    TESSEL_ASSIGN_OR_RETURN(auto f, s->Fuse(loops));
    fused = f;
  }
  TESSEL_ASSIGN_OR_RETURN(auto p, s->Split(fused, {-1, ty, tx, vec}));
  TESSEL_RETURN_IF_ERROR(s->Bind(p[1], "threadIdx.y"));
  TESSEL_RETURN_IF_ERROR(s->Bind(p[2], "threadIdx.x"));
  if (vec > 1) TESSEL_RETURN_IF_ERROR(s->Vectorize(p[3]));
  return absl::OkStatus();
}

absl::Status UnrollAll(Schedule* s, BlockRV b) {
  TESSEL_ASSIGN_OR_RETURN(auto loops, s->GetLoops(b));
  for (LoopRV l : loops) TESSEL_RETURN_IF_ERROR(s->Unroll(l));
  return absl::OkStatus();
}

// The output stage of a workload and the single reduction feeding it (the contraction).
std::string OutputName(const Schedule& s) {
  for (const Stage& st : s.stages()) {
    if (st.is_output && !st.inlined()) return st.name;
  }
  return "";
}

// GEMM-like contraction (matmul, batch matmul, fused epilogues) on CUDA: block tile bm x bn,
// thread tile tm x tn, A and B tiles in shared memory over k steps of bk, register tiles for
// the operands and the accumulator, the epilogue applied on the write-back.
absl::Status ContractionCuda(Schedule* s, const std::string& gemm, const TemplateOptions& o) {
  TESSEL_ASSIGN_OR_RETURN(auto g, s->GetBlock(gemm));
  TESSEL_ASSIGN_OR_RETURN(auto cc, s->CacheWrite(g, "local"));
  std::string out = OutputName(*s);
  if (out != gemm) {
    TESSEL_RETURN_IF_ERROR(s->ComputeInline(g));
  }
  TESSEL_ASSIGN_OR_RETURN(auto ob, s->GetBlock(out));
  TESSEL_ASSIGN_OR_RETURN(auto oloops, s->GetLoops(ob));
  // Spatial loops: [batch...,] m, n.
  const size_t nl = oloops.size();
  LoopRV m = oloops[nl - 2], n = oloops[nl - 1];
  const int64_t ty = o.bm / o.tm, tx = o.bn / o.tn;
  TESSEL_ASSIGN_OR_RETURN(auto ms, s->Split(m, {-1, ty, o.tm}));
  TESSEL_ASSIGN_OR_RETURN(auto ns, s->Split(n, {-1, tx, o.tn}));
  TESSEL_RETURN_IF_ERROR(s->Reorder({ms[0], ns[0], ms[1], ns[1], ms[2], ns[2]}));
  if (nl > 2) {
    std::vector<LoopRV> batch(oloops.begin(), oloops.end() - 2);
    LoopRV bz = batch[0];
    if (batch.size() > 1) {
      TESSEL_ASSIGN_OR_RETURN(auto f, s->Fuse(batch));
      bz = f;
    }
    TESSEL_RETURN_IF_ERROR(s->Bind(bz, "blockIdx.z"));
  }
  TESSEL_RETURN_IF_ERROR(s->Bind(ms[0], "blockIdx.y"));
  TESSEL_RETURN_IF_ERROR(s->Bind(ns[0], "blockIdx.x"));
  TESSEL_RETURN_IF_ERROR(s->Bind(ms[1], "threadIdx.y"));
  TESSEL_RETURN_IF_ERROR(s->Bind(ns[1], "threadIdx.x"));
  TESSEL_RETURN_IF_ERROR(s->Unroll(ms[2]));
  TESSEL_RETURN_IF_ERROR(s->Unroll(ns[2]));
  TESSEL_RETURN_IF_ERROR(s->ComputeAt(cc, ns[1]));

  // The accumulator's loops: [batch...,] i, j, k...  ->  k_outer, k_inner, i, j.
  TESSEL_ASSIGN_OR_RETURN(auto cl, s->GetLoops(cc));
  std::vector<LoopRV> cspatial, creduce;
  for (LoopRV l : cl) (IsLeafReduce(*s, l) ? creduce : cspatial).push_back(l);
  LoopRV k = creduce[0];
  if (creduce.size() > 1) {
    TESSEL_ASSIGN_OR_RETURN(auto f, s->Fuse(creduce));
    k = f;
  }
  TESSEL_ASSIGN_OR_RETURN(auto ks, s->Split(k, {-1, o.bk}));
  std::vector<LoopRV> order = {ks[0], ks[1]};
  order.insert(order.end(), cspatial.begin(), cspatial.end());
  TESSEL_RETURN_IF_ERROR(s->Reorder(order));
  TESSEL_RETURN_IF_ERROR(s->DecomposeReduction(cc, ks[0]));
  TESSEL_RETURN_IF_ERROR(s->Unroll(ks[1]));
  for (LoopRV l : cspatial) TESSEL_RETURN_IF_ERROR(s->Unroll(l));

  // Operands: every input the accumulator reads goes through shared and local memory.
  std::vector<std::string> operands;
  for (const TensorDef& t : s->workload().tensors) {
    if (t.is_input) operands.push_back(t.name);
  }
  for (const std::string& name : operands) {
    if (!ReadsBuffer(s->GetStage(cc).body, name)) continue;
    TESSEL_ASSIGN_OR_RETURN(auto sh, s->CacheRead(name, "shared", {cc}));
    TESSEL_ASSIGN_OR_RETURN(auto lo, s->CacheRead(s->GetStage(sh).name, "local", {cc}));
    TESSEL_RETURN_IF_ERROR(s->ComputeAt(lo, ks[1]));  // consumers first
    TESSEL_RETURN_IF_ERROR(s->ComputeAt(sh, ks[0]));
    TESSEL_RETURN_IF_ERROR(CooperativeFetch(s, sh, ty, tx, 4));
    TESSEL_RETURN_IF_ERROR(UnrollAll(s, lo));
  }
  return absl::OkStatus();
}

// Softmax with X read once into registers: each row taken by a block of `threads` threads (a
// cluster of `c` such CTAs when c > 1), a thread holding `per_thread` elements in float4s
// (rules::RowInRegisters).
absl::Status SoftmaxRowInRegistersCuda(Schedule* s, int64_t c, int64_t threads,
                                       int64_t per_thread) {
  std::vector<Factor> split = {per_thread / 4, threads, 4};
  if (c > 1) split.insert(split.begin(), c);
  return rules::RowInRegisters(s, "Y", {"row_max", "row_sum"}, "X", split);
}

absl::Status SoftmaxCuda(Schedule* s, const Target& t, const TemplateOptions& o) {
  TESSEL_RETURN_IF_ERROR(InlineInjective(s));
  TESSEL_ASSIGN_OR_RETURN(auto y, s->GetBlock("Y"));
  TESSEL_ASSIGN_OR_RETURN(auto yl, s->GetLoops(y));
  const int64_t rows = s->LoopExtent(yl[0]);
  const int64_t cols = s->LoopExtent(yl[1]);
  // The row in registers, over a cluster or one block: when the row divides into float4s of
  // every thread and a thread's share fits (and, without a cluster, is asked for).
  auto fits = [&](int64_t ctas, int64_t t) {
    return !o.online_softmax && cols % (ctas * t * 4) == 0 &&
           cols / (ctas * t) <= o.row_register_elements && cols / (ctas * t * 4) <= 16;
  };
  if (const int64_t c = o.row_cluster, ct = o.row_cluster_threads;
      c > 1 && c <= t.max_cluster_ctas && fits(c, ct)) {
    return SoftmaxRowInRegistersCuda(s, c, ct, cols / (c * ct));
  }
  const int64_t threads = ThreadsFor(cols, o.row_threads);
  if (o.row_in_registers && fits(1, threads)) {
    return SoftmaxRowInRegistersCuda(s, 1, threads, cols / threads);
  }
  const int64_t vec = cols % (threads * 4) == 0 ? 4 : 1;
  TESSEL_ASSIGN_OR_RETURN(auto js, s->Split(yl[1], {-1, threads, vec}));
  LoopRV row = yl[0];
  const int64_t grid = o.row_grid > 0 ? o.row_grid : t.sm_count * o.row_blocks_per_sm;
  if (grid > 0 && rows > grid) {
    // Block b takes rows b, b + grid, ...
    TESSEL_ASSIGN_OR_RETURN(auto rs, s->Split(yl[0], {-1, grid}));
    TESSEL_RETURN_IF_ERROR(s->Reorder({rs[1], rs[0]}));
    TESSEL_RETURN_IF_ERROR(s->Bind(rs[1], "blockIdx.x"));
    row = rs[0];
  } else {
    TESSEL_RETURN_IF_ERROR(s->Bind(yl[0], "blockIdx.x"));
  }
  TESSEL_RETURN_IF_ERROR(s->Bind(js[1], "threadIdx.x"));
  if (vec > 1) TESSEL_RETURN_IF_ERROR(s->Vectorize(js[2]));
  if (s->LoopExtent(js[0]) <= 16) TESSEL_RETURN_IF_ERROR(s->Unroll(js[0]));
  if (o.row_blocks_per_sm_limit > 0) {
    TESSEL_RETURN_IF_ERROR(s->Annotate(y, "max_blocks_per_sm", o.row_blocks_per_sm_limit));
  }
  if (o.online_softmax) {
    // The maximum and the sum in one pass (fuse_reductions: online softmax), the maximum leading.
    TESSEL_ASSIGN_OR_RETURN(auto m, s->GetBlock("row_max"));
    TESSEL_ASSIGN_OR_RETURN(auto sum, s->GetBlock("row_sum"));
    TESSEL_RETURN_IF_ERROR(s->SetScope(m, "local"));
    TESSEL_RETURN_IF_ERROR(s->SetScope(sum, "local"));
    TESSEL_RETURN_IF_ERROR(s->FuseReductions({m, sum}));
  }
  for (const char* name : {"row_sum", "row_max"}) {  // consumers first
    if (o.online_softmax && std::string(name) == "row_sum") continue;
    TESSEL_ASSIGN_OR_RETURN(auto b, s->GetBlock(name));
    TESSEL_RETURN_IF_ERROR(s->SetScope(b, "local"));
    TESSEL_RETURN_IF_ERROR(s->ComputeAt(b, row));
    TESSEL_RETURN_IF_ERROR(CrossThreadReduce(s, b, threads, false, o.reduce_unroll));
  }
  return absl::OkStatus();
}

// A row reduction over very long rows: partial sums of `chunk` elements by many blocks (rfactor),
// then one block per row combines them.
absl::Status PartialRowReduceCuda(Schedule* s, const std::string& name, int64_t chunk,
                                  const TemplateOptions& o) {
  TESSEL_ASSIGN_OR_RETURN(auto b, s->GetBlock(name));
  TESSEL_ASSIGN_OR_RETURN(auto loops, s->GetLoops(b));
  const int64_t cols = s->LoopExtent(loops.back());
  if (cols <= chunk) {
    return CrossThreadReduce(s, b, ThreadsFor(cols, o.row_threads), true, o.reduce_unroll);
  }
  TESSEL_ASSIGN_OR_RETURN(auto ks, s->Split(loops.back(), {-1, chunk}));
  TESSEL_ASSIGN_OR_RETURN(auto rf, s->RFactor(ks[0]));
  // Partials: (rows, chunks) fused over blocks, the chunk reduced by a block.
  TESSEL_ASSIGN_OR_RETURN(auto rl, s->GetLoops(rf));
  TESSEL_ASSIGN_OR_RETURN(auto fused, s->Fuse({rl[0], rl[1]}));
  TESSEL_RETURN_IF_ERROR(s->Bind(fused, "blockIdx.x"));
  TESSEL_RETURN_IF_ERROR(
      CrossThreadReduce(s, rf, std::min<int64_t>(256, chunk), false, o.reduce_unroll));
  // Combine: one block per row over the partials.
  TESSEL_ASSIGN_OR_RETURN(auto bl, s->GetLoops(b));
  return CrossThreadReduce(s, b, ThreadsFor(s->LoopExtent(bl.back()), 256), true, o.reduce_unroll);
}

// Layernorm statistics in one read of the input: the row sum and the squares about its mean as
// one tuple reduction (fuse_reductions: Welford), its partials over chunks by many blocks, each
// thread's elements folded in the combiner's two passes, then one block per row combines them in
// two passes over the partials.
absl::Status FusedStatsCuda(Schedule* s, int64_t chunk, const TemplateOptions& o) {
  TESSEL_ASSIGN_OR_RETURN(auto sum, s->GetBlock("x_sum"));
  TESSEL_ASSIGN_OR_RETURN(auto sq, s->GetBlock("sq_sum"));
  TESSEL_RETURN_IF_ERROR(s->FuseReductions({sum, sq}));
  TESSEL_RETURN_IF_ERROR(s->Annotate(sum, "two_pass", 1));  // the partials (rfactor copies it)
  TESSEL_RETURN_IF_ERROR(PartialRowReduceCuda(s, "x_sum", chunk, o));
  return s->Annotate(sum, "two_pass", 2);  // their combination, an all-reduce a pass
}

// Layernorm in one grid-synchronized kernel (rules::GridRows): `grid` blocks of `threads`
// threads, each taking a slice of `per_thread` x `threads` columns of every row in float4s, its
// slice of the weight in shared memory.
absl::Status LayernormGridCuda(Schedule* s, int64_t grid, int64_t threads, int64_t per_thread) {
  return rules::GridRows(s, "Y", {"x_sum", "sq_sum"}, "X", {"weight"},
                         {grid, per_thread / 4, threads, 4});
}

absl::Status LayernormCuda(Schedule* s, const Target& t, const TemplateOptions& o) {
  TESSEL_RETURN_IF_ERROR(InlineInjective(s));
  if (o.grid_rows) {
    TESSEL_ASSIGN_OR_RETURN(auto y, s->GetBlock("Y"));
    TESSEL_ASSIGN_OR_RETURN(auto yl, s->GetLoops(y));
    const int64_t rows = s->LoopExtent(yl[0]), cols = s->LoopExtent(yl[1]);
    const int64_t threads = o.grid_row_threads;
    // The most blocks, at most one an SM, that divide the row into float4s of every thread.
    int64_t grid = 0;
    for (int64_t g = t.sm_count; g >= 1 && grid == 0; --g) {
      if (cols % (g * threads * 4) == 0) grid = g;
    }
    const int64_t per_thread = grid > 0 ? cols / (grid * threads) : 0;
    int64_t weight_bytes = 0;
    for (const TensorDef& td : s->workload().tensors) {
      if (td.name == "weight") weight_bytes = per_thread * threads * DTypeBytes(td.buffer->dtype);
    }
    if (grid > 1 && grid <= threads && rows < grid && per_thread <= o.row_register_elements &&
        per_thread / 4 <= 16 && weight_bytes <= t.max_shared_bytes_optin) {
      return LayernormGridCuda(s, grid, threads, per_thread);
    }
  }
  TESSEL_ASSIGN_OR_RETURN(auto xb, s->GetBlock("x_sum"));
  TESSEL_ASSIGN_OR_RETURN(auto xl, s->GetLoops(xb));
  if (o.center_variance && s->LoopExtent(xl.back()) > o.partial_chunk) {
    TESSEL_RETURN_IF_ERROR(FusedStatsCuda(s, o.partial_chunk, o));
  } else {
    TESSEL_RETURN_IF_ERROR(PartialRowReduceCuda(s, "x_sum", o.partial_chunk, o));
    TESSEL_RETURN_IF_ERROR(PartialRowReduceCuda(s, "sq_sum", o.partial_chunk, o));
  }
  // Normalize: columns over blocks and threads, the rows of one column chunk in one thread (the
  // weight and bias of the chunk are loaded once for all rows).
  TESSEL_ASSIGN_OR_RETURN(auto y, s->GetBlock("Y"));
  TESSEL_ASSIGN_OR_RETURN(auto yl, s->GetLoops(y));
  const int64_t cols = s->LoopExtent(yl[1]);
  const int64_t vec = cols % 4 == 0 ? 4 : 1;
  TESSEL_ASSIGN_OR_RETURN(auto js, s->Split(yl[1], {-1, 256, vec}));
  TESSEL_RETURN_IF_ERROR(s->Reorder({js[0], js[1], yl[0], js[2]}));
  TESSEL_RETURN_IF_ERROR(s->Bind(js[0], "blockIdx.x"));
  TESSEL_RETURN_IF_ERROR(s->Bind(js[1], "threadIdx.x"));
  TESSEL_RETURN_IF_ERROR(s->Unroll(yl[0]));
  if (vec > 1) TESSEL_RETURN_IF_ERROR(s->Vectorize(js[2]));
  return absl::OkStatus();
}

absl::Status ReduceCuda(Schedule* s, const TemplateOptions& o) {
  TESSEL_RETURN_IF_ERROR(InlineInjective(s));
  const Stage* acc = nullptr;
  for (const Stage& st : s->stages()) {
    if (st.reduces() && !st.inlined()) acc = &st;
  }
  const std::string acc_name = acc->name;
  const std::string out = OutputName(*s);
  TESSEL_ASSIGN_OR_RETURN(auto b, s->GetBlock(acc_name));
  if (out == acc_name) {
    TESSEL_ASSIGN_OR_RETURN(auto loops, s->GetLoops(b));
    return CrossThreadReduce(s, b, ThreadsFor(s->LoopExtent(loops.back()), o.row_threads), true,
                             o.reduce_unroll);
  }
  // acc feeds an elementwise output (mean, cast): keep it per thread, attached at the row.
  TESSEL_ASSIGN_OR_RETURN(auto ob, s->GetBlock(out));
  TESSEL_ASSIGN_OR_RETURN(auto ol, s->GetLoops(ob));
  TESSEL_RETURN_IF_ERROR(s->Bind(ol[0], "blockIdx.x"));
  TESSEL_RETURN_IF_ERROR(s->SetScope(b, "local"));
  TESSEL_RETURN_IF_ERROR(s->ComputeAt(b, ol[0]));
  TESSEL_ASSIGN_OR_RETURN(auto loops, s->GetLoops(b));
  return CrossThreadReduce(s, b, ThreadsFor(s->LoopExtent(loops.back()), o.row_threads), false,
                           o.reduce_unroll);
}

// Convolutions on CUDA: the padding inlined, one output element per thread accumulated in a
// register, the epilogue on the write-back.
absl::Status ConvCuda(Schedule* s) {
  const std::string out = OutputName(*s);
  TESSEL_ASSIGN_OR_RETURN(auto c, s->GetBlock("conv"));
  TESSEL_ASSIGN_OR_RETURN(auto cc, s->CacheWrite(c, "local"));
  if (out != "conv") TESSEL_RETURN_IF_ERROR(s->ComputeInline(c));
  TESSEL_RETURN_IF_ERROR(InlineInjective(s));
  TESSEL_ASSIGN_OR_RETURN(auto ob, s->GetBlock(out));
  TESSEL_ASSIGN_OR_RETURN(auto ol, s->GetLoops(ob));
  TESSEL_ASSIGN_OR_RETURN(auto fused, s->Fuse(ol));
  TESSEL_ASSIGN_OR_RETURN(auto p,
                          s->Split(fused, {-1, std::min<int64_t>(128, s->LoopExtent(fused))}));
  TESSEL_RETURN_IF_ERROR(s->Bind(p[0], "blockIdx.x"));
  TESSEL_RETURN_IF_ERROR(s->Bind(p[1], "threadIdx.x"));
  TESSEL_RETURN_IF_ERROR(s->ComputeAt(cc, p[1]));
  TESSEL_ASSIGN_OR_RETURN(auto cl, s->GetLoops(cc));
  LoopRV inner = cl.back();
  if (s->LoopExtent(inner) <= 16) TESSEL_RETURN_IF_ERROR(s->Unroll(inner));
  return absl::OkStatus();
}

// Anything else on CUDA: injective stages inlined where possible, the rest bound.
absl::Status GenericCuda(Schedule* s) {
  TESSEL_RETURN_IF_ERROR(InlineInjective(s));
  std::vector<std::pair<std::string, bool>> roots;
  for (const Stage& st : s->stages()) {
    if (!st.inlined()) roots.emplace_back(st.name, st.reduces());
  }
  for (const auto& [name, reduce] : roots) {
    TESSEL_RETURN_IF_ERROR(reduce ? BindOnePerThreadCuda(s, name) : BindInjectiveCuda(s, name));
  }
  return absl::OkStatus();
}

// ---- Host.

// Contraction on the host: i/j/k tiles, the outer i tiles in parallel, the j tile vectorized.
absl::Status ContractionHost(Schedule* s, const std::string& gemm, const TemplateOptions& o) {
  TESSEL_ASSIGN_OR_RETURN(auto g, s->GetBlock(gemm));
  TESSEL_ASSIGN_OR_RETURN(auto loops, s->GetLoops(g));
  std::vector<LoopRV> spatial, reduce;
  for (LoopRV l : loops) (IsLeafReduce(*s, l) ? reduce : spatial).push_back(l);
  const size_t ns = spatial.size();
  LoopRV i = spatial[ns - 2], j = spatial[ns - 1];
  LoopRV k = reduce[0];
  if (reduce.size() > 1) {
    TESSEL_ASSIGN_OR_RETURN(auto f, s->Fuse(reduce));
    k = f;
  }
  TESSEL_ASSIGN_OR_RETURN(auto is, s->Split(i, {-1, std::min(o.host_tile_i, s->LoopExtent(i))}));
  TESSEL_ASSIGN_OR_RETURN(auto js, s->Split(j, {-1, std::min(o.host_tile_j, s->LoopExtent(j))}));
  TESSEL_ASSIGN_OR_RETURN(auto ks, s->Split(k, {-1, std::min(o.host_tile_k, s->LoopExtent(k))}));
  std::vector<LoopRV> order(spatial.begin(), spatial.end() - 2);
  for (LoopRV l : {is[0], js[0], ks[0], is[1], ks[1], js[1]}) order.push_back(l);
  TESSEL_RETURN_IF_ERROR(s->Reorder(order));
  TESSEL_RETURN_IF_ERROR(s->DecomposeReduction(g, ks[0]));
  LoopRV outer = order[0];
  if (ns > 2) {
    TESSEL_ASSIGN_OR_RETURN(auto f, s->Fuse({order.begin(), order.begin() + (ns - 2) + 1}));
    outer = f;
  }
  TESSEL_RETURN_IF_ERROR(s->Parallel(outer));
  TESSEL_RETURN_IF_ERROR(s->Vectorize(js[1]));
  return absl::OkStatus();
}

// Every other stage on the host: the outermost spatial loop parallel, the innermost spatial loop
// vectorized when it is the last loop.
absl::Status GenericHost(Schedule* s, bool inline_injective) {
  if (inline_injective) TESSEL_RETURN_IF_ERROR(InlineInjective(s));
  std::vector<std::string> roots;
  for (const Stage& st : s->stages()) {
    if (!st.inlined() && st.attach.kind == AttachPoint::Kind::kRoot) roots.push_back(st.name);
  }
  for (const std::string& name : roots) {
    TESSEL_ASSIGN_OR_RETURN(auto b, s->GetBlock(name));
    TESSEL_ASSIGN_OR_RETURN(auto loops, s->GetLoops(b));
    if (loops.empty() || IsLeafReduce(*s, loops[0])) continue;
    const IterVar& first = s->LoopStage(loops[0]).iters[s->LoopIter(loops[0])];
    if (first.kind != ForKind::kSerial) continue;  // already scheduled (the contraction)
    TESSEL_RETURN_IF_ERROR(s->Parallel(loops[0]));
    if (loops.size() > 1 && !IsLeafReduce(*s, loops.back())) {
      TESSEL_RETURN_IF_ERROR(s->Vectorize(loops.back()));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Schedule> HandwrittenSchedule(const Workload& workload, const Target& target,
                                             const TemplateOptions& o) {
  TESSEL_ASSIGN_OR_RETURN(auto s, Schedule::Create(workload));
  const std::string& f = workload.name;
  const bool contraction = f == "matmul" || f == "matmul_bias_gelu";
  if (target.is_cuda()) {
    if (contraction) {
      TESSEL_RETURN_IF_ERROR(ContractionCuda(&s, "C", o));
      TESSEL_RETURN_IF_ERROR(InlineInjective(&s));
    } else if (f == "softmax") {
      TESSEL_RETURN_IF_ERROR(SoftmaxCuda(&s, target, o));
    } else if (f == "layernorm") {
      TESSEL_RETURN_IF_ERROR(LayernormCuda(&s, target, o));
    } else if (f == "reduce") {
      TESSEL_RETURN_IF_ERROR(ReduceCuda(&s, o));
    } else if (f == "conv2d" || f == "conv2d_bias_relu") {
      TESSEL_RETURN_IF_ERROR(ConvCuda(&s));
    } else {
      TESSEL_RETURN_IF_ERROR(GenericCuda(&s));
    }
    return s;
  }
  if (contraction) {
    TESSEL_RETURN_IF_ERROR(ContractionHost(&s, "C", o));
    TESSEL_RETURN_IF_ERROR(GenericHost(&s, false));
    return s;
  }
  TESSEL_RETURN_IF_ERROR(GenericHost(&s, f != "custom"));
  return s;
}

}  // namespace tessel::schedules
