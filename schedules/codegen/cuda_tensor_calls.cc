// The CUDA printer's tensor-core calls (lower_tensor_intrinsics leaves them; ir/tensor_intrin.h):
// each call prints as a helper function with the operands' addresses, and the helpers the
// program uses are defined once before its kernels, each a few lines of inline PTX.

#include <cmath>
#include <set>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "schedules/codegen/cuda_printer.h"
#include "schedules/codegen/narrow_math.h"
#include "schedules/ir/affine.h"
#include "schedules/ir/structural.h"
#include "schedules/ir/tensor_intrin.h"

namespace tessel::schedules::codegen {

std::string CudaCodeGen::TensorCall(const CallNode& n) {
  tensor_calls_.insert(n.name);
  std::string out = n.name + "(";
  for (size_t i = 0; i < n.args.size(); ++i) {
    const Expr& a = n.args[i];
    std::string arg;
    // A load is an operand's address, but for the values a quad store takes after its
    // destination.
    if (const auto* l = As<LoadNode>(a); l && !(i > 0 && IsQuadStoreCall(n.name))) {
      arg = "&" + Access(l->buffer, l->indices);
    } else if ((i == 2 && TmaLoadRank(n.name) > 0) || (i == 0 && TmaStoreRank(n.name) > 0)) {
      arg = "&tessel_tmap_" + Print(a);  // the kernel's tensor map parameter
    } else if (const auto* dst = As<LoadNode>(n.args[0]);
               i >= 3 && IsQuadStoreCall(n.name) && dst) {
      // The values a quad store rounds to its destination's half type.
      const StoreTarget target(this, dst->buffer.get());
      arg = Print(a);
    } else {
      arg = Print(a);
    }
    absl::StrAppend(&out, i ? ", " : "", arg);
  }
  return out + ")";
}

namespace {

bool IsFloatConstant(const Expr& e, double v) {
  const auto* f = As<FloatImmNode>(e);
  return f != nullptr && f->value == v;
}

// y of `erf(y)`; nullptr when `e` is not such a call.
const Expr* ErfArgument(const Expr& e) {
  const auto* c = As<CallNode>(e);
  return c != nullptr && c->name == "erf" && c->args.size() == 1 ? &c->args[0] : nullptr;
}

// y of `1 + erf(y)` (either order) or `1 - erf(y)`; nullptr when `b` is neither.
const Expr* ErfComplementArgument(const BinaryNode& b) {
  if (b.op != BinaryOp::kAdd && b.op != BinaryOp::kSub) return nullptr;
  if (IsFloatConstant(b.a, 1.0)) return ErfArgument(b.b);
  return b.op == BinaryOp::kAdd && IsFloatConstant(b.b, 1.0) ? ErfArgument(b.a) : nullptr;
}

// The constant c of `c * v` or `v * c`, with v in *other; nullptr when `e` is not such a product.
const FloatImmNode* ConstantFactor(const Expr& e, const Expr** other) {
  const auto* m = As<BinaryNode>(e);
  if (m == nullptr || m->op != BinaryOp::kMul) return nullptr;
  for (const auto& [c, v] : {std::pair(&m->a, &m->b), std::pair(&m->b, &m->a)}) {
    if (const auto* f = As<FloatImmNode>(*c)) {
      *other = v;
      return f;
    }
  }
  return nullptr;
}

// `factor * (1 + erf(y))` is GELU's product when y is x * (1 / sqrt 2) (either order) and `factor`
// is x or k * x (either order) for a constant k: 2k, or 2 where there is no k; 0 otherwise.
double GeluMultiple(const Expr& factor, const Expr& y, const Expr** x) {
  const FloatImmNode* c = ConstantFactor(y, x);
  if (c == nullptr || std::fabs(c->value - codegen::kGeluScale) > 1e-7) return 0;
  if (StructuralEqual(factor, **x)) return 2.0;
  const Expr* kx = nullptr;
  const FloatImmNode* k = ConstantFactor(factor, &kx);
  return k != nullptr && StructuralEqual(*kx, **x) ? 2.0 * k->value : 0;
}

// y of `1 / (1 + exp(y))` (the sum in either order); nullptr when `n` is not such a quotient.
const Expr* LogisticArgument(const BinaryNode& n) {
  if (n.op != BinaryOp::kDiv || !IsFloatConstant(n.a, 1.0)) return nullptr;
  const auto* sum = As<BinaryNode>(n.b);
  if (sum == nullptr || sum->op != BinaryOp::kAdd) return nullptr;
  const Expr* e = IsFloatConstant(sum->a, 1.0)   ? &sum->b
                  : IsFloatConstant(sum->b, 1.0) ? &sum->a
                                                 : nullptr;
  const auto* exp = e == nullptr ? nullptr : As<CallNode>(*e);
  return exp != nullptr && exp->name == "exp" && exp->args.size() == 1 ? &exp->args[0] : nullptr;
}

}  // namespace

std::string CudaCodeGen::NarrowMath(const BinaryNode& n, int* prec) {
  if (!NarrowStore() || n.a->dtype != DType::kFloat32) return "";
  if (const Expr* y = LogisticArgument(n)) {
    // 1 + exp(y) >= 1 does not cancel: the result keeps __expf's relative error (CUDA's bound,
    // 2 + floor(|1.173 y|) ulps: below 1.3e-5 for |y| <= 88, 0.05 of f16's half unit) and
    // __fdividef's two ulps. Past exp's range the sum is infinite, and __fdividef(1, inf) is 0,
    // the limit.
    *prec = kPrecPrimary;
    return absl::StrCat("__fdividef(1.0f, 1.0f + __expf(", Print(*y), "))");
  }
  if (n.op == BinaryOp::kMul) {
    for (const auto& [factor, sum] : {std::pair(&n.a, &n.b), std::pair(&n.b, &n.a)}) {
      const auto* b = As<BinaryNode>(*sum);
      const Expr* y = b != nullptr && b->op == BinaryOp::kAdd ? ErfComplementArgument(*b) : nullptr;
      const Expr* x = nullptr;
      const double multiple = y == nullptr ? 0 : GeluMultiple(*factor, *y, &x);
      if (multiple == 0) continue;
      tensor_calls_.insert(kGeluNarrowCall);
      const std::string gelu = absl::StrCat(kGeluNarrowCall, "(", Print(*x), ")");
      if (multiple == 1.0) {
        *prec = kPrecPrimary;
        return gelu;
      }
      *prec = kPrecMul;
      return absl::StrCat(FloatLiteral(multiple, DType::kFloat32), " * ", gelu);
    }
    return "";
  }
  const Expr* y = ErfComplementArgument(n);
  if (y == nullptr) return "";
  const bool plus = n.op == BinaryOp::kAdd;
  tensor_calls_.insert(kErfcNarrowCall);
  *prec = kPrecPrimary;
  std::string arg = Print(*y);
  if (plus) arg = absl::StrCat("-(", arg, ")");  // 1 + erf(y) = erfc(-y)
  return absl::StrCat(kErfcNarrowCall, "(", arg, ")");
}

std::string CudaCodeGen::StorageOffset(const Buffer& buffer, const Expr& at) {
  if (buffer.swizzle_bytes == 0) return Print(at);
  const std::string name =
      absl::StrCat(kCallSwizzle, "_", buffer.swizzle_bytes, "_", DTypeBytes(buffer.dtype));
  tensor_calls_.insert(name);
  // Terms that are multiples of the swizzle's period (a stage slot, a k step, a block of rows)
  // stay outside the XOR, so the XOR of what is left is loop-invariant where it can be.
  const auto [outer, inner] =
      SplitByPeriod(at, SwizzlePeriodElements(buffer.swizzle_bytes, DTypeBytes(buffer.dtype)));
  const std::string swizzled = absl::StrCat(name, "(", Print(inner), ")");
  return outer ? absl::StrCat(Print(outer), " + ", swizzled) : swizzled;
}

namespace {

int Log2(int64_t v) {
  int l = 0;
  while ((int64_t{1} << l) < v) ++l;
  return l;
}

// tessel_swizzle_<W>_<E>(o): the swizzle's XOR on element offset o (affine.h, SwizzledOffset):
// the 16-byte chunk's index bits take the 128-byte line's index modulo W / 16.
std::string SwizzleHelper(const std::string& name, int64_t width, int64_t element_bytes) {
  return absl::StrCat("__device__ __forceinline__ int ", name, "(int o) { return o ^ (((o >> ",
                      Log2(128 / element_bytes), ") & ", width / 16 - 1, ") << ",
                      Log2(16 / element_bytes), "); }\n");
}

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
// A helper of no arguments that issues one PTX instruction (`ptx`, without its semicolon).
std::string AsmHelper(const std::string& name, const std::string& ptx) {
  return absl::StrCat("__device__ __forceinline__ void ", name, "() { asm volatile(\"", ptx,
                      ";\" ::: \"memory\"); }\n");
}

std::string CpAsyncHelper(const std::string& name, int64_t bytes) {
  const char* cache = bytes == 16 ? "cg" : "ca";
  return absl::StrCat(
      "__device__ __forceinline__ void ", name, "(void* dst, const void* src, bool valid) {\n",
      "  const unsigned d = static_cast<unsigned>(__cvta_generic_to_shared(dst));\n",
      "  asm volatile(\"cp.async.", cache, ".shared.global [%0], [%1], ", bytes,
      ", %2;\" :: \"r\"(d), \"l\"(src), \"r\"(valid ? ", bytes, " : 0) : \"memory\");\n}\n");
}

// tessel_wgmma_m64n<N>k16_f32_<ab>_<ta><tb>(d, a, b, a_lbo, a_sbo, a_mode, b_lbo, b_sbo,
// b_mode): the warpgroup's D (N / 2 f32 registers a thread) += A * B, both from shared memory
// through matrix descriptors (start address, leading and stride byte offsets, swizzle mode);
// tessel_wgmma_..._r<tb>(d, a, b, b_lbo, b_sbo, b_mode): A from the warp's registers.
std::string WgmmaHelper(const std::string& name) {
  const int64_t n = WgmmaCallN(name);
  if (n <= 0 || n % 8 != 0) return "";
  const std::string ab = absl::StrContains(name, "_bf16_") ? "bf16" : "f16";
  const std::string trans = name.substr(name.size() - 2);
  const int64_t regs = n / 2;
  std::string list, outs;
  for (int64_t i = 0; i < regs; ++i) {
    absl::StrAppend(&list, i ? ", " : "", "%", i);
    absl::StrAppend(&outs, i ? ", " : "", i % 8 == 0 ? "\n      " : "", "\"+f\"(d[", i, "])");
  }
  if (trans[0] == 'r') {
    // A from the warp's registers: four 32-bit registers of 16 x 16 f16/bf16 (mma.sync's A).
    return absl::StrCat(
        "__device__ __forceinline__ void ", name,
        "(float* d, const void* a, const void* b, unsigned b_lbo, unsigned b_sbo, unsigned "
        "b_mode) {\n",
        "  const unsigned* ar = static_cast<const unsigned*>(a);\n",
        "  const unsigned long long db = tessel_wgmma_descriptor(b, b_lbo, b_sbo, b_mode);\n",
        "  asm volatile(\"{\\n.reg .pred p;\\nsetp.ne.b32 p, %", regs + 5, ", 0;\\n\"\n",
        "               \"wgmma.mma_async.sync.aligned.m64n", n, "k16.f32.", ab, ".", ab, " {",
        list, "}, {%", regs, ", %", regs + 1, ", %", regs + 2, ", %", regs + 3, "}, %", regs + 4,
        ", p, 1, 1, ", trans.substr(1), ";\\n}\\n\"\n", "               : ", outs,
        "\n               : \"r\"(ar[0]), \"r\"(ar[1]), \"r\"(ar[2]), \"r\"(ar[3]), "
        "\"l\"(db), \"r\"(1));\n}\n");
  }
  return absl::StrCat(
      "__device__ __forceinline__ void ", name,
      "(float* d, const void* a, const void* b, unsigned a_lbo, unsigned a_sbo, unsigned a_mode,"
      " unsigned b_lbo, unsigned b_sbo, unsigned b_mode) {\n",
      "  const unsigned long long da = tessel_wgmma_descriptor(a, a_lbo, a_sbo, a_mode);\n",
      "  const unsigned long long db = tessel_wgmma_descriptor(b, b_lbo, b_sbo, b_mode);\n",
      "  asm volatile(\"{\\n.reg .pred p;\\nsetp.ne.b32 p, %", regs + 2, ", 0;\\n\"\n",
      "               \"wgmma.mma_async.sync.aligned.m64n", n, "k16.f32.", ab, ".", ab, " {", list,
      "}, %", regs, ", %", regs + 1, ", p, 1, 1, ", trans.substr(0, 1), ", ", trans.substr(1),
      ";\\n}\\n\"\n", "               : ", outs,
      "\n               : \"l\"(da), \"l\"(db), \"r\"(1));\n}\n");
}

// A matrix descriptor: bits 0-13 the shared address / 16, 16-29 the leading byte offset / 16,
// 32-45 the stride byte offset / 16, 62-63 the swizzle mode (base offset 0: the buffer starts on
// its swizzle period).
constexpr char kWgmmaDescriptor[] =
    "__device__ __forceinline__ unsigned long long tessel_wgmma_descriptor(const void* p, "
    "unsigned lbo, unsigned sbo, unsigned mode) {\n"
    "  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(p));\n"
    "  return static_cast<unsigned long long>((s & 0x3FFFF) >> 4) |\n"
    "         static_cast<unsigned long long>((lbo >> 4) & 0x3FFF) << 16 |\n"
    "         static_cast<unsigned long long>((sbo >> 4) & 0x3FFF) << 32 |\n"
    "         static_cast<unsigned long long>(mode) << 62;\n"
    "}\n";

// tessel_tma_load_<R>d(dst, barrier, map, c0, ..): the box of `map` at c (innermost first) into
// shared memory at dst, completing `barrier`'s transaction bytes; tessel_tma_multicast_<R>d(..,
// mask) into that of each CTA of the cluster in `mask`, at the same offsets.
std::string TmaLoadHelper(const std::string& name, int64_t rank) {
  const bool multicast = IsTmaMulticastCall(name);
  std::string params, coords;
  for (int64_t i = 0; i < rank; ++i) {
    absl::StrAppend(&params, ", int c", i);
    absl::StrAppend(&coords, i ? ", " : "", "%", i + 3);
  }
  std::string ins;
  for (int64_t i = 0; i < rank; ++i) absl::StrAppend(&ins, ", \"r\"(c", i, ")");
  if (multicast) {
    absl::StrAppend(&params, ", unsigned mask");
    absl::StrAppend(&ins, ", \"h\"(static_cast<unsigned short>(mask))");
  }
  return absl::StrCat(
      "__device__ __forceinline__ void ", name,
      "(void* dst, void* barrier, const tessel_tensor_map* map", params, ") {\n",
      "  asm volatile(\"cp.async.bulk.tensor.", rank,
      "d.shared::cluster.global.mbarrier::complete_tx::bytes",
      multicast ? ".multicast::cluster" : "", " [%0], [%1, {", coords, "}], [%2]",
      multicast ? absl::StrCat(", %", rank + 3) : "", ";\"\n",
      "               :: \"r\"(static_cast<unsigned>(__cvta_generic_to_shared(dst))),\n",
      "                  \"l\"(reinterpret_cast<unsigned long long>(map)),\n",
      "                  \"r\"(static_cast<unsigned>(__cvta_generic_to_shared(barrier)))", ins,
      "\n               : \"memory\");\n}\n");
}

// tessel_tma_store_<R>d(map, src, c0, ..): the box of `map` at c (innermost first) from shared
// memory at src, in this thread's bulk async-group.
std::string TmaStoreHelper(const std::string& name, int64_t rank) {
  std::string params, coords, ins;
  for (int64_t i = 0; i < rank; ++i) {
    absl::StrAppend(&params, ", int c", i);
    absl::StrAppend(&coords, i ? ", " : "", "%", i + 2);
    absl::StrAppend(&ins, ", \"r\"(c", i, ")");
  }
  return absl::StrCat(
      "__device__ __forceinline__ void ", name, "(const tessel_tensor_map* map, const void* src",
      params, ") {\n", "  asm volatile(\"cp.async.bulk.tensor.", rank,
      "d.global.shared::cta.bulk_group [%0, {", coords, "}], [%1];\"\n",
      "               :: \"l\"(reinterpret_cast<unsigned long long>(map)),\n",
      "                  \"r\"(static_cast<unsigned>(__cvta_generic_to_shared(src)))", ins,
      "\n               : \"memory\");\n}\n");
}

// An arrival on the mbarrier at the same offset in another CTA of the cluster (mapa; release at
// the CTA's scope, as any arrival).
constexpr char kMbarrierArriveClusterHelper[] =
    "__device__ __forceinline__ void tessel_mbarrier_arrive_cluster(long long* bar, unsigned cta) "
    "{\n"
    "  unsigned remote;\n"
    "  asm volatile(\"mapa.shared::cluster.u32 %0, %1, %2;\" : \"=r\"(remote) : "
    "\"r\"(static_cast<unsigned>(__cvta_generic_to_shared(bar))), \"r\"(cta));\n"
    "  asm volatile(\"mbarrier.arrive.shared::cluster.b64 _, [%0];\" :: "
    "\"r\"(remote) : \"memory\");\n"
    "}\n";

// tessel_quad_store_<f16|bf16> (kCallQuadStore): each lane's pairs rounded and packed, traded
// within the quad in two rounds of shuffles (xor 1: the pair of tiles sharing lane q's bit 0,
// xor 2: the tile q), one 16-byte store.
std::string QuadStoreHelper(const std::string& name, bool bf16) {
  const char* pack = bf16 ? "__floats2bfloat162_rn" : "__floats2half2_rn";
  const char* pair = bf16 ? "__nv_bfloat162" : "__half2";
  return absl::StrCat(
      "__device__ __forceinline__ void ", name,
      "(void* dst, int pred, int q, float a0, float a1, float b0, float b1, float c0, float c1, "
      "float d0, float d1) {\n",
      "  ", pair, " v[4] = {", pack, "(a0, a1), ", pack, "(b0, b1), ", pack, "(c0, c1), ", pack,
      "(d0, d1)};\n",
      "  const unsigned* p = reinterpret_cast<const unsigned*>(v);\n"
      "  const bool odd = q & 1, hi = q & 2;\n"
      "  const unsigned r0 = __shfl_xor_sync(0xffffffffu, odd ? p[0] : p[1], 1);\n"
      "  const unsigned r1 = __shfl_xor_sync(0xffffffffu, odd ? p[2] : p[3], 1);\n"
      "  const unsigned a = odd ? p[1] : p[0], b = odd ? p[3] : p[2];\n"
      "  const unsigned a_lo = odd ? r0 : a, a_hi = odd ? a : r0;\n"
      "  const unsigned b_lo = odd ? r1 : b, b_hi = odd ? b : r1;\n"
      "  const unsigned k_lo = hi ? b_lo : a_lo, k_hi = hi ? b_hi : a_hi;\n"
      "  const unsigned y_lo = __shfl_xor_sync(0xffffffffu, hi ? a_lo : b_lo, 2);\n"
      "  const unsigned y_hi = __shfl_xor_sync(0xffffffffu, hi ? a_hi : b_hi, 2);\n"
      "  if (pred) {\n"
      "    *reinterpret_cast<uint4*>(dst) = make_uint4(hi ? y_lo : k_lo, hi ? y_hi : k_hi, "
      "hi ? k_lo : y_lo, hi ? k_hi : y_hi);\n"
      "  }\n"
      "}\n");
}

// The copy engine's tensor map: opaque, 128 bytes, 64-byte aligned (CUtensorMap).
constexpr char kTensorMapType[] =
    "struct __align__(64) tessel_tensor_map { unsigned long long opaque[16]; };\n";

// mbarrier operations on a shared i64 word.
constexpr char kMbarrierHelpers[] =
    "__device__ __forceinline__ void tessel_mbarrier_init(long long* bar, unsigned count) {\n"
    "  asm volatile(\"mbarrier.init.shared::cta.b64 [%0], %1;\" :: "
    "\"r\"(static_cast<unsigned>(__cvta_generic_to_shared(bar))), \"r\"(count) : \"memory\");\n"
    "}\n"
    "__device__ __forceinline__ void tessel_mbarrier_expect_tx(long long* bar, unsigned bytes) {\n"
    "  asm volatile(\"mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\" :: "
    "\"r\"(static_cast<unsigned>(__cvta_generic_to_shared(bar))), \"r\"(bytes) : \"memory\");\n"
    "}\n"
    "__device__ __forceinline__ void tessel_mbarrier_arrive(long long* bar) {\n"
    "  asm volatile(\"mbarrier.arrive.shared::cta.b64 _, [%0];\" :: "
    "\"r\"(static_cast<unsigned>(__cvta_generic_to_shared(bar))) : \"memory\");\n"
    "}\n"
    "__device__ __forceinline__ void tessel_mbarrier_wait(long long* bar, unsigned parity) {\n"
    "  const unsigned b = static_cast<unsigned>(__cvta_generic_to_shared(bar));\n"
    "  unsigned done = 0;\n"
    "  do {\n"
    "    asm volatile(\"{\\n.reg .pred p;\\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], "
    "%2;\\nselp.u32 %0, 1, 0, p;\\n}\" : \"=r\"(done) : \"r\"(b), \"r\"(parity) : "
    "\"memory\");\n"
    "  } while (!done);\n"
    "}\n";

}  // namespace

std::string TensorCallHelpers(const std::set<std::string>& calls) {
  std::string out;
  for (const std::string& name : calls) {
    if (IsWgmmaCall(name)) {
      absl::StrAppend(&out, kWgmmaDescriptor);
      break;
    }
  }
  bool mbarriers = false, maps = false;
  for (const std::string& name : calls) {
    mbarriers |= absl::StartsWith(name, "tessel_mbarrier_");
    maps |= TmaLoadRank(name) > 0 || TmaStoreRank(name) > 0;
  }
  if (maps) absl::StrAppend(&out, kTensorMapType);
  if (mbarriers) absl::StrAppend(&out, kMbarrierHelpers);
  for (const std::string& name : calls) {
    if (IsWgmmaCall(name)) {
      absl::StrAppend(&out, WgmmaHelper(name));
    } else if (const int64_t rank = TmaLoadRank(name); rank > 0) {
      absl::StrAppend(&out, TmaLoadHelper(name, rank));
    } else if (const int64_t store_rank = TmaStoreRank(name); store_rank > 0) {
      absl::StrAppend(&out, TmaStoreHelper(name, store_rank));
    } else if (name == kCallBulkCommit) {
      absl::StrAppend(&out, AsmHelper(name, "cp.async.bulk.commit_group"));
    } else if (const int64_t reading = BulkWaitReadGroups(name); reading >= 0) {
      absl::StrAppend(&out,
                      AsmHelper(name, absl::StrCat("cp.async.bulk.wait_group.read ", reading)));
    } else if (name == kCallSyncwarp) {
      absl::StrAppend(&out, "__device__ __forceinline__ void ", name, "() { __syncwarp(); }\n");
    } else if (name == kErfcNarrowCall) {
      absl::StrAppend(&out, ErfcNarrowHelper());
    } else if (name == kGeluNarrowCall) {
      absl::StrAppend(&out, GeluNarrowHelper());
    } else if (IsQuadStoreCall(name)) {
      absl::StrAppend(&out, QuadStoreHelper(name, name == QuadStoreCall(DType::kBFloat16)));
    } else if (name == kCallMbarrierArriveCluster) {
      absl::StrAppend(&out, kMbarrierArriveClusterHelper);
    } else if (absl::StartsWith(name, kCallSetmaxnreg)) {
      // tessel_setmaxnreg_<inc|dec>_<registers>
      const std::vector<std::string> parts =
          absl::StrSplit(name.substr(sizeof(kCallSetmaxnreg)), '_');
      if (parts.size() == 2) {
        absl::StrAppend(&out, AsmHelper(name, absl::StrCat("setmaxnreg.", parts[0],
                                                           ".sync.aligned.u32 ", parts[1])));
      }
    } else if (name == kCallFenceMbarrierInit) {
      absl::StrAppend(&out, AsmHelper(name, "fence.mbarrier_init.release.cluster"));
    } else if (name == kCallWgmmaFence) {
      absl::StrAppend(&out, AsmHelper(name, "wgmma.fence.sync.aligned"));
    } else if (name == kCallWgmmaCommit) {
      absl::StrAppend(&out, AsmHelper(name, "wgmma.commit_group.sync.aligned"));
    } else if (const int64_t groups = WgmmaWaitGroups(name); groups >= 0) {
      absl::StrAppend(&out,
                      AsmHelper(name, absl::StrCat("wgmma.wait_group.sync.aligned ", groups)));
    } else if (name == kCallFenceProxyAsync) {
      absl::StrAppend(&out, AsmHelper(name, "fence.proxy.async.shared::cta"));
    } else if (absl::StartsWith(name, kCallSwizzle)) {
      const std::vector<std::string> parts = absl::StrSplit(name.substr(sizeof(kCallSwizzle)), '_');
      int64_t width = 0, bytes = 0;
      if (parts.size() == 2 && absl::SimpleAtoi(parts[0], &width) &&
          absl::SimpleAtoi(parts[1], &bytes)) {
        absl::StrAppend(&out, SwizzleHelper(name, width, bytes));
      }
    } else if (absl::StartsWith(name, kCallMma)) {
      absl::StrAppend(&out, MmaHelper(name));
    } else if (absl::StartsWith(name, kCallLdmatrix)) {
      absl::StrAppend(&out, LdmatrixHelper(name));
    } else if (name == kCallCpAsyncCommit) {
      absl::StrAppend(&out, AsmHelper(name, "cp.async.commit_group"));
    } else if (const int64_t groups = CpAsyncWaitGroups(name); groups >= 0) {
      // At most `groups` groups still in flight.
      absl::StrAppend(&out, AsmHelper(name, absl::StrCat("cp.async.wait_group ", groups)));
    } else if (const int64_t bytes = CpAsyncCallBytes(name); bytes > 0) {
      absl::StrAppend(&out, CpAsyncHelper(name, bytes));
    }
  }
  return out;
}

}  // namespace tessel::schedules::codegen
