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

// GELU's polynomial, in s = |x|: log2(erfc(s / sqrt 2) / 2), the coefficients of log2(erfc) times
// powers of 1 / sqrt 2 (in double, then rounded), less 1 in the constant. Clamped where s / sqrt 2
// reaches erfc's clamp.
struct GeluPolynomial {
  float clamp;
  float c[kDegree + 1];
};
GeluPolynomial MakeGeluPolynomial() {
  GeluPolynomial g;
  g.clamp = static_cast<float>(kClamp / kGeluScale);
  double scale = 1.0;
  for (int i = 0; i <= kDegree; ++i, scale *= kGeluScale) {
    g.c[i] = static_cast<float>(kLog2Erfc[i] * scale - (i == 0 ? 1.0 : 0.0));
  }
  return g;
}
const GeluPolynomial& Gelu() {
  static const GeluPolynomial g = MakeGeluPolynomial();
  return g;
}

std::string Literal(float v) { return FloatLiteral(v, DType::kFloat32); }

// "  float p = c[n];\n  p = fmaf(p, s, c[n - 1]);\n ... c[0]": Horner's rule in s.
std::string HornerSource(const float* c) {
  std::string horner = absl::StrCat("  float p = ", Literal(c[kDegree]), ";\n");
  for (int i = kDegree - 1; i >= 0; --i) {
    absl::StrAppend(&horner, "  p = fmaf(p, s, ", Literal(c[i]), ");\n");
  }
  return horner;
}

float Horner(const float* c, float s) {
  float p = c[kDegree];
  for (int i = kDegree - 1; i >= 0; --i) p = std::fma(p, s, c[i]);
  return p;
}

// p >= log2(erfc(6)) - 1, about -56.4: exp2 of it is a normal float, so flushing subnormals
// changes nothing, and the bare ex2 drops exp2f's guard for them (an FSETP and two FMULs an
// element in the SASS).
constexpr char kBareExp2[] =
    "  float e;\n"
    "  asm(\"ex2.approx.ftz.f32 %0, %1;\" : \"=f\"(e) : \"f\"(p));\n";

}  // namespace

float ErfcNarrow(float z) {
  const float e = std::exp2(Horner(kLog2Erfc, std::fmin(std::fabs(z), kClamp)));
  return z >= 0.0f ? e : 2.0f - e;
}

float GeluNarrow(float x) {
  const float h = std::exp2(Horner(Gelu().c, std::fmin(std::fabs(x), Gelu().clamp)));
  return std::fma(-std::fabs(x), h, std::fmax(x, 0.0f));
}

std::string ErfcNarrowHelper() {
  return absl::StrCat("__device__ __forceinline__ float ", kErfcNarrowCall, "(float z) {\n",
                      "  const float s = fminf(fabsf(z), ", Literal(kClamp), ");\n",
                      HornerSource(kLog2Erfc), kBareExp2, "  return z >= 0.0f ? e : 2.0f - e;\n",
                      "}\n");
}

std::string GeluNarrowHelper() {
  return absl::StrCat("__device__ __forceinline__ float ", kGeluNarrowCall, "(float x) {\n",
                      "  const float s = fminf(fabsf(x), ", Literal(Gelu().clamp), ");\n",
                      HornerSource(Gelu().c), kBareExp2,
                      "  return fmaf(-fabsf(x), e, fmaxf(x, 0.0f));\n", "}\n");
}

}  // namespace tessel::schedules::codegen
