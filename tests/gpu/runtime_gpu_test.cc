// libtessel_runtime on a GPU (CTest label gpu; skipped without one): a matmul tuned on this GPU
// with `tessel tune --target cuda` is found for this very device, loaded from the stored cubin
// (not recompiled), launched on device buffers the test owns, on its own stream, and matches a
// host reference; a cubin stored for another architecture is recompiled with NVRTC from the
// stored source; after a code generator change the runtime still returns the measured source
// and cubin byte for byte; on a 9.0 GPU an sm_90a tune stores sm_90a cubins the runtime loads;
// and a kernel of bulk tensor copies gets its tensor maps made over the caller's buffers.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "runtime/include/tessel/runtime.h"
#include "schedules/codegen/codegen_version.h"
#include "schedules/codegen/source_json.h"
#include "schedules/space/space_generator.h"
#include "store/tuning_log.h"
#include "tests/cli/cli_test_util.h"
#include "tests/e2e/e2e_util.h"
#include "tests/store/store_test_util.h"
#include "tests/test_util.h"
#ifdef TESSEL_HAVE_CUDA
#include "tests/gpu/gpu_test_util.h"
#include "worker/cuda/cuda_driver.h"
#include "worker/cuda/cuda_runner.h"
#include "worker/cuda/nvrtc_compiler.h"
#include "worker/output_compare.h"
#endif

namespace tessel::testing {
namespace {

#ifdef TESSEL_HAVE_CUDA

using ::testing::HasSubstr;

constexpr int kM = 128, kN = 96, kK = 64;
constexpr char kSpec[] = "matmul(M=128, N=96, K=64)";

// Tunes kSpec on GPU 0 into a fresh log (once per process) and returns its path.
const std::string& TunedLog() {
  static const std::string* path = [] {
    auto* p = new std::string(MakeTempDir("tessel_runtime_gpu") + "/tuning.db");
    CliResult r = RunTessel("tune -w '" + std::string(kSpec) +
                            "' -n 16 --target cuda --quiet --db '" + *p + "'");
    EXPECT_EQ(r.status, 0) << r.output;
    return p;
  }();
  return *path;
}

// Device buffers of A (M x K), B (K x N) and C (M x N) in GPU 0's primary context, with random
// inputs, and the host reference of C.
class DeviceMatmul {
 public:
  DeviceMatmul() {
    auto d = worker::LoadCudaDriver();
    EXPECT_TRUE(d.ok()) << d.status();
    d_ = *d;
    CUdevice dev = 0;
    EXPECT_EQ(d_->cuDeviceGet_(&dev, 0), CUDA_SUCCESS);
    EXPECT_EQ(d_->cuDevicePrimaryCtxRetain_(&ctx_, dev), CUDA_SUCCESS);
    EXPECT_EQ(d_->cuCtxSetCurrent_(ctx_), CUDA_SUCCESS);
    std::mt19937 rng(5);
    std::uniform_real_distribution<float> u(-1, 1);
    a_.resize(kM * kK);
    b_.resize(kK * kN);
    for (float& v : a_) v = u(rng);
    for (float& v : b_) v = u(rng);
    EXPECT_EQ(d_->cuMemAlloc_(&da_, a_.size() * 4), CUDA_SUCCESS);
    EXPECT_EQ(d_->cuMemAlloc_(&db_, b_.size() * 4), CUDA_SUCCESS);
    EXPECT_EQ(d_->cuMemAlloc_(&dc_, size_t{kM} * kN * 4), CUDA_SUCCESS);
    EXPECT_EQ(d_->cuMemcpyHtoD_(da_, a_.data(), a_.size() * 4), CUDA_SUCCESS);
    EXPECT_EQ(d_->cuMemcpyHtoD_(db_, b_.data(), b_.size() * 4), CUDA_SUCCESS);
    EXPECT_EQ(d_->cuStreamCreate_(&stream_, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
  }
  ~DeviceMatmul() {
    d_->cuStreamDestroy_(stream_);
    d_->cuMemFree_(da_);
    d_->cuMemFree_(db_);
    d_->cuMemFree_(dc_);
  }

  // Launches `k` on the buffers (C poisoned with NaN first) on this test's stream, and returns the
  // largest error against the host reference.
  double LaunchAndCompare(tessel_kernel* k) {
    EXPECT_EQ(d_->cuMemsetD32Async_(dc_, 0x7fc00000u, size_t{kM} * kN, stream_), CUDA_SUCCESS);
    const int64_t sa[2] = {kM, kK}, sb[2] = {kK, kN}, sc[2] = {kM, kN};
    tessel_tensor args[3] = {{reinterpret_cast<void*>(da_), "f32", 2, sa},
                             {reinterpret_cast<void*>(db_), "f32", 2, sb},
                             {reinterpret_cast<void*>(dc_), "f32", 2, sc}};
    EXPECT_EQ(tessel_launch(k, args, 3, stream_), TESSEL_OK) << tessel_last_error();
    EXPECT_EQ(d_->cuStreamSynchronize_(stream_), CUDA_SUCCESS);
    std::vector<float> c(size_t{kM} * kN);
    EXPECT_EQ(d_->cuMemcpyDtoH_(c.data(), dc_, c.size() * 4), CUDA_SUCCESS);
    double worst = 0;
    for (int i = 0; i < kM; ++i) {
      for (int j = 0; j < kN; ++j) {
        double want = 0;
        for (int kk = 0; kk < kK; ++kk) want += double(a_[i * kK + kk]) * b_[kk * kN + j];
        const double err = std::fabs(c[size_t(i) * kN + j] - want) / std::max(1.0, std::fabs(want));
        if (!(err <= worst)) worst = err;
      }
    }
    return worst;
  }

 private:
  const worker::CudaDriver* d_ = nullptr;
  CUcontext ctx_ = nullptr;
  CUstream stream_ = nullptr;
  CUdeviceptr da_ = 0, db_ = 0, dc_ = 0;
  std::vector<float> a_, b_;
};

std::string Hex(const void* data, size_t n) {
  static const char* digits = "0123456789ABCDEF";
  std::string h;
  for (size_t i = 0; i < n; ++i) {
    const unsigned char c = static_cast<const unsigned char*>(data)[i];
    h.push_back(digits[c >> 4]);
    h.push_back(digits[c & 15]);
  }
  return h;
}

// The stored cubin of record `id`, as upper-case hex (the bytes hold NULs).
std::string StoredCubinHex(const std::string& db, const std::string& id) {
  return RawQuery(db, "SELECT hex(binary) FROM artifacts WHERE record_id = " + id);
}

// The record the runtime loads: the fastest fully timed one (TuningLog::Best's order; a screened
// candidate's brief timing does not count).
std::string BestId(const std::string& db) {
  return RawQuery(db,
                  "SELECT id FROM records WHERE status = 'ok' AND timing_kind = 1 "
                  "ORDER BY latency_ms, id LIMIT 1");
}

tessel_kernel* Find(const std::string& path, tessel_db** db) {
  tessel_open_options o{nullptr, 0};
  EXPECT_EQ(tessel_open(path.c_str(), &o, db), TESSEL_OK) << tessel_last_error();
  tessel_kernel* k = nullptr;
  EXPECT_EQ(tessel_find(*db, kSpec, TESSEL_TARGET_CUDA, &k), TESSEL_OK) << tessel_last_error();
  return k;
}

TEST(RuntimeGpu, LoadsTheStoredCubinForThisDeviceAndLaunchesOnTheCallersStream) {
  SKIP_WITHOUT_GPU();
  const std::string& log = TunedLog();
  const std::string id = BestId(log);
  ASSERT_FALSE(id.empty());
  EXPECT_EQ(RawQuery(log, "SELECT binary_format FROM artifacts WHERE record_id = " + id), "cubin");
  tessel_db* db = nullptr;
  tessel_kernel* k = Find(log, &db);
  ASSERT_NE(k, nullptr);
  auto device = worker::CudaDevice::Open(0);
  ASSERT_TRUE(device.ok()) << device.status();
  EXPECT_EQ(tessel_kernel_match(k), TESSEL_MATCH_DEVICE);
  EXPECT_EQ(std::string(tessel_kernel_match_description(k)),
            "same device (" + (*device)->info().name + ")");
  EXPECT_EQ(tessel_kernel_compiled_here(k), 0);  // the stored cubin, not NVRTC
  size_t n = 0;
  const void* bin = tessel_kernel_binary(k, &n);
  EXPECT_EQ(Hex(bin, n), StoredCubinHex(log, id));
  EXPECT_GT(n, 0u);
  DeviceMatmul m;
  EXPECT_LT(m.LaunchAndCompare(k), 1e-4);
  tessel_kernel_release(k);
  tessel_close(db);
}

TEST(RuntimeGpu, ACubinOfAnotherArchitectureIsRecompiledFromTheStoredSource) {
  SKIP_WITHOUT_GPU();
  const std::string copy = MakeTempDir("tessel_runtime_gpu") + "/other_arch.db";
  ASSERT_EQ(RawExec(TunedLog(), "VACUUM INTO '" + copy + "'"), "");
  auto device = worker::CudaDevice::Open(0);
  ASSERT_TRUE(device.ok());
  const std::string other = (*device)->info().arch == "sm_90" ? "sm_80" : "sm_90";
  const std::string id = BestId(copy);
  // A real cubin, but for the other architecture, as a worker with that GPU would have stored it.
  const std::string source = RawQuery(copy, "SELECT source FROM artifacts WHERE record_id = " + id);
  worker::NvrtcOptions o;
  o.arch = other;
  auto cubin = worker::CompileCudaSource(source, o);
  ASSERT_TRUE(cubin.ok()) << cubin.status();
  ASSERT_EQ(RawExec(copy, "UPDATE artifacts SET binary_arch = '" + other + "', binary = x'" +
                              Hex(cubin->cubin.data(), cubin->cubin.size()) +
                              "' WHERE record_id = " + id),
            "");
  tessel_db* db = nullptr;
  tessel_kernel* k = Find(copy, &db);
  ASSERT_NE(k, nullptr);
  EXPECT_EQ(tessel_kernel_compiled_here(k), 1);
  DeviceMatmul m;
  EXPECT_LT(m.LaunchAndCompare(k), 1e-4);
  tessel_kernel_release(k);
  tessel_close(db);
}

// sm_90a (issue 23) on a 9.0 GPU: `tessel tune --arch sm_90a` is measured by the embedded worker,
// which builds the kernels for sm_90a; the records are of cuda -arch=sm_90a with sm_90a cubins,
// and the runtime finds them for this device (which runs both sm_90 and sm_90a records) and loads
// the stored cubin. Only a 9.0 GPU runs sm_90a code: elsewhere the test skips.
TEST(RuntimeGpu, OnA90GpuAnSm90aTuneStoresSm90aCubinsThatTheRuntimeLoads) {
  SKIP_WITHOUT_GPU();
  auto device = worker::CudaDevice::Open(0);
  ASSERT_TRUE(device.ok()) << device.status();
  if ((*device)->info().arch != "sm_90") {
    GTEST_SKIP() << "sm_90a code runs only on a GPU of compute capability 9.0; GPU 0 is "
                 << (*device)->info().arch;
  }
  const std::string log = MakeTempDir("tessel_runtime_gpu") + "/sm90a.db";
  CliResult r = RunTessel("tune -w '" + std::string(kSpec) +
                          "' -n 8 --target cuda --arch sm_90a --quiet --db '" + log + "'");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(RawQuery(log, "SELECT DISTINCT target_key FROM records"), "cuda -arch=sm_90a");
  EXPECT_NE(RawQuery(log, "SELECT count(*) FROM records WHERE status = 'ok'"), "0");
  const std::string id = BestId(log);
  ASSERT_FALSE(id.empty());
  EXPECT_EQ(RawQuery(log, "SELECT binary_arch FROM artifacts WHERE record_id = " + id), "sm_90a");
  EXPECT_THAT(RawQuery(log, "SELECT compile_options FROM artifacts WHERE record_id = " + id),
              HasSubstr("--gpu-architecture=sm_90a"));
  EXPECT_EQ(RawQuery(log, "SELECT device_arch FROM artifacts WHERE record_id = " + id), "sm_90");
  tessel_db* db = nullptr;
  tessel_kernel* k = Find(log, &db);
  ASSERT_NE(k, nullptr);
  EXPECT_EQ(tessel_kernel_match(k), TESSEL_MATCH_DEVICE);
  EXPECT_EQ(tessel_kernel_compiled_here(k), 0);  // the stored sm_90a cubin, not NVRTC
  DeviceMatmul m;
  EXPECT_LT(m.LaunchAndCompare(k), 1e-4);
  tessel_kernel_release(k);
  tessel_close(db);
}

TEST(RuntimeGpu, AfterACodeGeneratorChangeTheMeasuredSourceAndCubinComeBackByteForByte) {
  SKIP_WITHOUT_GPU();
  const std::string copy = MakeTempDir("tessel_runtime_gpu") + "/changed.db";
  ASSERT_EQ(RawExec(TunedLog(), "VACUUM INTO '" + copy + "'"), "");
  const std::string id = BestId(copy);
  const std::string v = std::to_string(schedules::kCodegenVersion + 1);
  ASSERT_EQ(RawExec(copy, "UPDATE artifacts SET codegen_version = " + v +
                              ", source = source || '// printed by code generator version " + v +
                              "\n' WHERE record_id = " + id),
            "");
  const std::string source = RawQuery(copy, "SELECT source FROM artifacts WHERE record_id = " + id);
  const std::string cubin = StoredCubinHex(copy, id);
  tessel_db* db = nullptr;
  tessel_kernel* k = Find(copy, &db);
  ASSERT_NE(k, nullptr);
  size_t n = 0;
  const char* s = tessel_kernel_source(k, &n);
  EXPECT_EQ(std::string(s, n), source);
  const void* b = tessel_kernel_binary(k, &n);
  EXPECT_EQ(Hex(b, n), cubin);
  EXPECT_EQ(tessel_kernel_codegen_version(k), schedules::kCodegenVersion + 1);
  EXPECT_EQ(tessel_kernel_compiled_here(k), 0);
  DeviceMatmul m;
  EXPECT_LT(m.LaunchAndCompare(k), 1e-4);
  tessel_kernel_release(k);
  tessel_close(db);
  // tessel best prints the same bytes.
  auto device = worker::CudaDevice::Open(0);
  ASSERT_TRUE(device.ok());
  CliResult best = RunTessel("best --db '" + copy + "' -w '" + kSpec + "' -t cuda --arch " +
                                 (*device)->info().arch + " --emit binary",
                             false);
  EXPECT_EQ(Hex(best.output.data(), best.output.size()), cubin);
}

// A kernel whose operands the copy engine fetches (sm_90a, bulk tensor copies) takes tensor maps
// over its buffers: the runtime makes them over the caller's device pointers at each launch. The
// best record of an sm_90a f16 tune is given a bulk-copy sample's program; it is found, compiled,
// launched and compared with the host; a buffer that is not 16-byte aligned is refused with a
// message naming it.
TEST(RuntimeGpu, ABulkCopyKernelGetsItsTensorMapsOverTheCallersBuffers) {
  SKIP_WITHOUT_GPU();
  auto device = worker::CudaDevice::Open(0);
  ASSERT_TRUE(device.ok()) << device.status();
  if ((*device)->info().arch != "sm_90") {
    GTEST_SKIP() << "sm_90a code runs only on a GPU of compute capability 9.0";
  }
  constexpr int M = 256, N = 256, K = 128;
  const std::string spec = "matmul(M=256, N=256, K=128, dtype=f16)";
  const std::string log = MakeTempDir("tessel_runtime_gpu") + "/bulk.db";
  CliResult r = RunTessel("tune -w '" + spec +
                          "' -n 48 --target cuda --arch sm_90a --quiet --db '" + log + "'");
  ASSERT_EQ(r.status, 0) << r.output;
  // The best record's stored program becomes a bulk-copy sample of the same workload, without
  // a binary: the runtime compiles the stored source (the artifact is what it loads).
  auto space = schedules::SpaceGenerator::Create(LoadSpec(spec), schedules::CudaTarget("sm_90a"));
  ASSERT_TRUE(space.ok()) << space.status();
  std::optional<schedules::Candidate> bulk;
  for (uint64_t seed = 1; seed <= 200 && !bulk; ++seed) {
    auto c = space->Sample(seed);
    if (c.ok() && c->source.code.find("cp.async.bulk.tensor") != std::string::npos) bulk = *c;
  }
  ASSERT_TRUE(bulk.has_value());
  auto quoted = [](std::string text) {
    for (size_t at = text.find('\''); at != std::string::npos; at = text.find('\'', at + 2)) {
      text.insert(at, "'");
    }
    return "'" + text + "'";
  };
  const std::string id = BestId(log);
  ASSERT_FALSE(id.empty());
  RawExec(log, "UPDATE artifacts SET source = " + quoted(bulk->source.code) +
                   ", launch_json = " + quoted(schedules::SourceLaunchToJson(bulk->source)) +
                   ", binary = x'', binary_arch = '' WHERE record_id = " + id);

  tessel_db* db = nullptr;
  tessel_open_options o{nullptr, 0};
  ASSERT_EQ(tessel_open(log.c_str(), &o, &db), TESSEL_OK) << tessel_last_error();
  tessel_kernel* k = nullptr;
  ASSERT_EQ(tessel_find(db, spec.c_str(), TESSEL_TARGET_CUDA, &k), TESSEL_OK)
      << tessel_last_error();
  size_t source_size = 0;
  const char* source = tessel_kernel_source(k, &source_size);
  ASSERT_NE(source, nullptr);
  EXPECT_THAT(std::string(source, source_size), HasSubstr("cp.async.bulk.tensor"));

  auto d = worker::LoadCudaDriver();
  ASSERT_TRUE(d.ok());
  const worker::CudaDriver& cu = **d;
  CUdevice dev = 0;
  CUcontext ctx = nullptr;
  ASSERT_EQ(cu.cuDeviceGet_(&dev, 0), CUDA_SUCCESS);
  ASSERT_EQ(cu.cuDevicePrimaryCtxRetain_(&ctx, dev), CUDA_SUCCESS);
  ASSERT_EQ(cu.cuCtxSetCurrent_(ctx), CUDA_SUCCESS);
  std::mt19937 rng(9);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<uint16_t> a(M * K), b(K * N), c(M * N);
  for (uint16_t& v : a) v = worker::FloatToHalfBits(u(rng));
  for (uint16_t& v : b) v = worker::FloatToHalfBits(u(rng));
  CUdeviceptr da = 0, db_ = 0, dc = 0;
  ASSERT_EQ(cu.cuMemAlloc_(&da, a.size() * 2 + 16), CUDA_SUCCESS);
  ASSERT_EQ(cu.cuMemAlloc_(&db_, b.size() * 2), CUDA_SUCCESS);
  ASSERT_EQ(cu.cuMemAlloc_(&dc, c.size() * 2), CUDA_SUCCESS);
  ASSERT_EQ(cu.cuMemcpyHtoD_(da, a.data(), a.size() * 2), CUDA_SUCCESS);
  ASSERT_EQ(cu.cuMemcpyHtoD_(db_, b.data(), b.size() * 2), CUDA_SUCCESS);
  const int64_t sa[2] = {M, K}, sb[2] = {K, N}, sc[2] = {M, N};
  tessel_tensor args[3] = {{reinterpret_cast<void*>(da), "f16", 2, sa},
                           {reinterpret_cast<void*>(db_), "f16", 2, sb},
                           {reinterpret_cast<void*>(dc), "f16", 2, sc}};
  ASSERT_EQ(tessel_launch(k, args, 3, nullptr), TESSEL_OK) << tessel_last_error();
  ASSERT_EQ(cu.cuMemcpyDtoH_(c.data(), dc, c.size() * 2), CUDA_SUCCESS);
  double worst = 0;
  for (int i = 0; i < M; ++i) {
    for (int j = 0; j < N; ++j) {
      double want = 0;
      for (int kk = 0; kk < K; ++kk) {
        want +=
            double(worker::HalfBitsToFloat(a[i * K + kk])) * worker::HalfBitsToFloat(b[kk * N + j]);
      }
      const double err = std::fabs(worker::HalfBitsToFloat(c[size_t(i) * N + j]) - want) /
                         std::max(1.0, std::fabs(want));
      if (!(err <= worst)) worst = err;
    }
  }
  EXPECT_LT(worst, 1e-2);
  // A moved by 8 bytes: the copy engine reads 16-byte aligned tensors only.
  args[0].data = reinterpret_cast<void*>(da + 8);
  EXPECT_EQ(tessel_launch(k, args, 3, nullptr), TESSEL_ERROR_INVALID_ARGUMENT);
  EXPECT_THAT(tessel_last_error(), HasSubstr("is not 16-byte aligned, which the copy engine needs; "
                                             "pass a 16-byte aligned buffer"));
  cu.cuMemFree_(da);
  cu.cuMemFree_(db_);
  cu.cuMemFree_(dc);
  tessel_kernel_release(k);
  tessel_close(db);
}

#else

TEST(RuntimeGpu, NeedsTheCudaToolkit) { GTEST_SKIP() << "built without the CUDA toolkit"; }

#endif  // TESSEL_HAVE_CUDA

}  // namespace
}  // namespace tessel::testing
