// The verification input generator shared by the host and the GPU (worker/input_gen.h): the
// values are those of the original host FillInputs, every dtype, default and custom ranges; the
// GPU verifier's source embeds the same generator and compiles with NVRTC (no GPU needed).

#include "worker/input_gen.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "schedules/ir/buffer.h"
#include "worker/output_compare.h"

#ifdef TESSEL_HAVE_CUDA
#include "worker/cuda/cuda_verifier.h"
#include "worker/cuda/nvrtc_compiler.h"
#endif

namespace tessel::worker {
namespace {

using schedules::BufferRole;
using schedules::DType;
using schedules::MakeBuffer;
using schedules::ProgramBuffer;

// The host generator as it was written before it was shared (worker/output_compare.cc, FillBuffer):
// the oracle that the shared generator must reproduce bit for bit.
constexpr uint64_t kGamma = 0x9E3779B97F4A7C15ull;
uint64_t Mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
uint64_t OracleElement(DType t, uint64_t seed, int64_t buffer_index, int64_t i,
                       const FillOptions& opt) {
  const uint64_t key = Mix(seed ^ Mix(static_cast<uint64_t>(buffer_index + 1) * kGamma));
  const double lo = opt.float_min;
  const double span = opt.float_max - opt.float_min;
  const uint64_t int_span = static_cast<uint64_t>(opt.int_max - opt.int_min) + 1;
  const uint64_t bits = Mix(key + static_cast<uint64_t>(i + 1) * kGamma);
  const double u24 = (static_cast<double>(bits >> 40) + 0.5) / 16777216.0;
  uint64_t out = 0;
  switch (t) {
    case DType::kFloat32: {
      const float v = static_cast<float>(lo + span * u24);
      std::memcpy(&out, &v, 4);
      break;
    }
    case DType::kFloat64: {
      const double u53 = (static_cast<double>(bits >> 11) + 0.5) / 9007199254740992.0;
      const double v = lo + span * u53;
      std::memcpy(&out, &v, 8);
      break;
    }
    case DType::kFloat16:
      out = FloatToHalfBits(static_cast<float>(lo + span * u24));
      break;
    case DType::kBFloat16:
      out = FloatToBFloat16Bits(static_cast<float>(lo + span * u24));
      break;
    case DType::kInt32: {
      const int32_t v = static_cast<int32_t>(opt.int_min + static_cast<int64_t>(bits % int_span));
      std::memcpy(&out, &v, 4);
      break;
    }
    case DType::kInt64: {
      const int64_t v = opt.int_min + static_cast<int64_t>(bits % int_span);
      std::memcpy(&out, &v, 8);
      break;
    }
    case DType::kBool:
      out = bits >> 63;
      break;
  }
  return out;
}

const DType kAllDTypes[] = {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kBFloat16,
                            DType::kInt32,   DType::kInt64,   DType::kBool};

std::vector<FillOptions> Ranges() {
  FillOptions custom;
  custom.float_min = -3.25;
  custom.float_max = 1e4;
  custom.int_min = -1000;
  custom.int_max = 123456;
  FillOptions tiny;  // half subnormals and values that round across binades
  tiny.float_min = -1e-5;
  tiny.float_max = 7e-5;
  tiny.int_min = 5;
  tiny.int_max = 5;
  return {FillOptions(), custom, tiny};
}

TEST(VerifyGenTest, SharedGeneratorReproducesTheOriginalHostValuesForEveryDtype) {
  for (const FillOptions& opt : Ranges()) {
    for (DType t : kAllDTypes) {
      SCOPED_TRACE(schedules::DTypeName(t));
      const schedules::BufferPtr b = MakeBuffer("x", t, {1 << 16});
      int mismatches = 0;
      for (uint64_t seed : {uint64_t{0}, uint64_t{7}, ~uint64_t{0}}) {
        for (int64_t buffer_index : {0, 1, 5}) {
          for (int64_t i = 0; i < (1 << 16); ++i) {
            const uint64_t want = OracleElement(t, seed, buffer_index, i, opt);
            const uint64_t got = InputElementBits(*b, seed, buffer_index, i, opt);
            if (got != want && ++mismatches < 5) {
              ADD_FAILURE() << "seed " << seed << " buffer " << buffer_index << " element " << i
                            << ": shared generator " << std::hex << got << ", original " << want;
            }
          }
        }
      }
      EXPECT_EQ(mismatches, 0);
    }
  }
}

TEST(VerifyGenTest, FillInputsWritesTheSharedGeneratorsBitsIncludingPadding) {
  // A padded 2-D buffer (row stride 37 for 33 columns) and one of every dtype.
  std::vector<ProgramBuffer> buffers;
  for (DType t : kAllDTypes) {
    buffers.push_back({MakeBuffer(std::string("in_") + schedules::DTypeName(t), t, {19, 33},
                                  schedules::MemScope::kGlobal, {37, 1}),
                       BufferRole::kInput});
  }
  buffers.push_back({MakeBuffer("out", DType::kFloat32, {19, 33}), BufferRole::kOutput});
  absl::StatusOr<HostBuffers> host = MakeVerificationBuffers(buffers, 42);
  ASSERT_TRUE(host.ok()) << host.status();
  for (size_t k = 0; k + 1 < buffers.size(); ++k) {
    const schedules::Buffer& b = *buffers[k].buffer;
    const int64_t size = schedules::DTypeBytes(b.dtype);
    ASSERT_EQ(b.AllocatedElements(), 18 * 37 + 33);
    for (int64_t i = 0; i < b.AllocatedElements(); ++i) {
      uint64_t got = 0;
      std::memcpy(&got, host->data[k].data() + i * size, static_cast<size_t>(size));
      ASSERT_EQ(got, InputElementBits(b, 42, static_cast<int64_t>(k), i))
          << b.name << " element " << i;
      ASSERT_EQ(got, OracleElement(b.dtype, 42, static_cast<int64_t>(k), i, FillOptions()));
    }
  }
}

TEST(VerifyGenTest, NoFloatInputIsZeroWithTheDefaultRange) {
  const schedules::BufferPtr b = MakeBuffer("x", DType::kFloat16, {1 << 20});
  for (int64_t i = 0; i < (1 << 20); ++i) {
    const uint64_t bits = InputElementBits(*b, 3, 0, i);
    ASSERT_NE(bits & 0x7FFFu, 0u) << "element " << i << " is zero";
  }
}

TEST(VerifyGenTest, HalfAndBFloat16ConversionsMatchTheHostOnesEverywhere) {
  // Every 2^-k-spaced pattern is too many; all exponents with random mantissas, plus edges.
  std::mt19937_64 gen(1);
  std::vector<uint32_t> patterns = {0u,          0x80000000u, 0x7F800000u, 0xFF800000u, 0x7FC00000u,
                                    0x7FA00001u, 0x477FEFFFu, 0x477FF000u, 0x38800000u, 0x387FFFFFu,
                                    0x33000000u, 0x33000001u, 0x32FFFFFFu, 0x00000001u};
  for (uint32_t e = 0; e < 256; ++e) {
    for (int k = 0; k < 2000; ++k) {
      const uint32_t mant = static_cast<uint32_t>(gen()) & 0x7FFFFFu;
      const uint32_t sign = (k & 1) ? 0x80000000u : 0u;
      patterns.push_back(sign | (e << 23) | mant);
      patterns.push_back(sign | (e << 23) | (mant & ~0x1FFFu) | 0x1000u);  // exact half-way
    }
  }
  for (uint32_t x : patterns) {
    float f;
    std::memcpy(&f, &x, 4);
    ASSERT_EQ(tessel_gen::GenFloatToHalfBits(f), FloatToHalfBits(f)) << std::hex << x;
    ASSERT_EQ(tessel_gen::GenFloatToBFloat16Bits(f), FloatToBFloat16Bits(f)) << std::hex << x;
  }
}

TEST(VerifyGenTest, DTypeCodesFollowTheGeneratorsEnum) {
  EXPECT_EQ(GenDTypeOf(DType::kFloat32), tessel_gen::kGenF32);
  EXPECT_EQ(GenDTypeOf(DType::kFloat64), tessel_gen::kGenF64);
  EXPECT_EQ(GenDTypeOf(DType::kFloat16), tessel_gen::kGenF16);
  EXPECT_EQ(GenDTypeOf(DType::kBFloat16), tessel_gen::kGenBF16);
  EXPECT_EQ(GenDTypeOf(DType::kInt32), tessel_gen::kGenI32);
  EXPECT_EQ(GenDTypeOf(DType::kInt64), tessel_gen::kGenI64);
  EXPECT_EQ(GenDTypeOf(DType::kBool), tessel_gen::kGenBool);
}

// The GPU merges per-block statistics of interleaved indices (MergeUnordered); the host merges
// chunks in order (Merge). Both must name the same first and worst elements.
TEST(VerifyGenTest, UnorderedMergeNamesTheSameFirstAndWorstElementsAsTheOrderedOne) {
  std::mt19937 gen(5);
  for (int trial = 0; trial < 200; ++trial) {
    const int n = 1000;
    std::vector<CompareStats> per(n);
    for (int i = 0; i < n; ++i) {
      const int kind = static_cast<int>(gen() % 10);
      if (kind == 0) per[i].unwritten = 1, per[i].first_unwritten = i;
      if (kind == 1) per[i].nan = 1, per[i].first_nan = i;
      if (kind >= 8) {
        per[i].wrong = 1, per[i].first_wrong = i, per[i].worst = i;
        per[i].worst_ratio = static_cast<double>(gen() % 4);  // ties on purpose
      }
    }
    CompareStats ordered;
    for (const CompareStats& s : per) ordered.Merge(s);
    // 7 "threads" with a grid stride, reduced in a scrambled order.
    std::vector<CompareStats> threads(7);
    for (int i = 0; i < n; ++i) threads[static_cast<size_t>(i % 7)].MergeUnordered(per[i]);
    std::shuffle(threads.begin(), threads.end(), gen);
    CompareStats unordered;
    for (const CompareStats& s : threads) unordered.MergeUnordered(s);
    ASSERT_EQ(unordered.unwritten, ordered.unwritten);
    ASSERT_EQ(unordered.first_unwritten, ordered.first_unwritten);
    ASSERT_EQ(unordered.nan, ordered.nan);
    ASSERT_EQ(unordered.first_nan, ordered.first_nan);
    ASSERT_EQ(unordered.wrong, ordered.wrong);
    ASSERT_EQ(unordered.first_wrong, ordered.first_wrong);
    ASSERT_EQ(unordered.worst, ordered.worst);
    ASSERT_EQ(unordered.worst_ratio, ordered.worst_ratio);
  }
}

#ifdef TESSEL_HAVE_CUDA
TEST(VerifyGenTest, GpuVerifierSourceEmbedsThisGeneratorAndCompilesWithNvrtc) {
  std::ifstream in(std::string(TESSEL_SOURCE_DIR) + "/worker/input_gen.h");
  ASSERT_TRUE(in.good());
  std::stringstream text;
  text << in.rdbuf();
  std::string gen = text.str();
  gen.replace(gen.find("#pragma once"), std::string("#pragma once").size(), "");
  EXPECT_EQ(CudaVerifierSource().rfind(gen, 0), 0u)
      << "the embedded generator is stale: re-run cmake (worker/CMakeLists.txt embeds it)";
  for (const char* arch : {"sm_80", "sm_90"}) {
    absl::StatusOr<CudaBinary> bin =
        CompileCudaSource(CudaVerifierSource(), CudaVerifierNvrtcOptions(arch));
    ASSERT_TRUE(bin.ok()) << bin.status();
    for (const char* entry :
         {"tessel_verify_fill", "tessel_verify_poison", "tessel_verify_check",
          "tessel_verify_ref_stats", "tessel_verify_cand_stats", "tessel_verify_exact_stats"}) {
      EXPECT_NE(bin->cubin.find(entry), std::string::npos) << arch << " lacks " << entry;
    }
  }
}
#endif

}  // namespace
}  // namespace tessel::worker
