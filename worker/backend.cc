#include "worker/backend.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <functional>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "schedules/util/elapsed.h"
#include "worker/host/host_runner.h"

#ifdef TESSEL_HAVE_CUDA
#include "worker/cuda/cuda_runner.h"
#include "worker/cuda/cuda_verifier.h"
#endif

namespace tessel::worker {
namespace {

using schedules::MsSince;

using schedules::Buffer;
using schedules::BufferRole;
using schedules::GeneratedSource;
using schedules::ProgramBuffer;

class HostExecutable : public Executable {
 public:
  explicit HostExecutable(HostModule module) : module_(std::move(module)) {}
  Backend backend() const override { return Backend::kHost; }
  double compile_ms() const override { return module_.compile_ms(); }
  absl::Status Run(HostBuffers* buffers) override { return RunHostModule(module_, buffers); }
  absl::StatusOr<measure::Timings> Time(HostBuffers* buffers,
                                        const measure::TimingOptions& options) override {
    return TimeHostModule(module_, buffers, options);
  }

 private:
  HostModule module_;
};

#ifdef TESSEL_HAVE_CUDA
class CudaExecutable : public Executable {
 public:
  // `owned` is set when the executable opened the device itself; `device` points to it or to the
  // caller's.
  CudaExecutable(std::unique_ptr<CudaDevice> owned, CudaDevice* device,
                 std::vector<ProgramBuffer> buffers, double compile_ms)
      : owned_(std::move(owned)),
        device_(device),
        buffers_(std::move(buffers)),
        compile_ms_(compile_ms) {}
  ~CudaExecutable() override { program_.reset(); }  // before the device it may own

  Backend backend() const override { return Backend::kCuda; }
  double compile_ms() const override { return compile_ms_; }

  absl::Status Run(HostBuffers* buffers) override {
    absl::StatusOr<std::unique_ptr<CudaBuffers>> dev = device_->Allocate(buffers_);
    if (!dev.ok()) return dev.status();
    if (absl::Status s = device_->Upload(*buffers, dev->get()); !s.ok()) return s;
    if (absl::Status s = device_->Run(*program_, **dev); !s.ok()) return s;
    return device_->Download(**dev, buffers, /*include_inputs=*/true);
  }

  absl::StatusOr<measure::Timings> Time(HostBuffers* buffers,
                                        const measure::TimingOptions& options) override {
    absl::StatusOr<std::unique_ptr<CudaBuffers>> dev = device_->Allocate(buffers_);
    if (!dev.ok()) return dev.status();
    if (absl::Status s = device_->Upload(*buffers, dev->get()); !s.ok()) return s;
    return device_->Time(*program_, **dev, options);
  }

  std::vector<measure::KernelResources> Resources() const override {
    std::vector<measure::KernelResources> out;
    for (const CudaKernelInfo& k : program_->kernels()) {
      out.push_back(measure::KernelResources{k.entry, k.registers, k.static_shared_bytes,
                                             k.launch.dynamic_shared_bytes, k.local_bytes});
    }
    return out;
  }

  CudaDevice* device() const { return device_; }
  const CudaProgram& program() const { return *program_; }

  // Run's steps apart, each timed into `profile` (upload, run, download).
  absl::Status RunProfiled(HostBuffers* buffers, double* upload_ms, double* run_ms,
                           double* download_ms);

  std::unique_ptr<CudaProgram> program_;

 private:
  std::unique_ptr<CudaDevice> owned_;
  CudaDevice* device_;
  std::vector<ProgramBuffer> buffers_;
  double compile_ms_;
};
#endif

#ifdef TESSEL_HAVE_CUDA
absl::Status CudaExecutable::RunProfiled(HostBuffers* buffers, double* upload_ms, double* run_ms,
                                         double* download_ms) {
  auto t = std::chrono::steady_clock::now();
  absl::StatusOr<std::unique_ptr<CudaBuffers>> dev = device_->Allocate(buffers_);
  if (!dev.ok()) return dev.status();
  if (absl::Status s = device_->Upload(*buffers, dev->get()); !s.ok()) return s;
  *upload_ms += MsSince(t);
  t = std::chrono::steady_clock::now();
  if (absl::Status s = device_->Run(*program_, **dev); !s.ok()) return s;
  *run_ms += MsSince(t);
  t = std::chrono::steady_clock::now();
  absl::Status s = device_->Download(**dev, buffers, /*include_inputs=*/true);
  *download_ms += MsSince(t);
  return s;
}
#endif

// Candidate and reference must agree on their inputs and outputs (the workload's interface), in
// order; their workspace buffers are their own business and may differ.
std::vector<size_t> Interface(const GeneratedSource& source) {
  std::vector<size_t> out;
  for (size_t i = 0; i < source.buffers.size(); ++i) {
    if (source.buffers[i].role != BufferRole::kWorkspace) out.push_back(i);
  }
  return out;
}

absl::Status SameInterface(const GeneratedSource& candidate, const GeneratedSource& reference) {
  auto describe = [](const ProgramBuffer& pb) {
    const Buffer& b = *pb.buffer;
    return absl::StrCat(
        schedules::BufferRoleName(pb.role), " '", b.name, "' ", schedules::DTypeName(b.dtype), "[",
        absl::StrJoin(b.shape, ", "), "]",
        b.strides.empty() ? "" : absl::StrCat(" strides [", absl::StrJoin(b.strides, ", "), "]"));
  };
  const std::vector<size_t> ci = Interface(candidate), ri = Interface(reference);
  if (ci.size() != ri.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the candidate has ", ci.size(), " inputs and outputs and the reference ",
                     ri.size(), ": both must come from the same workload"));
  }
  for (size_t k = 0; k < ci.size(); ++k) {
    const ProgramBuffer& c = candidate.buffers[ci[k]];
    const ProgramBuffer& r = reference.buffers[ri[k]];
    if (c.role != r.role || c.buffer->dtype != r.buffer->dtype ||
        c.buffer->shape != r.buffer->shape || c.buffer->Strides() != r.buffer->Strides()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "buffer ", k, " differs: the candidate's is ", describe(c), ", the reference's ",
          describe(r), ": both must come from the same workload, in the same order"));
    }
  }
  return absl::OkStatus();
}

// A failure of the reference is not the candidate's: drop the measure::MeasureStatus and say whose
// it is.
absl::Status ReferenceError(const absl::Status& s) {
  return absl::Status(s.code(), absl::StrCat("the reference program failed (fix the reference, "
                                             "not the candidate): ",
                                             s.message()));
}

}  // namespace

const char* BackendName(Backend backend) {
  switch (backend) {
    case Backend::kHost:
      return "host";
    case Backend::kCuda:
      return "cuda";
  }
  return "?";
}

Backend BackendOf(const GeneratedSource& source) {
  return source.target == schedules::TargetKind::kCuda ? Backend::kCuda : Backend::kHost;
}

namespace {

// Loads `source` from `host` (host backend) or compiles it with NVRTC unless `cuda` holds its
// CUBIN (CUDA backend).
absl::StatusOr<std::unique_ptr<Executable>> PrepareImpl(const GeneratedSource& source,
                                                        const HostObject* host,
                                                        const CudaBinary* cuda,
                                                        const RunOptions& options) {
  if (BackendOf(source) == Backend::kHost) {
    absl::StatusOr<HostModule> module =
        host != nullptr ? LoadHostModule(source, *host) : CompileHost(source, options.host);
    if (!module.ok()) return module.status();
    return std::unique_ptr<Executable>(new HostExecutable(std::move(*module)));
  }
#ifdef TESSEL_HAVE_CUDA
  std::unique_ptr<CudaDevice> owned;
  CudaDevice* device = options.device;
  if (device == nullptr) {
    absl::StatusOr<std::unique_ptr<CudaDevice>> opened = CudaDevice::Open(options.cuda_ordinal);
    if (!opened.ok()) return opened.status();
    owned = std::move(*opened);
    device = owned.get();
  }
  CudaBinary compiled;
  if (cuda == nullptr) {
    NvrtcOptions nvrtc = options.nvrtc;
    if (nvrtc.arch.empty()) nvrtc.arch = device->info().arch;
    absl::StatusOr<CudaBinary> binary = CompileCuda(source, nvrtc);
    if (!binary.ok()) return binary.status();
    compiled = std::move(*binary);
    cuda = &compiled;
  }
  absl::StatusOr<std::unique_ptr<CudaProgram>> program = device->Load(source, *cuda);
  if (!program.ok()) return program.status();
  auto exe =
      std::make_unique<CudaExecutable>(std::move(owned), device, source.buffers, cuda->compile_ms);
  exe->program_ = std::move(*program);
  return std::unique_ptr<Executable>(std::move(exe));
#else
  return absl::UnimplementedError(
      "this Tessel was built without the CUDA toolkit: rebuild with CUDA 13 at /usr/local/cuda "
      "(or CUDAToolkit_ROOT) to run CUDA programs");
#endif
}

}  // namespace

absl::StatusOr<std::unique_ptr<Executable>> Prepare(const GeneratedSource& source,
                                                    const RunOptions& options) {
  return PrepareImpl(source, nullptr, nullptr, options);
}

absl::StatusOr<std::unique_ptr<Executable>> PrepareCompiled(const GeneratedSource& source,
                                                            const PrecompiledProgram& compiled,
                                                            const RunOptions& options) {
  return PrepareImpl(source, &compiled.host, &compiled.cuda, options);
}

absl::Status RunAndVerify(const GeneratedSource& candidate, const GeneratedSource& reference,
                          uint64_t seed, const VerifyOptions& options) {
  if (absl::Status s = SameInterface(candidate, reference); !s.ok()) return s;
  RunOptions run = options.run;
#ifdef TESSEL_HAVE_CUDA
  // One device for both programs (declared before the executables, so destroyed after them).
  std::unique_ptr<CudaDevice> device;
  if (run.device == nullptr &&
      (BackendOf(candidate) == Backend::kCuda || BackendOf(reference) == Backend::kCuda)) {
    absl::StatusOr<std::unique_ptr<CudaDevice>> opened = CudaDevice::Open(run.cuda_ordinal);
    if (!opened.ok()) return opened.status();
    device = std::move(*opened);
    run.device = device.get();
  }
#endif
  absl::StatusOr<std::unique_ptr<Executable>> ref_exe = Prepare(reference, run);
  if (!ref_exe.ok()) return ReferenceError(ref_exe.status());
  absl::StatusOr<std::unique_ptr<Executable>> cand_exe = Prepare(candidate, run);
  if (!cand_exe.ok()) return cand_exe.status();
  return VerifyPrepared(candidate, **cand_exe, reference, **ref_exe, seed, options);
}

namespace {

absl::Status InputWritten(const GeneratedSource& candidate, size_t i, int64_t at) {
  return measure::WithMeasureStatus(
      absl::FailedPreconditionError(
          absl::StrCat("verification failed: the candidate wrote into input buffer '",
                       candidate.buffers[i].buffer->name, "' (first changed byte at offset ", at,
                       "): inputs are read-only")),
      measure::MeasureStatus::kVerifyFailed);
}

// VerifyPrepared on the host: fill, copy, run, copy back, compare.
absl::Status VerifyOnHost(const GeneratedSource& candidate, Executable& candidate_exe,
                          const GeneratedSource& reference, Executable& reference_exe,
                          uint64_t seed, const VerifyOptions& options, VerifyProfile* profile) {
  auto t = std::chrono::steady_clock::now();
  absl::StatusOr<HostBuffers> cand_buffers =
      MakeVerificationBuffers(candidate.buffers, seed, options.fill);
  if (!cand_buffers.ok()) return cand_buffers.status();
  absl::StatusOr<HostBuffers> ref_buffers =
      MakeVerificationBuffers(reference.buffers, seed, options.fill);
  if (!ref_buffers.ok()) return ref_buffers.status();
  const std::vector<size_t> ci = Interface(candidate), ri = Interface(reference);
  for (size_t k = 0; k < ci.size(); ++k) ref_buffers->data[ri[k]] = cand_buffers->data[ci[k]];
  const HostBuffers inputs = *cand_buffers;
  profile->fill_ms += MsSince(t);

  // A run, its copies timed apart where the backend has them.
  auto run = [&](Executable& exe, HostBuffers* buffers, double* run_ms) -> absl::Status {
#ifdef TESSEL_HAVE_CUDA
    if (auto* cuda = dynamic_cast<CudaExecutable*>(&exe); cuda != nullptr) {
      return cuda->RunProfiled(buffers, &profile->upload_ms, run_ms, &profile->download_ms);
    }
#endif
    const auto start = std::chrono::steady_clock::now();
    absl::Status s = exe.Run(buffers);
    *run_ms += MsSince(start);
    return s;
  };
  if (absl::Status s = run(reference_exe, &*ref_buffers, &profile->reference_ms); !s.ok()) {
    return ReferenceError(s);
  }
  if (absl::Status s = run(candidate_exe, &*cand_buffers, &profile->candidate_ms); !s.ok()) {
    return s;
  }

  t = std::chrono::steady_clock::now();
  for (size_t i = 0; i < candidate.buffers.size(); ++i) {
    if (candidate.buffers[i].role != BufferRole::kInput) continue;
    const ByteVector& a = inputs.data[i];
    const ByteVector& b = cand_buffers->data[i];
    if (a == b) continue;
    const size_t at = static_cast<size_t>(
        std::mismatch(a.begin(), a.end(), b.begin(), b.end()).first - a.begin());
    return InputWritten(candidate, i, static_cast<int64_t>(at));
  }
  // Compare over the interface only.
  std::vector<ProgramBuffer> io;
  HostBuffers ref_io, cand_io;
  for (size_t k = 0; k < ci.size(); ++k) {
    io.push_back(candidate.buffers[ci[k]]);
    ref_io.data.push_back(std::move(ref_buffers->data[ri[k]]));
    cand_io.data.push_back(std::move(cand_buffers->data[ci[k]]));
  }
  absl::Status s = CompareOutputs(io, ref_io, cand_io, options.compare);
  profile->compare_ms += MsSince(t);
  return s;
}

#ifdef TESSEL_HAVE_CUDA
// VerifyPrepared on the GPU: the same steps, with nothing but statistics coming back.
absl::Status VerifyOnDevice(const GeneratedSource& candidate, CudaExecutable& candidate_exe,
                            const GeneratedSource& reference, CudaExecutable& reference_exe,
                            CudaVerifier& verifier, uint64_t seed, const VerifyOptions& options,
                            VerifyProfile* profile) {
  CudaDevice& device = verifier.device();
  auto t = std::chrono::steady_clock::now();
  absl::StatusOr<std::unique_ptr<CudaBuffers>> cand = device.Allocate(candidate.buffers);
  if (!cand.ok()) return cand.status();
  absl::StatusOr<std::unique_ptr<CudaBuffers>> ref = device.Allocate(reference.buffers);
  if (!ref.ok()) return ref.status();
  if (absl::Status s = verifier.FillInputs(candidate.buffers, seed, options.fill, cand->get());
      !s.ok()) {
    return s;
  }
  if (absl::Status s = verifier.PoisonOutputs(candidate.buffers, cand->get()); !s.ok()) return s;
  if (absl::Status s = verifier.PoisonOutputs(reference.buffers, ref->get()); !s.ok()) return s;
  const std::vector<size_t> ci = Interface(candidate), ri = Interface(reference);
  for (size_t k = 0; k < ci.size(); ++k) {
    if (candidate.buffers[ci[k]].role != BufferRole::kInput) continue;
    if (absl::Status s = verifier.Copy((*ref)->ptr(ri[k]), (*cand)->ptr(ci[k]),
                                       static_cast<size_t>((*cand)->bytes(ci[k])));
        !s.ok()) {
      return s;
    }
  }
  profile->fill_ms += MsSince(t);
  t = std::chrono::steady_clock::now();
  if (absl::Status s = device.Run(reference_exe.program(), **ref); !s.ok()) {
    return ReferenceError(s);
  }
  profile->reference_ms += MsSince(t);
  t = std::chrono::steady_clock::now();
  if (absl::Status s = device.Run(candidate_exe.program(), **cand); !s.ok()) return s;
  profile->candidate_ms += MsSince(t);

  t = std::chrono::steady_clock::now();
  for (size_t i = 0; i < candidate.buffers.size(); ++i) {
    if (candidate.buffers[i].role != BufferRole::kInput) continue;
    const Buffer& b = *candidate.buffers[i].buffer;
    absl::StatusOr<int64_t> changed = verifier.FirstChangedElement(b, static_cast<int64_t>(i), seed,
                                                                   options.fill, (*cand)->ptr(i));
    if (!changed.ok()) return changed.status();
    if (*changed < 0) continue;
    // The first changed byte of that element, as the host comparison reports it.
    const int64_t size = schedules::DTypeBytes(b.dtype);
    uint64_t got = 0;
    if (absl::Status s = device.MakeCurrent(); !s.ok()) return s;
    const CUresult r = device.driver().cuMemcpyDtoH_(
        &got, (*cand)->ptr(i) + static_cast<CUdeviceptr>(*changed * size),
        static_cast<size_t>(size));
    if (r != CUDA_SUCCESS) return CudaError(device.driver(), r, "cuMemcpyDtoH", "input check");
    const uint64_t want =
        InputElementBits(b, seed, static_cast<int64_t>(i), *changed, options.fill);
    int64_t byte = 0;
    while (byte < size - 1 && ((got >> (8 * byte)) & 0xFF) == ((want >> (8 * byte)) & 0xFF)) {
      ++byte;
    }
    return InputWritten(candidate, i, *changed * size + byte);
  }
  std::vector<std::string> failures;
  int compared = 0;
  for (size_t k = 0; k < ci.size(); ++k) {
    const BufferRole role = candidate.buffers[ci[k]].role;
    if (role == BufferRole::kInput) continue;
    const Buffer& b = *candidate.buffers[ci[k]].buffer;
    const Tolerance tol = options.compare.tolerance.value_or(DefaultTolerance(b.dtype));
    absl::Status s = verifier.CompareBuffer(b, (*ref)->ptr(ri[k]), (*cand)->ptr(ci[k]), tol);
    ++compared;
    if (s.ok()) continue;
    if (s.code() != absl::StatusCode::kFailedPrecondition) return s;
    failures.push_back(std::string(s.message()));
  }
  profile->compare_ms += MsSince(t);
  return OutputsVerdict(compared, failures);
}
#endif

}  // namespace

absl::Status VerifyPrepared(const GeneratedSource& candidate, Executable& candidate_exe,
                            const GeneratedSource& reference, Executable& reference_exe,
                            uint64_t seed, const VerifyOptions& options) {
  if (absl::Status s = SameInterface(candidate, reference); !s.ok()) return s;
  VerifyProfile ignored;
  VerifyProfile* profile = options.profile != nullptr ? options.profile : &ignored;
  *profile = VerifyProfile();
#ifdef TESSEL_HAVE_CUDA
  auto* cand_cuda = dynamic_cast<CudaExecutable*>(&candidate_exe);
  auto* ref_cuda = dynamic_cast<CudaExecutable*>(&reference_exe);
  if (options.on_device && cand_cuda != nullptr && ref_cuda != nullptr &&
      cand_cuda->device() == ref_cuda->device()) {
    absl::StatusOr<CudaVerifier*> verifier = cand_cuda->device()->Verifier();
    if (!verifier.ok()) return verifier.status();
    profile->on_device = true;
    return VerifyOnDevice(candidate, *cand_cuda, reference, *ref_cuda, **verifier, seed, options,
                          profile);
  }
#endif
  return VerifyOnHost(candidate, candidate_exe, reference, reference_exe, seed, options, profile);
}

namespace {

// Fresh inputs from `seed` and poisoned outputs for `source` (on the GPU for CUDA programs), then
// `body` called with a function that times `exe` on them with given options.
using TimeOn = std::function<absl::StatusOr<measure::Timings>(const measure::TimingOptions&)>;
absl::StatusOr<measure::Timings> WithInputs(
    const GeneratedSource& source, Executable& exe, uint64_t seed, const FillOptions& fill,
    double* fill_ms, const std::function<absl::StatusOr<measure::Timings>(const TimeOn&)>& body) {
  const auto t = std::chrono::steady_clock::now();
#ifdef TESSEL_HAVE_CUDA
  if (auto* cuda = dynamic_cast<CudaExecutable*>(&exe); cuda != nullptr) {
    CudaDevice& device = *cuda->device();
    absl::StatusOr<CudaVerifier*> verifier = device.Verifier();
    if (!verifier.ok()) return verifier.status();
    absl::StatusOr<std::unique_ptr<CudaBuffers>> dev = device.Allocate(source.buffers);
    if (!dev.ok()) return dev.status();
    if (absl::Status s = (*verifier)->FillInputs(source.buffers, seed, fill, dev->get()); !s.ok()) {
      return s;
    }
    if (absl::Status s = (*verifier)->PoisonOutputs(source.buffers, dev->get()); !s.ok()) return s;
    if (fill_ms != nullptr) *fill_ms = MsSince(t);
    return body([&](const measure::TimingOptions& timing) {
      return device.Time(cuda->program(), **dev, timing);
    });
  }
#endif
  absl::StatusOr<HostBuffers> buffers = MakeVerificationBuffers(source.buffers, seed, fill);
  if (!buffers.ok()) return buffers.status();
  if (fill_ms != nullptr) *fill_ms = MsSince(t);
  return body([&](const measure::TimingOptions& timing) { return exe.Time(&*buffers, timing); });
}

}  // namespace

absl::StatusOr<measure::Timings> TimePrepared(const GeneratedSource& source, Executable& exe,
                                              uint64_t seed, const FillOptions& fill,
                                              const measure::TimingOptions& timing,
                                              double* fill_ms) {
  return WithInputs(source, exe, seed, fill, fill_ms,
                    [&](const TimeOn& time_on) { return time_on(timing); });
}

absl::StatusOr<measure::Timings> TimeScreened(const GeneratedSource& source, Executable& exe,
                                              uint64_t seed, const FillOptions& fill,
                                              const measure::TimingOptions& timing,
                                              const measure::ScreenOptions& screen,
                                              double* fill_ms) {
  if (!screen.enabled) return TimePrepared(source, exe, seed, fill, timing, fill_ms);
  return WithInputs(source, exe, seed, fill, fill_ms,
                    [&](const TimeOn& time_on) -> absl::StatusOr<measure::Timings> {
                      measure::TimingOptions short_timing = screen.timing;
                      short_timing.hardware_counters = timing.hardware_counters;
                      absl::StatusOr<measure::Timings> screened = time_on(short_timing);
                      if (!screened.ok()) return screened;
                      const double screen_median = screened->latency_ms();
                      const int screen_repeats = static_cast<int>(screened->repeats_ms.size());
                      if (!measure::ShouldConfirm(screen, screen_median)) {
                        screened->kind = measure::TimingKind::kScreened;
                        screened->screen_median_ms = screen_median;
                        screened->screen_repeats = screen_repeats;
                        return screened;
                      }
                      // The full measurement, as without screening; the counters were collected
                      // already.
                      measure::TimingOptions full = timing;
                      full.hardware_counters = false;
                      absl::StatusOr<measure::Timings> confirmed = time_on(full);
                      if (!confirmed.ok()) return confirmed;
                      confirmed->kind = measure::TimingKind::kConfirmed;
                      confirmed->screen_median_ms = screen_median;
                      confirmed->screen_repeats = screen_repeats;
                      if (timing.hardware_counters) {
                        confirmed->counters = screened->counters;
                        if (!screened->counters.has_value() && confirmed->note.empty()) {
                          confirmed->note = screened->note;
                        }
                      }
                      return confirmed;
                    });
}

absl::StatusOr<measure::Timings> Measure(const GeneratedSource& source,
                                         const MeasureOptions& options) {
  absl::StatusOr<std::unique_ptr<Executable>> exe = Prepare(source, options.run);
  if (!exe.ok()) return exe.status();
  absl::StatusOr<HostBuffers> buffers =
      MakeVerificationBuffers(source.buffers, options.seed, options.fill);
  if (!buffers.ok()) return buffers.status();
  return (*exe)->Time(&*buffers, options.timing);
}

}  // namespace tessel::worker
