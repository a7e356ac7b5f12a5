#include "worker/isolation/child_main.h"

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "measure/measurement.h"
#include "proto/convert.h"
#include "proto/measure_child.pb.h"
#include "schedules/target/target.h"
#include "schedules/util/elapsed.h"
#include "schedules/util/fnv1a.h"
#include "worker/backend.h"
#include "worker/host/host_compiler.h"
#include "worker/host/host_runner.h"
#include "worker/isolation/frame_io.h"
#ifdef TESSEL_HAVE_CUDA
#include "worker/cuda/cuda_runner.h"
#include "worker/cuda/nvrtc_compiler.h"
#endif

namespace tessel::worker {
namespace {

using schedules::MsSince;

PrecompiledProgram FromArtifact(const proto::CompiledArtifact& a) {
  PrecompiledProgram p;
  p.host.library_path = a.host_library();
  p.host.compile_ms = a.compile_ms();
  p.host.cache_hit = a.cache_hit();
  p.cuda.cubin = a.cubin();
  p.cuda.arch = a.cuda_arch();
  p.cuda.compile_ms = a.compile_ms();
  return p;
}

// Inputs for candidate `id` of a batch: fresh for every candidate, reproducible from the batch.
uint64_t CandidateSeed(uint64_t batch_seed, uint64_t id) {
  return schedules::Fnv1a64(absl::StrCat(batch_seed, ":", id));
}

// TESSEL_VERIFY_ON_HOST=1: verify CUDA candidates on the host (fill, copy, compare there), as
// before the GPU verifier; for comparisons and as a fallback.
bool VerifyOnHostRequested() {
  const char* v = std::getenv("TESSEL_VERIFY_ON_HOST");
  return v != nullptr && v[0] != '\0' && v[0] != '0';
}

// TESSEL_VERIFY_PROFILE=FILE: append one line per candidate with where its verification and
// timing went (tessel_bench_worker --mode=throughput sums them).
const char* VerifyProfilePath() {
  const char* v = std::getenv("TESSEL_VERIFY_PROFILE");
  return v != nullptr && v[0] != '\0' ? v : nullptr;
}

void WriteProfile(uint64_t candidate_id, const VerifyProfile& p, double verify_ms,
                  double timing_fill_ms, double timing_ms) {
  const char* path = VerifyProfilePath();
  if (path == nullptr) return;
  const std::string line = absl::StrFormat(
      "verify_profile id=%d on_device=%d verify_ms=%.3f fill_ms=%.3f upload_ms=%.3f "
      "reference_ms=%.3f candidate_ms=%.3f download_ms=%.3f compare_ms=%.3f "
      "timing_fill_ms=%.3f timing_ms=%.3f\n",
      candidate_id, p.on_device ? 1 : 0, verify_ms, p.fill_ms, p.upload_ms, p.reference_ms,
      p.candidate_ms, p.download_ms, p.compare_ms, timing_fill_ms, timing_ms);
  const int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return;
  (void)!write(fd, line.data(), line.size());  // one write: lines of children do not interleave
  close(fd);
}

class Child {
 public:
  explicit Child(const ChildMainOptions& options) : options_(options) {}
  ~Child() {
    reference_.reset();  // before the device
  }

  // Opens the device and fills the hello.
  proto::ChildHello Open() {
    proto::ChildHello hello;
    proto::Device* d = hello.mutable_device();
    d->set_ordinal(options_.device);
    if (options_.target == "host") {
      const schedules::Target t = schedules::HostTarget();
      d->set_kind(proto::TARGET_KIND_HOST);
      d->set_name(t.device_name);
      d->set_arch(t.arch);
      d->set_cores(static_cast<int32_t>(t.cores));
      d->set_cache_bytes(HostLastLevelCacheBytes());
      absl::StatusOr<std::string> cxx = HostCompilerVersion(HostCompileOptions().compiler);
      d->set_toolkit_version(cxx.ok() ? *cxx : "unknown C++ compiler");
      hello.set_device_count(1);
      return hello;
    }
#ifdef TESSEL_HAVE_CUDA
    absl::StatusOr<std::unique_ptr<CudaDevice>> device = CudaDevice::Open(options_.device);
    if (!device.ok()) {
      hello.set_error(std::string(device.status().message()));
      return hello;
    }
    device_ = std::move(*device);
    const CudaDeviceInfo& info = device_->info();
    d->set_kind(proto::TARGET_KIND_CUDA);
    d->set_name(info.name);
    d->set_arch(info.arch);
    d->set_sm_count(static_cast<int32_t>(info.sm_count));
    d->set_memory_bytes(info.total_memory_bytes);
    d->set_l2_bytes(info.l2_bytes);
    d->set_max_shared_per_block(info.max_shared_per_block);
    d->set_max_shared_per_block_optin(info.max_shared_per_block_optin);
    d->set_max_threads_per_block(static_cast<int32_t>(info.max_threads_per_block));
    d->set_driver_version(info.driver_version);
    d->set_toolkit_version(NvrtcVersionString());
    const CudaDriver& drv = device_->driver();
    int count = 0;
    if (drv.cuDeviceGetCount_(&count) == CUDA_SUCCESS) hello.set_device_count(count);
    CUdevice dev = 0;
    if (drv.cuDeviceGet_(&dev, options_.device) == CUDA_SUCCESS) {
      auto attr = [&](CUdevice_attribute a) {
        int v = 0;
        return drv.cuDeviceGetAttribute_(&v, a, dev) == CUDA_SUCCESS ? v : 0;
      };
      d->set_clock_khz(attr(CU_DEVICE_ATTRIBUTE_CLOCK_RATE));
      d->set_memory_clock_khz(attr(CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE));
      d->set_memory_bus_width_bits(attr(CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH));
      d->set_registers_per_block(attr(CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK));
      d->set_registers_per_sm(attr(CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR));
      d->set_max_shared_per_sm(attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR));
    }
    return hello;
#else
    hello.set_error(
        "this Tessel was built without the CUDA toolkit: rebuild with CUDA 13 at /usr/local/cuda "
        "to measure on a GPU, or use --target host");
    return hello;
#endif
  }

  proto::ChildResult Measure(const proto::ChildMeasure& request) {
    proto::ChildResult out;
    out.set_token(request.token());
    measure::Measurement result = MeasureImpl(request);
    result.device = options_.device;
    proto::ToProto(result, out.mutable_result());
#ifdef TESSEL_HAVE_CUDA
    out.set_device_poisoned(device_ != nullptr && device_->is_poisoned());
#endif
    return out;
  }

 private:
  measure::Measurement MeasureImpl(const proto::ChildMeasure& request) {
    absl::StatusOr<schedules::GeneratedSource> candidate = proto::FromProto(request.candidate());
    if (!candidate.ok()) return measure::Measurement::FromStatus(candidate.status());
    RunOptions run;
#ifdef TESSEL_HAVE_CUDA
    run.device = device_.get();
#endif
    absl::StatusOr<std::unique_ptr<Executable>> exe =
        PrepareCompiled(*candidate, FromArtifact(request.candidate_artifact()), run);
    measure::Measurement result;
    if (!exe.ok()) {
      result = measure::Measurement::FromStatus(exe.status());
    } else {
      result.kernels = (*exe)->Resources();
      result = Run(request, *candidate, **exe, run, std::move(result));
    }
    result.compile_ms = request.candidate_artifact().compile_ms();
    result.compile_cache_hit = request.candidate_artifact().cache_hit();
    return result;
  }

  measure::Measurement Run(const proto::ChildMeasure& request,
                           const schedules::GeneratedSource& candidate, Executable& exe,
                           const RunOptions& run, measure::Measurement result) {
    const uint64_t seed = CandidateSeed(request.options().verify_seed(), request.candidate_id());
    VerifyProfile profile;
    bool verified = false;
    // The worker's own failure (its reference, the options it was sent), not the candidate's.
    auto worker_error = [&result](const absl::Status& s) {
      result.status = measure::MeasureStatus::kWorkerError;
      result.error = std::string(s.message());
      return std::move(result);
    };
    if (!request.options().skip_verify()) {
      absl::Status ref = PrepareReference(request, run);
      if (!ref.ok()) return worker_error(ref);
      VerifyOptions verify;
      verify.run = run;
      verify.on_device = !VerifyOnHostRequested();
      verify.profile = &profile;
      const auto start = std::chrono::steady_clock::now();
      absl::Status s = VerifyPrepared(candidate, exe, reference_source_, *reference_, seed, verify);
      result.verify_ms = MsSince(start);
      verified = true;
      if (!s.ok()) {
        WriteProfile(request.candidate_id(), profile, result.verify_ms, -1, -1);
        measure::Measurement failed = measure::Measurement::FromStatus(s);
        failed.kernels = std::move(result.kernels);
        failed.verify_ms = result.verify_ms;
        return failed;
      }
    }
    measure::TimingOptions timing;
    if (request.options().has_timing()) {
      absl::StatusOr<measure::TimingOptions> t = proto::FromProto(request.options().timing());
      if (!t.ok()) return worker_error(t.status());
      timing = *t;
    }
    measure::ScreenOptions screen;
    if (request.options().has_screen()) {
      absl::StatusOr<measure::ScreenOptions> s = proto::FromProto(request.options().screen());
      if (!s.ok()) return worker_error(s.status());
      screen = *s;
      screen.confirm = request.confirm();
    }
    double timing_fill_ms = 0;
    const auto timing_start = std::chrono::steady_clock::now();
    absl::StatusOr<measure::Timings> timings =
        TimeScreened(candidate, exe, seed, FillOptions(), timing, screen, &timing_fill_ms);
    result.worker_times.timing_ms = MsSince(timing_start);
    if (verified) {
      WriteProfile(request.candidate_id(), profile, result.verify_ms, timing_fill_ms,
                   result.worker_times.timing_ms);
    }
    if (!timings.ok()) {
      measure::Measurement failed = measure::Measurement::FromStatus(timings.status());
      failed.kernels = std::move(result.kernels);
      failed.verify_ms = result.verify_ms;
      failed.worker_times = result.worker_times;
      return failed;
    }
    result.status = measure::MeasureStatus::kOk;
    result.timings = std::move(*timings);
    return result;
  }

  // Loads the batch's reference once: it stays loaded while the requests name the same one.
  absl::Status PrepareReference(const proto::ChildMeasure& request, const RunOptions& run) {
    const std::string key = absl::StrCat(request.reference().code(), "\n//",
                                         request.reference_artifact().host_library(), ":",
                                         schedules::Fnv1a64(request.reference_artifact().cubin()));
    if (reference_ != nullptr && key == reference_key_) return absl::OkStatus();
    reference_.reset();
    absl::StatusOr<schedules::GeneratedSource> source = proto::FromProto(request.reference());
    if (!source.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("the batch's reference is malformed: ", source.status().message()));
    }
    absl::StatusOr<std::unique_ptr<Executable>> exe =
        PrepareCompiled(*source, FromArtifact(request.reference_artifact()), run);
    if (!exe.ok()) {
      return absl::Status(exe.status().code(),
                          absl::StrCat("the reference program failed to load (fix the reference, "
                                       "not the candidate): ",
                                       exe.status().message()));
    }
    reference_source_ = std::move(*source);
    reference_ = std::move(*exe);
    reference_key_ = key;
    return absl::OkStatus();
  }

  ChildMainOptions options_;
#ifdef TESSEL_HAVE_CUDA
  std::unique_ptr<CudaDevice> device_;
#endif
  schedules::GeneratedSource reference_source_;
  std::unique_ptr<Executable> reference_;
  std::string reference_key_;
};

}  // namespace

int RunMeasureChild(const ChildMainOptions& options) {
  // Die with the parent; never take the terminal's Ctrl-C (the parent decides when to stop us).
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() == 1) return 1;
  // A crashing candidate is expected here: no core files.
  const rlimit no_core{0, 0};
  setrlimit(RLIMIT_CORE, &no_core);
  std::signal(SIGPIPE, SIG_IGN);

  Child child(options);
  proto::ChildResponse hello;
  *hello.mutable_hello() = child.Open();
  const bool opened = hello.hello().error().empty();
  if (!WriteFrame(options.fd, hello).ok()) return 1;
  if (!opened) return 2;
  while (true) {
    proto::ChildRequest request;
    absl::Status s = ReadFrame(options.fd, &request);
    if (absl::IsUnavailable(s)) return 0;  // the parent closed the socket
    if (!s.ok()) {
      std::fprintf(stderr, "tessel measure child: %s\n", std::string(s.message()).c_str());
      return 1;
    }
    if (!request.has_measure()) continue;
    proto::ChildResponse response;
    *response.mutable_result() = child.Measure(request.measure());
    const bool poisoned = response.result().device_poisoned();
    if (!WriteFrame(options.fd, response).ok()) return 1;
    if (poisoned) return 3;
  }
}

}  // namespace tessel::worker
