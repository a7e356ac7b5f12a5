// Operands whose rows are not whole 16-byte vectors (a contiguous extent such as K = 1999 in f16)
// without a GPU: pad_axis on a global copy computes the same result on the host; the design
// space copies such operands into zero-padded buffers of their own (rules::AlignRows) so that the
// tensor-core sketches (mma.sync, wgmma, bulk tensor copies) apply and the CUDA-core sketch gets
// vector loads; the copies are workspaces of kernels of their own; the samples compile with
// NVRTC where the CUDA toolkit is installed. GPU runs: tests/gpu/tensor_core_gpu_test.cc
// (AlignedRowsSpaceGpu).

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "schedules/codegen/source_json.h"
#include "schedules/space/space_generator.h"
#include "tests/e2e/e2e_util.h"
#include "tests/schedules/recorded_schedules.h"

namespace tessel::schedules {
namespace {

using ::testing::HasSubstr;

bool PadsRows(const Candidate& c) {
  for (const Instruction& i : c.trace->insts) {
    if (i.kind == "pad_axis") return true;
  }
  return false;
}

// How many of `n` samples of `spec` on `arch` are valid, pad rows, and run on `marker`.
struct Drawn {
  int valid = 0, padded = 0, padded_with_marker = 0;
};

Drawn Draw(const std::string& spec, const std::string& arch, int n, const std::string& marker) {
  Drawn d;
  auto w = ParseWorkloadSpec(spec);
  EXPECT_TRUE(w.ok()) << w.status();
  if (!w.ok()) return d;
  auto space = SpaceGenerator::Create(*w, CudaTarget(arch));
  EXPECT_TRUE(space.ok()) << space.status();
  if (!space.ok()) return d;
  for (uint64_t seed = 1; seed <= static_cast<uint64_t>(n); ++seed) {
    auto c = space->Sample(seed);
    if (!c.ok()) continue;
    ++d.valid;
    if (!PadsRows(*c)) continue;
    ++d.padded;
    if (c->source.code.find(marker) != std::string::npos) ++d.padded_with_marker;
  }
  return d;
}

// The host runs the recorded schedule (A copied with its rows padded from 15 to 16) and matches
// the reference.
TEST(AlignedRows, APaddedCopyComputesTheSameProduct) {
  const Schedule s = recorded_schedules::HostMatmulPaddedRows(1);
  for (uint64_t seed : {1, 2}) testing::ExpectMatchesReference(s, test_workloads::HostT(), seed);
}

// f16 4099 x 3001 x 1999: every row of A and B starts at an odd element. Before, the tensor-core
// rule had no sketch for it (its 16-byte copies need aligned rows) and only the CUDA cores ran it.
TEST(AlignedRows, OddF16ShapesRunOnTheTensorCores) {
  const std::string spec = "matmul(M=4099, N=3001, K=1999, dtype=f16)";
  for (const char* arch : {"sm_80", "sm_90"}) {
    SCOPED_TRACE(arch);
    const Drawn d = Draw(spec, arch, 32, "tessel_mma_m16n8k16");
    EXPECT_GE(d.valid, 29);
    EXPECT_GE(d.padded_with_marker, 8);
  }
  // Some wgmma samples are over the shared memory limit, as for aligned shapes.
  const Drawn wgmma = Draw(spec, "sm_90a", 64, "wgmma.mma_async");
  EXPECT_GE(wgmma.valid, 54);
  EXPECT_GE(wgmma.padded_with_marker, 8);
  EXPECT_GE(Draw(spec, "sm_90a", 64, "cp.async.bulk.tensor").padded_with_marker, 3);
}

// The copies are workspaces with the padded shape, each computed by a kernel of its own before
// the GEMM's; the GEMM's fetches can be 16-byte copies of the padded rows.
TEST(AlignedRows, CopiesAreWorkspacesOfTheirOwnKernels) {
  auto w = ParseWorkloadSpec("matmul(M=99, N=70, K=61, dtype=f16, transpose_a=true)");
  ASSERT_TRUE(w.ok()) << w.status();
  auto space = SpaceGenerator::Create(*w, CudaTarget("sm_90"));
  ASSERT_TRUE(space.ok()) << space.status();
  int seen = 0, sixteen_bytes = 0;
  for (uint64_t seed = 1; seed <= 24 && seen < 6; ++seed) {
    auto c = space->Sample(seed);
    if (!c.ok() || !PadsRows(*c) ||
        c->source.code.find("tessel_mma_m16n8k16") == std::string::npos) {
      continue;
    }
    ++seen;
    const std::string json = SourceLaunchToJson(c->source);
    // A is [K, M] = [61, 99]: its rows padded to 104; B is [61, 70]: to 72.
    EXPECT_THAT(json, HasSubstr(R"("name":"A_global","role":"workspace","shape":[61,104])"));
    EXPECT_THAT(json, HasSubstr(R"("name":"B_global","role":"workspace","shape":[61,72])"));
    const std::string& code = c->source.code;
    EXPECT_THAT(code, HasSubstr("tessel_matmul_A_global("));
    EXPECT_THAT(code, HasSubstr("tessel_matmul_B_global("));
    sixteen_bytes +=
        code.find("tessel_cp_async_16(") != std::string::npos ||
        code.find("__ldg(reinterpret_cast<const uint4*>(&A_global[") != std::string::npos;
    EXPECT_LT(code.find("tessel_matmul_A_global("), code.find("tessel_matmul_D("));
  }
  EXPECT_EQ(seen, 6);
  EXPECT_GT(sixteen_bytes, 0);  // a fetch of 16-byte copies of the padded rows (vec 8)
}

// f32 4099 x 3001 x 1999 on the CUDA cores: the pipelined sketches read padded copies, with
// 16-byte cp.async copies (4 floats).
TEST(AlignedRows, PipelinedCudaCoreSketchesCopy16BytesOfPaddedRows) {
  auto w = ParseWorkloadSpec("matmul(M=4099, N=3001, K=1999)");
  ASSERT_TRUE(w.ok()) << w.status();
  auto space = SpaceGenerator::Create(*w, CudaTarget("sm_90"));
  ASSERT_TRUE(space.ok()) << space.status();
  int padded = 0, vectorized = 0;
  for (uint64_t seed = 1; seed <= 32; ++seed) {
    auto c = space->Sample(seed);
    if (!c.ok() || !PadsRows(*c)) continue;
    ++padded;
    if (c->source.code.find("tessel_cp_async_16(") != std::string::npos) ++vectorized;
  }
  EXPECT_GE(padded, 8);
  EXPECT_GE(vectorized, 2);
}

// Aligned rows are read where they are; the host target never copies.
TEST(AlignedRows, AlignedOperandsAndTheHostAreLeftAlone) {
  for (const char* spec : {"matmul(M=96, N=64, K=72, dtype=f16)", "matmul(M=67, N=44, K=52)"}) {
    SCOPED_TRACE(spec);
    EXPECT_EQ(Draw(spec, "sm_90a", 24, "").padded, 0);
  }
  auto w = ParseWorkloadSpec("matmul(M=67, N=45, K=53)");
  ASSERT_TRUE(w.ok()) << w.status();
  auto space = SpaceGenerator::Create(*w, HostTarget());
  ASSERT_TRUE(space.ok()) << space.status();
  for (uint64_t seed = 1; seed <= 8; ++seed) {
    auto c = space->Sample(seed);
    if (c.ok()) {
      EXPECT_FALSE(PadsRows(*c));
    }
  }
}

// NVRTC compiles the padded samples of each sketch (mma.sync on sm_80 and sm_90, wgmma and bulk
// copies on sm_90a, the CUDA cores in f32); 0 where the CUDA toolkit is not installed.
TEST(AlignedRows, PaddedSamplesCompileWithNvrtc) {
  const auto padded = [](const Candidate& c) { return PadsRows(c); };
  const int n =
      testing::CompileSamples("matmul(M=99, N=70, K=61, dtype=f16)", "sm_80", 32, 3, padded);
  if (n == 0) GTEST_SKIP() << "no CUDA toolkit in this build";
  EXPECT_EQ(n, 3);
  EXPECT_EQ(
      testing::CompileSamples("matmul(M=130, N=136, K=99, dtype=bf16)", "sm_90a", 48, 4, padded),
      4);
  EXPECT_EQ(testing::CompileSamples("matmul(M=67, N=45, K=53)", "sm_90", 32, 2, padded), 2);
}

}  // namespace
}  // namespace tessel::schedules
