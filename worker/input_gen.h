#pragma once

// The verification input generator, shared by the host (worker/output_compare.cc FillInputs) and
// the GPU (worker/cuda/cuda_verifier.cc compiles this very text with NVRTC, embedded at build
// time), so that both produce bit-identical inputs: element i of input buffer b depends only on
// (seed, b, i), through SplitMix64's finalizer in counter mode.
//
// This file must compile as host C++ and as NVRTC device code: no #include, only built-in types,
// every function TESSEL_GEN_FN, and no floating-point expression the compiler may contract or
// reassociate (the device side uses explicitly rounded operations).
//
// Threads: pure functions, callable from any thread.

#ifdef __CUDACC__
#define TESSEL_GEN_FN __device__ __forceinline__
#else
#define TESSEL_GEN_FN inline
#endif

namespace tessel_gen {

typedef unsigned long long u64;
typedef unsigned int u32;
typedef unsigned short u16;

// DType codes (schedules::DType's order is checked against these in tests).
enum GenDType { kGenF32 = 0, kGenF64, kGenF16, kGenBF16, kGenI32, kGenI64, kGenBool };

const u64 kGenGamma = 0x9E3779B97F4A7C15ull;

TESSEL_GEN_FN u64 GenMix(u64 z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// The stream key of buffer `buffer_index` (its position in the program's buffer list).
TESSEL_GEN_FN u64 GenKey(u64 seed, long long buffer_index) {
  return GenMix(seed ^ GenMix(static_cast<u64>(buffer_index + 1) * kGenGamma));
}

// The raw 64 random bits of element i.
TESSEL_GEN_FN u64 GenBits(u64 key, long long i) {
  return GenMix(key + static_cast<u64>(i + 1) * kGenGamma);
}

TESSEL_GEN_FN u32 GenFloatBits(float f) {
#ifdef __CUDACC__
  return static_cast<u32>(__float_as_uint(f));
#else
  return __builtin_bit_cast(u32, f);
#endif
}
TESSEL_GEN_FN float GenBitsFloat(u32 x) {
#ifdef __CUDACC__
  return __uint_as_float(x);
#else
  return __builtin_bit_cast(float, x);
#endif
}
TESSEL_GEN_FN u64 GenDoubleBits(double d) {
#ifdef __CUDACC__
  return static_cast<u64>(__double_as_longlong(d));
#else
  return __builtin_bit_cast(u64, d);
#endif
}

// lo + span * u without contraction into a fused multiply-add (the host's x86-64 code has none).
TESSEL_GEN_FN double GenAffine(double lo, double span, double u) {
#ifdef __CUDACC__
  return __dadd_rn(lo, __dmul_rn(span, u));
#else
  const volatile double product = span * u;  // volatile: never fused with the addition
  return lo + product;
#endif
}

// Round to nearest even of a float that is an exact multiple of 2^-1 under 2^11.
TESSEL_GEN_FN float GenRint(float x) {
#ifdef __CUDACC__
  return rintf(x);
#else
  return __builtin_rintf(x);
#endif
}

// IEEE binary16 bits of `value` (round to nearest even; NaN stays NaN).
TESSEL_GEN_FN u16 GenFloatToHalfBits(float value) {
  const u32 x = GenFloatBits(value);
  const u32 sign = (x >> 16) & 0x8000u;
  const u32 ax = x & 0x7FFFFFFFu;
  if (ax > 0x7F800000u) return static_cast<u16>(sign | 0x7E00u | ((ax >> 13) & 0x3FFu));
  if (ax >= 0x477FF000u) return static_cast<u16>(sign | 0x7C00u);  // rounds to infinity
  if (ax < 0x38800000u) {  // under 2^-14: a half subnormal (or zero) in units of 2^-24
    const float af = GenBitsFloat(ax);
    const u32 m = static_cast<u32>(GenRint(af * 16777216.0f));
    return static_cast<u16>(sign | m);  // m == 1024 is correctly the smallest normal
  }
  const u32 mant = ax & 0x7FFFFFu;
  u32 h = ((((ax >> 23) - 127 + 15) << 10) | (mant >> 13));
  const u32 rest = mant & 0x1FFFu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;  // a carry into the exponent is right
  return static_cast<u16>(sign | h);
}

// bfloat16 bits of `value` (round to nearest even; NaN stays NaN).
TESSEL_GEN_FN u16 GenFloatToBFloat16Bits(float value) {
  u32 x = GenFloatBits(value);
  if ((x & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<u16>((x >> 16) | 0x0040u);
  x += 0x7FFFu + ((x >> 16) & 1u);
  return static_cast<u16>(x >> 16);
}

// What FillOptions asks for, in built-in types.
struct GenParams {
  double lo;    // float_min
  double span;  // float_max - float_min
  long long int_min;
  u64 int_span;  // int_max - int_min + 1
};

// The storage bits of element i (the low DTypeBytes bytes are the element, little-endian).
TESSEL_GEN_FN u64 GenElement(int dtype, u64 key, long long i, const GenParams& p) {
  const u64 bits = GenBits(key, i);
  // (u + 0.5) / 2^24 is in (0, 1) and, for [-1, 1], never maps to exactly zero.
  const double u24 = (static_cast<double>(bits >> 40) + 0.5) / 16777216.0;
  switch (dtype) {
    case kGenF32:
      return GenFloatBits(static_cast<float>(GenAffine(p.lo, p.span, u24)));
    case kGenF64: {
      const double u53 = (static_cast<double>(bits >> 11) + 0.5) / 9007199254740992.0;
      return GenDoubleBits(GenAffine(p.lo, p.span, u53));
    }
    case kGenF16:
      return GenFloatToHalfBits(static_cast<float>(GenAffine(p.lo, p.span, u24)));
    case kGenBF16:
      return GenFloatToBFloat16Bits(static_cast<float>(GenAffine(p.lo, p.span, u24)));
    case kGenI32:
      return static_cast<u32>(
          static_cast<int>(p.int_min + static_cast<long long>(bits % p.int_span)));
    case kGenI64:
      return static_cast<u64>(p.int_min + static_cast<long long>(bits % p.int_span));
    default:  // bool
      return bits >> 63;
  }
}

}  // namespace tessel_gen
