#pragma once

// A program loaded for its backend and ready to launch (the host's shared object, or a CUDA
// module), and the factories that load one from what a tuning record stored. Arguments are
// checked before they get here (runtime/kernel.h).
//
// Threads: Launch may be called from several threads at once; the factories from any thread.

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "measure/artifact.h"
#include "schedules/codegen/source.h"

namespace tessel::runtime {

class LoadedKernel {
 public:
  virtual ~LoadedKernel() = default;
  // Runs the program on `buffers`: one pointer per GeneratedSource buffer, in order, with nullptr
  // for the workspace buffers, which the kernel allocates. `stream` is the caller's CUstream
  // (CUDA) or nullptr (host).
  virtual absl::Status Launch(const std::vector<void*>& buffers, void* stream) = 0;
  // Compiled here from the source rather than loaded from the stored binary.
  virtual bool compiled_here() const = 0;
};

// The stored C++ compiled with the system compiler (the flags of artifact.compile_options, when
// given) into a shared object cached in `cache_dir`, loaded with dlopen.
absl::StatusOr<std::unique_ptr<LoadedKernel>> LoadHostKernel(
    const schedules::GeneratedSource& source, const measure::Artifact& artifact,
    const std::string& cache_dir);

// What the runtime matches CUDA records by.
struct CudaDeviceIdentity {
  std::string name;  // "NVIDIA H100 80GB HBM3"
  std::string arch;  // "sm_90"
};
// UNSUPPORTED when this build has no CUDA, there is no driver or no such device.
absl::StatusOr<CudaDeviceIdentity> IdentifyCudaDevice(int ordinal);

// The stored cubin loaded through the driver API into device `ordinal`'s primary context when it
// was built for code that runs on that device (schedules::CudaArchRunsOn), else the stored source
// compiled with NVRTC for it (schedules::CudaBuildArch of `target_arch`, the record's target's
// architecture). A record of an architecture-specific target (sm_90a) runs on its devices only:
// UNSUPPORTED elsewhere, naming the record's target, the device and the devices that run it.
absl::StatusOr<std::unique_ptr<LoadedKernel>> LoadCudaKernel(
    const schedules::GeneratedSource& source, const measure::Artifact& artifact,
    const std::string& target_arch, int ordinal);

}  // namespace tessel::runtime
