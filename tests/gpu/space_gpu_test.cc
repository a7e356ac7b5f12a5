// On an H100/H200 (CTest label gpu; skipped without a GPU): 64 random samples of the design space
// of every family match the reference kernel on random inputs.

#include <gtest/gtest.h>

#include "tests/e2e/e2e_util.h"
#include "tests/gpu/gpu_test_util.h"

namespace tessel::testing {
namespace {

class SpaceGpu : public ::testing::TestWithParam<std::string> {};

TEST_P(SpaceGpu, SamplesMatchReference) {
  SKIP_WITHOUT_GPU();
  EXPECT_GE(VerifySamplesOnGpu(GetParam(), 64, 64), 58);  // at least 90% of the samples are valid
}

INSTANTIATE_TEST_SUITE_P(Families, SpaceGpu, ::testing::ValuesIn(SpaceFamilySpecs()), SpecTestName);

// Split-K samples (the reduction split over blocks, then combined in order) match the reference:
// the first 8 that split among 64 seeds.
class SplitKSpaceGpu : public ::testing::TestWithParam<std::string> {};

TEST_P(SplitKSpaceGpu, SplitSamplesMatchReference) {
  SKIP_WITHOUT_GPU();
  const int checked = VerifySamplesOnGpu(
      GetParam(), 64, 8, [](const schedules::Candidate& c) { return SplitKFactor(*c.trace) > 1; });
  EXPECT_EQ(checked, 8);
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

// The CUDA-core sketch with its shared-memory steps software-pipelined (cp.async into
// multi-buffered slots, or synchronous stores where a copy is not 4, 8 or 16 contiguous bytes)
// matches the reference: the first 8 pipelined samples among 64 seeds, plain, transposed,
// batched, split over K, over padded copies of odd rows, and convolutions in both layouts.
class PipelinedCudaCoreSpaceGpu : public ::testing::TestWithParam<std::string> {};

TEST_P(PipelinedCudaCoreSpaceGpu, PipelinedSamplesMatchReference) {
  SKIP_WITHOUT_GPU();
  const int checked = VerifySamplesOnGpu(GetParam(), 64, 8, [](const schedules::Candidate& c) {
    return c.source.code.find("software_pipeline=") != std::string::npos;
  });
  EXPECT_EQ(checked, 8);
}

INSTANTIATE_TEST_SUITE_P(
    Families, PipelinedCudaCoreSpaceGpu,
    ::testing::Values("matmul(M=128, N=96, K=256)", "matmul(M=64, N=128, K=96, transpose_a=true)",
                      "matmul(M=96, N=64, K=128, transpose_b=true)",
                      "matmul(M=32, N=64, K=96, batch=3)", "matmul(M=128, N=128, K=16384)",
                      "matmul(M=67, N=45, K=53)", "matmul_bias_gelu(M=64, N=96, K=80)",
                      "conv2d(N=2, C=16, H=8, W=8, K=32, R=3, S=3, padding=1, layout=nhwc)",
                      "conv2d(N=2, C=8, H=9, W=40, K=32, R=3, S=3, stride=2, padding=1)"),
    SpecTestName);

// Shapes no tile divides: CUDA-core samples that tile an axis as if padded (kPadTile: the last
// tiles computed whole on zero-filled shared copies, only the output's stores guarded) match the
// reference: the first 8 that pad among 64 seeds, on the small shapes and on issue 18's.
class PaddedTileSpaceGpu : public ::testing::TestWithParam<std::string> {};

TEST_P(PaddedTileSpaceGpu, PaddedSamplesMatchReference) {
  SKIP_WITHOUT_GPU();
  const int checked = VerifySamplesOnGpu(
      GetParam(), 64, 8, [](const schedules::Candidate& c) { return PaddedLoops(*c.trace) > 0; });
  EXPECT_EQ(checked, 8);
}

std::vector<std::string> PaddedTileGpuSpecs() {
  std::vector<std::string> specs = PaddedTileSpecs();
  for (const char* s : {"matmul(M=4099, N=3001, K=1999)", "matmul(M=1031, N=4096, K=509)",
                        "matmul(M=4099, N=3001, K=1999, transpose_a=true)"}) {
    specs.push_back(s);
  }
  return specs;
}

INSTANTIATE_TEST_SUITE_P(Families, PaddedTileSpaceGpu, ::testing::ValuesIn(PaddedTileGpuSpecs()),
                         SpecTestName);

// Skinny contractions: samples of skinny_contraction's sketches (a reduction across threads,
// split over blocks or not, or partials of chunks of k a thread) match the reference: the first
// 8 among 64 seeds, on the small shapes and on issue 18's f16 matrix-vector product (its f32 one,
// M=4096 N=1 K=262144, has a 4 GiB matrix: bench/ measures it).
class SkinnySpaceGpu : public ::testing::TestWithParam<std::string> {};

TEST_P(SkinnySpaceGpu, SkinnySamplesMatchReference) {
  SKIP_WITHOUT_GPU();
  const int checked = VerifySamplesOnGpu(
      GetParam(), 64, 8, [](const schedules::Candidate& c) { return IsSkinnySample(*c.trace); });
  EXPECT_EQ(checked, 8);
}

std::vector<std::string> SkinnyGpuSpecs() {
  std::vector<std::string> specs = SkinnySpecs();
  for (const char* s : {"matmul(M=1, N=8192, K=8192, dtype=f16)", "matmul(M=2048, N=1, K=65536)",
                        "matmul(M=4096, N=4, K=8192, dtype=f16)"}) {
    specs.push_back(s);
  }
  return specs;
}

INSTANTIATE_TEST_SUITE_P(Families, SkinnySpaceGpu, ::testing::ValuesIn(SkinnyGpuSpecs()),
                         SpecTestName);

// The one-kernel "columns" sketch alone (its partials summed in shared memory, the output's
// threads fewer than the partials'): the first 6 of its samples among 200 seeds match the
// reference, on every skinny family whose large operand is contiguous along the outputs.
class BlockColumnsSpaceGpu : public ::testing::TestWithParam<std::string> {};

TEST_P(BlockColumnsSpaceGpu, BlockColumnsSamplesMatchReference) {
  SKIP_WITHOUT_GPU();
  const int checked = VerifySamplesOnGpu(GetParam(), 200, 6, [](const schedules::Candidate& c) {
    return IsBlockColumnsSample(*c.trace);
  });
  EXPECT_EQ(checked, 6);
}

INSTANTIATE_TEST_SUITE_P(Families, BlockColumnsSpaceGpu,
                         ::testing::Values("matmul(M=1, N=2048, K=2048, dtype=f16)",
                                           "matmul(M=1024, N=1, K=2048, transpose_a=true)",
                                           "matmul(M=1, N=512, K=1024, batch=3)",
                                           "matmul_bias_gelu(M=1, N=1024, K=2048, dtype=f16)",
                                           "matmul(M=8, N=1024, K=1024, dtype=f16)",
                                           "matmul(M=1, N=8192, K=8192, dtype=f16)",
                                           "matmul(M=1, N=1000, K=4100, dtype=bf16)"),
                         SpecTestName);

}  // namespace
}  // namespace tessel::testing
