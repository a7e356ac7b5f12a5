// The CUDA printer's all-reduce emitters (CudaCodeGen, cuda_printer.h): warp butterflies, block
// reductions through the shared scratch of the kernel's plan (Kernel::shared), the centred
// (sum, squares) pair, and cluster reductions through distributed shared memory, with the checks
// of what they support. Kept apart from the rest of the printer: a lowering pass is to expand
// all-reduces into IR (issue 16, step 2), after which this file goes.

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>

#include "absl/strings/str_cat.h"
#include "schedules/codegen/cuda_printer.h"
#include "schedules/ir/stmt.h"

namespace tessel::schedules::codegen {
namespace {

std::string Hex32(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "0x%08xu", v);
  return buf;
}

}  // namespace

absl::Status CudaCodeGen::CheckAllReduces(const Kernel& k) {
  absl::Status st;
  const auto& block = k.launch.block;
  WalkStmt(k.body, [&](const Stmt& s) {
    if (!st.ok()) return;
    const auto* r = As<AllReduceNode>(s);
    if (r == nullptr) return;
    const std::string what =
        absl::StrCat("AllReduce over ", ThreadTagName(r->thread), " with extent ", r->extent);
    if (r->thread == ThreadTag::kClusterX) {
      if (r->extent != k.launch.cluster) {
        st = absl::InvalidArgumentError(
            WithKernel(absl::StrCat(what, ": the kernel's clusters have ", k.launch.cluster,
                                    " CTAs; the extent must equal the cluster size")));
      } else if (r->value->dtype == DType::kBool) {
        st = absl::InvalidArgumentError(
            WithKernel(what + ": boolean values cannot be reduced; reduce an integer"));
      }
      return;
    }
    if (!IsThreadTag(r->thread)) {
      st = absl::InvalidArgumentError(WithKernel(
          absl::StrCat(what,
                       ": cross-thread reductions combine the threads of threadIdx.x, .y or .z; "
                       "bind the reduction loop to a thread axis")));
      return;
    }
    const int axis = ThreadAxis(r->thread);
    if (r->centered() &&
        (axis != 0 || (r->value->dtype != DType::kFloat32 && r->value->dtype != DType::kFloat64) ||
         r->m2_result->scope != MemScope::kLocal)) {
      st = absl::InvalidArgumentError(
          WithKernel(what + ": a centred (sum, squares) reduction combines f32 or f64 values "
                            "across threadIdx.x into local results; bind its loop to "
                            "threadIdx.x"));
      return;
    }
    if (r->extent != block[axis]) {
      st = absl::InvalidArgumentError(WithKernel(
          absl::StrCat(what, ": the block has ", block[axis],
                       " threads on that axis; the extent must equal the block dimension")));
      return;
    }
    if (r->value->dtype == DType::kBool) {
      st = absl::InvalidArgumentError(
          WithKernel(what + ": boolean values cannot be reduced; reduce an integer"));
      return;
    }
    if (r->result->scope != MemScope::kLocal || r->result->AllocatedElements() < 1) {
      st = absl::InvalidArgumentError(
          WithKernel(absl::StrCat(what, ": its result buffer '", r->result->name,
                                  "' must be a local buffer of at least one element")));
      return;
    }
    const int64_t e = r->extent;
    if (axis == 0) {
      const bool pow2 = e >= 1 && e <= 32 && (e & (e - 1)) == 0;
      if (!pow2 && e % 32 != 0) {
        st = absl::UnimplementedError(WithKernel(absl::StrCat(
            what,
            " is not supported: threadIdx.x reductions need a power of two up to 32 "
            "or a multiple of 32 threads; split the reduction loop so that threadIdx.x "
            "gets such an extent")));
        return;
      }
    }
  });
  return st;
}
std::string CudaCodeGen::LaneMask(int64_t lanes) const {
  if (lanes >= 32) return Hex32(0xffffffffu);
  const auto& block = kernel_->launch.block;
  if (block[1] * block[2] == 1) return Hex32((1u << lanes) - 1);
  return absl::StrCat("(", Hex32((1u << lanes) - 1), " << ((", LinearThreadIndex(), ") & ",
                      32 - lanes, "))");
}

std::string CudaCodeGen::WarpRowPrefix(int64_t warps) const {
  const auto& block = kernel_->launch.block;
  if (block[2] > 1) {
    return absl::StrCat("(threadIdx.y + ", block[1], " * threadIdx.z) * ", warps, " + ");
  }
  if (block[1] > 1) return absl::StrCat("threadIdx.y * ", warps, " + ");
  return "";
}

std::string CudaCodeGen::LinearThreadIndex() const {
  const auto& b = kernel_->launch.block;
  std::string s = "threadIdx.x";
  if (b[1] > 1) absl::StrAppend(&s, " + ", b[0], " * threadIdx.y");
  if (b[2] > 1) absl::StrAppend(&s, " + ", b[0] * b[1], " * threadIdx.z");
  return s;
}

std::string CudaCodeGen::Combine(ReduceOp op, DType t, const std::string& a, const std::string& b) {
  switch (op) {
    case ReduceOp::kSum:
      return a + " + " + b;
    case ReduceOp::kMax:
      return MinMax(true, t, a, b);
    case ReduceOp::kMin:
      return MinMax(false, t, a, b);
  }
  return a;
}

void CudaCodeGen::EmitAllReduce(const AllReduceNode& n) {
  if (n.thread == ThreadTag::kClusterX) {
    EmitClusterAllReduce(n);
    return;
  }
  if (n.centered()) {
    EmitCenteredAllReduce(n);
    return;
  }
  // Checked by CheckAllReduces: a thread axis, extent == block dimension, a supported extent.
  const auto& block = kernel_->launch.block;
  const int axis = ThreadAxis(n.thread);
  const int64_t e = n.extent;
  const DType t = n.value->dtype;
  const std::string type = ComputeType(t);
  const std::string value = Print(n.value);
  const std::string result = absl::StrCat(BufferName(n.result.get()), "[0]");
  const std::string red = "tessel_red";
  auto store_result = [&] { Line(result + " = " + ComputeToStorage(n.result->dtype, red) + ";"); };
  OpenBlock("", absl::StrCat("  // allreduce_", ReduceOpName(n.op), " over ",
                             ThreadTagName(n.thread), " (", e, " threads)"));
  if (axis == 0 && e <= 32) {
    // Butterfly within each group of e lanes: every lane ends with the same value.
    Line(absl::StrCat(type, " ", red, " = ", value, ";"));
    if (e > 1) {
      Line("const unsigned tessel_mask = " + LaneMask(e) + ";");
      for (int64_t off = e / 2; off >= 1; off /= 2) {
        Line(absl::StrCat(red, " = ",
                          Combine(n.op, t, red,
                                  absl::StrCat("__shfl_xor_sync(tessel_mask, ", red, ", ", off,
                                               e == 32 ? "" : absl::StrCat(", ", e), ")")),
                          ";"));
      }
    }
    store_result();
    CloseBlock();
    return;
  }
  const std::string scratch = Scratch(red_scratch_, type);
  if (axis == 0) {
    // Warp butterflies, one partial per warp through shared memory, then every thread combines
    // its row's partials in the same order.
    const int64_t warps = e / 32;
    const std::string row = WarpRowPrefix(warps);
    const std::string warp = row.empty() ? "threadIdx.x >> 5" : "(threadIdx.x >> 5)";
    Line(absl::StrCat(type, " ", red, " = ", value, ";"));
    for (int off = 16; off >= 1; off /= 2) {
      Line(absl::StrCat(
          red, " = ",
          Combine(n.op, t, red, absl::StrCat("__shfl_xor_sync(0xffffffffu, ", red, ", ", off, ")")),
          ";"));
    }
    Line("__syncthreads();  // earlier readers of the scratch are done");
    OpenBlock("if ((threadIdx.x & 31) == 0)");
    Line(absl::StrCat(scratch, "[", row, warp, "] = ", red, ";"));
    CloseBlock();
    Line("__syncthreads();");
    Line(absl::StrCat(red, " = ", scratch, "[", row, "0];"));
    Line("#pragma unroll");
    OpenBlock(absl::StrCat("for (int tessel_w = 1; tessel_w < ", warps, "; ++tessel_w)"));
    Line(absl::StrCat(red, " = ",
                      Combine(n.op, t, red, absl::StrCat(scratch, "[", row, "tessel_w]")), ";"));
    CloseBlock();
    store_result();
    CloseBlock();
    return;
  }
  // threadIdx.y / threadIdx.z: every thread writes its value, then combines its group's values.
  std::string base;
  int64_t stride = 0;
  if (axis == 1) {
    base = block[2] > 1 ? absl::StrCat("threadIdx.x + ", block[0] * block[1], " * threadIdx.z")
                        : "threadIdx.x";
    stride = block[0];
  } else {
    base =
        block[1] > 1 ? absl::StrCat("threadIdx.x + ", block[0], " * threadIdx.y") : "threadIdx.x";
    stride = block[0] * block[1];
  }
  Line("__syncthreads();  // earlier readers of the scratch are done");
  Line(absl::StrCat(scratch, "[", LinearThreadIndex(), "] = ", value, ";"));
  Line("__syncthreads();");
  Line("const int tessel_base = " + base + ";");
  Line(absl::StrCat(type, " ", red, " = ", scratch, "[tessel_base];"));
  OpenBlock(absl::StrCat("for (int tessel_k = 1; tessel_k < ", e, "; ++tessel_k)"));
  Line(absl::StrCat(
      red, " = ",
      Combine(n.op, t, red, absl::StrCat(scratch, "[tessel_base + tessel_k * ", stride, "]")),
      ";"));
  CloseBlock();
  store_result();
  CloseBlock();
}

void CudaCodeGen::EmitCenteredAllReduce(const AllReduceNode& n) {
  // Groups of threads hold (mean, squares about it, count); two groups combine as
  //   n = na + nb, mean = (ma na + mb nb) / n, squares = qa + qb + (mb - ma)^2 na nb / n
  // (Chan et al.), which gives the same bits in both partners of a butterfly. With a constant
  // count every group of a level has the same count: mean = (ma + mb) / 2 and the last term is
  // (mb - ma)^2 n / 2 for groups of n. Then one mean, squares and count per warp go through
  // shared memory, and every thread combines its row's warps in the same order.
  const auto& block = kernel_->launch.block;
  const int64_t e = n.extent;
  const std::string type = ComputeType(n.value->dtype);
  const auto* fixed = As<FloatImmNode>(n.count);
  auto lit = [&](double v) { return codegen::FloatLiteral(v, n.value->dtype); };
  OpenBlock("", absl::StrCat("  // allreduce_centered over threadIdx.x (", e, " threads)"));
  const std::string count = Print(n.count);
  Line(absl::StrCat(type, " tessel_n = ", count, ";"));
  Line(absl::StrCat(type, " tessel_m = tessel_n > ", lit(0), " ? (", Print(n.value),
                    ") / tessel_n : ", lit(0), ";"));
  Line(absl::StrCat(type, " tessel_q = ", Print(n.m2), ";"));
  // One combination of (tessel_m, tessel_q, tessel_n) with (m, q, c); `c_per_group` the count of
  // each group when every group has the same, else 0.
  auto combine = [&](const std::string& m, const std::string& q, const std::string& c,
                     double c_per_group) {
    Line(absl::StrCat("const ", type, " tessel_d = ", m, " - tessel_m;"));
    if (c_per_group > 0) {
      Line(absl::StrCat("tessel_m = ", lit(0.5), " * (tessel_m + ", m, ");"));
      Line(absl::StrCat("tessel_q = tessel_q + ", q, " + tessel_d * tessel_d * ",
                        lit(0.5 * c_per_group), ";"));
      Line(absl::StrCat("tessel_n = tessel_n + ", c, ";"));
      return;
    }
    Line(absl::StrCat("const ", type, " tessel_t = tessel_n + ", c, ";"));
    OpenBlock(absl::StrCat("if (tessel_t > ", lit(0), ")"));
    Line(absl::StrCat("tessel_q = tessel_q + ", q, " + tessel_d * tessel_d * (tessel_n * ", c,
                      " / tessel_t);"));
    Line(absl::StrCat("tessel_m = (tessel_m * tessel_n + ", m, " * ", c, ") / tessel_t;"));
    CloseBlock();
    Line("tessel_n = tessel_t;");
  };
  const int64_t lanes = std::min<int64_t>(e, 32);
  if (lanes > 1) Line("const unsigned tessel_mask = " + LaneMask(lanes) + ";");
  double group = fixed != nullptr ? fixed->value : 0;
  for (int64_t off = 1; off < lanes; off *= 2, group *= 2) {
    OpenBlock("");
    const std::string width = lanes == 32 ? "" : absl::StrCat(", ", lanes);
    for (const char* v : {"m", "q", "n"}) {
      if (fixed != nullptr && std::string(v) == "n") continue;
      Line(absl::StrCat("const ", type, " tessel_", v, "2 = __shfl_xor_sync(tessel_mask, tessel_",
                        v, ", ", off, width, ");"));
    }
    combine("tessel_m2", "tessel_q2", fixed != nullptr ? "tessel_n" : "tessel_n2", group);
    CloseBlock();
  }
  if (e > 32) {
    const std::string scratch = Scratch(red_scratch_, type);
    const int64_t warps = e / 32;
    const std::string row = WarpRowPrefix(warps);
    const int64_t plane = block[1] * block[2] * warps;  // means, then squares, then counts
    auto at = [&](int64_t p, const std::string& w) {
      return absl::StrCat(scratch, "[", p > 0 ? absl::StrCat(p * plane, " + ") : "", row, w, "]");
    };
    Line("__syncthreads();  // earlier readers of the scratch are done");
    OpenBlock("if ((threadIdx.x & 31) == 0)");
    Line(at(0, "(threadIdx.x >> 5)") + " = tessel_m;");
    Line(at(1, "(threadIdx.x >> 5)") + " = tessel_q;");
    if (fixed == nullptr) Line(at(2, "(threadIdx.x >> 5)") + " = tessel_n;");
    CloseBlock();
    Line("__syncthreads();");
    Line("tessel_m = " + at(0, "0") + ";");
    Line("tessel_q = " + at(1, "0") + ";");
    if (fixed == nullptr) {
      Line("tessel_n = " + at(2, "0") + ";");
      Line("#pragma unroll");
      OpenBlock(absl::StrCat("for (int tessel_w = 1; tessel_w < ", warps, "; ++tessel_w)"));
      combine(at(0, "tessel_w"), at(1, "tessel_w"), at(2, "tessel_w"), 0);
      CloseBlock();
    } else {
      // The warps in order, each of `group` elements, with constant weights: after w warps the
      // next one weighs 1 / (w + 1) in the mean and w / (w + 1) * group in the squares.
      for (int64_t w = 1; w < warps; ++w) {
        OpenBlock("");
        const std::string i = absl::StrCat(w);
        Line(absl::StrCat("const ", type, " tessel_d = ", at(0, i), " - tessel_m;"));
        Line(absl::StrCat("tessel_m = tessel_m + tessel_d * ",
                          lit(1.0 / static_cast<double>(w + 1)), ";"));
        Line(absl::StrCat("tessel_q = tessel_q + ", at(1, i), " + tessel_d * tessel_d * ",
                          lit(group * static_cast<double>(w) / static_cast<double>(w + 1)), ";"));
        CloseBlock();
      }
      Line(absl::StrCat("tessel_n = ", lit(group * static_cast<double>(warps)), ";"));
    }
  }
  Line(absl::StrCat(BufferName(n.result.get()),
                    "[0] = ", ComputeToStorage(n.result->dtype, "tessel_m * tessel_n"), ";"));
  Line(absl::StrCat(BufferName(n.m2_result.get()),
                    "[0] = ", ComputeToStorage(n.m2_result->dtype, "tessel_q"), ";"));
  CloseBlock();
}

void CudaCodeGen::EmitClusterAllReduce(const AllReduceNode& n) {
  // Every thread of every CTA runs this (the value is the same in all threads of a CTA): thread
  // 0 publishes the CTA's value in its shared slot, the cluster synchronizes, every thread reads
  // the C slots in rank order through distributed shared memory (so every CTA combines the same
  // values in the same order), and the cluster synchronizes again before a slot may be rewritten
  // or a CTA exit while others still read it.
  const DType t = n.value->dtype;
  const std::string type = ComputeType(t);
  const std::string slot = Scratch(cluster_scratch_, type);
  const std::string red = "tessel_red";
  const char* ld = type == "float"    ? "ld.shared::cluster.f32 %0, [%1];"
                   : type == "double" ? "ld.shared::cluster.f64 %0, [%1];"
                   : type == "int"    ? "ld.shared::cluster.s32 %0, [%1];"
                                      : "ld.shared::cluster.s64 %0, [%1];";
  const char* constraint = type == "float"    ? "=f"
                           : type == "double" ? "=d"
                           : type == "int"    ? "=r"
                                              : "=l";
  const std::string sync =
      "asm volatile(\"barrier.cluster.arrive.release.aligned;\\n\\t"
      "barrier.cluster.wait.acquire.aligned;\" ::: \"memory\");";
  OpenBlock("", absl::StrCat("  // allreduce_", ReduceOpName(n.op), " over cluster.x (", n.extent,
                             " CTAs, distributed shared memory)"));
  OpenBlock(absl::StrCat("if (", LinearThreadIndex(), " == 0)"));
  Line(absl::StrCat(slot, "[0] = ", Print(n.value), ";"));
  CloseBlock();
  Line(sync);
  Line(absl::StrCat("const unsigned tessel_local = static_cast<unsigned>(__cvta_generic_to_shared(",
                    slot, "));"));
  Line(absl::StrCat(type, " ", red, ";"));
  Line("#pragma unroll");
  OpenBlock(absl::StrCat("for (int tessel_r = 0; tessel_r < ", n.extent, "; ++tessel_r)"));
  Line("unsigned tessel_remote;");
  Line(
      "asm volatile(\"mapa.shared::cluster.u32 %0, %1, %2;\" : \"=r\"(tessel_remote) : "
      "\"r\"(tessel_local), \"r\"(tessel_r));");
  Line(absl::StrCat(type, " tessel_v;"));
  Line(absl::StrCat("asm volatile(\"", ld, "\" : \"", constraint,
                    "\"(tessel_v) : \"r\"(tessel_remote) : \"memory\");"));
  Line(absl::StrCat(red, " = tessel_r == 0 ? tessel_v : ", Combine(n.op, t, red, "tessel_v"), ";"));
  CloseBlock();
  Line(sync);
  Line(absl::StrCat(BufferName(n.result.get()), "[0] = ", ComputeToStorage(n.result->dtype, red),
                    ";"));
  CloseBlock();
}

}  // namespace tessel::schedules::codegen
