#include "worker/verify_run.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "worker/host/host_runner.h"

#ifdef TESSEL_HAVE_CUDA
#include "worker/cuda/cuda_runner.h"
#endif

namespace tessel::worker {
namespace {

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
  absl::StatusOr<Timings> Time(HostBuffers* buffers, const TimingOptions& options) override {
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

  absl::StatusOr<Timings> Time(HostBuffers* buffers, const TimingOptions& options) override {
    absl::StatusOr<std::unique_ptr<CudaBuffers>> dev = device_->Allocate(buffers_);
    if (!dev.ok()) return dev.status();
    if (absl::Status s = device_->Upload(*buffers, dev->get()); !s.ok()) return s;
    return device_->Time(*program_, **dev, options);
  }

  std::vector<KernelResources> Resources() const override {
    std::vector<KernelResources> out;
    for (const CudaKernelInfo& k : program_->kernels()) {
      out.push_back(KernelResources{k.entry, k.registers, k.static_shared_bytes,
                                    k.launch.dynamic_shared_bytes, k.local_bytes});
    }
    return out;
  }

  std::unique_ptr<CudaProgram> program_;

 private:
  std::unique_ptr<CudaDevice> owned_;
  CudaDevice* device_;
  std::vector<ProgramBuffer> buffers_;
  double compile_ms_;
};
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

// A failure of the reference is not the candidate's: drop the FailureKind and say whose it is.
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

absl::Status VerifyPrepared(const GeneratedSource& candidate, Executable& candidate_exe,
                            const GeneratedSource& reference, Executable& reference_exe,
                            uint64_t seed, const VerifyOptions& options) {
  if (absl::Status s = SameInterface(candidate, reference); !s.ok()) return s;
  absl::StatusOr<HostBuffers> cand_buffers =
      MakeVerificationBuffers(candidate.buffers, seed, options.fill);
  if (!cand_buffers.ok()) return cand_buffers.status();
  absl::StatusOr<HostBuffers> ref_buffers =
      MakeVerificationBuffers(reference.buffers, seed, options.fill);
  if (!ref_buffers.ok()) return ref_buffers.status();
  const std::vector<size_t> ci = Interface(candidate), ri = Interface(reference);
  for (size_t k = 0; k < ci.size(); ++k) ref_buffers->data[ri[k]] = cand_buffers->data[ci[k]];
  const HostBuffers inputs = *cand_buffers;
  if (absl::Status s = reference_exe.Run(&*ref_buffers); !s.ok()) return ReferenceError(s);
  if (absl::Status s = candidate_exe.Run(&*cand_buffers); !s.ok()) return s;

  for (size_t i = 0; i < candidate.buffers.size(); ++i) {
    if (candidate.buffers[i].role != BufferRole::kInput) continue;
    const ByteVector& a = inputs.data[i];
    const ByteVector& b = cand_buffers->data[i];
    if (a == b) continue;
    const size_t at = static_cast<size_t>(
        std::mismatch(a.begin(), a.end(), b.begin(), b.end()).first - a.begin());
    return WithFailureKind(absl::FailedPreconditionError(absl::StrCat(
                               "verification failed: the candidate wrote into input buffer '",
                               candidate.buffers[i].buffer->name,
                               "' (first changed byte at offset ", at, "): inputs are read-only")),
                           FailureKind::kVerifyFailed);
  }
  // Compare over the interface only.
  std::vector<ProgramBuffer> io;
  HostBuffers ref_io, cand_io;
  for (size_t k = 0; k < ci.size(); ++k) {
    io.push_back(candidate.buffers[ci[k]]);
    ref_io.data.push_back(std::move(ref_buffers->data[ri[k]]));
    cand_io.data.push_back(std::move(cand_buffers->data[ci[k]]));
  }
  return CompareOutputs(io, ref_io, cand_io, options.compare);
}

absl::StatusOr<Timings> Measure(const GeneratedSource& source, const MeasureOptions& options) {
  absl::StatusOr<std::unique_ptr<Executable>> exe = Prepare(source, options.run);
  if (!exe.ok()) return exe.status();
  absl::StatusOr<HostBuffers> buffers =
      MakeVerificationBuffers(source.buffers, options.seed, options.fill);
  if (!buffers.ok()) return buffers.status();
  return (*exe)->Time(&*buffers, options.timing);
}

}  // namespace tessel::worker
