#include "schedules/codegen/host_codegen.h"

#include <algorithm>
#include <string>
#include <unordered_set>
#include <vector>

#include "absl/strings/str_cat.h"
#include "schedules/codegen/c_printer.h"
#include "schedules/ir/expr.h"
#include "schedules/ir/stmt.h"
#include "schedules/ir/stmt_analysis.h"

namespace tessel::schedules {
namespace {

using codegen::CodeGenC;

// Allocations larger than this go to the heap rather than the stack.
constexpr int64_t kMaxStackBytes = 64 * 1024;

// Conversions between float and the bits of f16 / bf16, rounding to nearest even (after F.
// Giesen's float_to_half_fast3_rtne and half_to_float). Compiled without -ffast-math.
constexpr char kF16Prelude[] = R"(// f16 bits <-> float, rounding to nearest even.
static inline float tessel_f16_to_f32(uint16_t h) {
  const uint32_t shifted_exp = 0x7c00u << 13;
  uint32_t o = (static_cast<uint32_t>(h) & 0x7fffu) << 13;
  const uint32_t exp = shifted_exp & o;
  o += (127u - 15u) << 23;
  float f = 0.0f;
  if (exp == shifted_exp) {
    o += (128u - 16u) << 23;  // inf or nan
    std::memcpy(&f, &o, 4);
  } else if (exp == 0) {
    o += 1u << 23;  // subnormal: renormalize
    std::memcpy(&f, &o, 4);
    f -= 6.103515625e-05f;
  } else {
    std::memcpy(&f, &o, 4);
  }
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  bits |= (static_cast<uint32_t>(h) & 0x8000u) << 16;
  std::memcpy(&f, &bits, 4);
  return f;
}
static inline uint16_t tessel_f32_to_f16(float value) {
  uint32_t f;
  std::memcpy(&f, &value, 4);
  const uint32_t sign = f & 0x80000000u;
  f ^= sign;
  uint32_t o;
  if (f >= 0x47800000u) {  // 65536 or more: inf (nan stays nan)
    o = f > 0x7f800000u ? 0x7e00u : 0x7c00u;
  } else if (f < 0x38800000u) {  // subnormal or zero as f16: let the FPU round
    float x;
    std::memcpy(&x, &f, 4);
    x += 0.5f;
    uint32_t u;
    std::memcpy(&u, &x, 4);
    o = u - 0x3f000000u;
  } else {
    const uint32_t mant_odd = (f >> 13) & 1u;
    f += 0xc8000fffu;  // rebias the exponent, add the rounding bias
    f += mant_odd;
    o = f >> 13;
  }
  return static_cast<uint16_t>(o | (sign >> 16));
}
)";

constexpr char kBF16Prelude[] = R"(// bf16 bits <-> float, rounding to nearest even.
static inline float tessel_bf16_to_f32(uint16_t h) {
  const uint32_t u = static_cast<uint32_t>(h) << 16;
  float f = 0.0f;
  std::memcpy(&f, &u, 4);
  return f;
}
static inline uint16_t tessel_f32_to_bf16(float value) {
  uint32_t u;
  std::memcpy(&u, &value, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x0040u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}
)";

constexpr codegen::StorageNames kHostStorage = {"int32_t",           "int64_t",
                                                "uint16_t",          "uint16_t",
                                                "tessel_f16_to_f32", "tessel_bf16_to_f32",
                                                "tessel_f32_to_f16", "tessel_f32_to_bf16"};

class HostCodeGen final : public CodeGenC {
 public:
  explicit HostCodeGen(const Program& p)
      : CodeGenC(p.needs_int64_indices, kHostStorage), program_(p) {}

  absl::StatusOr<GeneratedSource> Generate();

 protected:
  std::string InfLiteral(bool negative, DType t) override {
    if (t == DType::kFloat64) {
      return negative ? "(-static_cast<double>(INFINITY))" : "static_cast<double>(INFINITY)";
    }
    return negative ? "(-INFINITY)" : "INFINITY";
  }
  std::string NanLiteral(DType t) override {
    return t == DType::kFloat64 ? "static_cast<double>(NAN)" : "NAN";
  }
  std::string RoundToHalf(DType to, DType from, const std::string& s) override {
    const std::string arg =
        from == DType::kFloat32 || from == DType::kFloat16 || from == DType::kBFloat16
            ? s
            : "static_cast<float>(" + s + ")";
    return StorageToCompute(to, ComputeToStorage(to, arg));
  }
  std::string MathCall(const std::string& name, DType t,
                       const std::vector<std::string>& args) override {
    if (args.size() != 1) return "";
    if (IsInt(t) && t != DType::kBool) {
      if (name != "abs") return "";
      return "std::abs(" + args[0] + ")";
    }
    if (!IsFloat(t)) return "";
    if (name == "rsqrt") {
      return absl::StrCat("(", t == DType::kFloat64 ? "1.0" : "1.0f", " / std::sqrt(", args[0],
                          "))");
    }
    return absl::StrCat("std::", name == "abs" ? "fabs" : name, "(", args[0], ")");
  }
  std::string MinMax(bool is_max, DType t, const std::string& a, const std::string& b) override {
    if (IsFloat(t)) return absl::StrCat(is_max ? "std::fmax(" : "std::fmin(", a, ", ", b, ")");
    return absl::StrCat(is_max ? "std::max<" : "std::min<", ComputeType(t), ">(", a, ", ", b, ")");
  }

  void EmitFor(const ForNode& n) override;
  void EmitAllocate(const AllocateNode& n) override;
  void EmitBarrier(const BarrierNode&) override {}
  void EmitAllReduce(const AllReduceNode& n) override {
    Fail(absl::InvalidArgumentError(absl::StrCat(
        "AllReduce over ", ThreadTagName(n.thread), " into '", n.results[0]->name,
        "': cross-thread reductions need the cuda target; on the host reduce with a serial "
        "loop")));
  }

 private:
  const Program& program_;
  int parallel_depth_ = 0;
  bool uses_vector_ = false;
};

absl::StatusOr<GeneratedSource> HostCodeGen::Generate() {
  if (program_.target != TargetKind::kHost) {
    return absl::InvalidArgumentError(absl::StrCat(
        "program '", program_.name,
        "' was lowered for the cuda target; lower it for the host to generate host code"));
  }
  if (!codegen::IsCIdentifier(program_.name)) {
    return absl::InvalidArgumentError(
        absl::StrCat("program name '", program_.name,
                     "' is not a C identifier; the host entry is named after the program, so "
                     "use letters, digits and '_'"));
  }
  ResetKernelState();
  std::unordered_set<const Buffer*> written;
  for (const Kernel& k : program_.kernels) CollectWrittenBuffers(k.body, &written);

  GeneratedSource out;
  out.target = TargetKind::kHost;
  out.buffers = program_.buffers;
  KernelSource entry;
  entry.entry = program_.name;

  OpenBlock(absl::StrCat("extern \"C\" void ", program_.name, "(void* const* buffers)"));
  for (size_t i = 0; i < program_.buffers.size(); ++i) {
    const BufferPtr& b = program_.buffers[i].buffer;
    if (b->scope != MemScope::kGlobal) {
      return absl::InvalidArgumentError(absl::StrCat(
          "program buffer '", b->name, "' has scope ", MemScopeName(b->scope),
          "; program buffers are global (shared and local buffers are allocated by Allocate)"));
    }
    entry.params.push_back(static_cast<int>(i));
    const std::string name = BindBuffer(b.get());
    const std::string type = (written.count(b.get()) ? "" : "const ") + StorageType(b->dtype) + "*";
    Line(absl::StrCat(type, " __restrict__ ", name, " = static_cast<", type, ">(buffers[", i,
                      "]);"));
  }
  for (const Kernel& k : program_.kernels) {
    Line("");
    Line("// kernel " + k.name);
    OpenBlock("");
    EmitStmt(k.body);
    CloseBlock();
  }
  CloseBlock();
  if (failed()) return status();

  std::string code = codegen::ProgramHeaderComment(program_, "host");
  code += "\n#include <algorithm>\n#include <cmath>\n#include <cstdint>\n#include <cstring>\n";
  if (uses_vector_) code += "#include <vector>\n";
  if (uses_f16_) absl::StrAppend(&code, "\n", kF16Prelude);
  if (uses_bf16_) absl::StrAppend(&code, "\n", kBF16Prelude);
  if (uses_floordiv_ || uses_float_floormod_) {
    absl::StrAppend(
        &code, "\n",
        codegen::FloorDivHelpers("static inline", uses_floordiv_, uses_float_floormod_));
  }
  absl::StrAppend(&code, "\n", TakeOutput());
  out.code = std::move(code);
  out.kernels.push_back(std::move(entry));
  return out;
}

void HostCodeGen::EmitFor(const ForNode& n) {
  switch (n.kind) {
    case ForKind::kSerial:
      EmitLoop(n, {AnnotationUnrollPragma(n, "#pragma GCC unroll", /*full_needs_count=*/true)});
      return;
    case ForKind::kUnrolled: {
      int64_t extent = 0;
      const int64_t count =
          IsConstInt(n.extent, &extent) && extent > 0 && extent <= 64 ? extent : 16;
      EmitLoop(n, {absl::StrCat("#pragma GCC unroll ", count)},
               n.thread == ThreadTag::kVThread ? "  // vthread" : "");
      return;
    }
    case ForKind::kParallel:
      ++parallel_depth_;
      if (parallel_depth_ == 1) {
        EmitLoop(n, {"#pragma omp parallel for schedule(static)"});
      } else {
        EmitLoop(n, {}, "  // parallel inside a parallel loop: serial");
      }
      --parallel_depth_;
      return;
    case ForKind::kVectorized:
      // A reduction loop made vectorized accumulates into one element: its iterations depend
      // on each other, which `omp simd` would ignore. It stays a plain loop here.
      if (StoresIndependentOf(n.body, n.var.get())) {
        EmitLoop(n, {}, "  // vectorized reduction: lane by lane on the host");
        return;
      }
      EmitLoop(n, {"#pragma omp simd"});
      return;
    case ForKind::kThreadBinding:
      if (n.thread == ThreadTag::kVThread) {
        EmitLoop(n, {}, "  // vthread");
        return;
      }
      Fail(absl::InvalidArgumentError(absl::StrCat(
          "loop '", n.var->name, "' is bound to ", ThreadTagName(n.thread),
          ": thread bindings need the cuda target; use parallel or serial loops on the host")));
      return;
  }
}

void HostCodeGen::EmitAllocate(const AllocateNode& n) {
  const Buffer& b = *n.buffer;
  if (b.scope == MemScope::kGlobal || b.scope == MemScope::kFragment) {
    Fail(absl::InvalidArgumentError(
        absl::StrCat("Allocate of ", MemScopeName(b.scope), " buffer '", b.name,
                     "': the host code generator allocates shared and local buffers only")));
    return;
  }
  const std::string name = BindBuffer(&b);
  const bool nested = !DeclareInBlock(name);
  if (nested) {
    OpenBlock("");
    DeclareInBlock(name);
  }
  const int64_t elements = std::max<int64_t>(1, b.AllocatedElements());
  const std::string type = StorageType(b.dtype);
  if (elements * DTypeBytes(b.dtype) <= kMaxStackBytes) {
    Line(absl::StrCat("alignas(64) ", type, " ", name, "[", elements, "];  // ",
                      MemScopeName(b.scope)));
  } else {
    uses_vector_ = true;
    const std::string heap = names_.Unique(name + "_heap");
    DeclareInBlock(heap);
    Line(absl::StrCat("std::vector<", type, "> ", heap, "(", elements, ");  // ",
                      MemScopeName(b.scope), ", too large for the stack"));
    Line(absl::StrCat(type, "* const ", name, " = ", heap, ".data();"));
  }
  EmitStmt(n.body);
  if (nested) CloseBlock();
}

}  // namespace

absl::StatusOr<GeneratedSource> GenerateHost(const Program& p) { return HostCodeGen(p).Generate(); }

}  // namespace tessel::schedules
