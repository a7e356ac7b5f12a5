// On an H100/H200 (CTest label gpu; skipped without a GPU): 64 random samples of the design space
// of every family match the reference kernel on random inputs.

#include <gtest/gtest.h>

#include "schedules/space/space_generator.h"
#include "schedules/workload/builtins.h"
#include "tests/e2e/e2e_util.h"
#include "worker/backend.h"
#ifdef TESSEL_HAVE_CUDA
#include "worker/cuda/cuda_runner.h"
#endif

namespace tessel::testing {
namespace {

class SpaceGpu : public ::testing::TestWithParam<std::string> {};

TEST_P(SpaceGpu, SamplesMatchReference) {
#ifndef TESSEL_HAVE_CUDA
  GTEST_SKIP() << "built without the CUDA toolkit";
#else
  if (!worker::CudaDeviceAvailable()) GTEST_SKIP() << "no CUDA GPU";
  auto device = worker::CudaDevice::Open(0);
  ASSERT_TRUE(device.ok()) << device.status();
  auto w = schedules::ParseWorkloadSpec(GetParam());
  ASSERT_TRUE(w.ok()) << w.status();
  const auto target = schedules::CudaTarget("sm_90");
  auto ref = GenerateReference(*w, target);
  ASSERT_TRUE(ref.ok()) << ref.status();
  auto g = schedules::SpaceGenerator::Create(*w, target);
  ASSERT_TRUE(g.ok()) << g.status();
  worker::VerifyOptions vo;
  vo.run.device = device->get();
  int checked = 0;
  for (uint64_t seed = 0; seed < 64; ++seed) {
    auto c = g->Sample(seed);
    if (!c.ok()) continue;
    ++checked;
    absl::Status v = worker::RunAndVerify(c->source, *ref, seed, vo);
    EXPECT_TRUE(v.ok()) << "seed " << seed << ": " << v << "\n"
                        << c->trace->ToJsonString() << "\n"
                        << c->source.code;
  }
  EXPECT_GE(checked, 58);  // at least 90% of the samples are valid
#endif
}

INSTANTIATE_TEST_SUITE_P(Families, SpaceGpu, ::testing::ValuesIn(SpaceFamilySpecs()), SpecTestName);

// Split-K samples (the reduction split over blocks, then combined in order) match the reference:
// the first 8 that split among 64 seeds.
class SplitKSpaceGpu : public ::testing::TestWithParam<std::string> {};

TEST_P(SplitKSpaceGpu, SplitSamplesMatchReference) {
#ifndef TESSEL_HAVE_CUDA
  GTEST_SKIP() << "built without the CUDA toolkit";
#else
  if (!worker::CudaDeviceAvailable()) GTEST_SKIP() << "no CUDA GPU";
  auto device = worker::CudaDevice::Open(0);
  ASSERT_TRUE(device.ok()) << device.status();
  auto w = schedules::ParseWorkloadSpec(GetParam());
  ASSERT_TRUE(w.ok()) << w.status();
  const auto target = schedules::CudaTarget("sm_90");
  auto ref = GenerateReference(*w, target);
  ASSERT_TRUE(ref.ok()) << ref.status();
  auto g = schedules::SpaceGenerator::Create(*w, target);
  ASSERT_TRUE(g.ok()) << g.status();
  worker::VerifyOptions vo;
  vo.run.device = device->get();
  int checked = 0;
  for (uint64_t seed = 0; seed < 64 && checked < 8; ++seed) {
    auto c = g->Sample(seed);
    if (!c.ok() || SplitKFactor(*c->trace) == 1) continue;
    ++checked;
    absl::Status v = worker::RunAndVerify(c->source, *ref, seed, vo);
    EXPECT_TRUE(v.ok()) << "seed " << seed << " (split " << SplitKFactor(*c->trace) << "): " << v
                        << "\n"
                        << c->trace->ToJsonString() << "\n"
                        << c->source.code;
  }
  EXPECT_EQ(checked, 8);
#endif
}

std::vector<std::string> SplitKGpuSpecs() {
  std::vector<std::string> specs = SplitKSpecs();
  for (const char* s : {"matmul(M=256, N=256, K=65536)", "matmul(M=2048, N=1, K=65536)",
                        "matmul(M=32, N=8192, K=8192)", "matmul(M=64, N=4096, K=8192, dtype=f16)",
                        "conv2d(N=1, C=256, H=7, W=7, K=64, R=3, S=3, padding=1, layout=nhwc)"}) {
    specs.push_back(s);
  }
  return specs;
}

INSTANTIATE_TEST_SUITE_P(Families, SplitKSpaceGpu, ::testing::ValuesIn(SplitKGpuSpecs()),
                         SpecTestName);

}  // namespace
}  // namespace tessel::testing
