// On an H100/H200 (CTest label gpu; skipped without a GPU): tensor-core kernels (mma.sync,
// ldmatrix, cp.async pipelines) match the reference on random inputs: the recorded schedule with
// 1 to 4 pipeline stages, and the tensor-core samples of the design space of f16/bf16 GEMMs with
// transposes, batches and a fused epilogue.

#include <gtest/gtest.h>

#include "schedules/codegen/cuda_codegen.h"
#include "schedules/lower/lower.h"
#include "schedules/space/space_generator.h"
#include "schedules/workload/builtins.h"
#include "tests/e2e/e2e_util.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/schedules/recorded_schedules.h"
#include "worker/backend.h"
#ifdef TESSEL_HAVE_CUDA
#include "worker/cuda/cuda_runner.h"
#endif

namespace tessel::testing {
namespace {

#ifdef TESSEL_HAVE_CUDA
TEST(TensorCoreGpu, RecordedScheduleMatchesReferenceAtEveryPipelineDepth) {
  if (!worker::CudaDeviceAvailable()) GTEST_SKIP() << "no CUDA GPU";
  auto device = worker::CudaDevice::Open(0);
  ASSERT_TRUE(device.ok()) << device.status();
  const auto target = schedules::CudaTarget("sm_90");
  for (const char* spec :
       {"matmul(M=64, N=64, K=64, dtype=f16)", "matmul(M=128, N=192, K=320, dtype=bf16)"}) {
    auto w = schedules::ParseWorkloadSpec(spec);
    ASSERT_TRUE(w.ok()) << w.status();
    auto ref = GenerateReference(*w, target);
    ASSERT_TRUE(ref.ok()) << ref.status();
    for (int64_t stages : {1, 2, 3, 4}) {
      for (bool spread : {false, true}) {  // the next stage's copies in one burst or spread
        // The next stage's first fragments loaded in the last k step (pipeline_fragments_across).
        for (bool across : {false, true}) {
          for (uint64_t seed : {uint64_t{1}, uint64_t{2}}) {  // one or two k steps
            schedules::Schedule s = schedules::recorded_schedules::CudaTensorCoreMatmul(
                seed + stages * 2, stages, true, spec, spread, across);
            auto src = Generate(s, target);
            ASSERT_TRUE(src.ok()) << src.status();
            worker::VerifyOptions vo;
            vo.run.device = device->get();
            absl::Status v = worker::RunAndVerify(*src, *ref, stages, vo);
            EXPECT_TRUE(v.ok()) << spec << ", " << stages << " stages, spread " << spread
                                << ", across " << across << ": " << v << "\n"
                                << src->code;
          }
        }
      }
    }
  }
}

class TensorCoreSpaceGpu : public ::testing::TestWithParam<std::string> {};

TEST_P(TensorCoreSpaceGpu, TensorCoreSamplesMatchReference) {
  SKIP_WITHOUT_GPU();
  const int checked = VerifySamplesOnGpu(GetParam(), 48, 12, [](const schedules::Candidate& c) {
    return c.source.code.find("tessel_mma_m16n8k16") != std::string::npos;
  });
  EXPECT_GE(checked, 8);
}

// The samples whose shared copies are XOR-swizzled (kSwizzleWidest: 32, 64 or 128 bytes, as the
// tiles allow) rather than padded, read through ldmatrix.
TEST_P(TensorCoreSpaceGpu, SwizzledSamplesMatchReference) {
  SKIP_WITHOUT_GPU();
  const int checked = VerifySamplesOnGpu(GetParam(), 96, 6, [](const schedules::Candidate& c) {
    return c.source.code.find("tessel_mma_m16n8k16") != std::string::npos &&
           c.source.code.find("tessel_swizzle_") != std::string::npos;
  });
  EXPECT_GE(checked, 3);
}

INSTANTIATE_TEST_SUITE_P(
    Families, TensorCoreSpaceGpu,
    ::testing::Values("matmul(M=128, N=128, K=128, dtype=f16)",
                      "matmul(M=96, N=160, K=224, dtype=bf16, transpose_a=true)",
                      "matmul(M=64, N=256, K=64, dtype=f16, transpose_b=true)",
                      "matmul(M=32, N=64, K=96, batch=3, dtype=bf16)",
                      "matmul_bias_gelu(M=128, N=256, K=96, dtype=f16)",
                      // Shapes no tile divides: zero-filled tails, guarded stores.
                      "matmul(M=100, N=200, K=168, dtype=f16)",
                      "matmul(M=77, N=120, K=104, dtype=bf16, transpose_b=true)",
                      "matmul_bias_gelu(M=50, N=72, K=40, dtype=f16)",
                      // Convolutions as implicit GEMMs (fuse_axes, reindex): padded borders
                      // zero-filled, strides, both layouts, rows no tile divides, an epilogue.
                      "conv2d(N=2, C=16, H=6, W=6, K=16, R=3, S=3, padding=1, layout=nhwc, "
                      "dtype=f16)",
                      "conv2d(N=3, C=32, H=9, W=7, K=24, R=3, S=3, stride=2, padding=1, "
                      "layout=nhwc, dtype=bf16)",
                      "conv2d(N=2, C=64, H=8, W=8, K=32, R=1, S=1, layout=nhwc, dtype=f16)",
                      "conv2d(N=2, C=16, H=10, W=10, K=32, R=3, S=3, padding=2, dilation=2, "
                      "layout=nchw, dtype=f16)",
                      "conv2d_bias_relu(N=2, C=32, H=7, W=7, K=48, R=3, S=3, padding=1, "
                      "layout=nhwc, dtype=f16)"),
    SpecTestName);

// sm_90a: samples of the warpgroup sketch (wgmma from swizzled shared memory) match the
// reference: plain, transposed (K-major and MN-major operands), batched, with an epilogue, with
// tiles no shape divides, and convolutions as implicit GEMMs.
class WgmmaSpaceGpu : public ::testing::TestWithParam<std::string> {};

// The first 8 sm_90a samples of `spec` (seeds 1 to `seeds`) whose code contains `marker`, verified
// against the reference; how many there were.
int VerifySm90aSamplesWith(const std::string& spec, uint64_t seeds, const std::string& marker) {
  return VerifySamplesOnGpu(
      spec, seeds, 8,
      [&](const schedules::Candidate& c) {
        return c.source.code.find(marker) != std::string::npos;
      },
      "sm_90a");
}

TEST_P(WgmmaSpaceGpu, WgmmaSamplesMatchReference) {
  SKIP_WITHOUT_GPU();
  EXPECT_GE(VerifySm90aSamplesWith(GetParam(), 64, "wgmma.mma_async"), 6);
}

INSTANTIATE_TEST_SUITE_P(
    Families, WgmmaSpaceGpu,
    ::testing::Values("matmul(M=256, N=256, K=256, dtype=f16)",
                      "matmul(M=128, N=512, K=192, dtype=bf16, transpose_a=true)",
                      "matmul(M=256, N=256, K=128, dtype=f16, transpose_b=true)",
                      "matmul(M=128, N=128, K=128, batch=3, dtype=bf16)",
                      "matmul_bias_gelu(M=256, N=256, K=128, dtype=f16)",
                      "matmul(M=200, N=136, K=168, dtype=f16)",
                      // Convolutions as implicit GEMMs, the padded border zero-filled.
                      "conv2d(N=2, C=64, H=8, W=8, K=64, R=3, S=3, padding=1, layout=nhwc, "
                      "dtype=f16)",
                      "conv2d(N=3, C=64, H=7, W=9, K=128, R=1, S=1, layout=nhwc, dtype=bf16)"),
    SpecTestName);

// Sigmoid and SiLU epilogues stored as f16 or bf16 print their logistic with __expf and
// __fdividef (schedules/codegen/narrow_math.h): samples on mma.sync (sm_90) and wgmma (sm_90a)
// whose code has it match the reference, on tiles that divide the shape and on tiles that do not.
TEST(NarrowEpilogueGpu, SigmoidAndSiluEpiloguesMatchReference) {
  SKIP_WITHOUT_GPU();
  const std::string kLogistic = "__fdividef(1.0f, 1.0f + __expf(";
  for (const char* definition :
       {"A = input(f16, [M, K])\nB = input(f16, [K, N])\n"
        "C[m, n] = sum(k) f32(A[m, k]) * f32(B[k, n])\nD[m, n] = f16(silu(C[m, n]))\n"
        "output D\nwith M = 256, N = 256, K = 128",
        "A = input(bf16, [M, K])\nB = input(bf16, [K, N])\nbias = input(bf16, [N])\n"
        "C[m, n] = sum(k) f32(A[m, k]) * f32(B[k, n])\n"
        "D[m, n] = bf16(sigmoid(C[m, n] + f32(bias[n])))\noutput D\nwith M = 100, N = 72, K = "
        "40"}) {
    EXPECT_GE(VerifySamplesOnGpu(definition, 64, 6,
                                 [&](const schedules::Candidate& c) {
                                   return c.source.code.find(kLogistic) != std::string::npos &&
                                          c.source.code.find("tessel_mma_m16n8k16") !=
                                              std::string::npos;
                                 }),
              3)
        << definition;
    EXPECT_GE(VerifySm90aSamplesWith(definition, 64, "wgmma.mma_async"), 3) << definition;
  }
}

// Operands whose rows are not whole 16-byte vectors (odd contiguous extents): samples whose
// operands were first copied into zero-padded global buffers (pad_axis, kernels of their own)
// match the reference, on the tensor cores (mma.sync on sm_90; wgmma with cp.async and with bulk
// tensor copies on sm_90a) and on the CUDA cores (f32).
struct AlignedRowsCase {
  std::string spec;
  std::string arch;
  std::string marker;  // in the sample's code
};

class AlignedRowsSpaceGpu : public ::testing::TestWithParam<AlignedRowsCase> {};

TEST_P(AlignedRowsSpaceGpu, SamplesOverPaddedCopiesMatchReference) {
  SKIP_WITHOUT_GPU();
  const AlignedRowsCase& c = GetParam();
  const int checked = VerifySamplesOnGpu(
      c.spec, 96, 6,
      [&](const schedules::Candidate& cand) {
        bool padded = false;
        for (const schedules::Instruction& i : cand.trace->insts) padded |= i.kind == "pad_axis";
        return padded && cand.source.code.find(c.marker) != std::string::npos;
      },
      c.arch);
  EXPECT_GE(checked, 4);
}

INSTANTIATE_TEST_SUITE_P(
    Families, AlignedRowsSpaceGpu,
    ::testing::Values(
        AlignedRowsCase{"matmul(M=99, N=70, K=61, dtype=f16)", "sm_90", "tessel_mma_m16n8k16"},
        AlignedRowsCase{"matmul(M=45, N=83, K=97, dtype=bf16, transpose_a=true)", "sm_90",
                        "tessel_mma_m16n8k16"},
        AlignedRowsCase{"matmul_bias_gelu(M=50, N=77, K=43, dtype=f16)", "sm_90",
                        "tessel_mma_m16n8k16"},
        AlignedRowsCase{"matmul(M=130, N=136, K=99, dtype=f16)", "sm_90a", "wgmma.mma_async"},
        AlignedRowsCase{"matmul(M=130, N=136, K=99, dtype=f16, transpose_b=true)", "sm_90a",
                        "cp.async.bulk.tensor"},
        AlignedRowsCase{"matmul(M=67, N=45, K=53)", "sm_90", "float"}),
    [](const ::testing::TestParamInfo<AlignedRowsCase>& info) {
      std::string name =
          SpecTestName(::testing::TestParamInfo<std::string>(info.param.spec, info.index)) + "_" +
          info.param.arch + "_" + std::to_string(info.index);
      return name;
    });

// A hand schedule of `spec` lowered for sm_90, its code holding `marker`, matches the reference.
void ExpectHandScheduleMatchesOnSm90(const schedules::Schedule& sch, const std::string& spec,
                                     const std::string& marker) {
  auto device = worker::CudaDevice::Open(0);
  ASSERT_TRUE(device.ok()) << device.status();
  const schedules::Target target = schedules::CudaTarget("sm_90");
  auto source = Generate(sch, target);
  ASSERT_TRUE(source.ok()) << source.status();
  ASSERT_NE(source->code.find(marker), std::string::npos) << source->code;
  auto ref = GenerateReference(LoadSpec(spec), target);
  ASSERT_TRUE(ref.ok()) << ref.status();
  worker::VerifyOptions vo;
  vo.run.device = device->get();
  vo.run.nvrtc.arch = "sm_90";
  for (uint64_t seed : {1, 2}) {
    absl::Status v = worker::RunAndVerify(*source, *ref, seed, vo);
    EXPECT_TRUE(v.ok()) << v << "\n" << source->code;
  }
}

// A producer plane's pipeline run four times (inside the loop over C's rows, its mbarriers set up
// once): its steps count on across the runs, and C matches the reference on sm_90.
TEST(BulkCopyGpu, APlanePipelineInsideALoopMatchesTheReference) {
  SKIP_WITHOUT_GPU();
  ExpectHandScheduleMatchesOnSm90(PlanePipelineInsideALoop(),
                                  "matmul(M=4, N=128, K=256, dtype=f16)", "if (threadIdx.z == 1)");
}

// sm_90a: wgmma reading A from registers (each warp's fragment loaded by ldmatrix at the
// pipelined k step, WgmmaWithRegisterOperand) matches the reference: f16, bf16 with A
// transposed, an epilogue, and tiles past the extents.
TEST(WgmmaGpu, AFromRegistersMatchesTheReference) {
  SKIP_WITHOUT_GPU();
  auto device = worker::CudaDevice::Open(0);
  ASSERT_TRUE(device.ok()) << device.status();
  const schedules::Target target = schedules::CudaTarget("sm_90a");
  worker::VerifyOptions vo;
  vo.run.device = device->get();
  vo.run.nvrtc.arch = "sm_90a";
  for (const char* spec : {"matmul(M=256, N=256, K=512, dtype=f16)",
                           "matmul(M=256, N=128, K=192, dtype=bf16, transpose_a=true)",
                           "matmul_bias_gelu(M=256, N=256, K=128, dtype=f16)",
                           "matmul(M=200, N=136, K=168, dtype=f16)"}) {
    SCOPED_TRACE(spec);
    auto space = schedules::SpaceGenerator::Create(LoadSpec(spec), target);
    ASSERT_TRUE(space.ok()) << space.status();
    auto ref = GenerateReference(LoadSpec(spec), target);
    ASSERT_TRUE(ref.ok()) << ref.status();
    int checked = 0;
    for (uint64_t seed = 1; seed <= 300 && checked < 3; ++seed) {
      auto c = space->Sample(seed);
      if (!c.ok() || c->source.code.find("wgmma.mma_async") == std::string::npos ||
          c->source.code.find("cp.async.bulk") != std::string::npos) {
        continue;
      }
      auto sch = WgmmaWithRegisterOperand(*c);
      ASSERT_TRUE(sch.ok()) << sch.status();
      auto source = Generate(*sch, target);
      ASSERT_TRUE(source.ok()) << source.status();
      ASSERT_TRUE(source->code.find("_r0(&") != std::string::npos ||
                  source->code.find("_r1(&") != std::string::npos)
          << source->code;
      absl::Status v = worker::RunAndVerify(*source, *ref, seed, vo);
      EXPECT_TRUE(v.ok()) << v << "\n" << source->code;
      ++checked;
    }
    EXPECT_GE(checked, 2);
  }
}

// Two thread groups taking turns at one ring of slots (pipeline_turns), the pipeline run once a
// row of C by each: C matches the reference on sm_90.
TEST(BulkCopyGpu, ThreadsTakingTurnsMatchTheReference) {
  SKIP_WITHOUT_GPU();
  ExpectHandScheduleMatchesOnSm90(TurnsPipelineInsideALoop(TurnsFetch::kBulk),
                                  "matmul(M=4, N=256, K=256, dtype=f16)", "_turn[");
}

// sm_90a: samples of the warpgroup sketch whose operands the copy engine fetches (tensor maps
// made by the runner, cp.async.bulk.tensor into swizzled slots, mbarrier waits) match the
// reference: K-major and MN-major boxes, an epilogue, and tiles past the extents (the copy
// engine's zero fill).
class BulkCopySpaceGpu : public ::testing::TestWithParam<std::string> {};

TEST_P(BulkCopySpaceGpu, BulkCopySamplesMatchReference) {
  SKIP_WITHOUT_GPU();
  EXPECT_GE(VerifySm90aSamplesWith(GetParam(), 160, "cp.async.bulk.tensor"), 6);
}

INSTANTIATE_TEST_SUITE_P(
    Families, BulkCopySpaceGpu,
    ::testing::Values("matmul(M=256, N=256, K=256, dtype=f16)",
                      // Batched: the box's nest starts below the batch axis's loop (3D boxes).
                      "matmul(M=128, N=128, K=128, batch=3, dtype=bf16)",
                      "matmul(M=128, N=512, K=192, dtype=bf16, "
                      "transpose_a=true)",
                      "matmul(M=256, N=256, K=128, dtype=f16, transpose_b=true)",
                      "matmul_bias_gelu(M=256, N=256, K=128, dtype=f16)",
                      "matmul(M=200, N=136, K=168, dtype=f16)"),
    SpecTestName);

// sm_90a: samples whose write-back goes through shared memory and bulk tensor stores (each
// warp's 16 rows in 64-column chunks, a tensor map over the output) match the reference: plain,
// batched (3D boxes), transposed, an epilogue, persistent blocks whose last round has blocks
// past the tiles (the warp's guard around its chunks), and rows past the extent (the copy engine
// writes nothing there).
class BulkStoreSpaceGpu : public ::testing::TestWithParam<std::string> {};

TEST_P(BulkStoreSpaceGpu, BulkStoreSamplesMatchReference) {
  SKIP_WITHOUT_GPU();
  EXPECT_GE(VerifySm90aSamplesWith(GetParam(), 200, "tessel_tma_store_"), 4);
}

INSTANTIATE_TEST_SUITE_P(
    Families, BulkStoreSpaceGpu,
    ::testing::Values("matmul(M=256, N=256, K=256, dtype=f16)",
                      "matmul(M=128, N=128, K=128, batch=3, dtype=bf16)",
                      "matmul(M=128, N=512, K=192, dtype=bf16, transpose_a=true)",
                      "matmul_bias_gelu(M=256, N=256, K=128, dtype=f16)",
                      "matmul(M=1664, N=2816, K=256, dtype=f16)",
                      "matmul(M=200, N=256, K=168, dtype=f16)"),
    SpecTestName);

// sm_90a: samples whose producer is a plane of four warps beside two computing warpgroups along
// y (block (32, 12, 1), registers moved by setmaxnreg) match the reference: plain, transposed,
// an epilogue, tiles past the extents.
class YPlaneSpaceGpu : public ::testing::TestWithParam<std::string> {};

TEST_P(YPlaneSpaceGpu, PlaneAlongYSamplesMatchReference) {
  SKIP_WITHOUT_GPU();
  EXPECT_GE(VerifySm90aSamplesWith(GetParam(), 300, "if (threadIdx.y >= 8) {"), 4);
}

INSTANTIATE_TEST_SUITE_P(
    Families, YPlaneSpaceGpu,
    ::testing::Values("matmul(M=256, N=256, K=256, dtype=f16)",
                      "matmul(M=256, N=512, K=192, dtype=bf16, transpose_a=true)",
                      "matmul_bias_gelu(M=256, N=256, K=128, dtype=f16)",
                      "matmul(M=200, N=136, K=168, dtype=f16)"),
    SpecTestName);

// sm_90a: samples in clusters of two whose shared tile is multicast (each CTA copying half of
// its rows into both) match the reference: plain, transposed, an epilogue, and tile counts the
// cluster does not divide (the last cluster's second block on a tile past the extents).
class MulticastSpaceGpu : public ::testing::TestWithParam<std::string> {};

TEST_P(MulticastSpaceGpu, MulticastSamplesMatchReference) {
  SKIP_WITHOUT_GPU();
  EXPECT_GE(VerifySm90aSamplesWith(GetParam(), 500, "tessel_tma_multicast_"), 4);
}

INSTANTIATE_TEST_SUITE_P(
    Families, MulticastSpaceGpu,
    ::testing::Values("matmul(M=256, N=256, K=256, dtype=f16)",
                      "matmul(M=256, N=512, K=192, dtype=bf16, transpose_a=true)",
                      "matmul(M=256, N=256, K=128, dtype=f16, transpose_b=true)",
                      "matmul_bias_gelu(M=256, N=256, K=128, dtype=f16)",
                      "matmul(M=200, N=136, K=168, dtype=f16)",
                      "matmul(M=192, N=320, K=256, batch=2, dtype=f16)"),
    SpecTestName);

// sm_90a: persistent grids (up to 132 or 264 blocks taking the tiles in rounds, the producer's
// pipeline counting on across the rounds, the last round's blocks past the tiles on a padded
// tile with guarded stores) match the reference: plain, transposed, an epilogue, clusters, and
// tiles the output does not divide.
class PersistentSpaceGpu : public ::testing::TestWithParam<std::string> {};

TEST_P(PersistentSpaceGpu, PersistentSamplesMatchReference) {
  SKIP_WITHOUT_GPU();
  const int checked = VerifySamplesOnGpu(
      GetParam(), 300, 6,
      [](const schedules::Candidate& c) {
        return c.source.code.find("cp.async.bulk.tensor") != std::string::npos &&
               BlockRounds(c) > 1;
      },
      "sm_90a");
  EXPECT_GE(checked, 4);
}

INSTANTIATE_TEST_SUITE_P(
    Families, PersistentSpaceGpu,
    ::testing::Values("matmul(M=4096, N=2048, K=128, dtype=f16)",
                      "matmul(M=4096, N=2048, K=192, dtype=bf16, transpose_a=true)",
                      "matmul(M=2048, N=4096, K=256, dtype=f16, transpose_b=true)",
                      "matmul_bias_gelu(M=4096, N=2048, K=128, dtype=f16)",
                      "matmul(M=3000, N=2000, K=200, dtype=f16)"),
    SpecTestName);

// sm_90a: ping-pong samples (two warpgroups along n taking turns at one ring of slots, each its
// own 64-row tile, the plane fetching turn after turn) match the reference: plain, persistent,
// transposed, an epilogue, clusters, and tiles the output does not divide.
class TurnsSpaceGpu : public ::testing::TestWithParam<std::string> {};

TEST_P(TurnsSpaceGpu, TurnSamplesMatchReference) {
  SKIP_WITHOUT_GPU();
  const int checked = VerifySamplesOnGpu(
      GetParam(), 800, 5,
      [](const schedules::Candidate& c) {
        return c.source.code.find("_turn[") != std::string::npos;
      },
      "sm_90a");
  EXPECT_GE(checked, 3);
}

INSTANTIATE_TEST_SUITE_P(
    Families, TurnsSpaceGpu,
    ::testing::Values("matmul(M=2048, N=4096, K=128, dtype=f16)",
                      "matmul(M=2048, N=2048, K=192, dtype=bf16, transpose_a=true)",
                      "matmul(M=1024, N=4096, K=256, dtype=f16, transpose_b=true)",
                      "matmul_bias_gelu(M=2048, N=4096, K=128, dtype=f16)",
                      "matmul(M=1000, N=3000, K=200, dtype=f16)"),
    SpecTestName);
#endif

}  // namespace
}  // namespace tessel::testing
