// The CUDA target of the runtime (runtime/loaded_kernel.h): the stored cubin loaded through the
// driver API (worker/cuda/cuda_driver.h loads libcuda at run time) into the device's primary
// context, the context the CUDA runtime API (and so PyTorch) uses; or, when the cubin was built
// for another architecture, the stored source compiled with NVRTC for this device.

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "runtime/loaded_kernel.h"
#include "runtime/runtime_status.h"
#include "schedules/target/target.h"

#ifdef TESSEL_HAVE_CUDA
#include "schedules/codegen/source_json.h"
#include "worker/cuda/cuda_driver.h"
#include "worker/cuda/nvrtc_compiler.h"
#include "worker/cuda/tensor_map.h"
#endif

namespace tessel::runtime {

#ifndef TESSEL_HAVE_CUDA

namespace {

absl::Status NoCuda() {
  return WithRuntimeCode(
      absl::UnimplementedError("this libtessel_runtime was built without the CUDA toolkit, so it "
                               "runs host kernels only; rebuild it where /usr/local/cuda exists"),
      TESSEL_ERROR_UNSUPPORTED);
}

}  // namespace

absl::StatusOr<CudaDeviceIdentity> IdentifyCudaDevice(int) { return NoCuda(); }

absl::StatusOr<std::unique_ptr<LoadedKernel>> LoadCudaKernel(const schedules::GeneratedSource&,
                                                             const measure::Artifact&,
                                                             const std::string&, int) {
  return NoCuda();
}

#else  // TESSEL_HAVE_CUDA

namespace {

using worker::CudaDriver;

constexpr int64_t kDefaultSharedLimit = 48 * 1024;
// A cooperative kernel's `tessel_grid_sync` words (worker/cuda/cuda_runner.cc).
constexpr size_t kGridSyncBytes = 64;

absl::Status Cu(const CudaDriver& d, CUresult r, const char* call, const std::string& context,
                tessel_status code = TESSEL_ERROR_LAUNCH) {
  if (r == CUDA_SUCCESS) return absl::OkStatus();
  return WithRuntimeCode(worker::CudaError(d, r, call, context), code);
}

absl::StatusOr<const CudaDriver*> Driver() {
  absl::StatusOr<const CudaDriver*> d = worker::LoadCudaDriver();
  if (!d.ok()) {
    return WithRuntimeCode(
        absl::UnavailableError(absl::StrCat("no usable CUDA driver here: ", d.status().message())),
        TESSEL_ERROR_UNSUPPORTED);
  }
  return d;
}

absl::StatusOr<CUdevice> Device(const CudaDriver& d, int ordinal) {
  int count = 0;
  if (d.cuDeviceGetCount_(&count) != CUDA_SUCCESS || ordinal < 0 || ordinal >= count) {
    return WithRuntimeCode(
        absl::UnavailableError(absl::StrCat("there is no CUDA device ", ordinal, " (", count,
                                            " found); pass an existing cuda_device")),
        TESSEL_ERROR_UNSUPPORTED);
  }
  CUdevice dev = 0;
  if (absl::Status s =
          Cu(d, d.cuDeviceGet_(&dev, ordinal), "cuDeviceGet", "", TESSEL_ERROR_UNSUPPORTED);
      !s.ok()) {
    return s;
  }
  return dev;
}

// Makes `ctx` current for the life of this object, and restores the caller's context after.
class ContextScope {
 public:
  ContextScope(const CudaDriver& d, CUcontext ctx) : d_(d) {
    d_.cuCtxGetCurrent_(&previous_);
    if (previous_ != ctx) d_.cuCtxSetCurrent_(ctx);
    restore_ = previous_ != ctx;
  }
  ~ContextScope() {
    if (restore_) d_.cuCtxSetCurrent_(previous_);
  }
  ContextScope(const ContextScope&) = delete;
  ContextScope& operator=(const ContextScope&) = delete;

 private:
  const CudaDriver& d_;
  CUcontext previous_ = nullptr;
  bool restore_ = false;
};

class CudaKernel final : public LoadedKernel {
 public:
  CudaKernel(const CudaDriver& d, CUdevice device, CUcontext ctx, bool compiled_here)
      : d_(d), device_(device), ctx_(ctx), compiled_here_(compiled_here) {}
  ~CudaKernel() override {
    {
      ContextScope scope(d_, ctx_);
      if (module_ != nullptr) d_.cuModuleUnload_(module_);
    }
    d_.cuDevicePrimaryCtxRelease_(device_);
  }

  absl::Status Load(const schedules::GeneratedSource& source, const std::string& image) {
    ContextScope scope(d_, ctx_);
    if (absl::Status s = Cu(d_, d_.cuModuleLoadDataEx_(&module_, image.data(), 0, nullptr, nullptr),
                            "cuModuleLoadDataEx", "loading the kernel's module");
        !s.ok()) {
      return s;
    }
    for (const schedules::KernelSource& k : source.kernels) {
      CUfunction fn = nullptr;
      if (absl::Status s = Cu(d_, d_.cuModuleGetFunction_(&fn, module_, k.entry.c_str()),
                              "cuModuleGetFunction", absl::StrCat("kernel '", k.entry, "'"));
          !s.ok()) {
        return s;
      }
      int static_shared = 0;
      d_.cuFuncGetAttribute_(&static_shared, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, fn);
      if (static_shared + k.launch.dynamic_shared_bytes > kDefaultSharedLimit) {
        if (absl::Status s =
                Cu(d_,
                   d_.cuFuncSetAttribute_(fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                          static_cast<int>(k.launch.dynamic_shared_bytes)),
                   "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)",
                   absl::StrCat("kernel '", k.entry, "'"));
            !s.ok()) {
          return s;
        }
      }
      functions_.push_back(fn);
      launches_.push_back(k.launch);
      params_.push_back(k.params);
      entries_.push_back(k.entry);
    }
    if (absl::Status s = schedules::CheckTensorMaps(source); !s.ok()) {
      return WithRuntimeCode(s, TESSEL_ERROR_BAD_FILE);
    }
    for (const schedules::ProgramBuffer& b : source.buffers) {
      buffers_.push_back(b.buffer);
      workspace_bytes_.push_back(
          b.role == schedules::BufferRole::kWorkspace ? b.buffer->AllocatedBytes() : 0);
    }
    return absl::OkStatus();
  }

  absl::Status Launch(const std::vector<void*>& buffers, void* stream_arg) override {
    ContextScope scope(d_, ctx_);
    CUstream stream = static_cast<CUstream>(stream_arg);
    std::vector<CUdeviceptr> ptrs(buffers.size());
    std::vector<CUdeviceptr> owned;  // workspace and grid barrier words of this launch
    auto free_owned = [&]() {
      if (owned.empty()) return absl::OkStatus();
      absl::Status s = Cu(d_, d_.cuStreamSynchronize_(stream), "cuStreamSynchronize",
                          "waiting for the launch before freeing its scratch memory");
      for (CUdeviceptr p : owned) d_.cuMemFree_(p);
      return s;
    };
    for (size_t i = 0; i < buffers.size(); ++i) {
      ptrs[i] = reinterpret_cast<CUdeviceptr>(buffers[i]);
      if (buffers[i] == nullptr && workspace_bytes_[i] > 0) {
        CUdeviceptr p = 0;
        if (absl::Status s = Cu(d_, d_.cuMemAlloc_(&p, static_cast<size_t>(workspace_bytes_[i])),
                                "cuMemAlloc", "the program's workspace");
            !s.ok()) {
          free_owned().IgnoreError();
          return s;
        }
        owned.push_back(p);
        ptrs[i] = p;
      }
    }
    for (size_t k = 0; k < functions_.size(); ++k) {
      const schedules::LaunchConfig& l = launches_[k];
      std::vector<CUdeviceptr> values;
      for (int p : params_[k]) values.push_back(ptrs[static_cast<size_t>(p)]);
      // The tensor maps over the caller's buffers, after them.
      std::vector<CUtensorMap> maps;
      for (const schedules::TensorMapSpec& m : l.tensor_maps) {
        const size_t b = static_cast<size_t>(m.buffer);
        absl::StatusOr<CUtensorMap> map = worker::EncodeTensorMap(d_, m, *buffers_[b], ptrs[b]);
        if (!map.ok()) {
          free_owned().IgnoreError();
          return WithRuntimeCode(map.status(), TESSEL_ERROR_INVALID_ARGUMENT);
        }
        maps.push_back(*map);
      }
      CUdeviceptr sync = 0;
      if (l.cooperative) {
        absl::Status s =
            Cu(d_, d_.cuMemAlloc_(&sync, kGridSyncBytes), "cuMemAlloc", "a grid barrier's words");
        if (s.ok()) {
          owned.push_back(sync);
          s = Cu(d_, d_.cuMemsetD32Async_(sync, 0, kGridSyncBytes / 4, stream), "cuMemsetD32Async",
                 "a grid barrier's words");
        }
        if (!s.ok()) {
          free_owned().IgnoreError();
          return s;
        }
      }
      std::vector<void*> args;
      for (CUdeviceptr& v : values) args.push_back(&v);
      for (CUtensorMap& m : maps) args.push_back(&m);
      if (l.cooperative) args.push_back(&sync);
      const auto u = [](int64_t v) { return static_cast<unsigned>(v); };
      const CUresult r =
          l.cooperative
              ? d_.cuLaunchCooperativeKernel_(functions_[k], u(l.grid[0]), u(l.grid[1]),
                                              u(l.grid[2]), u(l.block[0]), u(l.block[1]),
                                              u(l.block[2]), u(l.dynamic_shared_bytes), stream,
                                              args.empty() ? nullptr : args.data())
              : d_.cuLaunchKernel_(functions_[k], u(l.grid[0]), u(l.grid[1]), u(l.grid[2]),
                                   u(l.block[0]), u(l.block[1]), u(l.block[2]),
                                   u(l.dynamic_shared_bytes), stream,
                                   args.empty() ? nullptr : args.data(), nullptr);
      if (absl::Status s =
              Cu(d_, r, l.cooperative ? "cuLaunchCooperativeKernel" : "cuLaunchKernel",
                 absl::StrCat("kernel '", entries_[k], "' (", schedules::ToString(l), ")"));
          !s.ok()) {
        free_owned().IgnoreError();
        return s;
      }
    }
    return free_owned();
  }

  bool compiled_here() const override { return compiled_here_; }

 private:
  const CudaDriver& d_;
  const CUdevice device_;
  const CUcontext ctx_;  // the device's primary context, retained
  const bool compiled_here_;
  CUmodule module_ = nullptr;
  std::vector<CUfunction> functions_;
  std::vector<schedules::LaunchConfig> launches_;
  std::vector<std::vector<int>> params_;
  std::vector<std::string> entries_;
  std::vector<int64_t> workspace_bytes_;
  std::vector<schedules::BufferPtr> buffers_;  // the program's, for the tensor maps
};

}  // namespace

absl::StatusOr<CudaDeviceIdentity> IdentifyCudaDevice(int ordinal) {
  absl::StatusOr<const CudaDriver*> d = Driver();
  if (!d.ok()) return d.status();
  absl::StatusOr<CUdevice> dev = Device(**d, ordinal);
  if (!dev.ok()) return dev.status();
  char name[256] = {};
  int major = 0, minor = 0;
  (*d)->cuDeviceGetName_(name, sizeof(name), *dev);
  (*d)->cuDeviceGetAttribute_(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, *dev);
  (*d)->cuDeviceGetAttribute_(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, *dev);
  return CudaDeviceIdentity{name, absl::StrCat("sm_", major, minor)};
}

absl::StatusOr<std::unique_ptr<LoadedKernel>> LoadCudaKernel(
    const schedules::GeneratedSource& source, const measure::Artifact& artifact,
    const std::string& target_arch, int ordinal) {
  absl::StatusOr<CudaDeviceIdentity> identity = IdentifyCudaDevice(ordinal);
  if (!identity.ok()) return identity.status();
  absl::StatusOr<std::string> build_arch = schedules::CudaBuildArch(target_arch, identity->arch);
  if (!build_arch.ok()) {
    return WithRuntimeCode(
        absl::FailedPreconditionError(absl::StrCat(
            "the kernel was tuned for cuda -arch=", target_arch, ", and CUDA device ", ordinal,
            " (", identity->name, ") cannot run it: ", build_arch.status().message(),
            "; tune the workload for ", identity->arch, " to deploy it here")),
        TESSEL_ERROR_UNSUPPORTED);
  }
  absl::StatusOr<const CudaDriver*> d = Driver();
  if (!d.ok()) return d.status();
  absl::StatusOr<CUdevice> dev = Device(**d, ordinal);
  if (!dev.ok()) return dev.status();
  // The stored cubin when it is this device's architecture, else NVRTC for this device.
  const bool stored_fits = artifact.binary_format == "cubin" && !artifact.binary.empty() &&
                           schedules::CudaArchRunsOn(artifact.binary_arch, identity->arch);
  std::string image;
  if (stored_fits) {
    image = artifact.binary;
  } else {
    worker::NvrtcOptions options;
    options.arch = *build_arch;
    absl::StatusOr<worker::CudaBinary> binary = worker::CompileCuda(source, options);
    if (!binary.ok()) {
      return WithRuntimeCode(
          absl::Status(
              binary.status().code(),
              absl::StrCat("compiling the stored CUDA source with NVRTC for ", *build_arch,
                           " (the stored cubin is for ",
                           artifact.binary_arch.empty() ? "no architecture" : artifact.binary_arch,
                           ") failed: ", binary.status().message())),
          TESSEL_ERROR_COMPILE);
    }
    image = std::move(binary->cubin);
  }
  CUcontext ctx = nullptr;
  if (absl::Status s = Cu(**d, (*d)->cuDevicePrimaryCtxRetain_(&ctx, *dev),
                          "cuDevicePrimaryCtxRetain", "", TESSEL_ERROR_UNSUPPORTED);
      !s.ok()) {
    return s;
  }
  auto kernel = std::make_unique<CudaKernel>(**d, *dev, ctx, !stored_fits);
  if (absl::Status s = kernel->Load(source, image); !s.ok()) return s;
  return std::unique_ptr<LoadedKernel>(std::move(kernel));
}

#endif  // TESSEL_HAVE_CUDA

}  // namespace tessel::runtime
