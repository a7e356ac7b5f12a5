#include "schedules/codegen/narrow_math.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

namespace tessel::schedules::codegen {
namespace {

// The narrow erfc (the host twin of the device helper) against std::erfc in double: relative
// error below 1.3e-5 where |z| <= 6, which is 0.05 of f16's half unit and 0.006 of bf16's;
// beyond, below 2.2e-17 absolutely. 1 + erf(-z) and 1 - erf(z) are the same function.
TEST(NarrowMath, ErfcIsWithinATwentiethOfAHalfUnitOfF16) {
  double worst = 0, worst_at = 0;
  for (int i = -1'200'000; i <= 1'200'000; ++i) {
    const float z = static_cast<float>(i) * 1e-5f;
    const double want = std::erfc(static_cast<double>(z));
    const double got = ErfcNarrow(z);
    if (std::fabs(z) <= 6.0f) {
      const double rel = std::fabs(got - want) / want;
      if (rel > worst) worst = rel, worst_at = z;
    } else {
      EXPECT_LT(std::fabs(got - want), 2.2e-17) << "z = " << z;
    }
  }
  EXPECT_LT(worst, 1.3e-5) << "at z = " << worst_at;
  EXPECT_EQ(ErfcNarrow(0.0f), std::exp2(7.90927152e-06f));
  EXPECT_EQ(ErfcNarrow(40.0f), ErfcNarrow(6.0f));
  EXPECT_EQ(ErfcNarrow(-40.0f), 2.0f - ErfcNarrow(6.0f));
  // The device helper's exp2 flushes subnormal results to zero: none occurs, the smallest result
  // (at the clamp) is a normal float.
  EXPECT_GT(ErfcNarrow(6.0f), std::numeric_limits<float>::min());
}

// The narrow GELU (the host twin of its device helper) against 0.5 x (1 + erf(x / sqrt 2)) in
// double: relative error below 1.3e-5 where |x| / sqrt 2 <= 6, as erfc's; beyond, an absolute
// error below 2e-16 |x| (the clamped erfc's). Across zero it has no cancellation: both signs keep
// the bound.
TEST(NarrowMath, GeluIsWithinATwentiethOfAHalfUnitOfF16) {
  double worst = 0, worst_at = 0;
  for (int i = -1'500'000; i <= 1'500'000; ++i) {
    const float x = static_cast<float>(i) * 1e-5f;
    const double xd = x;
    const double want = 0.5 * xd * std::erfc(-xd / std::sqrt(2.0));
    const double got = GeluNarrow(x);
    if (x == 0.0f) {
      EXPECT_EQ(got, 0.0);
    } else if (std::fabs(xd) / std::sqrt(2.0) <= 6.0) {
      const double rel = std::fabs(got - want) / std::fabs(want);
      if (rel > worst) worst = rel, worst_at = x;
    } else {
      EXPECT_LT(std::fabs(got - want), 2e-16 * std::fabs(xd)) << "x = " << x;
    }
  }
  EXPECT_LT(worst, 1.3e-5) << "at x = " << worst_at;
  EXPECT_EQ(GeluNarrow(1e30f), 1e30f);
  EXPECT_LE(GeluNarrow(-1e30f), 0.0f);
  EXPECT_GT(GeluNarrow(-1e30f), -1e30f * 1e-16f);
}

// The device helpers' sources are their host twins' polynomials: erfc's, and GELU's (erfc's in
// |x| / sqrt 2, less 1 for erfc / 2, clamped at 6 sqrt 2), each with the bare ex2 and no exp2f.
TEST(NarrowMath, HelperSourceCarriesTheHostTwinsPolynomial) {
  struct Helper {
    std::string src;
    std::vector<std::string> lines;
  };
  for (const Helper& h :
       {Helper{ErfcNarrowHelper(),
               {"__device__ __forceinline__ float tessel_erfc_narrow(float z)",
                "fminf(fabsf(z), 6.0f)", "p = fmaf(p, s, -1.6282208f);", "ex2.approx.ftz.f32"}},
        Helper{GeluNarrowHelper(),
               {"__device__ __forceinline__ float tessel_gelu_narrow(float x)",
                "fminf(fabsf(x), 8.48528099f)", "p = fmaf(p, s, -0.999992073f);",
                "return fmaf(-fabsf(x), e, fmaxf(x, 0.0f));"}}}) {
    for (const std::string& line : h.lines) EXPECT_NE(h.src.find(line), std::string::npos) << h.src;
    EXPECT_EQ(h.src.find("exp2f"), std::string::npos) << h.src;
  }
}

}  // namespace
}  // namespace tessel::schedules::codegen
