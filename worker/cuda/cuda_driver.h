#pragma once

// The CUDA driver API, loaded at run time.
//
// Tessel does not link libcuda: the toolkit only has a stub of it (lib64/stubs/libcuda.so, soname
// libcuda.so.1), and a binary that records libcuda.so.1 as NEEDED does not start on a machine
// without the NVIDIA driver (CI, a build host). Instead LoadCudaDriver() dlopen's
// "libcuda.so.1" (the driver's own library; $TESSEL_LIBCUDA overrides the path), takes
// cuGetProcAddress_v2 from it and asks it for every function below at the ABI of the cuda.h this
// was built with (CUDA_VERSION), so that e.g. `cuMemAlloc_` is cuMemAlloc_v2 as cuda.h declares
// it. The driver must support CUDA 13 (r580 or newer) and cuInit(0) must succeed.

#include <cuda.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tessel::worker {

// The functions Tessel uses. X(name): `name` is the cuda.h name (macros such as cuMemAlloc ->
// cuMemAlloc_v2 pick the ABI; the symbol is requested by its base name). Not cuCtxSynchronize:
// asked for by name at CUDA 13 it resolves to cuCtxSynchronize_v2, which takes a context, and a
// call through the old signature crashes; wait on a stream instead.
#define TESSEL_CUDA_DRIVER_FUNCTIONS(X)          \
  X(cuInit)                                      \
  X(cuDriverGetVersion)                          \
  X(cuGetErrorName)                              \
  X(cuGetErrorString)                            \
  X(cuDeviceGetCount)                            \
  X(cuDeviceGet)                                 \
  X(cuDeviceGetName)                             \
  X(cuDeviceGetAttribute)                        \
  X(cuDeviceGetPCIBusId)                         \
  X(cuDeviceTotalMem)                            \
  X(cuDevicePrimaryCtxRetain)                    \
  X(cuDevicePrimaryCtxRelease)                   \
  X(cuCtxSetCurrent)                             \
  X(cuCtxGetCurrent)                             \
  X(cuModuleLoadDataEx)                          \
  X(cuModuleUnload)                              \
  X(cuModuleGetFunction)                         \
  X(cuFuncGetAttribute)                          \
  X(cuFuncSetAttribute)                          \
  X(cuOccupancyMaxActiveBlocksPerMultiprocessor) \
  X(cuMemAlloc)                                  \
  X(cuMemFree)                                   \
  X(cuMemGetInfo)                                \
  X(cuMemcpyHtoD)                                \
  X(cuMemcpyDtoH)                                \
  X(cuMemcpyDtoDAsync)                           \
  X(cuMemsetD8)                                  \
  X(cuMemsetD32Async)                            \
  X(cuStreamCreate)                              \
  X(cuStreamDestroy)                             \
  X(cuStreamSynchronize)                         \
  X(cuEventCreate)                               \
  X(cuEventDestroy)                              \
  X(cuEventRecord)                               \
  X(cuEventSynchronize)                          \
  X(cuEventElapsedTime)                          \
  X(cuLaunchKernel)                              \
  X(cuLaunchCooperativeKernel)                   \
  X(cuTensorMapEncodeTiled)

// One pointer per function, named `<name>_` (e.g. `driver.cuMemAlloc_(&ptr, bytes)`).
struct CudaDriver {
#define TESSEL_CUDA_DRIVER_MEMBER(name) decltype(&::name) name##_ = nullptr;
  TESSEL_CUDA_DRIVER_FUNCTIONS(TESSEL_CUDA_DRIVER_MEMBER)
#undef TESSEL_CUDA_DRIVER_MEMBER
  int driver_version = 0;  // cuDriverGetVersion, e.g. 13000
};

// Loads and initializes the driver once per process; later calls return the same result.
// Fails (never crashes) when libcuda.so.1 is missing, too old, or cuInit fails (no device, the
// stub library, a broken installation); the message says which and what to do.
// Threads: any thread.
absl::StatusOr<const CudaDriver*> LoadCudaDriver();

// "cuMemAlloc failed: CUDA_ERROR_OUT_OF_MEMORY (out of memory)" (+ ": <context>").
absl::Status CudaError(const CudaDriver& driver, CUresult result, absl::string_view call,
                       absl::string_view context = "");

// "CUDA_ERROR_ILLEGAL_ADDRESS (an illegal memory access was encountered)".
std::string CudaResultString(const CudaDriver& driver, CUresult result);

}  // namespace tessel::worker

// Calls `driver.fn_ args` and returns CudaError(...) from the enclosing function on failure.
// `fn` is the driver function's name, e.g. TESSEL_CU_RETURN_IF_ERROR(d, cuMemAlloc, (&p, n)).
#define TESSEL_CU_RETURN_IF_ERROR(driver, fn, args)                        \
  do {                                                                     \
    const CUresult tessel_cu_result = (driver).fn##_ args;                 \
    if (tessel_cu_result != CUDA_SUCCESS) {                                \
      return ::tessel::worker::CudaError((driver), tessel_cu_result, #fn); \
    }                                                                      \
  } while (false)
