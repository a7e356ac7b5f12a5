#include "worker/output_compare.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "measure/measurement.h"
#include "schedules/ir/buffer.h"

namespace tessel::worker {
namespace {

using schedules::BufferRole;
using schedules::DType;
using schedules::MakeBuffer;
using schedules::ProgramBuffer;

ByteVector F32Bytes(const std::vector<float>& v) {
  ByteVector b(v.size() * 4);
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

ByteVector F16Bytes(const std::vector<float>& v) {
  ByteVector b(v.size() * 2);
  for (size_t i = 0; i < v.size(); ++i) {
    const uint16_t h = FloatToHalfBits(v[i]);
    std::memcpy(b.data() + 2 * i, &h, 2);
  }
  return b;
}

std::vector<float> RandomValues(size_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(gen);
  return v;
}

absl::Status CompareF32(const std::vector<float>& ref, const std::vector<float>& cand) {
  auto buf = MakeBuffer("C", DType::kFloat32, {static_cast<int64_t>(ref.size())});
  return CompareBuffer(*buf, F32Bytes(ref), F32Bytes(cand), DefaultTolerance(DType::kFloat32));
}

TEST(VerifyTest, HalfConversionsRoundTripEveryHalf) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const uint16_t bits = static_cast<uint16_t>(h);
    const float f = HalfBitsToFloat(bits);
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(HalfBitsToFloat(FloatToHalfBits(f)))) << h;
      continue;
    }
    ASSERT_EQ(FloatToHalfBits(f), bits) << "half bits " << h << " value " << f;
  }
}

TEST(VerifyTest, HalfConversionRoundsToNearestEven) {
  EXPECT_EQ(FloatToHalfBits(1.0f), 0x3C00);
  EXPECT_EQ(FloatToHalfBits(-2.0f), 0xC000);
  EXPECT_EQ(FloatToHalfBits(65504.0f), 0x7BFF);
  EXPECT_EQ(FloatToHalfBits(65520.0f), 0x7C00);  // the tie above the largest half: infinity
  EXPECT_EQ(FloatToHalfBits(0.1f), 0x2E66);
  EXPECT_EQ(FloatToHalfBits(1.0f + 1.0f / 2048), 0x3C00);  // tie to even (down)
  EXPECT_EQ(FloatToHalfBits(1.0f + 3.0f / 2048), 0x3C02);  // tie to even (up)
  EXPECT_EQ(FloatToHalfBits(5.9604645e-8f), 0x0001);       // smallest subnormal
  EXPECT_EQ(FloatToHalfBits(1e-9f), 0x0000);
  EXPECT_EQ(FloatToBFloat16Bits(1.0f), 0x3F80);
  EXPECT_EQ(FloatToBFloat16Bits(1.0f + 1.0f / 256), 0x3F80);  // tie to even
  EXPECT_EQ(FloatToBFloat16Bits(1.0f + 3.0f / 256), 0x3F82);
  EXPECT_TRUE(std::isnan(BFloat16BitsToFloat(FloatToBFloat16Bits(NAN))));
  EXPECT_EQ(BFloat16BitsToFloat(0x4040), 3.0f);
}

TEST(VerifyTest, FillIsSeededRandomNonZeroAndPoisonsOutputs) {
  std::vector<ProgramBuffer> buffers = {
      {MakeBuffer("A", DType::kFloat32, {1000}), BufferRole::kInput},
      {MakeBuffer("H", DType::kFloat16, {1000}), BufferRole::kInput},
      {MakeBuffer("I", DType::kInt32, {100}), BufferRole::kInput},
      {MakeBuffer("C", DType::kFloat32, {10}), BufferRole::kOutput},
      {MakeBuffer("W", DType::kBFloat16, {10}), BufferRole::kWorkspace},
  };
  absl::StatusOr<HostBuffers> a = MakeVerificationBuffers(buffers, 7);
  absl::StatusOr<HostBuffers> b = MakeVerificationBuffers(buffers, 7);
  absl::StatusOr<HostBuffers> c = MakeVerificationBuffers(buffers, 8);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok() && c.ok());
  EXPECT_EQ(a->data, b->data);
  EXPECT_NE(a->data[0], c->data[0]);
  EXPECT_NE(a->data[0], a->data[1]);  // buffers get different streams
  double sum = 0;
  for (int i = 0; i < 1000; ++i) {
    float v;
    std::memcpy(&v, a->data[0].data() + 4 * i, 4);
    EXPECT_GT(v, -1.0f);
    EXPECT_LT(v, 1.0f);
    EXPECT_NE(v, 0.0f);
    sum += v;
    uint16_t h;
    std::memcpy(&h, a->data[1].data() + 2 * i, 2);
    EXPECT_LE(std::fabs(HalfBitsToFloat(h)), 1.0f);
  }
  EXPECT_LT(std::fabs(sum / 1000), 0.1);  // roughly centered
  for (int i = 0; i < 100; ++i) {
    int32_t v;
    std::memcpy(&v, a->data[2].data() + 4 * i, 4);
    EXPECT_GE(v, 0);
    EXPECT_LE(v, 7);
  }
  for (int i = 0; i < 10; ++i) {
    uint32_t bits;
    std::memcpy(&bits, a->data[3].data() + 4 * i, 4);
    EXPECT_EQ(bits, kPoisonF32);
    uint16_t w;
    std::memcpy(&w, a->data[4].data() + 2 * i, 2);
    EXPECT_EQ(w, kPoisonBF16);
  }
}

TEST(VerifyTest, F32WithinToleranceAndNearZeroOutputsPass) {
  std::vector<float> ref = RandomValues(4096, 1);
  for (float& x : ref) x *= 50.0f;
  ref[17] = 1e-9f;  // an output that cancelled to almost zero
  std::vector<float> cand = ref;
  for (float& x : cand) x *= 1.0f + 3e-5f;
  cand[17] = 1e-9f + 1e-3f;  // far off relative to itself, tiny relative to rms (~29)
  EXPECT_TRUE(CompareF32(ref, cand).ok()) << CompareF32(ref, cand);
}

TEST(VerifyTest, F32SystematicErrorFails) {
  std::vector<float> ref = RandomValues(4096, 2);
  std::vector<float> cand = ref;
  for (float& x : cand) x *= 1.0f + 5e-4f;  // 5x the f32 tolerance, everywhere
  absl::Status s = CompareF32(ref, cand);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(measure::AttachedMeasureStatus(s), measure::MeasureStatus::kVerifyFailed);
  EXPECT_NE(s.message().find("output 'C'"), absl::string_view::npos) << s;
  EXPECT_NE(s.message().find("relative L2 error"), absl::string_view::npos) << s;
}

TEST(VerifyTest, F32SingleBadElementIsNamed) {
  std::vector<float> ref = RandomValues(64 * 64, 3);
  std::vector<float> cand = ref;
  cand[64 * 5 + 9] += 0.01f;  // one element, ~2% of rms
  auto buf = MakeBuffer("C", DType::kFloat32, {64, 64});
  absl::Status s =
      CompareBuffer(*buf, F32Bytes(ref), F32Bytes(cand), DefaultTolerance(DType::kFloat32));
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("1 of 4096 elements differ"), absl::string_view::npos) << s;
  EXPECT_NE(s.message().find("index 329 [5, 9]"), absl::string_view::npos) << s;
}

// Sums of K = 65536 products: a float32 sum in one order against a float64 one passes, and the
// same sum with one product left out fails.
TEST(VerifyTest, F32LongReductionsPassAndAMissingTermFails) {
  constexpr int kK = 65536;
  constexpr int kOut = 48;
  std::vector<float> a = RandomValues(kK, 4);
  std::vector<float> ref(kOut), seq(kOut), missing(kOut);
  for (int o = 0; o < kOut; ++o) {
    std::vector<float> b = RandomValues(kK, 100 + o);
    double exact = 0;
    float acc = 0;
    for (int k = 0; k < kK; ++k) {
      exact += static_cast<double>(a[k]) * b[k];
      acc += a[k] * b[k];
    }
    ref[o] = static_cast<float>(exact);
    seq[o] = acc;
    missing[o] = acc - a[o * 7] * b[o * 7];
  }
  EXPECT_TRUE(CompareF32(ref, seq).ok()) << CompareF32(ref, seq);
  EXPECT_FALSE(CompareF32(ref, missing).ok());
}

TEST(VerifyTest, NaNNeverPasses) {
  std::vector<float> ref = RandomValues(100, 5);
  std::vector<float> cand = ref;
  cand[3] = std::numeric_limits<float>::quiet_NaN();
  auto buf = MakeBuffer("Y", DType::kFloat32, {100});
  Tolerance loose{1e9, 1e9, 1e9};
  absl::Status s = CompareBuffer(*buf, F32Bytes(ref), F32Bytes(cand), loose);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("1 NaN computed by the program, first at index 3"),
            absl::string_view::npos)
      << s;
  // A NaN in the reference is the reference's fault, and fails too.
  absl::Status r = CompareBuffer(*buf, F32Bytes(cand), F32Bytes(ref), loose);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.message().find("reference"), absl::string_view::npos) << r;
  EXPECT_FALSE(measure::AttachedMeasureStatus(r).has_value());
}

TEST(VerifyTest, UnwrittenElementsAreReported) {
  std::vector<float> ref = RandomValues(100, 6);
  ByteVector cand = F32Bytes(ref);
  for (int i = 50; i < 100; ++i) std::memcpy(cand.data() + 4 * i, &kPoisonF32, 4);
  auto buf = MakeBuffer("Y", DType::kFloat32, {100});
  absl::Status s = CompareBuffer(*buf, F32Bytes(ref), cand, DefaultTolerance(DType::kFloat32));
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("50 never written"), absl::string_view::npos) << s;
  EXPECT_NE(s.message().find("first at index 50"), absl::string_view::npos) << s;
}

TEST(VerifyTest, InfinitiesMustMatch) {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> ref = {1.0f, inf, -inf};
  EXPECT_TRUE(CompareF32(ref, {1.0f, inf, -inf}).ok());
  EXPECT_FALSE(CompareF32(ref, {1.0f, 3e38f, -inf}).ok());
}

TEST(VerifyTest, F16ToleranceIsAboutOnePercent) {
  std::vector<float> ref = RandomValues(1000, 7);
  std::vector<float> near = ref, far = ref;
  for (float& x : near) x *= 1.004f;  // a few f16 ulps
  for (float& x : far) x *= 1.03f;
  auto buf = MakeBuffer("H", DType::kFloat16, {1000});
  const Tolerance tol = DefaultTolerance(DType::kFloat16);
  EXPECT_TRUE(CompareBuffer(*buf, F16Bytes(ref), F16Bytes(near), tol).ok());
  absl::Status s = CompareBuffer(*buf, F16Bytes(ref), F16Bytes(far), tol);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("output 'H' (f16[1000])"), absl::string_view::npos) << s;
}

TEST(VerifyTest, BFloat16OneUlpPasses) {
  std::vector<float> ref = RandomValues(1000, 8);
  ByteVector r(2000), c(2000);
  for (int i = 0; i < 1000; ++i) {
    const uint16_t h = FloatToBFloat16Bits(ref[i]);
    const uint16_t next = static_cast<uint16_t>(h + 1);  // one ulp away from zero
    std::memcpy(r.data() + 2 * i, &h, 2);
    std::memcpy(c.data() + 2 * i, &next, 2);
  }
  auto buf = MakeBuffer("B", DType::kBFloat16, {1000});
  EXPECT_TRUE(CompareBuffer(*buf, r, c, DefaultTolerance(DType::kBFloat16)).ok());
}

TEST(VerifyTest, IntegersMustMatchExactly) {
  auto buf = MakeBuffer("I", DType::kInt32, {4});
  ByteVector r(16), c(16);
  const int32_t rv[4] = {1, 2, 3, 4};
  const int32_t cv[4] = {1, 2, 5, 4};
  std::memcpy(r.data(), rv, 16);
  std::memcpy(c.data(), cv, 16);
  absl::Status s = CompareBuffer(*buf, r, c, DefaultTolerance(DType::kInt32));
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("candidate 5, reference 3"), absl::string_view::npos) << s;
  EXPECT_TRUE(CompareBuffer(*buf, r, r, DefaultTolerance(DType::kInt32)).ok());
}

TEST(VerifyTest, CompareOutputsNamesEveryFailingBuffer) {
  std::vector<ProgramBuffer> buffers = {
      {MakeBuffer("X", DType::kFloat32, {8}), BufferRole::kInput},
      {MakeBuffer("Y", DType::kFloat32, {8}), BufferRole::kOutput},
      {MakeBuffer("Z", DType::kFloat32, {8}), BufferRole::kOutput},
  };
  absl::StatusOr<HostBuffers> ref = MakeVerificationBuffers(buffers, 1);
  ASSERT_TRUE(ref.ok());
  std::vector<float> vals = RandomValues(8, 9);
  ref->data[1] = F32Bytes(vals);
  ref->data[2] = F32Bytes(vals);
  HostBuffers cand = *ref;
  EXPECT_TRUE(CompareOutputs(buffers, *ref, cand).ok());
  vals[2] += 1.0f;
  cand.data[1] = F32Bytes(vals);
  cand.data[2] = F32Bytes(vals);
  absl::Status s = CompareOutputs(buffers, *ref, cand);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(measure::AttachedMeasureStatus(s), measure::MeasureStatus::kVerifyFailed);
  EXPECT_NE(s.message().find("output 'Y'"), absl::string_view::npos) << s;
  EXPECT_NE(s.message().find("output 'Z'"), absl::string_view::npos) << s;
}

TEST(VerifyTest, TimingsSummaries) {
  measure::Timings odd = measure::MakeTimings({3, 1, 2});
  EXPECT_EQ(odd.median_ms, 2);
  EXPECT_EQ(odd.min_ms, 1);
  EXPECT_EQ(odd.max_ms, 3);
  EXPECT_EQ(odd.repeats_ms, (std::vector<double>{3, 1, 2}));  // measurement order kept
  EXPECT_EQ(measure::MakeTimings({4, 1, 2, 3}).median_ms, 2.5);
}

}  // namespace
}  // namespace tessel::worker
