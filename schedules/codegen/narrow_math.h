#pragma once

// Math at the precision of a 16-bit store (CUDA code generation). A value that is rounded to f16
// or bf16 when stored keeps 11 or 8 significant bits, so the functions it goes through need not
// be accurate to f32's last bit; where a cheaper form is accurate to well below half a unit of the
// 16-bit result, the CUDA printer uses it (CudaCodeGen::NarrowMath).
//
// erfc, for 1 + erf(y) = erfc(-y) and 1 - erf(y) = erfc(y) (GELU's 0.5 x (1 + erf(x / sqrt 2))):
// log2(erfc(s)) for s = min(|z|, 6) as one polynomial of degree 8, one exp2 (`ex2.approx.ftz`:
// its argument is at least log2(erfc(6)), so its result is never subnormal), and
// erfc(z) = 2 - erfc(-z) for negative z. Relative error below 1.3e-5 for |z| <= 6 (f16's half
// unit is 2.4e-4, bf16's 2e-3); beyond 6, erfc(z) < 2.2e-17 and the result is erfc(6) (or
// 2 - erfc(6)), an absolute error below 2.2e-17. CUDA's erff evaluates two polynomials through
// selects (about 22 instructions), this about 13. On an H100, same trace (a persistent 2048 x
// 8192 x 2048 bias + GELU wgmma GEMM, f16, bias read through __ldg): 0.111-0.113 ms against
// 0.117 with erff (bench/RESULTS.md, session 6). The value's error is that of its operations: an
// expression that cancels after the erfc would amplify it, as it would any rounding.
//
// GELU, k x (1 + erf(x / sqrt 2)) with a constant k (the workload parser's 0.5): x (1 + erf(c x))
// = 2 max(x, 0) - |x| erfc(c |x|) for both signs of x, so GELU(x) = max(x, 0) - |x| h with
// h = erfc(|x| / sqrt 2) / 2 = exp2(q(|x|)), q the erfc polynomial with s scaled by 1 / sqrt 2 (its
// coefficients times powers of 1 / sqrt 2) and 1 taken from its constant: the scale, the halving,
// the sign's select and 2 - e fold away (in the SASS of a 128 x 256 bias + GELU wgmma kernel, 3128
// instructions against 2616). h <= 1/2 where x >= 0, so max(x, 0) - x h >= x / 2 does not cancel,
// and the result keeps erfc's relative error.
//
// The logistic 1 / (1 + exp(y)) (sigmoid's and SiLU's, as the workload parser expands them)
// prints with CUDA's __expf (ex2.approx of y log2 e) and __fdividef (an approximate reciprocal),
// in place of expf's range reduction and the IEEE division's checks: 1 + exp(y) >= 1, so nothing
// cancels, and the relative error stays below 1.4e-5 for |y| <= 88 (__expf's documented bound,
// 2 + floor(|1.173 y|) ulps, and the division's two). A bare exp is not changed: an expression
// such as exp(x) - 1 would amplify __expf's absolute error near x = 0.

#include <string>

namespace tessel::schedules::codegen {

// The name of the device helper: float tessel_erfc_narrow(float z).
inline constexpr char kErfcNarrowCall[] = "tessel_erfc_narrow";

// The host twin of the device helper (the same polynomial and operations, in float), for tests.
float ErfcNarrow(float z);

// The CUDA source of the device helper.
std::string ErfcNarrowHelper();

// GELU's scale, 1 / sqrt 2: erf's argument is x times it.
inline constexpr double kGeluScale = 0.70710678118654752;

// The name of the device helper: float tessel_gelu_narrow(float x), 0.5 x (1 + erf(x / sqrt 2)).
inline constexpr char kGeluNarrowCall[] = "tessel_gelu_narrow";

// The host twin of the GELU helper (the same polynomial and operations, in float), for tests.
float GeluNarrow(float x);

// The CUDA source of the GELU helper.
std::string GeluNarrowHelper();

}  // namespace tessel::schedules::codegen
