// GPU tests of CUPTI hardware counters (CTest label `gpu`): a copy kernel over buffers far larger
// than the L2 cache reads and writes its bytes from DRAM once, and its occupancy is a percentage.
// Each test skips itself, with the reason, where no GPU is usable.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#ifdef TESSEL_HAVE_CUDA

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "schedules/codegen/source.h"
#include "schedules/ir/buffer.h"
#include "tests/gpu/gpu_test_util.h"
#include "worker/cuda/cuda_runner.h"
#include "worker/cuda/cupti_counters.h"
#include "worker/cuda/nvrtc_compiler.h"

namespace tessel::worker {
namespace {

using schedules::BufferRole;
using schedules::DType;
using schedules::GeneratedSource;
using schedules::KernelSource;
using schedules::MakeBuffer;
using ::testing::HasSubstr;

// 512 MiB in and 512 MiB out: ten times the L2 of an H100 (50 MiB) or H200 (60 MiB), so that
// every byte goes to and from DRAM once.
constexpr int64_t kFloats = int64_t{128} << 20;
constexpr double kBytes = kFloats * 4.0;

// dst = src, float4 per thread, a grid-stride loop.
GeneratedSource CopySource() {
  GeneratedSource s;
  s.target = schedules::TargetKind::kCuda;
  s.code =
      "extern \"C\" __global__ void copy(const float4* __restrict__ src, float4* dst) {\n"
      "  const long long n = " +
      std::to_string(kFloats / 4) +
      "LL;\n"
      "  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;\n"
      "       i += (long long)gridDim.x * blockDim.x) dst[i] = src[i];\n"
      "}\n";
  KernelSource k;
  k.entry = "copy";
  k.params = {0, 1};
  k.launch.grid = {4096, 1, 1};
  k.launch.block = {256, 1, 1};
  s.kernels = {k};
  s.buffers = {{MakeBuffer("src", DType::kFloat32, {kFloats}), BufferRole::kInput},
               {MakeBuffer("dst", DType::kFloat32, {kFloats}), BufferRole::kOutput}};
  return s;
}

struct CopyOnGpu {
  std::unique_ptr<CudaDevice> device;
  std::unique_ptr<CudaProgram> program;
  std::unique_ptr<CudaBuffers> buffers;
  CUcontext ctx = nullptr;

  ~CopyOnGpu() {  // programs and buffers before their device
    buffers.reset();
    program.reset();
  }
};

absl::Status Prepare(CopyOnGpu* gpu) {
  absl::StatusOr<std::unique_ptr<CudaDevice>> device = CudaDevice::Open(0);
  if (!device.ok()) return device.status();
  gpu->device = std::move(*device);
  GeneratedSource source = CopySource();
  NvrtcOptions nvrtc;
  nvrtc.arch = gpu->device->info().arch;
  absl::StatusOr<CudaBinary> binary = CompileCuda(source, nvrtc);
  if (!binary.ok()) return binary.status();
  absl::StatusOr<std::unique_ptr<CudaProgram>> program = gpu->device->Load(source, *binary);
  if (!program.ok()) return program.status();
  gpu->program = std::move(*program);
  absl::StatusOr<std::unique_ptr<CudaBuffers>> buffers = gpu->device->Allocate(source.buffers);
  if (!buffers.ok()) return buffers.status();
  gpu->buffers = std::move(*buffers);
  if (absl::Status s = gpu->device->MakeCurrent(); !s.ok()) return s;
  if (CUresult r = gpu->device->driver().cuCtxGetCurrent_(&gpu->ctx); r != CUDA_SUCCESS) {
    return CudaError(gpu->device->driver(), r, "cuCtxGetCurrent");
  }
  // A first run outside the region: module loading and first-touch costs stay out of it.
  return gpu->device->Run(*gpu->program, *gpu->buffers);
}

// Create() without the privilege to profile is the machine's setup, not a defect: skip, saying so.
#define CREATE_OR_SKIP(var, ctx, metrics)                                                        \
  absl::StatusOr<std::unique_ptr<CuptiCounters>> var##_or = CuptiCounters::Create(ctx, metrics); \
  if (var##_or.status().code() == absl::StatusCode::kPermissionDenied) {                         \
    GTEST_SKIP() << var##_or.status().message();                                                 \
  }                                                                                              \
  ASSERT_TRUE(var##_or.ok()) << var##_or.status();                                               \
  CuptiCounters& var = **var##_or

TEST(CuptiCountersGpu, CopyReadsAndWritesItsBytesOnceFromDram) {
  SKIP_WITHOUT_GPU();
  CopyOnGpu gpu;
  absl::Status prepared = Prepare(&gpu);
  ASSERT_TRUE(prepared.ok()) << prepared;
  CREATE_OR_SKIP(counters, gpu.ctx, HardwareCounterMetrics());
  std::printf("chip %s, %d pass(es) for %zu metrics\n", counters.chip().c_str(), counters.passes(),
              counters.metrics().size());

  // One copy, then (the same object again) two copies in one region: the region sums its kernels.
  for (int copies : {1, 2}) {
    absl::StatusOr<std::map<std::string, double>> values = counters.Collect([&]() -> absl::Status {
      for (int i = 0; i < copies; ++i) {
        if (absl::Status s = gpu.device->Run(*gpu.program, *gpu.buffers); !s.ok()) return s;
      }
      return absl::OkStatus();
    });
    ASSERT_TRUE(values.ok()) << values.status();
    absl::StatusOr<measure::HardwareCounters> hw = HardwareCountersFromValues(*values);
    ASSERT_TRUE(hw.ok()) << hw.status();
    const double expected = copies * kBytes;
    std::printf(
        "%d copies of %.0f bytes: dram read %.0f (%.4fx), dram write %.0f (%.4fx), "
        "achieved occupancy %.2f%%\n",
        copies, kBytes, hw->dram_read_bytes, hw->dram_read_bytes / expected, hw->dram_write_bytes,
        hw->dram_write_bytes / expected, hw->achieved_occupancy);
    EXPECT_NEAR(hw->dram_read_bytes, expected, 0.1 * expected);
    // Writes: every byte once, plus at most what was left dirty in L2 before the region.
    EXPECT_GE(hw->dram_write_bytes, 0.9 * expected);
    EXPECT_LE(hw->dram_write_bytes, 1.2 * expected);
    EXPECT_GT(hw->achieved_occupancy, 0.0);
    EXPECT_LE(hw->achieved_occupancy, 100.0);
  }
}

TEST(CuptiCountersGpu, CollectHardwareCountersInOneCall) {
  SKIP_WITHOUT_GPU();
  CopyOnGpu gpu;
  absl::Status prepared = Prepare(&gpu);
  ASSERT_TRUE(prepared.ok()) << prepared;
  absl::StatusOr<measure::HardwareCounters> hw =
      CollectHardwareCounters(gpu.ctx, [&] { return gpu.device->Run(*gpu.program, *gpu.buffers); });
  if (hw.status().code() == absl::StatusCode::kPermissionDenied) GTEST_SKIP() << hw.status();
  ASSERT_TRUE(hw.ok()) << hw.status();
  EXPECT_NEAR(hw->dram_read_bytes, kBytes, 0.1 * kBytes);
  EXPECT_GT(hw->achieved_occupancy, 0.0);
  EXPECT_LE(hw->achieved_occupancy, 100.0);
}

TEST(CuptiCountersGpu, UnknownMetricIsNamedWithTheChipsMetricsOfItsUnit) {
  SKIP_WITHOUT_GPU();
  CopyOnGpu gpu;
  absl::Status prepared = Prepare(&gpu);
  ASSERT_TRUE(prepared.ok()) << prepared;
  absl::StatusOr<std::unique_ptr<CuptiCounters>> c =
      CuptiCounters::Create(gpu.ctx, {kDramReadBytesMetric, "dram__bytez_read.sum"});
  if (c.status().code() == absl::StatusCode::kPermissionDenied) GTEST_SKIP() << c.status();
  ASSERT_FALSE(c.ok());
  std::printf("%s\n", std::string(c.status().message()).c_str());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(c.status().message(), HasSubstr("unknown metric 'dram__bytez_read.sum' on chip"));
  EXPECT_THAT(c.status().message(), HasSubstr("dram__bytes_read"));
}

TEST(CuptiCountersGpu, PassesOutOfOrderAreRefused) {
  SKIP_WITHOUT_GPU();
  CopyOnGpu gpu;
  absl::Status prepared = Prepare(&gpu);
  ASSERT_TRUE(prepared.ok()) << prepared;
  CREATE_OR_SKIP(counters, gpu.ctx, HardwareCounterMetrics());
  absl::Status end = counters.End();
  EXPECT_EQ(end.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(end.message(), HasSubstr("End without Begin"));
  absl::StatusOr<std::map<std::string, double>> values = counters.Values();
  EXPECT_EQ(values.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(values.status().message(), HasSubstr("before every pass ran"));
  ASSERT_TRUE(counters.Begin().ok());
  absl::Status twice = counters.Begin();
  EXPECT_THAT(twice.message(), HasSubstr("Begin called twice"));
  EXPECT_TRUE(counters.End().ok());
}

}  // namespace
}  // namespace tessel::worker

#endif  // TESSEL_HAVE_CUDA
