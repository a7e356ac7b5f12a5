// Samples of the design space end to end: on the host, compiled with the system compiler and
// checked against the reference on random inputs (in CI); on CUDA, compiled with NVRTC for sm_80
// and sm_90 where the toolkit is present (GPU runs: tests/gpu/space_gpu_test.cc).

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "schedules/space/space_generator.h"
#include "schedules/workload/builtins.h"
#include "tests/e2e/e2e_util.h"
#include "worker/backend.h"
#include "worker/cuda/nvrtc_compiler.h"

namespace tessel::testing {
namespace {

class SpaceE2E : public ::testing::TestWithParam<std::string> {};

TEST_P(SpaceE2E, HostSamplesMatchReference) {
  auto w = schedules::ParseWorkloadSpec(GetParam());
  ASSERT_TRUE(w.ok()) << w.status();
  const auto target = schedules::HostTarget();
  auto ref = GenerateReference(*w, target);
  ASSERT_TRUE(ref.ok()) << ref.status();
  auto g = schedules::SpaceGenerator::Create(*w, target);
  ASSERT_TRUE(g.ok()) << g.status();
  int checked = 0;
  for (uint64_t seed = 0; seed < 8 && checked < 2; ++seed) {
    auto c = g->Sample(seed);
    if (!c.ok()) continue;
    ++checked;
    absl::Status v = worker::RunAndVerify(c->source, *ref, seed);
    EXPECT_TRUE(v.ok()) << "seed " << seed << ": " << v << "\n"
                        << c->trace->ToJsonString() << "\n"
                        << c->source.code;
  }
  EXPECT_EQ(checked, 2);
}

TEST_P(SpaceE2E, CudaSamplesCompileWithNvrtc) {
#ifndef TESSEL_HAVE_CUDA
  GTEST_SKIP() << "built without the CUDA toolkit";
#else
  if (!worker::FindCudaIncludeDir().ok()) GTEST_SKIP() << "no CUDA include directory";
  auto w = schedules::ParseWorkloadSpec(GetParam());
  ASSERT_TRUE(w.ok()) << w.status();
  for (const char* arch : {"sm_80", "sm_90"}) {
    auto g = schedules::SpaceGenerator::Create(*w, schedules::CudaTarget(arch));
    ASSERT_TRUE(g.ok()) << g.status();
    int compiled = 0;
    for (uint64_t seed = 0; seed < 8 && compiled < 2; ++seed) {
      auto c = g->Sample(seed);
      if (!c.ok()) continue;
      ++compiled;
      worker::NvrtcOptions o;
      o.arch = arch;
      auto bin = worker::CompileCuda(c->source, o);
      EXPECT_TRUE(bin.ok()) << arch << " seed " << seed << ": " << bin.status() << "\n"
                            << c->source.code;
    }
    EXPECT_EQ(compiled, 2);
  }
#endif
}

INSTANTIATE_TEST_SUITE_P(Families, SpaceE2E, ::testing::ValuesIn(SpaceFamilySpecs()), SpecTestName);

// Samples that split the reduction over blocks (split-K), end to end: the first three of the
// first 64 seeds on the host, checked against the reference; two on CUDA, compiled with NVRTC
// (GPU runs: tests/gpu/space_gpu_test.cc, SplitKSpaceGpu).
class SplitKE2E : public ::testing::TestWithParam<std::string> {};

TEST_P(SplitKE2E, HostSplitSamplesMatchReference) {
  auto w = schedules::ParseWorkloadSpec(GetParam());
  ASSERT_TRUE(w.ok()) << w.status();
  const auto target = schedules::HostTarget();
  auto ref = GenerateReference(*w, target);
  ASSERT_TRUE(ref.ok()) << ref.status();
  auto g = schedules::SpaceGenerator::Create(*w, target);
  ASSERT_TRUE(g.ok()) << g.status();
  int checked = 0;
  for (uint64_t seed = 0; seed < 64 && checked < 3; ++seed) {
    auto c = g->Sample(seed);
    if (!c.ok() || SplitKFactor(*c->trace) == 1) continue;
    ++checked;
    absl::Status v = worker::RunAndVerify(c->source, *ref, seed);
    EXPECT_TRUE(v.ok()) << "seed " << seed << " (split " << SplitKFactor(*c->trace) << "): " << v
                        << "\n"
                        << c->trace->ToJsonString() << "\n"
                        << c->source.code;
  }
  EXPECT_EQ(checked, 3);
}

TEST_P(SplitKE2E, CudaSplitSamplesCompileWithNvrtc) {
#ifndef TESSEL_HAVE_CUDA
  GTEST_SKIP() << "built without the CUDA toolkit";
#else
  if (!worker::FindCudaIncludeDir().ok()) GTEST_SKIP() << "no CUDA include directory";
  auto w = schedules::ParseWorkloadSpec(GetParam());
  ASSERT_TRUE(w.ok()) << w.status();
  for (const char* arch : {"sm_80", "sm_90"}) {
    auto g = schedules::SpaceGenerator::Create(*w, schedules::CudaTarget(arch));
    ASSERT_TRUE(g.ok()) << g.status();
    int compiled = 0;
    for (uint64_t seed = 0; seed < 64 && compiled < 2; ++seed) {
      auto c = g->Sample(seed);
      if (!c.ok() || SplitKFactor(*c->trace) == 1) continue;
      ++compiled;
      worker::NvrtcOptions o;
      o.arch = arch;
      auto bin = worker::CompileCuda(c->source, o);
      EXPECT_TRUE(bin.ok()) << arch << " seed " << seed << ": " << bin.status() << "\n"
                            << c->source.code;
    }
    EXPECT_EQ(compiled, 2) << arch;
  }
#endif
}

INSTANTIATE_TEST_SUITE_P(Families, SplitKE2E, ::testing::ValuesIn(SplitKSpecs()), SpecTestName);

// A long K that no split factor divides (1031 is prime): the rule offers no split, and the
// samples it gives are correct.
TEST(SplitKE2E, NoDividingFactorMeansNoSplitAndCorrectSamples) {
  auto w = schedules::ParseWorkloadSpec("matmul(M=8, N=1, K=1031)");
  ASSERT_TRUE(w.ok()) << w.status();
  const auto target = schedules::HostTarget();
  auto ref = GenerateReference(*w, target);
  ASSERT_TRUE(ref.ok()) << ref.status();
  auto g = schedules::SpaceGenerator::Create(*w, target);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->sketches().size(), 1u);
  for (uint64_t seed = 0; seed < 2; ++seed) {
    auto c = g->Sample(seed);
    ASSERT_TRUE(c.ok()) << c.status();
    EXPECT_EQ(SplitKFactor(*c->trace), 1);
    EXPECT_TRUE(worker::RunAndVerify(c->source, *ref, seed).ok());
  }
}

}  // namespace
}  // namespace tessel::testing
