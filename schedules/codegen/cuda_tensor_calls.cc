// The CUDA printer's tensor-core calls (lower_tensor_intrinsics leaves them; ir/tensor_intrin.h):
// each call prints as a helper function with the operands' addresses, and the helpers the
// program uses are defined once before its kernels, each a few lines of inline PTX.

#include <set>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "schedules/codegen/cuda_printer.h"
#include "schedules/ir/tensor_intrin.h"

namespace tessel::schedules::codegen {

std::string CudaCodeGen::TensorCall(const CallNode& n) {
  tensor_calls_.insert(n.name);
  std::string out = n.name + "(";
  for (size_t i = 0; i < n.args.size(); ++i) {
    const Expr& a = n.args[i];
    std::string arg;
    if (const auto* l = As<LoadNode>(a)) {
      arg = "&" + Access(l->buffer, l->indices);
    } else {
      arg = Print(a);
    }
    absl::StrAppend(&out, i ? ", " : "", arg);
  }
  return out + ")";
}

namespace {

std::string MmaHelper(const std::string& name) {
  // tessel_mma_m16n8k16_<acc>_<ab>
  const bool acc16 = absl::StrContains(name, "_f16_");
  const std::string ab = absl::EndsWith(name, "bf16") ? "bf16" : "f16";
  if (acc16) {
    return absl::StrCat(
        "__device__ __forceinline__ void ", name, "(void* c, const void* a, const void* b) {\n",
        "  unsigned* C = static_cast<unsigned*>(c);\n",
        "  const unsigned* A = static_cast<const unsigned*>(a);\n",
        "  const unsigned* B = static_cast<const unsigned*>(b);\n",
        "  asm volatile(\"mma.sync.aligned.m16n8k16.row.col.f16.", ab, ".", ab,
        ".f16 {%0, %1}, {%2, %3, %4, %5}, {%6, %7}, {%0, %1};\"\n",
        "               : \"+r\"(C[0]), \"+r\"(C[1])\n",
        "               : \"r\"(A[0]), \"r\"(A[1]), \"r\"(A[2]), \"r\"(A[3]), \"r\"(B[0]), "
        "\"r\"(B[1]));\n}\n");
  }
  return absl::StrCat(
      "__device__ __forceinline__ void ", name, "(float* c, const void* a, const void* b) {\n",
      "  const unsigned* A = static_cast<const unsigned*>(a);\n",
      "  const unsigned* B = static_cast<const unsigned*>(b);\n",
      "  asm volatile(\"mma.sync.aligned.m16n8k16.row.col.f32.", ab, ".", ab,
      ".f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\"\n",
      "               : \"+f\"(c[0]), \"+f\"(c[1]), \"+f\"(c[2]), \"+f\"(c[3])\n",
      "               : \"r\"(A[0]), \"r\"(A[1]), \"r\"(A[2]), \"r\"(A[3]), \"r\"(B[0]), "
      "\"r\"(B[1]));\n}\n");
}

std::string LdmatrixHelper(const std::string& name) {
  // tessel_ldmatrix_x<2|4>[_trans]
  const bool x4 = absl::StrContains(name, "_x4");
  const std::string trans = absl::EndsWith(name, "_trans") ? ".trans" : "";
  std::string regs = x4 ? "{%0, %1, %2, %3}, [%4]" : "{%0, %1}, [%2]";
  std::string outs =
      x4 ? "\"=r\"(d[0]), \"=r\"(d[1]), \"=r\"(d[2]), \"=r\"(d[3])" : "\"=r\"(d[0]), \"=r\"(d[1])";
  return absl::StrCat(
      "__device__ __forceinline__ void ", name, "(void* dst, const void* src) {\n",
      "  unsigned* d = static_cast<unsigned*>(dst);\n",
      "  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(src));\n",
      "  asm volatile(\"ldmatrix.sync.aligned.m8n8.x", x4 ? 4 : 2, trans, ".shared.b16 ", regs,
      ";\"\n               : ", outs, "\n               : \"r\"(s));\n}\n");
}

// tessel_cp_async_<bytes>: (dst, src, valid): the bytes copied, or zeros where !valid.
std::string CpAsyncHelper(const std::string& name, int64_t bytes) {
  const char* cache = bytes == 16 ? "cg" : "ca";
  return absl::StrCat(
      "__device__ __forceinline__ void ", name, "(void* dst, const void* src, bool valid) {\n",
      "  const unsigned d = static_cast<unsigned>(__cvta_generic_to_shared(dst));\n",
      "  asm volatile(\"cp.async.", cache, ".shared.global [%0], [%1], ", bytes,
      ", %2;\" :: \"r\"(d), \"l\"(src), \"r\"(valid ? ", bytes, " : 0) : \"memory\");\n}\n");
}

}  // namespace

std::string TensorCallHelpers(const std::set<std::string>& calls) {
  std::string out;
  for (const std::string& name : calls) {
    if (absl::StartsWith(name, kCallMma)) {
      absl::StrAppend(&out, MmaHelper(name));
    } else if (absl::StartsWith(name, kCallLdmatrix)) {
      absl::StrAppend(&out, LdmatrixHelper(name));
    } else if (name == kCallCpAsyncCommit) {
      absl::StrAppend(&out, "__device__ __forceinline__ void ", name,
                      "() { asm volatile(\"cp.async.commit_group;\" ::: \"memory\"); }\n");
    } else if (const int64_t groups = CpAsyncWaitGroups(name); groups >= 0) {
      // At most `groups` groups still in flight.
      absl::StrAppend(&out, "__device__ __forceinline__ void ", name,
                      "() { asm volatile(\"cp.async.wait_group ", groups,
                      ";\" ::: \"memory\"); }\n");
    } else if (const int64_t bytes = CpAsyncCallBytes(name); bytes > 0) {
      absl::StrAppend(&out, CpAsyncHelper(name, bytes));
    }
  }
  return out;
}

}  // namespace tessel::schedules::codegen
