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
  EXPECT_EQ(VerifySamples(GetParam(), schedules::HostTarget(), 8, 2), 2);
}

TEST_P(SpaceE2E, CudaSamplesCompileWithNvrtc) {
#ifndef TESSEL_HAVE_CUDA
  GTEST_SKIP() << "built without the CUDA toolkit";
#else
  if (!worker::FindCudaIncludeDir().ok()) GTEST_SKIP() << "no CUDA include directory";
  for (const char* arch : {"sm_80", "sm_90"}) {
    EXPECT_EQ(CompileSamples(GetParam(), arch, 8, 2), 2) << arch;
  }
#endif
}

INSTANTIATE_TEST_SUITE_P(Families, SpaceE2E, ::testing::ValuesIn(SpaceFamilySpecs()), SpecTestName);

// Samples that split the reduction over blocks (split-K), end to end: the first three of the
// first 64 seeds on the host, checked against the reference; two on CUDA, compiled with NVRTC
// (GPU runs: tests/gpu/space_gpu_test.cc, SplitKSpaceGpu).
class SplitKE2E : public ::testing::TestWithParam<std::string> {};

bool SplitsK(const schedules::Candidate& c) { return SplitKFactor(*c.trace) > 1; }

TEST_P(SplitKE2E, HostSplitSamplesMatchReference) {
  EXPECT_EQ(VerifySamples(GetParam(), schedules::HostTarget(), 64, 3, SplitsK), 3);
}

TEST_P(SplitKE2E, CudaSplitSamplesCompileWithNvrtc) {
#ifndef TESSEL_HAVE_CUDA
  GTEST_SKIP() << "built without the CUDA toolkit";
#else
  if (!worker::FindCudaIncludeDir().ok()) GTEST_SKIP() << "no CUDA include directory";
  for (const char* arch : {"sm_80", "sm_90"}) {
    EXPECT_EQ(CompileSamples(GetParam(), arch, 64, 2, SplitsK), 2) << arch;
  }
#endif
}

INSTANTIATE_TEST_SUITE_P(Families, SplitKE2E, ::testing::ValuesIn(SplitKSpecs()), SpecTestName);

// Shapes no tile divides, end to end: samples that tile an axis as if padded (its last tile past
// the extent: kPadTile on CUDA, guards on the host), the first three of 32 seeds on the host
// checked against the reference; two on CUDA compiled with NVRTC (GPU runs:
// tests/gpu/space_gpu_test.cc, PaddedTileSpaceGpu).
class PaddedTileE2E : public ::testing::TestWithParam<std::string> {};

bool Pads(const schedules::Candidate& c) { return PaddedLoops(*c.trace) > 0; }

TEST_P(PaddedTileE2E, HostPaddedSamplesMatchReference) {
  EXPECT_EQ(VerifySamples(GetParam(), schedules::HostTarget(), 32, 3, Pads), 3);
}

TEST_P(PaddedTileE2E, CudaPaddedSamplesCompileWithNvrtc) {
#ifndef TESSEL_HAVE_CUDA
  GTEST_SKIP() << "built without the CUDA toolkit";
#else
  if (!worker::FindCudaIncludeDir().ok()) GTEST_SKIP() << "no CUDA include directory";
  for (const char* arch : {"sm_80", "sm_90"}) {
    EXPECT_EQ(CompileSamples(GetParam(), arch, 32, 2, Pads), 2) << arch;
  }
#endif
}

INSTANTIATE_TEST_SUITE_P(Families, PaddedTileE2E, ::testing::ValuesIn(PaddedTileSpecs()),
                         SpecTestName);

// Skinny contractions (skinny_contraction's sketches: reductions across threads, the large
// operand streamed along its contiguous axis), end to end: the first four of 64 seeds compiled
// with NVRTC (GPU runs: tests/gpu/space_gpu_test.cc, SkinnySpaceGpu).
class SkinnyE2E : public ::testing::TestWithParam<std::string> {};

TEST_P(SkinnyE2E, CudaSkinnySamplesCompileWithNvrtc) {
#ifndef TESSEL_HAVE_CUDA
  GTEST_SKIP() << "built without the CUDA toolkit";
#else
  if (!worker::FindCudaIncludeDir().ok()) GTEST_SKIP() << "no CUDA include directory";
  const auto skinny = [](const schedules::Candidate& c) { return IsSkinnySample(*c.trace); };
  for (const char* arch : {"sm_80", "sm_90"}) {
    EXPECT_EQ(CompileSamples(GetParam(), arch, 64, 4, skinny), 4) << arch;
  }
#endif
}

INSTANTIATE_TEST_SUITE_P(Families, SkinnyE2E, ::testing::ValuesIn(SkinnySpecs()), SpecTestName);

// The CUDA-core sketch pipelined: its shared-memory step loop annotated software_pipeline (2 to
// 4 stages), the copies cp.async where they are 4, 8 or 16 contiguous bytes; the samples compile
// with NVRTC (GPU runs: tests/gpu/space_gpu_test.cc, PipelinedCudaCoreSpaceGpu).
TEST(PipelinedCudaCoreE2E, StepsArePipelinedWithAsyncCopiesAndCompile) {
  auto w = schedules::ParseWorkloadSpec("matmul(M=256, N=256, K=512)");
  ASSERT_TRUE(w.ok()) << w.status();
  auto space = schedules::SpaceGenerator::Create(*w, schedules::CudaTarget("sm_90"));
  ASSERT_TRUE(space.ok()) << space.status();
  int pipelined = 0, async = 0;
  for (uint64_t seed = 1; seed <= 32; ++seed) {
    auto c = space->Sample(seed);
    if (!c.ok() || c->source.code.find("software_pipeline=") == std::string::npos) continue;
    ++pipelined;
    if (c->source.code.find("tessel_cp_async_16(") != std::string::npos) ++async;
  }
  EXPECT_GE(pipelined, 8);
  EXPECT_GE(async, 2);
#ifdef TESSEL_HAVE_CUDA
  if (!worker::FindCudaIncludeDir().ok()) return;
  const auto piped = [](const schedules::Candidate& c) {
    return c.source.code.find("software_pipeline=") != std::string::npos;
  };
  for (const char* spec : {"matmul(M=256, N=256, K=512)", "matmul(M=128, N=128, K=16384)",
                           "conv2d(N=2, C=16, H=8, W=8, K=32, R=3, S=3, padding=1, layout=nhwc)",
                           "conv2d(N=2, C=8, H=9, W=40, K=32, R=3, S=3, stride=2, padding=1)"}) {
    EXPECT_EQ(CompileSamples(spec, "sm_80", 64, 2, piped), 2) << spec;
  }
#endif
}

// A long K that no split factor divides (1031 is prime): split into chunks of ceil(K / S) (S a
// power of two), the overhang of the last chunk guarded; the split samples match the reference.
TEST(SplitKE2E, PrimeKSplitsIntoGuardedChunksAndMatchesReference) {
  auto w = schedules::ParseWorkloadSpec("matmul(M=8, N=1, K=1031)");
  ASSERT_TRUE(w.ok()) << w.status();
  const auto target = schedules::HostTarget();
  auto ref = GenerateReference(*w, target);
  ASSERT_TRUE(ref.ok()) << ref.status();
  auto g = schedules::SpaceGenerator::Create(*w, target);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->sketches().size(), 2u);
  int split = 0;
  for (uint64_t seed = 0; seed < 32 && split < 2; ++seed) {
    auto c = g->Sample(seed);
    ASSERT_TRUE(c.ok()) << c.status();
    const int64_t f = SplitKFactor(*c->trace);
    if (f == 1) continue;
    EXPECT_NE(1031 % f, 0) << f;
    ++split;
    EXPECT_TRUE(worker::RunAndVerify(c->source, *ref, seed).ok()) << "split " << f;
  }
  EXPECT_EQ(split, 2);
}

}  // namespace
}  // namespace tessel::testing
