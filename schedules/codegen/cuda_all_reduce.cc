// The CUDA printer's all-reduce emitters (CudaCodeGen, cuda_printer.h): warp butterflies, block
// reductions through the shared scratch of the kernel's plan (Kernel::shared), and cluster
// reductions through distributed shared memory, for tuples of values folded with their
// combiner (a plain reduction is a one-component tuple), with the checks of what they support.
// Kept apart from the rest of the printer: a lowering pass is to expand all-reduces into IR
// (issue 16, step 2), after which this file goes.

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

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
    const DType t = r->values[0]->dtype;
    for (const Expr& v : r->values) {
      if (ComputeType(v->dtype) != ComputeType(t)) {
        st =
            absl::InvalidArgumentError(WithKernel(
                what + ": the components of one all-reduce must be computed in one type; reduce "
                       "components of other types in an all-reduce of their own"));
        return;
      }
    }
    if (r->thread == ThreadTag::kClusterX) {
      if (r->extent != k.launch.cluster) {
        st = absl::InvalidArgumentError(
            WithKernel(absl::StrCat(what, ": the kernel's clusters have ", k.launch.cluster,
                                    " CTAs; the extent must equal the cluster size")));
      } else if (t == DType::kBool) {
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
    if (r->extent != block[axis]) {
      st = absl::InvalidArgumentError(WithKernel(
          absl::StrCat(what, ": the block has ", block[axis],
                       " threads on that axis; the extent must equal the block dimension")));
      return;
    }
    if (t == DType::kBool) {
      st = absl::InvalidArgumentError(
          WithKernel(what + ": boolean values cannot be reduced; reduce an integer"));
      return;
    }
    for (const BufferPtr& res : r->results) {
      if (res->scope != MemScope::kLocal || res->AllocatedElements() < 1) {
        st = absl::InvalidArgumentError(
            WithKernel(absl::StrCat(what, ": its result buffer '", res->name,
                                    "' must be a local buffer of at least one element")));
        return;
      }
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

CudaCodeGen::ReduceTuple CudaCodeGen::StartTuple(const AllReduceNode& n) {
  ReduceTuple t;
  t.known = UniformComponents(*n.combiner, n.values);
  for (size_t c = 0; c < n.values.size(); ++c) {
    t.names.push_back(n.values.size() == 1 ? std::string("tessel_red")
                                           : absl::StrCat("tessel_red", c));
  }
  return t;
}

std::string CudaCodeGen::Component(const ReduceTuple& t, size_t c) {
  return t.known[c] ? Print(t.known[c]) : t.names[c];
}

void CudaCodeGen::CombineInto(const AllReduceNode& n, ReduceTuple* acc,
                              const std::vector<std::string>& other,
                              const std::vector<Expr>& other_known) {
  const Combiner& c = *n.combiner;
  const DType t = n.values[0]->dtype;
  const size_t k = acc->names.size();
  if (c.op && !acc->known[0]) {
    Line(absl::StrCat(acc->names[0], " = ", Combine(*c.op, t, acc->names[0], other[0]), ";"));
    return;
  }
  // The other tuple first (it may read the accumulators), then the combiner's temporaries and
  // results, then the accumulators. Uniform components are constants on both sides.
  const std::string type = ComputeType(t);
  std::vector<Expr> lhs, rhs;
  OpenBlock("");
  for (size_t i = 0; i < k; ++i) {
    if (acc->known[i]) {
      var_override_[c.lhs[i].get()] = {Print(acc->known[i]), kPrecPrimary};
      var_override_[c.rhs[i].get()] = {Print(other_known[i]), kPrecPrimary};
    } else {
      Line(absl::StrCat("const ", type, " tessel_o", i, " = ", other[i], ";"));
      var_override_[c.lhs[i].get()] = {acc->names[i], kPrecPrimary};
      var_override_[c.rhs[i].get()] = {absl::StrCat("tessel_o", i), kPrecPrimary};
    }
    lhs.push_back(acc->known[i] ? acc->known[i] : Expr(c.lhs[i]));
    rhs.push_back(acc->known[i] ? other_known[i] : Expr(c.rhs[i]));
  }
  for (const auto& [v, e] : c.lets) {
    const std::string name = absl::StrCat("tessel_let_", v->name);
    Line(absl::StrCat("const ", ComputeType(v->dtype), " ", name, " = ", Print(e), ";"));
    var_override_[v.get()] = {name, kPrecPrimary};
  }
  for (size_t i = 0; i < k; ++i) {
    if (!acc->known[i]) {
      Line(absl::StrCat("const ", type, " tessel_c", i, " = ", Print(c.combine[i]), ";"));
    }
  }
  for (size_t i = 0; i < k; ++i) {
    if (!acc->known[i]) Line(absl::StrCat(acc->names[i], " = tessel_c", i, ";"));
  }
  for (size_t i = 0; i < k; ++i) {
    var_override_.erase(c.lhs[i].get());
    var_override_.erase(c.rhs[i].get());
  }
  for (const auto& [v, e] : c.lets) var_override_.erase(v.get());
  CloseBlock();
  const std::vector<Expr> combined = CombineValues(c, lhs, rhs);
  for (size_t i = 0; i < k; ++i) {
    if (acc->known[i]) acc->known[i] = combined[i];
  }
}

void CudaCodeGen::StoreReduceResults(const AllReduceNode& n, const ReduceTuple& red) {
  for (size_t i = 0; i < red.names.size(); ++i) {
    Line(absl::StrCat(BufferName(n.results[i].get()),
                      "[0] = ", ComputeToStorage(n.results[i]->dtype, Component(red, i)), ";"));
  }
}

void CudaCodeGen::EmitAllReduce(const AllReduceNode& n) {
  if (n.thread == ThreadTag::kClusterX) {
    EmitClusterAllReduce(n);
    return;
  }
  // Checked by CheckAllReduces: a thread axis, extent == block dimension, a supported extent.
  const auto& block = kernel_->launch.block;
  const int axis = ThreadAxis(n.thread);
  const int64_t e = n.extent;
  const size_t k = n.values.size();
  const std::string type = ComputeType(n.values[0]->dtype);
  ReduceTuple red = StartTuple(n);
  // The components exchanged through the scratch (the uniform ones are not): their planes.
  std::vector<size_t> plane_of(k, 0);
  size_t planes = 0;
  for (size_t c = 0; c < k; ++c) {
    if (!red.known[c]) plane_of[c] = planes++;
  }
  // Component c's scratch entry `i` ("i" an index expression) in a scratch of `plane` entries a
  // component.
  auto entry = [&](const std::string& scratch, size_t c, int64_t plane, const std::string& i) {
    const bool simple = i.find_first_of(" +>") == std::string::npos;
    const size_t p = plane_of[c];
    return p == 0 ? absl::StrCat(scratch, "[", i, "]")
                  : absl::StrCat(scratch, "[", p * plane, " + ", simple ? i : "(" + i + ")", "]");
  };
  auto each = [&](const std::function<std::string(size_t)>& f) {
    std::vector<std::string> out;
    for (size_t c = 0; c < k; ++c) out.push_back(red.known[c] ? "" : f(c));
    return out;
  };
  auto declare = [&](const std::function<std::string(size_t)>& value) {
    for (size_t c = 0; c < k; ++c) {
      if (!red.known[c]) Line(absl::StrCat(type, " ", red.names[c], " = ", value(c), ";"));
    }
  };
  OpenBlock("", absl::StrCat("  // allreduce_", n.combiner->name, " over ", ThreadTagName(n.thread),
                             " (", e, " threads)"));
  if (axis == 0) {
    declare([&](size_t c) { return Print(n.values[c]); });
    // Butterflies within each group of min(e, 32) lanes: every lane ends with the same value.
    const int64_t lanes = std::min<int64_t>(e, 32);
    const std::string mask = lanes == 32 && e > 32 ? "0xffffffffu" : "tessel_mask";
    if (e <= 32 && e > 1) Line("const unsigned tessel_mask = " + LaneMask(e) + ";");
    for (int64_t off = lanes / 2; off >= 1; off /= 2) {
      const std::vector<Expr> alike = red.known;  // every lane's uniform components
      CombineInto(n, &red, each([&](size_t c) {
                    return absl::StrCat("__shfl_xor_sync(", mask, ", ", red.names[c], ", ", off,
                                        lanes == 32 ? "" : absl::StrCat(", ", lanes), ")");
                  }),
                  alike);
    }
    if (e > 32) {
      // One partial per warp through shared memory, then every thread combines its row's
      // partials in the same order.
      const std::string scratch = Scratch(red_scratch_, type);
      const int64_t warps = e / 32;
      const int64_t plane = block[1] * block[2] * warps;
      const std::string row = WarpRowPrefix(warps);
      const std::string warp = row.empty() ? "threadIdx.x >> 5" : "(threadIdx.x >> 5)";
      Line("__syncthreads();  // earlier readers of the scratch are done");
      OpenBlock("if ((threadIdx.x & 31) == 0)");
      for (size_t c = 0; c < k; ++c) {
        if (!red.known[c]) {
          Line(absl::StrCat(entry(scratch, c, plane, row + warp), " = ", red.names[c], ";"));
        }
      }
      CloseBlock();
      Line("__syncthreads();");
      if (n.combiner->op && !red.known[0]) {
        for (size_t c = 0; c < k; ++c) {
          Line(absl::StrCat(red.names[c], " = ", entry(scratch, c, plane, row + "0"), ";"));
        }
        Line("#pragma unroll");
        OpenBlock(absl::StrCat("for (int tessel_w = 1; tessel_w < ", warps, "; ++tessel_w)"));
        CombineInto(n, &red,
                    each([&](size_t c) { return entry(scratch, c, plane, row + "tessel_w"); }),
                    red.known);
        CloseBlock();
      } else {
        CombineWarpPartials(n, &red, warps, [&](size_t c, int64_t w) {
          return entry(scratch, c, plane, absl::StrCat(row, w));
        });
      }
    }
    StoreReduceResults(n, red);
    CloseBlock();
    return;
  }
  // threadIdx.y / threadIdx.z: every thread writes its values, then combines its group's values.
  const std::string scratch = Scratch(red_scratch_, type);
  const int64_t plane = kernel_->launch.threads_per_block();
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
  for (size_t c = 0; c < k; ++c) {
    if (red.known[c]) continue;
    Line(absl::StrCat(entry(scratch, c, plane, LinearThreadIndex()), " = ", Print(n.values[c]),
                      ";"));
  }
  Line("__syncthreads();");
  Line("const int tessel_base = " + base + ";");
  declare([&](size_t c) { return entry(scratch, c, plane, "tessel_base"); });
  if (red.known == std::vector<Expr>(k)) {
    OpenBlock(absl::StrCat("for (int tessel_k = 1; tessel_k < ", e, "; ++tessel_k)"));
    CombineInto(n, &red, each([&](size_t c) {
                  return entry(scratch, c, plane,
                               absl::StrCat("tessel_base + tessel_k * ", stride));
                }),
                red.known);
    CloseBlock();
  } else {
    // Uniform components change with every step: the steps unrolled, each with its constants.
    const std::vector<Expr> thread_known = red.known;  // every thread's alike
    for (int64_t i = 1; i < e; ++i) {
      CombineInto(n, &red, each([&](size_t c) {
                    return entry(scratch, c, plane, absl::StrCat("tessel_base + ", i * stride));
                  }),
                  thread_known);
    }
  }
  StoreReduceResults(n, red);
  CloseBlock();
}

void CudaCodeGen::CombineWarpPartials(const AllReduceNode& n, ReduceTuple* red, int64_t warps,
                                      const std::function<std::string(size_t, int64_t)>& entry) {
  // In the same order in every thread: independent chains over consecutive warps, then the chains
  // pairwise, so that the combinations form a short dependent chain while only a few partials are
  // held at a time (registers).
  const size_t k = red->names.size();
  const std::string type = ComputeType(n.values[0]->dtype);
  const std::vector<Expr> warp_known = red->known;  // every warp's uniform components alike
  // Chains pay where a combination has a long latency (a Welford weight's division, online
  // softmax's exponential: 1.066 against 1.044 ms for softmax (4096, 65536) online on an H100);
  // otherwise one chain, in warp order, holds the fewest registers (the 1024-thread grid
  // layernorm spilled with four).
  const int64_t chains = CombineIsSlow(*n.combiner, warp_known) ? std::min<int64_t>(4, warps) : 1;
  std::vector<ReduceTuple> level;
  std::vector<int64_t> begin, end;
  for (int64_t j = 0; j < chains; ++j) {
    begin.push_back(j * warps / chains);
    end.push_back((j + 1) * warps / chains);
    ReduceTuple t;
    t.known = warp_known;
    for (size_t c = 0; c < k; ++c) {
      t.names.push_back(absl::StrCat("tessel_p", j, "_", c));
      if (!t.known[c]) {
        Line(absl::StrCat(type, " ", t.names.back(), " = ", entry(c, begin[j]), ";"));
      }
    }
    level.push_back(std::move(t));
  }
  for (int64_t i = 1; i < warps; ++i) {
    for (int64_t j = 0; j < chains; ++j) {
      if (begin[j] + i >= end[j]) continue;
      std::vector<std::string> other;
      for (size_t c = 0; c < k; ++c) other.push_back(warp_known[c] ? "" : entry(c, begin[j] + i));
      CombineInto(n, &level[j], other, warp_known);
    }
  }
  while (level.size() > 1) {
    std::vector<ReduceTuple> next;
    for (size_t i = 0; i + 1 < level.size(); i += 2) {
      std::vector<std::string> other;
      for (size_t c = 0; c < k; ++c) {
        other.push_back(level[i + 1].known[c] ? "" : level[i + 1].names[c]);
      }
      CombineInto(n, &level[i], other, level[i + 1].known);
      next.push_back(std::move(level[i]));
    }
    if (level.size() % 2 == 1) next.push_back(std::move(level.back()));
    level = std::move(next);
  }
  for (size_t c = 0; c < k; ++c) {
    if (!level[0].known[c]) Line(absl::StrCat(red->names[c], " = ", level[0].names[c], ";"));
  }
  red->known = level[0].known;
}

void CudaCodeGen::EmitClusterAllReduce(const AllReduceNode& n) {
  // Every thread of every CTA runs this (the values are the same in all threads of a CTA): thread
  // 0 publishes the CTA's values in its shared slots, the cluster synchronizes, every thread
  // reads the C CTAs' slots in rank order through distributed shared memory (so every CTA
  // combines the same values in the same order), and the cluster synchronizes again before a
  // slot may be rewritten or a CTA exit while others still read it. Uniform components are not
  // exchanged: the ranks are combined one by one, unrolled, each with its constants.
  const DType t = n.values[0]->dtype;
  const size_t k = n.values.size();
  const std::string type = ComputeType(t);
  const std::string slot = Scratch(cluster_scratch_, type);
  ReduceTuple red = StartTuple(n);
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
  auto v = [&](size_t c) { return k == 1 ? std::string("tessel_v") : absl::StrCat("tessel_v", c); };
  // Slot of each exchanged component.
  std::vector<size_t> slot_of(k, 0);
  size_t slots = 0;
  for (size_t c = 0; c < k; ++c) {
    if (!red.known[c]) slot_of[c] = slots++;
  }
  OpenBlock("", absl::StrCat("  // allreduce_", n.combiner->name, " over cluster.x (", n.extent,
                             " CTAs, distributed shared memory)"));
  OpenBlock(absl::StrCat("if (", LinearThreadIndex(), " == 0)"));
  for (size_t c = 0; c < k; ++c) {
    if (!red.known[c]) {
      Line(absl::StrCat(slot, "[", slot_of[c], "] = ", Print(n.values[c]), ";"));
    }
  }
  CloseBlock();
  Line(sync);
  Line(absl::StrCat("const unsigned tessel_local = static_cast<unsigned>(__cvta_generic_to_shared(",
                    slot, "));"));
  // The exchanged components of rank `r` ("r" an expression) into tessel_v*.
  auto load_rank = [&](const std::string& r) {
    Line("unsigned tessel_remote;");
    Line(
        "asm volatile(\"mapa.shared::cluster.u32 %0, %1, %2;\" : \"=r\"(tessel_remote) : "
        "\"r\"(tessel_local), \"r\"(" +
        r + "));");
    std::vector<std::string> loaded;
    for (size_t c = 0; c < k; ++c) {
      if (red.known[c]) {
        loaded.push_back("");
        continue;
      }
      Line(absl::StrCat(type, " ", v(c), ";"));
      const std::string address =
          slot_of[c] == 0 ? "tessel_remote"
                          : absl::StrCat("tessel_remote + ", slot_of[c] * DTypeBytes(t), "u");
      Line(absl::StrCat("asm volatile(\"", ld, "\" : \"", constraint, "\"(", v(c), ") : \"r\"(",
                        address, ") : \"memory\");"));
      loaded.push_back(v(c));
    }
    return loaded;
  };
  if (n.combiner->op && !red.known[0]) {
    Line(absl::StrCat(type, " ", red.names[0], ";"));
    Line("#pragma unroll");
    OpenBlock(absl::StrCat("for (int tessel_r = 0; tessel_r < ", n.extent, "; ++tessel_r)"));
    load_rank("tessel_r");
    Line(absl::StrCat(red.names[0], " = tessel_r == 0 ? tessel_v : ",
                      Combine(*n.combiner->op, t, red.names[0], "tessel_v"), ";"));
    CloseBlock();
  } else {
    const std::vector<Expr> cta_known = red.known;  // every CTA's uniform components alike
    for (size_t c = 0; c < k; ++c) {
      if (!red.known[c]) Line(absl::StrCat(type, " ", red.names[c], ";"));
    }
    for (int64_t r = 0; r < n.extent; ++r) {
      OpenBlock("");
      const std::vector<std::string> loaded = load_rank(absl::StrCat(r));
      if (r == 0) {
        for (size_t c = 0; c < k; ++c) {
          if (!red.known[c]) Line(absl::StrCat(red.names[c], " = ", loaded[c], ";"));
        }
      } else {
        CombineInto(n, &red, loaded, cta_known);
      }
      CloseBlock();
    }
  }
  Line(sync);
  StoreReduceResults(n, red);
  CloseBlock();
}

}  // namespace tessel::schedules::codegen
