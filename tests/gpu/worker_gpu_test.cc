// GPU tests of the worker daemon (CTest label `gpu`; each skips itself where no GPU is usable): a
// real `tessel worker --target cuda` driven by the fake server of tests/worker, planted CUDA
// faults, and the fidelity of its timing against a direct CUDA-event measurement.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#ifdef TESSEL_HAVE_CUDA

#include <signal.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_replace.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/test_util.h"
#include "tests/worker/worker_test_util.h"
#include "worker/cuda/cuda_runner.h"
#include "worker/cuda/nvml_device_monitor.h"
#include "worker/cuda/nvrtc_compiler.h"
#include "worker/output_compare.h"

namespace tessel::testing {
namespace {

using ::testing::HasSubstr;

// The code generator's target for GPU 0 (sm_90 for Hopper, sm_80 for everything else it knows).
schedules::Target GpuTarget() {
  absl::StatusOr<std::unique_ptr<worker::CudaDevice>> d = worker::CudaDevice::Open(0);
  TESSEL_CHECK(d.ok()) << d.status();
  return schedules::CudaTarget((*d)->info().cc_major >= 9 ? "sm_90" : "sm_80");
}

schedules::GeneratedSource CudaMatmul(const schedules::Target& target, int n) {
  absl::StatusOr<schedules::Workload> w =
      schedules::ParseWorkloadSpec("matmul(M=" + std::to_string(n) + ", N=" + std::to_string(n) +
                                   ", K=" + std::to_string(n) + ")");
  TESSEL_CHECK(w.ok()) << w.status();
  absl::StatusOr<schedules::GeneratedSource> s = GenerateReference(*w, target);
  TESSEL_CHECK(s.ok()) << s.status();
  return *s;
}

enum class CudaPlant { kNone, kIllegalAddress, kTrap, kHang, kWrongAnswer, kTooMuchShared };

// `source` (the matmul reference) with a fault planted into its kernel.
schedules::GeneratedSource PlantCudaFault(schedules::GeneratedSource source, CudaPlant plant,
                                          const std::string& tag) {
  std::string statement;
  switch (plant) {
    case CudaPlant::kNone:
      break;
    case CudaPlant::kIllegalAddress:
      statement = "if (threadIdx.x == 0) *reinterpret_cast<volatile int*>(0x8) = 1;";
      break;
    case CudaPlant::kTrap:
      statement = "if (threadIdx.x == 0) __trap();";
      break;
    case CudaPlant::kHang:
      // A volatile global read the compiler cannot prove false: the inputs are never NaN.
      statement =
          "while (*reinterpret_cast<volatile const float*>(A) == "
          "*reinterpret_cast<volatile const float*>(A)) {}";
      break;
    case CudaPlant::kWrongAnswer:
      source.code = absl::StrReplaceAll(source.code, {{"C_acc[0] = 0.0;", "C_acc[0] = 1.0;"}});
      break;
    case CudaPlant::kTooMuchShared:
      source.kernels[0].launch.dynamic_shared_bytes = 1 << 20;  // 1 MiB: over every GPU's limit
      break;
  }
  if (!statement.empty()) {
    const size_t body = source.code.find(") {\n", source.code.find("__global__"));
    TESSEL_CHECK(body != std::string::npos);
    source.code.insert(body + 4, "  " + statement + "\n");
  }
  source.code += "\n// candidate " + tag + "\n";
  return source;
}

std::vector<std::string> CudaWorkerArgs(const std::string& address, const std::string& dir) {
  return {"worker",    "--server",    address,          "--target",     "cuda",
          "--devices", "0",           "--cache",        dir + "/cache", "--heartbeat-s",
          "0.2",       "--worker-id", "gpu-test-worker"};
}

TEST(WorkerGpu, RegistersTheGpu) {
  SKIP_WITHOUT_GPU();
  const std::string dir = MakeTempDir("tessel_worker_gpu");
  auto server = FakeWorkerServer::Start();
  ASSERT_NE(server, nullptr);
  TesselProcess worker(CudaWorkerArgs(server->address(), dir), dir + "/worker.log");
  std::optional<proto::WorkerMessage> reg =
      server->WaitFor([](const proto::WorkerMessage& m) { return m.has_register_(); });
  ASSERT_TRUE(reg.has_value()) << worker.Log();
  ASSERT_EQ(reg->register_().devices_size(), 1);
  const proto::Device& d = reg->register_().devices(0);
  EXPECT_EQ(d.kind(), proto::TARGET_KIND_CUDA);
  EXPECT_THAT(d.arch(), HasSubstr("sm_"));
  EXPECT_GT(d.sm_count(), 0);
  EXPECT_GT(d.memory_bytes(), 0);
  EXPECT_GT(d.l2_bytes(), 0);
  EXPECT_GT(d.clock_khz(), 0);
  EXPECT_GT(d.registers_per_block(), 0);
  EXPECT_GT(d.max_shared_per_block_optin(), 0);
  EXPECT_GT(d.driver_version(), 0);
  EXPECT_THAT(d.toolkit_version(), HasSubstr("NVRTC"));
  worker.Signal(SIGTERM);
  EXPECT_EQ(worker.Wait(absl::Seconds(30)), 0) << worker.Log();
}

TEST(WorkerGpu, PlantedCudaFaultsGetTheirStatusAndLaterCandidatesStillMeasure) {
  SKIP_WITHOUT_GPU();
  const std::string dir = MakeTempDir("tessel_worker_gpu");
  auto server = FakeWorkerServer::Start();
  ASSERT_NE(server, nullptr);
  TesselProcess worker(CudaWorkerArgs(server->address(), dir), dir + "/worker.log");
  ASSERT_TRUE(
      server->WaitFor([](const proto::WorkerMessage& m) { return m.has_register_(); }).has_value())
      << worker.Log();

  const schedules::Target target = GpuTarget();
  const schedules::GeneratedSource ref = CudaMatmul(target, 256);
  ASSERT_TRUE(server->Send(MakeBatch(
      1,
      {PlantCudaFault(ref, CudaPlant::kIllegalAddress, "illegal"),
       PlantCudaFault(ref, CudaPlant::kNone, "good1"),
       PlantCudaFault(ref, CudaPlant::kTrap, "trap"), PlantCudaFault(ref, CudaPlant::kHang, "hang"),
       PlantCudaFault(ref, CudaPlant::kWrongAnswer, "wrong"),
       PlantCudaFault(ref, CudaPlant::kTooMuchShared, "shared"),
       PlantCudaFault(ref, CudaPlant::kNone, "good2")},
      ref, FastMeasureOptions(/*timeout_s=*/10))));
  std::vector<proto::MeasureResult> r = server->WaitForResults(1, 7, absl::Seconds(120));
  ASSERT_EQ(r.size(), 7u) << worker.Log();
  EXPECT_EQ(r[0].status(), proto::MEASURE_STATUS_RUNTIME_ERROR) << r[0].error();
  EXPECT_THAT(r[0].error(), HasSubstr("ILLEGAL_ADDRESS"));
  EXPECT_EQ(r[1].status(), proto::MEASURE_STATUS_OK) << r[1].error();
  EXPECT_EQ(r[2].status(), proto::MEASURE_STATUS_RUNTIME_ERROR) << r[2].error();
  EXPECT_EQ(r[3].status(), proto::MEASURE_STATUS_TIMEOUT) << r[3].error();
  EXPECT_EQ(r[4].status(), proto::MEASURE_STATUS_VERIFY_FAILED) << r[4].error();
  EXPECT_EQ(r[5].status(), proto::MEASURE_STATUS_DEVICE_LIMIT_EXCEEDED) << r[5].error();
  EXPECT_EQ(r[6].status(), proto::MEASURE_STATUS_OK) << r[6].error();
  EXPECT_GT(r[6].median_ms(), 0);
  ASSERT_GE(r[6].kernels_size(), 1);
  EXPECT_GT(r[6].kernels(0).registers(), 0);
  worker.Signal(SIGTERM);
  EXPECT_EQ(worker.Wait(absl::Seconds(30)), 0) << worker.Log();
}

// MeasureBatch.cuda_arch (issue 23) on a 9.0 GPU: the worker compiles a batch for the architecture
// it names. A candidate with a wgmma fence, which only sm_90a builds, measures ok in an sm_90a
// batch (its artifact an sm_90a cubin) and is a compile error in an sm_90 one; a batch of an
// architecture this GPU does not run is refused at once, saying why.
TEST(WorkerGpu, ABatchIsCompiledForItsArchitectureAndOneThisGpuDoesNotRunIsRefused) {
  SKIP_WITHOUT_GPU();
  {
    auto d = worker::CudaDevice::Open(0);
    ASSERT_TRUE(d.ok());
    if ((*d)->info().arch != "sm_90") GTEST_SKIP() << "needs a GPU of compute capability 9.0";
  }
  const std::string dir = MakeTempDir("tessel_worker_gpu");
  auto server = FakeWorkerServer::Start();
  ASSERT_NE(server, nullptr);
  TesselProcess worker(CudaWorkerArgs(server->address(), dir), dir + "/worker.log");
  ASSERT_TRUE(
      server->WaitFor([](const proto::WorkerMessage& m) { return m.has_register_(); }).has_value())
      << worker.Log();
  const schedules::GeneratedSource ref = CudaMatmul(schedules::CudaTarget("sm_90a"), 64);
  schedules::GeneratedSource fenced = PlantCudaFault(ref, CudaPlant::kNone, "wgmma");
  const size_t body = fenced.code.find(") {\n", fenced.code.find("__global__"));
  ASSERT_NE(body, std::string::npos);
  fenced.code.insert(body + 4, "  asm volatile(\"wgmma.fence.sync.aligned;\" ::: \"memory\");\n");
  auto batch = [&](uint64_t id, const std::string& arch) {
    proto::ServerMessage m = MakeBatch(id, {fenced}, ref, FastMeasureOptions(/*timeout_s=*/10));
    m.mutable_batch()->set_cuda_arch(arch);
    return m;
  };
  ASSERT_TRUE(server->Send(batch(1, "sm_90a")));
  std::vector<proto::MeasureResult> a = server->WaitForResults(1, 1, absl::Seconds(60));
  ASSERT_EQ(a.size(), 1u) << worker.Log();
  EXPECT_EQ(a[0].status(), proto::MEASURE_STATUS_OK) << a[0].error();
  EXPECT_EQ(a[0].artifact().binary_arch(), "sm_90a");
  EXPECT_THAT(a[0].artifact().compile_options(), HasSubstr("--gpu-architecture=sm_90a"));
  EXPECT_EQ(a[0].artifact().device_arch(), "sm_90");

  ASSERT_TRUE(server->Send(batch(2, "sm_90")));
  std::vector<proto::MeasureResult> plain = server->WaitForResults(2, 1, absl::Seconds(60));
  ASSERT_EQ(plain.size(), 1u) << worker.Log();
  EXPECT_EQ(plain[0].status(), proto::MEASURE_STATUS_COMPILE_ERROR);
  EXPECT_THAT(plain[0].error(), HasSubstr("not supported on .target 'sm_90'"));

  ASSERT_TRUE(server->Send(batch(3, "sm_80")));
  std::vector<proto::MeasureResult> other = server->WaitForResults(3, 1, absl::Seconds(60));
  ASSERT_EQ(other.size(), 1u) << worker.Log();
  EXPECT_EQ(other[0].status(), proto::MEASURE_STATUS_WORKER_ERROR);
  EXPECT_EQ(other[0].error(),
            "this worker has no GPU that runs sm_80 code (its GPUs: sm_90): sm_80 code runs only "
            "on sm_80 devices, and this device is sm_90; the server should not have sent it here");
  worker.Signal(SIGTERM);
  EXPECT_EQ(worker.Wait(absl::Seconds(30)), 0) << worker.Log();
}

// The worker's median against the median of CUDA events recorded here around the same kernel,
// with the L2 flushed before each launch as the worker does.
TEST(WorkerGpu, TimingMatchesADirectCudaEventMeasurement) {
  SKIP_WITHOUT_GPU();
  const std::string dir = MakeTempDir("tessel_worker_gpu");
  const schedules::Target target = GpuTarget();
  const schedules::GeneratedSource src = CudaMatmul(target, 512);  // ~1 ms per run

  // Direct: NVRTC, module load and launches in this process, one event pair per launch.
  absl::StatusOr<std::unique_ptr<worker::CudaDevice>> device = worker::CudaDevice::Open(0);
  ASSERT_TRUE(device.ok()) << device.status();
  worker::CudaDevice& dev = **device;
  worker::NvrtcOptions nvrtc;
  nvrtc.arch = dev.info().arch;
  absl::StatusOr<worker::CudaBinary> binary = worker::CompileCuda(src, nvrtc);
  ASSERT_TRUE(binary.ok()) << binary.status();
  absl::StatusOr<std::unique_ptr<worker::CudaProgram>> program = dev.Load(src, *binary);
  ASSERT_TRUE(program.ok()) << program.status();
  absl::StatusOr<std::unique_ptr<worker::CudaBuffers>> buffers = dev.Allocate(src.buffers);
  ASSERT_TRUE(buffers.ok());
  absl::StatusOr<worker::HostBuffers> host = worker::MakeVerificationBuffers(src.buffers, 1);
  ASSERT_TRUE(host.ok());
  ASSERT_TRUE(dev.Upload(*host, buffers->get()).ok());
  const worker::CudaDriver& drv = dev.driver();
  ASSERT_TRUE(dev.MakeCurrent().ok());
  CUevent start = nullptr, stop = nullptr;
  ASSERT_EQ(drv.cuEventCreate_(&start, CU_EVENT_DEFAULT), CUDA_SUCCESS);
  ASSERT_EQ(drv.cuEventCreate_(&stop, CU_EVENT_DEFAULT), CUDA_SUCCESS);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(dev.LaunchAsync(**program, **buffers).ok());
  std::vector<double> direct;
  for (int i = 0; i < 50; ++i) {
    ASSERT_TRUE(dev.FlushL2Async().ok());
    ASSERT_EQ(drv.cuEventRecord_(start, dev.stream()), CUDA_SUCCESS);
    ASSERT_TRUE(dev.LaunchAsync(**program, **buffers).ok());
    ASSERT_EQ(drv.cuEventRecord_(stop, dev.stream()), CUDA_SUCCESS);
    ASSERT_EQ(drv.cuEventSynchronize_(stop), CUDA_SUCCESS);
    float ms = 0;
    ASSERT_EQ(drv.cuEventElapsedTime_(&ms, start, stop), CUDA_SUCCESS);
    direct.push_back(ms);
  }
  drv.cuEventDestroy_(start);
  drv.cuEventDestroy_(stop);
  std::sort(direct.begin(), direct.end());
  const double direct_median = direct[direct.size() / 2];

  auto server = FakeWorkerServer::Start();
  ASSERT_NE(server, nullptr);
  TesselProcess worker(CudaWorkerArgs(server->address(), dir), dir + "/worker.log");
  ASSERT_TRUE(
      server->WaitFor([](const proto::WorkerMessage& m) { return m.has_register_(); }).has_value())
      << worker.Log();
  proto::MeasureOptions options = FastMeasureOptions(60);
  options.mutable_timing()->set_warmup_runs(3);
  options.mutable_timing()->set_min_repeats(50);
  options.mutable_timing()->set_max_repeats(50);
  options.mutable_timing()->set_flush_cache(true);
  ASSERT_TRUE(server->Send(MakeBatch(1, {src}, src, options)));
  std::vector<proto::MeasureResult> r = server->WaitForResults(1, 1, absl::Seconds(120));
  ASSERT_EQ(r.size(), 1u) << worker.Log();
  ASSERT_EQ(r[0].status(), proto::MEASURE_STATUS_OK) << r[0].error();
  EXPECT_NEAR(r[0].median_ms(), direct_median, 0.05 * direct_median)
      << "worker " << r[0].median_ms() << " ms, direct CUDA events " << direct_median << " ms";
  worker.Signal(SIGTERM);
  EXPECT_EQ(worker.Wait(absl::Seconds(30)), 0) << worker.Log();
}

// Every timed repeat also has the kernel's own time from CUPTI activity records: as many as the
// CUDA-event repeats, each at most the event time around the same launch (the events also hold
// the launch overhead) and close to it for a kernel of about a millisecond.
TEST(WorkerGpu, CuptiKernelTimesArePresentAndCloseToTheEventTimes) {
  SKIP_WITHOUT_GPU();
  const std::string dir = MakeTempDir("tessel_worker_gpu");
  const schedules::GeneratedSource src = CudaMatmul(GpuTarget(), 512);
  auto server = FakeWorkerServer::Start();
  ASSERT_NE(server, nullptr);
  TesselProcess worker(CudaWorkerArgs(server->address(), dir), dir + "/worker.log");
  ASSERT_TRUE(
      server->WaitFor([](const proto::WorkerMessage& m) { return m.has_register_(); }).has_value())
      << worker.Log();
  proto::MeasureOptions options = FastMeasureOptions(60);
  options.mutable_timing()->set_warmup_runs(2);
  options.mutable_timing()->set_min_repeats(30);
  options.mutable_timing()->set_max_repeats(30);
  options.mutable_timing()->set_flush_cache(true);
  ASSERT_TRUE(server->Send(MakeBatch(1, {src}, src, options)));
  std::vector<proto::MeasureResult> r = server->WaitForResults(1, 1, absl::Seconds(120));
  ASSERT_EQ(r.size(), 1u) << worker.Log();
  ASSERT_EQ(r[0].status(), proto::MEASURE_STATUS_OK) << r[0].error();
  EXPECT_EQ(r[0].timing_note(), "");
  ASSERT_EQ(r[0].kernel_repeats_ms_size(), r[0].repeats_ms_size()) << r[0].timing_note();
  for (int i = 0; i < r[0].repeats_ms_size(); ++i) {
    EXPECT_GT(r[0].kernel_repeats_ms(i), 0) << "repeat " << i;
    // Event resolution is about half a microsecond.
    EXPECT_LE(r[0].kernel_repeats_ms(i), r[0].repeats_ms(i) * 1.01 + 0.002) << "repeat " << i;
  }
  EXPECT_GT(r[0].kernel_median_ms(), 0.9 * r[0].median_ms())
      << "CUPTI " << r[0].kernel_median_ms() << " ms, events " << r[0].median_ms() << " ms";
  EXPECT_LE(r[0].kernel_median_ms(), 1.01 * r[0].median_ms());
  std::printf("CUPTI kernel median %.5f ms, CUDA-event median %.5f ms (ratio %.4f)\n",
              r[0].kernel_median_ms(), r[0].median_ms(),
              r[0].kernel_median_ms() / r[0].median_ms());
  worker.Signal(SIGTERM);
  EXPECT_EQ(worker.Wait(absl::Seconds(30)), 0) << worker.Log();
}

// Asked for, the hardware counters come back with the result through the real worker: a
// 1024^2 f32 matmul reads at least its inputs (8 MiB) from DRAM with L2 flushed before the run,
// and runs at a positive occupancy. Not asked for, none come back.
TEST(WorkerGpu, HardwareCountersComeBackWhenAsked) {
  SKIP_WITHOUT_GPU();
  const std::string dir = MakeTempDir("tessel_worker_gpu");
  const schedules::GeneratedSource src = CudaMatmul(GpuTarget(), 1024);
  auto server = FakeWorkerServer::Start();
  ASSERT_NE(server, nullptr);
  TesselProcess worker(CudaWorkerArgs(server->address(), dir), dir + "/worker.log");
  ASSERT_TRUE(
      server->WaitFor([](const proto::WorkerMessage& m) { return m.has_register_(); }).has_value())
      << worker.Log();
  proto::MeasureOptions options = FastMeasureOptions(60);
  options.mutable_timing()->set_hardware_counters(true);
  options.mutable_timing()->set_flush_cache(true);  // the profiled run starts with a cold L2
  ASSERT_TRUE(server->Send(MakeBatch(1, {src}, src, options)));
  options.mutable_timing()->set_hardware_counters(false);
  ASSERT_TRUE(server->Send(MakeBatch(2, {src}, src, options)));
  std::vector<proto::MeasureResult> r1 = server->WaitForResults(1, 1, absl::Seconds(120));
  std::vector<proto::MeasureResult> r2 = server->WaitForResults(2, 1, absl::Seconds(120));
  ASSERT_EQ(r1.size(), 1u) << worker.Log();
  ASSERT_EQ(r2.size(), 1u) << worker.Log();
  const proto::MeasureResult& asked = r1[0];
  const proto::MeasureResult& not_asked = r2[0];
  ASSERT_EQ(asked.status(), proto::MEASURE_STATUS_OK) << asked.error();
  ASSERT_TRUE(asked.has_counters()) << asked.timing_note();
  const double input_bytes = 2.0 * 1024 * 1024 * 4;
  EXPECT_GT(asked.counters().dram_read_bytes(), 0.5 * input_bytes);
  EXPECT_GT(asked.counters().achieved_occupancy(), 0);
  EXPECT_LE(asked.counters().achieved_occupancy(), 100);
  EXPECT_FALSE(not_asked.has_counters());
  std::printf("matmul 1024^2: DRAM read %.0f B, written %.0f B, occupancy %.1f%%\n",
              asked.counters().dram_read_bytes(), asked.counters().dram_write_bytes(),
              asked.counters().achieved_occupancy());
  worker.Signal(SIGTERM);
  EXPECT_EQ(worker.Wait(absl::Seconds(30)), 0) << worker.Log();
}

// Every figure of a CUDA measurement comes back through the real worker (issue 21): the CUPTI
// kernel median, the SM and memory clocks and the temperature right after the timed repeats
// (NVML), as a confirmed timing. A GPU host has NVML (it comes with the driver): a note saying
// it is missing fails the test.
TEST(WorkerGpu, AMeasurementCarriesItsCuptiMedianClocksAndTemperature) {
  SKIP_WITHOUT_GPU();
  const std::string dir = MakeTempDir("tessel_worker_gpu");
  const schedules::GeneratedSource src = CudaMatmul(GpuTarget(), 512);
  auto server = FakeWorkerServer::Start();
  ASSERT_NE(server, nullptr);
  TesselProcess worker(CudaWorkerArgs(server->address(), dir), dir + "/worker.log");
  ASSERT_TRUE(
      server->WaitFor([](const proto::WorkerMessage& m) { return m.has_register_(); }).has_value())
      << worker.Log();
  ASSERT_TRUE(server->Send(MakeBatch(1, {src}, src, FastMeasureOptions(60))));
  std::vector<proto::MeasureResult> r = server->WaitForResults(1, 1, absl::Seconds(120));
  ASSERT_EQ(r.size(), 1u) << worker.Log();
  ASSERT_EQ(r[0].status(), proto::MEASURE_STATUS_OK) << r[0].error();
  EXPECT_GT(r[0].kernel_median_ms(), 0) << r[0].timing_note();
  EXPECT_EQ(r[0].kernel_repeats_ms_size(), r[0].repeats_ms_size());
  ASSERT_TRUE(r[0].has_device_state()) << r[0].timing_note();
  EXPECT_GT(r[0].device_state().sm_clock_mhz(), 0);
  EXPECT_GT(r[0].device_state().memory_clock_mhz(), 0);
  EXPECT_GT(r[0].device_state().temperature_c(), 0);
  EXPECT_LT(r[0].device_state().temperature_c(), 120);
  EXPECT_THAT(r[0].timing_note(), ::testing::Not(HasSubstr("clocks")));
  EXPECT_EQ(r[0].timing_kind(), proto::TIMING_KIND_CONFIRMED);
  std::printf(
      "matmul 512^2: kernel median %.4f ms (events %.4f ms), SM %d MHz, memory %d MHz, "
      "%d C\n",
      r[0].kernel_median_ms(), r[0].median_ms(), r[0].device_state().sm_clock_mhz(),
      r[0].device_state().memory_clock_mhz(), r[0].device_state().temperature_c());
  worker.Signal(SIGTERM);
  EXPECT_EQ(worker.Wait(absl::Seconds(30)), 0) << worker.Log();
}

// NVML finds the CUDA device by its PCI bus id and reads plausible clocks and temperature.
TEST(WorkerGpu, NvmlReadsTheClocksOfTheCudaDevice) {
  SKIP_WITHOUT_GPU();
  absl::StatusOr<std::unique_ptr<worker::CudaDevice>> device = worker::CudaDevice::Open(0);
  ASSERT_TRUE(device.ok()) << device.status();
  ASSERT_FALSE((*device)->info().pci_bus_id.empty());
  absl::StatusOr<std::unique_ptr<worker::NvmlDeviceMonitor>> nvml =
      worker::NvmlDeviceMonitor::Create((*device)->info().pci_bus_id);
  ASSERT_TRUE(nvml.ok()) << nvml.status();
  absl::StatusOr<measure::DeviceState> state = (*nvml)->Read();
  ASSERT_TRUE(state.ok()) << state.status();
  EXPECT_GT(state->sm_clock_mhz, 0);
  EXPECT_GT(state->memory_clock_mhz, 0);
  EXPECT_GT(state->temperature_c, 0);
}

// On the device directly: each repeat's CUPTI time is the sum over the kernels of the repeat, so
// a region of two launches of the same program takes clearly more than one and at most about
// twice (the second launch finds its inputs in L2, flushed only before each repeat);
// kernel_times = false collects none.
TEST(WorkerGpu, CuptiKernelTimesSumTheProgramsKernelsPerRepeat) {
  SKIP_WITHOUT_GPU();
  const schedules::GeneratedSource src = CudaMatmul(GpuTarget(), 256);
  absl::StatusOr<std::unique_ptr<worker::CudaDevice>> device = worker::CudaDevice::Open(0);
  ASSERT_TRUE(device.ok()) << device.status();
  worker::CudaDevice& dev = **device;
  worker::NvrtcOptions nvrtc;
  nvrtc.arch = dev.info().arch;
  absl::StatusOr<worker::CudaBinary> binary = worker::CompileCuda(src, nvrtc);
  ASSERT_TRUE(binary.ok()) << binary.status();
  absl::StatusOr<std::unique_ptr<worker::CudaProgram>> program = dev.Load(src, *binary);
  ASSERT_TRUE(program.ok()) << program.status();
  absl::StatusOr<std::unique_ptr<worker::CudaBuffers>> buffers = dev.Allocate(src.buffers);
  ASSERT_TRUE(buffers.ok());
  absl::StatusOr<worker::HostBuffers> host = worker::MakeVerificationBuffers(src.buffers, 1);
  ASSERT_TRUE(host.ok());
  ASSERT_TRUE(dev.Upload(*host, buffers->get()).ok());
  measure::TimingOptions t;
  t.min_repeats = 20;
  t.max_repeats = 20;
  absl::StatusOr<measure::Timings> one = dev.Time(**program, **buffers, t);
  ASSERT_TRUE(one.ok()) << one.status();
  absl::StatusOr<measure::Timings> two = dev.TimeRegion(
      [&]() -> absl::Status {
        if (absl::Status s = dev.LaunchAsync(**program, **buffers); !s.ok()) return s;
        return dev.LaunchAsync(**program, **buffers);
      },
      t);
  ASSERT_TRUE(two.ok()) << two.status();
  ASSERT_EQ(one->kernel_repeats_ms.size(), 20u) << one->note;
  ASSERT_EQ(two->kernel_repeats_ms.size(), 20u) << two->note;
  EXPECT_GT(two->kernel_median_ms, 1.2 * one->kernel_median_ms)
      << "one launch " << one->kernel_median_ms << " ms, two " << two->kernel_median_ms << " ms";
  EXPECT_LT(two->kernel_median_ms, 2.2 * one->kernel_median_ms)
      << "one launch " << one->kernel_median_ms << " ms, two " << two->kernel_median_ms << " ms";
  t.kernel_times = false;
  absl::StatusOr<measure::Timings> none = dev.Time(**program, **buffers, t);
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_TRUE(none->kernel_repeats_ms.empty());
  EXPECT_EQ(none->repeats_ms.size(), 20u);
}

// Throughput of the whole pipeline (compile on every core, verify, time) for 512 distinct random
// matmul schedules in batches of 64. Prints candidates per second; asserts nothing about speed.
// Run with --gtest_also_run_disabled_tests.
TEST(WorkerGpu, DISABLED_Throughput512DistinctMatmuls) {
  SKIP_WITHOUT_GPU();
  const std::string dir = MakeTempDir("tessel_worker_gpu");
  const schedules::Target target = GpuTarget();
  absl::StatusOr<schedules::Workload> w =
      schedules::ParseWorkloadSpec("matmul(M=512, N=512, K=512)");
  ASSERT_TRUE(w.ok());
  absl::StatusOr<schedules::GeneratedSource> ref = GenerateReference(*w, target);
  ASSERT_TRUE(ref.ok());
  std::vector<schedules::GeneratedSource> candidates;
  std::set<std::string> seen;
  for (uint64_t seed = 1; candidates.size() < 512 && seed < 20000; ++seed) {
    absl::StatusOr<schedules::Schedule> s = RandomSchedule(*w, target, seed, 8);
    if (!s.ok()) continue;
    absl::StatusOr<schedules::GeneratedSource> src = Generate(*s, target);
    if (!src.ok() || !seen.insert(src->code).second) continue;
    candidates.push_back(*src);
  }
  ASSERT_EQ(candidates.size(), 512u);

  auto server = FakeWorkerServer::Start();
  ASSERT_NE(server, nullptr);
  TesselProcess worker(CudaWorkerArgs(server->address(), dir), dir + "/worker.log");
  ASSERT_TRUE(
      server->WaitFor([](const proto::WorkerMessage& m) { return m.has_register_(); }).has_value())
      << worker.Log();
  proto::MeasureOptions options = FastMeasureOptions(10);
  options.mutable_timing()->set_warmup_runs(1);
  options.mutable_timing()->set_min_repeats(3);
  options.mutable_timing()->set_max_repeats(20);
  options.mutable_timing()->set_min_total_ms(5);
  options.mutable_timing()->set_flush_cache(true);
  const absl::Time start = absl::Now();
  for (int b = 0; b < 8; ++b) {
    std::vector<schedules::GeneratedSource> part(candidates.begin() + b * 64,
                                                 candidates.begin() + (b + 1) * 64);
    ASSERT_TRUE(server->Send(MakeBatch(b + 1, part, *ref, options)));
  }
  std::map<int, int> statuses;
  std::map<int, std::string> example;
  double measured_ms = 0;
  for (int b = 0; b < 8; ++b) {
    std::vector<proto::MeasureResult> r = server->WaitForResults(b + 1, 64, absl::Seconds(300));
    ASSERT_EQ(r.size(), 64u) << worker.Log();
    for (const proto::MeasureResult& m : r) {
      ++statuses[m.status()];
      if (!example.count(m.status())) {
        example[m.status()] = m.error().substr(0, 600) + "\n" +
                              candidates[b * 64 + (m.candidate_id() - 100)].code.substr(0, 3000);
      }
      for (double ms : m.repeats_ms()) measured_ms += ms;
    }
  }
  const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
  std::printf(
      "512 distinct random matmul schedules in %.2f s: %.1f candidates/s (%.1f s inside "
      "timed repeats)\n",
      seconds, 512 / seconds, measured_ms / 1000);
  for (const auto& [status, count] : statuses) {
    std::printf("  %s: %d\n", proto::MeasureStatus_Name(status).c_str(), count);
  }
  for (const auto& [status, text] : example) {
    if (status != proto::MEASURE_STATUS_OK) {
      std::printf("example %s: %s\n", proto::MeasureStatus_Name(status).c_str(), text.c_str());
    }
  }

  // The pipeline alone: 512 distinct sources (each compiled by NVRTC) of one reasonable kernel.
  const absl::Time start2 = absl::Now();
  for (int b = 0; b < 8; ++b) {
    std::vector<schedules::GeneratedSource> part;
    for (int i = 0; i < 64; ++i) {
      schedules::GeneratedSource c = *ref;
      c.code += "\n// copy " + std::to_string(b * 64 + i) + "\n";
      part.push_back(c);
    }
    ASSERT_TRUE(server->Send(MakeBatch(100 + b, part, *ref, options)));
  }
  int ok = 0;
  for (int b = 0; b < 8; ++b) {
    for (const proto::MeasureResult& m : server->WaitForResults(100 + b, 64, absl::Seconds(300))) {
      ok += m.status() == proto::MEASURE_STATUS_OK;
    }
  }
  const double seconds2 = absl::ToDoubleSeconds(absl::Now() - start2);
  std::printf("512 distinct sources of the reference kernel in %.2f s: %.1f candidates/s, %d ok\n",
              seconds2, 512 / seconds2, ok);
  worker.Signal(SIGTERM);
  EXPECT_EQ(worker.Wait(absl::Seconds(30)), 0) << worker.Log();
}

}  // namespace
}  // namespace tessel::testing

#else

TEST(WorkerGpu, NeedsTheCudaToolkit) { GTEST_SKIP() << "built without the CUDA toolkit"; }

#endif
