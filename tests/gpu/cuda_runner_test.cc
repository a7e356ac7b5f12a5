// GPU tests (CTest label `gpu`): each one skips itself, with the reason, where no GPU is usable.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#ifdef TESSEL_HAVE_CUDA

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "measure/measurement.h"
#include "schedules/codegen/source.h"
#include "schedules/ir/buffer.h"
#include "tests/gpu/gpu_test_util.h"
#include "worker/backend.h"
#include "worker/cuda/cuda_runner.h"
#include "worker/cuda/nvrtc_compiler.h"
#include "worker/output_compare.h"

namespace tessel::worker {
namespace {

using schedules::BufferRole;
using schedules::DType;
using schedules::GeneratedSource;
using schedules::KernelSource;
using schedules::MakeBuffer;
using schedules::ProgramBuffer;

GeneratedSource Source(schedules::TargetKind target, std::string code,
                       std::vector<KernelSource> kernels, std::vector<ProgramBuffer> buffers) {
  GeneratedSource s;
  s.target = target;
  s.code = std::move(code);
  s.kernels = std::move(kernels);
  s.buffers = std::move(buffers);
  return s;
}

KernelSource Kernel(std::string entry, std::vector<int> params, int64_t grid, int64_t block,
                    int64_t dynamic_shared = 0) {
  KernelSource k;
  k.entry = std::move(entry);
  k.params = std::move(params);
  k.launch.grid = {grid, 1, 1};
  k.launch.block = {block, 1, 1};
  k.launch.dynamic_shared_bytes = dynamic_shared;
  return k;
}

constexpr int kN = 1 << 20;

std::vector<ProgramBuffer> VaddBuffers() {
  return {{MakeBuffer("x", DType::kFloat32, {kN}), BufferRole::kInput},
          {MakeBuffer("y", DType::kFloat32, {kN}), BufferRole::kInput},
          {MakeBuffer("z", DType::kFloat32, {kN}), BufferRole::kOutput}};
}

GeneratedSource CudaVadd(const std::string& expr) {
  return Source(schedules::TargetKind::kCuda,
                "extern \"C\" __global__ void vadd(const float* x, const float* y, float* z) {\n"
                "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
                "  if (i < " +
                    std::to_string(kN) + ") z[i] = " + expr + ";\n}\n",
                {Kernel("vadd", {0, 1, 2}, kN / 256, 256)}, VaddBuffers());
}

GeneratedSource HostVadd() {
  return Source(schedules::TargetKind::kHost,
                "extern \"C\" void vadd_ref(void* const* b) {\n"
                "  const float* x = (const float*)b[0]; const float* y = (const float*)b[1];\n"
                "  float* z = (float*)b[2];\n"
                "  for (int i = 0; i < " +
                    std::to_string(kN) + "; ++i) z[i] = x[i] + y[i];\n}\n",
                {Kernel("vadd_ref", {}, 1, 1)}, VaddBuffers());
}

TEST(CudaRunnerTest, VectorAddVerifiesAgainstHostReference) {
  SKIP_WITHOUT_GPU();
  absl::Status s = RunAndVerify(CudaVadd("x[i] + y[i]"), HostVadd(), 1);
  EXPECT_TRUE(s.ok()) << s;
}

TEST(CudaRunnerTest, WrongKernelFailsVerification) {
  SKIP_WITHOUT_GPU();
  absl::Status s = RunAndVerify(CudaVadd("x[i] - y[i]"), HostVadd(), 2);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(measure::AttachedMeasureStatus(s), measure::MeasureStatus::kVerifyFailed);
  EXPECT_NE(s.message().find("output 'z'"), absl::string_view::npos) << s;
}

TEST(CudaRunnerTest, UnwrittenOutputIsReported) {
  SKIP_WITHOUT_GPU();
  GeneratedSource half = CudaVadd("x[i] + y[i]");
  half.kernels[0].launch.grid[0] /= 2;  // only the first half of z is written
  absl::Status s = RunAndVerify(half, HostVadd(), 3);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("never written"), absl::string_view::npos) << s;
}

// C = A * B, 256^3, one thread per output, against a float64 host loop: exercises the f32 rule.
TEST(CudaRunnerTest, MatmulVerifiesAgainstHostReference) {
  SKIP_WITHOUT_GPU();
  constexpr int n = 256;
  std::vector<ProgramBuffer> buffers = {
      {MakeBuffer("A", DType::kFloat32, {n, n}), BufferRole::kInput},
      {MakeBuffer("B", DType::kFloat32, {n, n}), BufferRole::kInput},
      {MakeBuffer("C", DType::kFloat32, {n, n}), BufferRole::kOutput}};
  KernelSource k = Kernel("mm", {0, 1, 2}, n * n / 128, 128);
  GeneratedSource gpu = Source(schedules::TargetKind::kCuda, R"(
extern "C" __global__ void mm(const float* A, const float* B, float* C) {
  int idx = blockIdx.x * blockDim.x + threadIdx.x;
  int i = idx / 256, j = idx % 256;
  float acc = 0.f;
  for (int k = 0; k < 256; ++k) acc += A[i * 256 + k] * B[k * 256 + j];
  C[idx] = acc;
})",
                               {k}, buffers);
  GeneratedSource host = Source(schedules::TargetKind::kHost, R"(
extern "C" void mm_ref(void* const* b) {
  const float* A = (const float*)b[0]; const float* B = (const float*)b[1]; float* C = (float*)b[2];
  for (int i = 0; i < 256; ++i)
    for (int j = 0; j < 256; ++j) {
      double acc = 0;
      for (int k = 0; k < 256; ++k) acc += (double)A[i * 256 + k] * B[k * 256 + j];
      C[i * 256 + j] = (float)acc;
    }
})",
                                {Kernel("mm_ref", {}, 1, 1)}, buffers);
  absl::Status s = RunAndVerify(gpu, host, 4);
  EXPECT_TRUE(s.ok()) << s;
}

TEST(CudaRunnerTest, TimingReturnsRepeats) {
  SKIP_WITHOUT_GPU();
  MeasureOptions options;
  options.timing.min_repeats = 10;
  options.timing.min_total_ms = 20;
  absl::StatusOr<measure::Timings> t = Measure(CudaVadd("x[i] + y[i]"), options);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_GE(t->repeats_ms.size(), 10u);
  EXPECT_GT(t->median_ms, 0.0);
  EXPECT_LE(t->min_ms, t->median_ms);
  double total = 0;
  for (double ms : t->repeats_ms) total += ms;
  // It stopped for one of its reasons: the total, max_repeats, or a median precise enough.
  EXPECT_TRUE(total >= 20 || t->repeats_ms.size() == 1000u ||
              measure::MedianHalfWidth(t->repeats_ms) <= options.timing.median_precision)
      << total;

  // Without a precision to reach, the total rules.
  options.timing.median_precision = 0;
  t = Measure(CudaVadd("x[i] + y[i]"), options);
  ASSERT_TRUE(t.ok()) << t.status();
  total = 0;
  for (double ms : t->repeats_ms) total += ms;
  EXPECT_TRUE(total >= 20 || t->repeats_ms.size() == 1000u) << total;
}

// A precise median ends the timing long before the total: a stable kernel needs a few dozen
// repeats, and the CUPTI kernel times come with every one of them.
TEST(CudaRunnerTest, TimingStopsOnceTheMedianIsPrecise) {
  SKIP_WITHOUT_GPU();
  MeasureOptions options;
  options.timing.min_repeats = 5;
  options.timing.max_repeats = 1000;
  options.timing.min_total_ms = 1e6;
  options.timing.median_precision = 0.05;
  absl::StatusOr<measure::Timings> t = Measure(CudaVadd("x[i] + y[i]"), options);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_LT(t->repeats_ms.size(), 1000u);
  EXPECT_GE(t->repeats_ms.size(), 8u);
  EXPECT_LE(measure::MedianHalfWidth(t->repeats_ms), 0.05);
  if (!t->kernel_repeats_ms.empty()) {
    EXPECT_EQ(t->kernel_repeats_ms.size(), t->repeats_ms.size());
    EXPECT_EQ(t->latency_ms(), t->kernel_median_ms);
  }
}

// 64 KiB of dynamic shared memory: needs the MAX_DYNAMIC_SHARED_SIZE_BYTES opt-in.
TEST(CudaRunnerTest, DynamicSharedMemoryOver48KiBRuns) {
  SKIP_WITHOUT_GPU();
  constexpr int kTile = 16384;  // floats per block: 64 KiB
  constexpr int kBlocks = 64;
  std::vector<ProgramBuffer> buffers = {
      {MakeBuffer("x", DType::kFloat32, {kBlocks * kTile}), BufferRole::kInput},
      {MakeBuffer("y", DType::kFloat32, {kBlocks * kTile}), BufferRole::kOutput}};
  // Each block reverses its tile through shared memory.
  GeneratedSource gpu = Source(schedules::TargetKind::kCuda, R"(
extern "C" __global__ void rev(const float* x, float* y) {
  extern __shared__ float tile[];
  const int base = blockIdx.x * 16384;
  for (int i = threadIdx.x; i < 16384; i += blockDim.x) tile[i] = x[base + i];
  __syncthreads();
  for (int i = threadIdx.x; i < 16384; i += blockDim.x) y[base + i] = tile[16383 - i];
})",
                               {Kernel("rev", {0, 1}, kBlocks, 256, kTile * 4)}, buffers);
  GeneratedSource host = Source(schedules::TargetKind::kHost, R"(
extern "C" void rev_ref(void* const* b) {
  const float* x = (const float*)b[0]; float* y = (float*)b[1];
  for (int blk = 0; blk < 64; ++blk)
    for (int i = 0; i < 16384; ++i) y[blk * 16384 + i] = x[blk * 16384 + 16383 - i];
})",
                                {Kernel("rev_ref", {}, 1, 1)}, buffers);
  absl::Status s = RunAndVerify(gpu, host, 5);
  EXPECT_TRUE(s.ok()) << s;
}

TEST(CudaRunnerTest, LaunchOverTheDeviceLimitsIsRejected) {
  SKIP_WITHOUT_GPU();
  GeneratedSource big = CudaVadd("x[i] + y[i]");
  big.kernels[0].launch.block = {2048, 1, 1};
  absl::StatusOr<std::unique_ptr<Executable>> exe = Prepare(big);
  ASSERT_FALSE(exe.ok());
  EXPECT_EQ(measure::AttachedMeasureStatus(exe.status()),
            measure::MeasureStatus::kDeviceLimitExceeded)
      << exe.status();
  GeneratedSource smem = CudaVadd("x[i] + y[i]");
  smem.kernels[0].launch.dynamic_shared_bytes = 1 << 20;
  exe = Prepare(smem);
  ASSERT_FALSE(exe.ok());
  EXPECT_EQ(measure::AttachedMeasureStatus(exe.status()),
            measure::MeasureStatus::kDeviceLimitExceeded)
      << exe.status();
}

// A grid barrier as LaunchConfig::cooperative specifies it: word 0 of `s` counts arrivals and is
// back at zero once every block has passed; word 1 is the generation, which only increments.
constexpr char kGridBarrier[] = R"(
__device__ void grid_barrier(unsigned int* s) {
  __syncthreads();
  if (threadIdx.x == 0) {
    volatile unsigned int* vs = s;
    const unsigned int gen = vs[1];
    __threadfence();  // this block's writes, and the read of `gen`, before arriving
    const unsigned int blocks = gridDim.x * gridDim.y * gridDim.z;
    if (atomicAdd(&s[0], 1u) == blocks - 1) {
      atomicExch(&s[0], 0u);
      __threadfence();
      atomicAdd(&s[1], 1u);
    } else {
      while (vs[1] == gen) {
      }
    }
    __threadfence();
  }
  __syncthreads();
}
)";

constexpr int kCoopBlocks = 8;
constexpr int kCoopThreads = 64;
constexpr int kCoopSlots = kCoopBlocks * kCoopThreads;

// Three phases over `out` ([3][blocks][threads]), a grid barrier between each: every block
// reads what other blocks wrote in the phase before.
GeneratedSource CooperativeExchange() {
  const std::string code = std::string(kGridBarrier) + R"(
extern "C" __global__ void exchange(float* out, unsigned int* tessel_grid_sync) {
  const int n = gridDim.x * blockDim.x;
  const int b = blockIdx.x, t = threadIdx.x, T = blockDim.x;
  volatile float* v = out;  // other blocks' writes: not through a stale L1 line
  v[b * T + t] = (float)(b * T + t + 1);
  grid_barrier(tessel_grid_sync);
  v[n + b * T + t] = v[((b + 1) % gridDim.x) * T + (T - 1 - t)] * 2.0f;
  grid_barrier(tessel_grid_sync);
  v[2 * n + b * T + t] = v[n + ((b + 3) % gridDim.x) * T + t] + 0.5f;
})";
  KernelSource k = Kernel("exchange", {0}, kCoopBlocks, kCoopThreads);
  k.launch.cooperative = true;
  return Source(schedules::TargetKind::kCuda, code, {k},
                {{MakeBuffer("out", DType::kFloat32, {3 * kCoopSlots}), BufferRole::kOutput}});
}

std::vector<float> CooperativeExchangeExpected() {
  std::vector<float> out(3 * kCoopSlots);
  for (int b = 0; b < kCoopBlocks; ++b) {
    for (int t = 0; t < kCoopThreads; ++t) {
      out[b * kCoopThreads + t] = static_cast<float>(b * kCoopThreads + t + 1);
    }
  }
  for (int b = 0; b < kCoopBlocks; ++b) {
    for (int t = 0; t < kCoopThreads; ++t) {
      out[kCoopSlots + b * kCoopThreads + t] =
          out[((b + 1) % kCoopBlocks) * kCoopThreads + (kCoopThreads - 1 - t)] * 2.0f;
    }
  }
  for (int b = 0; b < kCoopBlocks; ++b) {
    for (int t = 0; t < kCoopThreads; ++t) {
      out[2 * kCoopSlots + b * kCoopThreads + t] =
          out[kCoopSlots + ((b + 3) % kCoopBlocks) * kCoopThreads + t] + 0.5f;
    }
  }
  return out;
}

// The runner launches it cooperatively with its grid barrier words, which stay consistent from
// one launch to the next: one at a time (each on freshly poisoned output) and back to back.
TEST(CudaRunnerTest, CooperativeKernelSynchronizesItsGridOnEveryLaunch) {
  SKIP_WITHOUT_GPU();
  absl::StatusOr<std::unique_ptr<CudaDevice>> device = CudaDevice::Open(0);
  ASSERT_TRUE(device.ok()) << device.status();
  CudaDevice& d = **device;
  if (!d.info().cooperative_launch) GTEST_SKIP() << d.info().name << " has no cooperative launch";
  const GeneratedSource source = CooperativeExchange();
  NvrtcOptions nvrtc;
  nvrtc.arch = d.info().arch;
  absl::StatusOr<CudaBinary> binary = CompileCuda(source, nvrtc);
  ASSERT_TRUE(binary.ok()) << binary.status();
  absl::StatusOr<std::unique_ptr<CudaProgram>> program = d.Load(source, *binary);
  ASSERT_TRUE(program.ok()) << program.status();
  absl::StatusOr<std::unique_ptr<CudaBuffers>> buffers = d.Allocate(source.buffers);
  ASSERT_TRUE(buffers.ok()) << buffers.status();
  absl::StatusOr<HostBuffers> host = AllocateHostBuffers(source.buffers);
  ASSERT_TRUE(host.ok()) << host.status();
  const std::vector<float> expected = CooperativeExchangeExpected();

  auto run_and_check = [&](int launch) {
    float* out = reinterpret_cast<float*>(host->data[0].data());
    std::fill(out, out + expected.size(), -1.0f);
    ASSERT_TRUE(d.Upload(*host, buffers->get()).ok());
    absl::Status s = d.Run(**program, **buffers);
    ASSERT_TRUE(s.ok()) << "launch " << launch << ": " << s;
    ASSERT_TRUE(d.Download(**buffers, &*host).ok());
    for (size_t i = 0; i < expected.size(); ++i) {
      ASSERT_EQ(out[i], expected[i]) << "launch " << launch << ", element " << i;
    }
  };
  for (int launch = 0; launch < 5; ++launch) run_and_check(launch);
  measure::TimingOptions timing;
  timing.warmup_runs = 3;
  timing.min_repeats = 20;
  timing.max_repeats = 20;
  timing.min_total_ms = 0;
  timing.kernel_times = false;
  timing.flush_cache = false;  // launches back to back
  absl::StatusOr<measure::Timings> t = d.Time(**program, **buffers, timing);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->repeats_ms.size(), 20u);
  run_and_check(5);
}

// A grid barrier with more blocks than the GPU can hold at once would deadlock: refused at load.
TEST(CudaRunnerTest, CooperativeGridLargerThanTheGpuHoldsIsRejected) {
  SKIP_WITHOUT_GPU();
  GeneratedSource source = CooperativeExchange();
  source.kernels[0].launch.grid = {100000, 1, 1};
  source.kernels[0].launch.block = {1024, 1, 1};
  absl::StatusOr<std::unique_ptr<Executable>> exe = Prepare(source);
  ASSERT_FALSE(exe.ok());
  EXPECT_EQ(measure::AttachedMeasureStatus(exe.status()),
            measure::MeasureStatus::kDeviceLimitExceeded)
      << exe.status();
  const std::string message(exe.status().message());
  EXPECT_THAT(message, ::testing::HasSubstr("kernel 'exchange' (grid 100000x1x1, block 1024x1x1"));
  EXPECT_THAT(message, ::testing::HasSubstr(
                           "synchronizes its whole grid, so all 100000 blocks must be resident "
                           "at once, but GPU 0 holds at most "));
  EXPECT_THAT(message, ::testing::HasSubstr(" per SM x "));
  EXPECT_THAT(message, ::testing::HasSubstr(
                           "use fewer blocks, or fewer registers or less shared memory per block"));
}

TEST(CudaRunnerTest, DeviceInfoIsFilled) {
  SKIP_WITHOUT_GPU();
  absl::StatusOr<std::unique_ptr<CudaDevice>> device = CudaDevice::Open(0);
  ASSERT_TRUE(device.ok()) << device.status();
  const CudaDeviceInfo& info = (*device)->info();
  EXPECT_FALSE(info.name.empty());
  EXPECT_EQ(info.arch.rfind("sm_", 0), 0u);
  EXPECT_GT(info.sm_count, 0);
  EXPECT_GT(info.l2_bytes, 0);
  EXPECT_GE(info.max_shared_per_block_optin, info.max_shared_per_block);
  // Timing an empty region works and gives non-negative times.
  measure::TimingOptions timing;
  timing.min_repeats = 3;
  timing.min_total_ms = 0;
  absl::StatusOr<measure::Timings> t =
      (*device)->TimeRegion([] { return absl::OkStatus(); }, timing);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->repeats_ms.size(), 3u);
}

}  // namespace
}  // namespace tessel::worker

#else  // !TESSEL_HAVE_CUDA

TEST(CudaRunnerTest, SkippedWithoutCudaToolkit) {
  GTEST_SKIP() << "built without the CUDA toolkit: no CUDA backend to test";
}

#endif  // TESSEL_HAVE_CUDA
