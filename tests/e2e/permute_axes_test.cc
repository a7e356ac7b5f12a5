// Shared copies stored in another axis order (permute_axes) without a GPU: the host runs a
// product over a transposed copy and matches the reference; multi_level_tiling's pipelined
// sketches store a row-major A[m, k] of 4-byte elements k-major in shared memory, fetched one
// element a cp.async, and read A where it is even when its rows are not 16-byte aligned; the
// samples compile with NVRTC where the CUDA toolkit is installed. GPU runs:
// tests/gpu/space_gpu_test.cc (PipelinedCudaCoreSpaceGpu).

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "schedules/space/space_generator.h"
#include "tests/e2e/e2e_util.h"
#include "tests/schedules/recorded_schedules.h"

namespace tessel::schedules {
namespace {

bool Records(const Candidate& c, const std::string& kind) {
  for (const Instruction& i : c.trace->insts) {
    if (i.kind == kind) return true;
  }
  return false;
}

bool Pipelined(const Candidate& c) {
  return c.source.code.find("software_pipeline") != std::string::npos;
}

// The host runs the recorded schedule (A copied as [k, m]) and matches the reference.
TEST(PermuteAxes, ATransposedCopyComputesTheSameProduct) {
  const Schedule s = recorded_schedules::HostMatmulKMajorCopy(1);
  for (uint64_t seed : {1, 2}) testing::ExpectMatchesReference(s, test_workloads::HostT(), seed);
}

struct Drawn {
  int pipelined = 0, permuted = 0, four_byte_copies_of_a = 0, a_padded = 0;
};

Drawn Draw(const std::string& spec, int n) {
  Drawn d;
  auto w = ParseWorkloadSpec(spec);
  EXPECT_TRUE(w.ok()) << w.status();
  if (!w.ok()) return d;
  auto space = SpaceGenerator::Create(*w, CudaTarget("sm_90"));
  EXPECT_TRUE(space.ok()) << space.status();
  if (!space.ok()) return d;
  for (uint64_t seed = 1; seed <= static_cast<uint64_t>(n); ++seed) {
    auto c = space->Sample(seed);
    if (!c.ok() || !Pipelined(*c)) continue;
    ++d.pipelined;
    if (Records(*c, "permute_axes")) ++d.permuted;
    if (c->source.code.find("tessel_cp_async_4(&A_") != std::string::npos) {
      ++d.four_byte_copies_of_a;
    }
    if (c->source.code.find("workspace A_global") != std::string::npos) ++d.a_padded;
  }
  return d;
}

// f32 A[m, k]: every pipelined sample stores A's shared copy k-major and fetches it by 4-byte
// cp.async copies; K = 1999 (rows not 16-byte aligned) copies only B into a padded buffer.
TEST(PermuteAxes, PipelinedSketchesStoreARowMajorAKMajor) {
  for (const char* spec : {"matmul(M=256, N=192, K=128)", "matmul(M=4099, N=3001, K=1999)"}) {
    SCOPED_TRACE(spec);
    const Drawn d = Draw(spec, 32);
    EXPECT_GE(d.pipelined, 8);
    EXPECT_EQ(d.permuted, d.pipelined);
    EXPECT_EQ(d.four_byte_copies_of_a, d.pipelined);
    EXPECT_EQ(d.a_padded, 0);
  }
}

// Operands that are not row-major m-side f32 ones keep their layout: a transposed A (already
// k-major), and f16 (2-byte elements: no 2-byte cp.async).
TEST(PermuteAxes, OtherOperandsKeepTheirLayout) {
  for (const char* spec : {"matmul(M=256, N=192, K=128, transpose_a=true)",
                           "matmul(M=256, N=192, K=128, dtype=f16)"}) {
    SCOPED_TRACE(spec);
    const Drawn d = Draw(spec, 48);
    EXPECT_GE(d.pipelined, 4);
    EXPECT_EQ(d.permuted, 0);
  }
}

// NVRTC compiles the k-major samples; 0 where the CUDA toolkit is not installed.
TEST(PermuteAxes, KMajorSamplesCompileWithNvrtc) {
  const auto permuted = [](const Candidate& c) { return Records(c, "permute_axes"); };
  const int n = testing::CompileSamples("matmul(M=256, N=192, K=128)", "sm_90", 32, 3, permuted);
  if (n == 0) GTEST_SKIP() << "no CUDA toolkit in this build";
  EXPECT_EQ(n, 3);
  EXPECT_EQ(testing::CompileSamples("matmul(M=67, N=45, K=53, batch=2)", "sm_80", 32, 2, permuted),
            2);
}

}  // namespace
}  // namespace tessel::schedules
