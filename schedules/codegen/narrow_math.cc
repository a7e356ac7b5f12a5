#include "schedules/codegen/narrow_math.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "schedules/codegen/c_printer.h"

namespace tessel::schedules::codegen {
namespace {

// log2(erfc(s)) on [0, 6], lowest degree first: a Chebyshev fit of degree 8, reweighted towards
// the largest error (Lawson's iteration), in the power basis, rounded to float. Evaluated by
// Horner's rule in float, its relative error in erfc is at most 1.22e-5 (checked against erfc
// over 600 001 points of [0, 6]; tests/schedules/narrow_math_test.cc checks it against std::erfc).
constexpr float kClamp = 6.0f;
constexpr float kLog2Erfc[] = {7.90927152e-06f, -1.6282208f,      -0.916364729f,
                               -0.15373531f,    0.0350874327f,    -0.00579859084f,
                               0.000640860118f, -4.18916898e-05f, 1.21557605e-06f};
constexpr int kDegree = sizeof(kLog2Erfc) / sizeof(kLog2Erfc[0]) - 1;

}  // namespace

float ErfcNarrow(float z) {
  const float s = std::fmin(std::fabs(z), kClamp);
  float p = kLog2Erfc[kDegree];
  for (int i = kDegree - 1; i >= 0; --i) p = std::fma(p, s, kLog2Erfc[i]);
  const float e = std::exp2(p);
  return z >= 0.0f ? e : 2.0f - e;
}

std::string ErfcNarrowHelper() {
  auto literal = [](float v) { return FloatLiteral(v, DType::kFloat32); };
  std::string horner = absl::StrCat("  float p = ", literal(kLog2Erfc[kDegree]), ";\n");
  for (int i = kDegree - 1; i >= 0; --i) {
    absl::StrAppend(&horner, "  p = fmaf(p, s, ", literal(kLog2Erfc[i]), ");\n");
  }
  return absl::StrCat("__device__ __forceinline__ float ", kErfcNarrowCall, "(float z) {\n",
                      "  const float s = fminf(fabsf(z), ", literal(kClamp), ");\n", horner,
                      // p >= log2(erfc(6)), about -55.4: exp2 of it is a normal float, so
                      // flushing subnormals changes nothing, and the bare ex2 drops exp2f's
                      // guard for them (an FSETP and two FMULs an element in the SASS).
                      "  float e;\n"
                      "  asm(\"ex2.approx.ftz.f32 %0, %1;\" : \"=f\"(e) : \"f\"(p));\n"
                      "  return z >= 0.0f ? e : 2.0f - e;\n"
                      "}\n");
}

}  // namespace tessel::schedules::codegen
