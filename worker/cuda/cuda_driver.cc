#include "worker/cuda/cuda_driver.h"

#include <dlfcn.h>

#include <cstdlib>
#include <string>

#include "absl/strings/str_cat.h"

namespace tessel::worker {
namespace {

using GetProcAddressFn = CUresult (*)(const char*, void**, int, cuuint64_t,
                                      CUdriverProcAddressQueryResult*);
using DriverGetVersionFn = CUresult (*)(int*);

std::string VersionString(int v) { return absl::StrCat(v / 1000, ".", (v % 1000) / 10); }

absl::StatusOr<const CudaDriver*> Load() {
  const char* override_path = std::getenv("TESSEL_LIBCUDA");
  const std::string path =
      (override_path != nullptr && override_path[0] != '\0') ? override_path : "libcuda.so.1";
  void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    const char* why = dlerror();
    return absl::FailedPreconditionError(absl::StrCat(
        "the NVIDIA driver library could not be loaded (dlopen(\"", path,
        "\"): ", why != nullptr ? why : "unknown error",
        "): install the NVIDIA driver (r580 or newer for CUDA 13) or run on a GPU host"));
  }
  // Leaked on purpose: the driver stays loaded for the life of the process.
  auto get_version = reinterpret_cast<DriverGetVersionFn>(dlsym(lib, "cuDriverGetVersion"));
  auto get_proc = reinterpret_cast<GetProcAddressFn>(dlsym(lib, "cuGetProcAddress_v2"));
  if (get_version == nullptr || get_proc == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat(path,
                     " has no cuDriverGetVersion/cuGetProcAddress_v2: the NVIDIA driver is older "
                     "than CUDA 12; install r580 or newer"));
  }
  auto* driver = new CudaDriver();
  const CUresult version = get_version(&driver->driver_version);
  if (version != CUDA_SUCCESS) {
    return absl::FailedPreconditionError(absl::StrCat(
        "cuDriverGetVersion failed in ", path, " (CUresult ", static_cast<int>(version), "): ",
        version == CUDA_ERROR_STUB_LIBRARY
            ? "this is the CUDA toolkit's stub libcuda, not the driver's: install the NVIDIA "
              "driver or take the stubs directory off LD_LIBRARY_PATH"
            : "the driver installation is broken; reinstall the NVIDIA driver"));
  }
  if (driver->driver_version < CUDA_VERSION) {
    return absl::FailedPreconditionError(
        absl::StrCat("the NVIDIA driver supports CUDA ", VersionString(driver->driver_version),
                     " but Tessel was built with CUDA ", VersionString(CUDA_VERSION),
                     " (its NVRTC output needs a driver at least as new): upgrade the driver"));
  }
  std::string missing;
#define TESSEL_CUDA_DRIVER_RESOLVE(name)                                                           \
  {                                                                                                \
    void* fn = nullptr;                                                                            \
    CUdriverProcAddressQueryResult found = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;                   \
    if (get_proc(#name, &fn, CUDA_VERSION, CU_GET_PROC_ADDRESS_DEFAULT, &found) != CUDA_SUCCESS || \
        fn == nullptr || found != CU_GET_PROC_ADDRESS_SUCCESS) {                                   \
      absl::StrAppend(&missing, missing.empty() ? "" : ", ", #name);                               \
    } else {                                                                                       \
      driver->name##_ = reinterpret_cast<decltype(driver->name##_)>(fn);                           \
    }                                                                                              \
  }
  TESSEL_CUDA_DRIVER_FUNCTIONS(TESSEL_CUDA_DRIVER_RESOLVE)
#undef TESSEL_CUDA_DRIVER_RESOLVE
  if (!missing.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the NVIDIA driver (CUDA ", VersionString(driver->driver_version),
        ") lacks driver API functions Tessel needs: ", missing, "; upgrade the driver"));
  }
  const CUresult init = driver->cuInit_(0);
  if (init != CUDA_SUCCESS) {
    absl::Status s = CudaError(*driver, init, "cuInit");
    std::string hint = "check that a GPU is present and visible (nvidia-smi, CUDA_VISIBLE_DEVICES)";
    if (init == CUDA_ERROR_STUB_LIBRARY) {
      hint =
          "the CUDA toolkit's stub libcuda was loaded instead of the driver's: remove the stubs "
          "directory from LD_LIBRARY_PATH";
    }
    return absl::FailedPreconditionError(absl::StrCat(s.message(), ": ", hint));
  }
  return driver;
}

}  // namespace

absl::StatusOr<const CudaDriver*> LoadCudaDriver() {
  static const absl::StatusOr<const CudaDriver*>* loaded =
      new absl::StatusOr<const CudaDriver*>(Load());
  return *loaded;
}

std::string CudaResultString(const CudaDriver& driver, CUresult result) {
  const char* name = nullptr;
  const char* text = nullptr;
  if (driver.cuGetErrorName_ != nullptr) driver.cuGetErrorName_(result, &name);
  if (driver.cuGetErrorString_ != nullptr) driver.cuGetErrorString_(result, &text);
  return absl::StrCat(name != nullptr ? name : absl::StrCat("CUresult ", static_cast<int>(result)),
                      " (", text != nullptr ? text : "no description", ")");
}

absl::Status CudaError(const CudaDriver& driver, CUresult result, absl::string_view call,
                       absl::string_view context) {
  std::string msg = absl::StrCat(call, " failed: ", CudaResultString(driver, result));
  if (!context.empty()) absl::StrAppend(&msg, ": ", context);
  switch (result) {
    case CUDA_ERROR_OUT_OF_MEMORY:
      return absl::ResourceExhaustedError(msg);
    case CUDA_ERROR_INVALID_VALUE:
      return absl::InvalidArgumentError(msg);
    default:
      return absl::InternalError(msg);
  }
}

}  // namespace tessel::worker
