#pragma once

// Hand-built workloads and small helpers for the schedule, trace and lowering tests. Header-only
// (inline functions) so that every test file can include it without a separate build entry.
//
// The workloads are built directly from TensorDef (not through the text parser), so their
// variable names are fixed here: axes i, j and reduction axis k.

#include <gtest/gtest.h>

#include <cstdint>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "schedules/ir/buffer.h"
#include "schedules/ir/expr.h"
#include "schedules/ir/stmt.h"
#include "schedules/lower/lower.h"
#include "schedules/lower/program.h"
#include "schedules/schedule/schedule.h"
#include "schedules/target/target.h"
#include "schedules/workload/workload.h"

namespace tessel::schedules::test_workloads {

inline TensorDef InputTensor(const std::string& name, std::vector<int64_t> shape,
                             DType dtype = DType::kFloat32) {
  TensorDef t;
  t.name = name;
  t.buffer = MakeBuffer(name, dtype, std::move(shape));
  t.is_input = true;
  return t;
}

// A computed tensor with spatial axes named `axis_names` (one per dimension of `shape`). The
// body is filled in by the caller.
inline TensorDef ComputeTensor(const std::string& name, std::vector<int64_t> shape,
                               const std::vector<std::string>& axis_names,
                               DType dtype = DType::kFloat32) {
  TensorDef t;
  t.name = name;
  t.buffer = MakeBuffer(name, dtype, std::move(shape));
  for (const std::string& a : axis_names) t.axes.push_back(MakeVar(a));
  return t;
}

inline Expr Ld(const TensorDef& t, std::vector<Expr> idx) { return MakeLoad(t.buffer, idx); }

// C[i, j] = sum_k A[i, k] * B[k, j]; A is M x K, B is K x N.
inline Workload Matmul(int64_t m, int64_t n, int64_t k) {
  Workload w;
  w.name = "matmul";
  w.spec = "matmul(M=" + std::to_string(m) + ", N=" + std::to_string(n) +
           ", K=" + std::to_string(k) + ")";
  TensorDef a = InputTensor("A", {m, k});
  TensorDef b = InputTensor("B", {k, n});
  TensorDef c = ComputeTensor("C", {m, n}, {"i", "j"});
  VarPtr kv = MakeVar("k");
  c.reduce_axes = {kv};
  c.reduce_extents = {k};
  c.reduce = ReduceOp::kSum;
  c.body = Ld(a, {c.axes[0], kv}) * Ld(b, {kv, c.axes[1]});
  w.tensors = {a, b, c};
  w.outputs = {"C"};
  return w;
}

// Matmul followed by D[i, j] = max(C[i, j], 0); D is the output, C an intermediate.
inline Workload MatmulRelu(int64_t m, int64_t n, int64_t k) {
  Workload w = Matmul(m, n, k);
  w.name = "matmul_relu";
  w.spec += " + relu";
  const TensorDef& c = w.tensors[2];
  TensorDef d = ComputeTensor("D", {m, n}, {"i", "j"});
  d.body = MakeMax(Ld(c, {d.axes[0], d.axes[1]}), MakeFloat(0.0));
  w.tensors.push_back(d);
  w.outputs = {"D"};
  return w;
}

// B[i, j] = A[i, j] * 2; C[i, j] = max(B[i, j], 0). Output C.
inline Workload ElementwiseChain(int64_t m, int64_t n) {
  Workload w;
  w.name = "ewchain";
  w.spec = "ewchain";
  TensorDef a = InputTensor("A", {m, n});
  TensorDef b = ComputeTensor("B", {m, n}, {"i", "j"});
  b.body = Ld(a, {b.axes[0], b.axes[1]}) * MakeFloat(2.0);
  TensorDef c = ComputeTensor("C", {m, n}, {"i", "j"});
  c.body = MakeMax(Ld(b, {c.axes[0], c.axes[1]}), MakeFloat(0.0));
  w.tensors = {a, b, c};
  w.outputs = {"C"};
  return w;
}

// S[i] = sum_k X[i, k].
inline Workload RowSum(int64_t rows, int64_t cols) {
  Workload w;
  w.name = "rowsum";
  w.spec = "rowsum";
  TensorDef x = InputTensor("X", {rows, cols});
  TensorDef s = ComputeTensor("S", {rows}, {"i"});
  VarPtr kv = MakeVar("k");
  s.reduce_axes = {kv};
  s.reduce_extents = {cols};
  s.reduce = ReduceOp::kSum;
  s.body = Ld(x, {s.axes[0], kv});
  w.tensors = {x, s};
  w.outputs = {"S"};
  return w;
}

// Softmax over rows in four stages: Mx[i] = max_k X[i, k]; E[i, j] = exp(X[i, j] - Mx[i]);
// Sm[i] = sum_k E[i, k]; Y[i, j] = E[i, j] / Sm[i]. Output Y.
inline Workload Softmax(int64_t rows, int64_t cols) {
  Workload w;
  w.name = "softmax";
  w.spec = "softmax";
  TensorDef x = InputTensor("X", {rows, cols});
  TensorDef mx = ComputeTensor("Mx", {rows}, {"i"});
  VarPtr k1 = MakeVar("k");
  mx.reduce_axes = {k1};
  mx.reduce_extents = {cols};
  mx.reduce = ReduceOp::kMax;
  mx.body = Ld(x, {mx.axes[0], k1});
  TensorDef e = ComputeTensor("E", {rows, cols}, {"i", "j"});
  e.body = MakeCall("exp", {Ld(x, {e.axes[0], e.axes[1]}) - Ld(mx, {e.axes[0]})}, DType::kFloat32);
  TensorDef sm = ComputeTensor("Sm", {rows}, {"i"});
  VarPtr k2 = MakeVar("k");
  sm.reduce_axes = {k2};
  sm.reduce_extents = {cols};
  sm.reduce = ReduceOp::kSum;
  sm.body = Ld(e, {sm.axes[0], k2});
  TensorDef y = ComputeTensor("Y", {rows, cols}, {"i", "j"});
  y.body = Ld(e, {y.axes[0], y.axes[1]}) / Ld(sm, {y.axes[0]});
  w.tensors = {x, mx, e, sm, y};
  w.outputs = {"Y"};
  return w;
}

// C[i] = A[i] + B[i].
inline Workload VectorAdd(int64_t n) {
  Workload w;
  w.name = "vadd";
  w.spec = "vadd";
  TensorDef a = InputTensor("A", {n});
  TensorDef b = InputTensor("B", {n});
  TensorDef c = ComputeTensor("C", {n}, {"i"});
  c.body = Ld(a, {c.axes[0]}) + Ld(b, {c.axes[0]});
  w.tensors = {a, b, c};
  w.outputs = {"C"};
  return w;
}

// A fixed host target (HostTarget() reads /proc/cpuinfo; lowering only needs the kind).
inline Target HostT() {
  Target t;
  t.kind = TargetKind::kHost;
  t.arch = "x86_64";
  t.device_name = "test host";
  return t;
}
inline Target CudaT() { return CudaTarget("sm_90"); }

// The IR of every kernel, or "ERROR: <message>" when lowering fails.
inline std::string LowerText(const Schedule& sch, const Target& target) {
  absl::StatusOr<Program> p = Lower(sch, target);
  if (!p.ok()) return "ERROR: " + std::string(p.status().message());
  std::string out;
  for (const Kernel& k : p->kernels) out += "kernel " + k.name + ":\n" + ToString(k.body);
  return out;
}

// The first Allocate of a buffer named `name` in `s` (pre-order), or nullptr.
inline const AllocateNode* FindAllocate(const Stmt& s, const std::string& name) {
  if (!s) return nullptr;
  switch (s->kind) {
    case StmtKind::kAllocate: {
      const auto* a = As<AllocateNode>(s);
      if (a->buffer->name == name) return a;
      return FindAllocate(a->body, name);
    }
    case StmtKind::kFor:
      return FindAllocate(As<ForNode>(s)->body, name);
    case StmtKind::kIfThenElse: {
      const auto* n = As<IfThenElseNode>(s);
      if (const AllocateNode* a = FindAllocate(n->then_case, name)) return a;
      return FindAllocate(n->else_case, name);
    }
    case StmtKind::kSeq:
      for (const Stmt& c : As<SeqNode>(s)->stmts) {
        if (const AllocateNode* a = FindAllocate(c, name)) return a;
      }
      return nullptr;
    case StmtKind::kLetStmt:
      return FindAllocate(As<LetStmtNode>(s)->body, name);
    default:
      return nullptr;
  }
}

// The program's IR (ToString) as lowering has it just before the pass named `pass` runs, such as
// "lower_all_reduce" (the all-reduces not yet expanded); empty when lowering stops earlier.
inline std::string IrBeforePass(const Schedule& s, const Target& t, const std::string& pass) {
  std::string previous, before;
  (void)Lower(s, t, [&](const LoweringPass& p, const Program& program) {
    if (p.name == pass) before = previous;
    previous = ToString(program);
  });
  return before;
}

// Number of non-overlapping occurrences of `needle` in `hay`.
inline int CountOf(const std::string& hay, const std::string& needle) {
  int n = 0;
  for (size_t pos = hay.find(needle); pos != std::string::npos;
       pos = hay.find(needle, pos + needle.size())) {
    ++n;
  }
  return n;
}

// Setup shorthand: the value, or an exception with the status (GoogleTest reports an exception
// thrown in a test body as a failure with its description). Tests check the status explicitly
// where the outcome is the point of the test.
template <typename T>
T ValueOrDie(absl::StatusOr<T> s) {
  if (!s.ok()) throw std::runtime_error(s.status().ToString());
  return *std::move(s);
}

inline absl::Status StatusOf(const absl::Status& s) { return s; }
template <typename T>
absl::Status StatusOf(const absl::StatusOr<T>& s) {
  return s.status();
}

#define TESSEL_ASSERT_OK(expr)                                                           \
  do {                                                                                   \
    const absl::Status tessel_st_ = ::tessel::schedules::test_workloads::StatusOf(expr); \
    ASSERT_TRUE(tessel_st_.ok()) << tessel_st_;                                          \
  } while (0)

inline Schedule NewSchedule(const Workload& w, uint64_t seed = 0) {
  return ValueOrDie(Schedule::Create(w, seed));
}
inline BlockRV BlockOf(Schedule& sch, const std::string& name) {
  return ValueOrDie(sch.GetBlock(name));
}
inline std::vector<LoopRV> LoopsOf(Schedule& sch, BlockRV b) { return ValueOrDie(sch.GetLoops(b)); }
inline std::vector<LoopRV> LoopsOf(Schedule& sch, const std::string& name) {
  return LoopsOf(sch, BlockOf(sch, name));
}

// Layernorm on CUDA with its statistics as one tuple reduction (fuse_reductions: Welford) in
// chunks of `chunk` columns (rfactor), each chunk one block of `threads` threads (a thread takes
// every threads-th column of it), each thread's elements folded in two passes with `two_pass`.
// Then one block a row combines the chunks (32 threads), and Y runs 128 threads a block.
inline Schedule FusedLayernormCuda(const Workload& w, int64_t chunk, int64_t threads,
                                   bool two_pass) {
  Schedule sch = NewSchedule(w);
  auto check = [](const absl::Status& st) {
    if (!st.ok()) throw std::runtime_error(st.ToString());
  };
  check(sch.ComputeInline(BlockOf(sch, "mean")));
  check(sch.ComputeInline(BlockOf(sch, "var")));
  check(sch.FuseReductions({BlockOf(sch, "x_sum"), BlockOf(sch, "sq_sum")}));
  if (two_pass) check(sch.Annotate(BlockOf(sch, "x_sum"), "two_pass", 1));
  std::vector<LoopRV> ks = ValueOrDie(sch.Split(LoopsOf(sch, "x_sum").back(), {-1, chunk}));
  BlockRV rf = ValueOrDie(sch.RFactor(ks[0]));
  std::vector<LoopRV> l = LoopsOf(sch, rf);  // row, chunk, element
  check(sch.Bind(ValueOrDie(sch.Fuse({l[0], l[1]})), "blockIdx.x"));
  check(sch.Bind(ValueOrDie(sch.Split(l[2], {-1, threads}))[1], "threadIdx.x"));
  std::vector<LoopRV> f = LoopsOf(sch, "x_sum");  // row, chunk
  check(sch.Bind(f[0], "blockIdx.x"));
  check(sch.Bind(ValueOrDie(sch.Split(f[1], {-1, 32}))[1], "threadIdx.x"));
  std::vector<LoopRV> y = LoopsOf(sch, "Y");
  std::vector<LoopRV> yb = ValueOrDie(sch.Split(ValueOrDie(sch.Fuse({y[0], y[1]})), {-1, 128}));
  check(sch.Bind(yb[0], "blockIdx.x"));
  check(sch.Bind(yb[1], "threadIdx.x"));
  return sch;
}

// A one-line description of everything a stage holds, to check that a failed primitive left the
// state unchanged.
inline std::string DescribeStage(const Stage& s) {
  std::ostringstream os;
  os << s.name << " buffer=" << s.buffer->name << ":" << MemScopeName(s.buffer->scope) << "[";
  for (int64_t d : s.buffer->shape) os << d << ",";
  os << "] origin=" << s.origin << " output=" << s.is_output
     << " attach=" << static_cast<int>(s.attach.kind) << ":" << s.attach.stage << ":"
     << s.attach.iter << ":" << s.attach.reverse << " init_at=" << s.init_at
     << " reduce=" << (s.reduce ? ReduceOpName(*s.reduce) : "none") << " body=" << ToString(s.body)
     << " iters=";
  for (const IterVar& iv : s.iters) {
    os << iv.var->name << ":" << iv.extent << ":" << iv.reduce << ":" << ForKindName(iv.kind) << ":"
       << ThreadTagName(iv.thread);
    for (const auto& [k, v] : iv.annotations) os << "@" << k << "=" << v;
    os << ",";
  }
  os << " leaves=";
  for (int l : s.leaves) os << l << ",";
  os << " relations=";
  for (const IterRelation& r : s.relations) {
    os << static_cast<int>(r.kind) << ":" << r.parent << ":" << r.outer << ":" << r.inner << ":"
       << r.fused << ":" << r.factor << ",";
  }
  os << " aligns=";
  for (const StorageAlign& a : s.aligns) os << a.axis << ":" << a.factor << ":" << a.offset << ",";
  os << " annotations=";
  for (const auto& [k, v] : s.annotations) os << k << "=" << v << ",";
  return os.str();
}

inline std::string DescribeSchedule(const Schedule& sch) {
  std::string out;
  for (const Stage& s : sch.stages()) out += DescribeStage(s) + "\n";
  return out;
}

}  // namespace tessel::schedules::test_workloads
