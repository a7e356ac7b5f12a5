#pragma once

// What a kernel runs on, with the limits CheckTargetLimits checks. Built-in descriptions exist for
// sm_80 (A100), sm_90 (H100/H200) and sm_90a (the same GPUs with Hopper's architecture-specific
// instructions: wgmma, setmaxnreg); the host's comes from the CPU.
//
// Threads: pure functions and plain values, callable from any thread.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace tessel::schedules {

enum class TargetKind : uint8_t { kHost, kCuda };

// What a CUDA target offers beyond what every target has, for the passes that use it.
enum class TargetFeature : uint8_t {
  kThreadBlockClusters,  // __cluster_dims__, distributed shared memory (sm_90, sm_90a)
  kBulkTensorCopy,       // the tensor memory accelerator: cp.async.bulk.tensor (sm_90, sm_90a)
  kWgmma,                // warpgroup MMA: wgmma.mma_async, wgmma.fence (sm_90a only)
  kSetmaxnreg,           // per-warpgroup register reallocation: setmaxnreg (sm_90a only)
};
const char* TargetFeatureName(TargetFeature f);  // "wgmma", ...

struct Target {
  TargetKind kind = TargetKind::kHost;
  std::string arch;         // "sm_90", "sm_90a", "sm_80"; "x86_64" for the host
  std::string device_name;  // "NVIDIA H100", or the CPU model
  // CUDA limits.
  int64_t max_threads_per_block = 1024;
  int64_t max_shared_bytes_per_block = 48 * 1024;  // static limit without the opt-in
  int64_t max_shared_bytes_optin = 48 * 1024;      // dynamic limit after cudaFuncSetAttribute
  int64_t shared_bytes_per_sm = 48 * 1024;         // what the blocks on one SM share
  int64_t max_registers_per_thread = 255;
  int64_t registers_per_block = 65536;
  int64_t sm_count = 1;
  int64_t warp_size = 32;
  int64_t max_vector_bytes = 16;
  // CTAs a thread-block cluster may hold without a non-portable opt-in (0: no clusters).
  int64_t max_cluster_ctas = 0;
  int64_t l2_bytes = 0;
  // Host.
  int64_t cores = 1;
  int64_t host_vector_bytes = 32;

  bool is_cuda() const { return kind == TargetKind::kCuda; }
  // An architecture-specific CUDA target ("sm_90a"): its kernels may use instructions that run on
  // devices of exactly one compute capability (CudaArchRunsOn).
  bool HasArchSpecificFeatures() const;
  bool Supports(TargetFeature f) const;
  // "cuda -arch=sm_90", "cuda -arch=sm_90a" or "host": the key of the target's records.
  std::string ToString() const;
};

// kind "cuda" (arch one of KnownCudaArchs(); empty arch means sm_90) or "host" (arch ignored).
absl::StatusOr<Target> MakeTarget(const std::string& kind, const std::string& arch = "");
Target CudaTarget(const std::string& arch);  // arch must be one of KnownCudaArchs() (checked)
Target HostTarget();                         // the machine this runs on
// The target of a records' key ToString wrote: "host" (this machine) or "cuda -arch=ARCH";
// InvalidArgument naming the keys this build knows otherwise.
absl::StatusOr<Target> TargetOfKey(const std::string& target_key);

// The CUDA architectures with a built-in description: sm_80, sm_90, sm_90a.
const std::vector<std::string>& KnownCudaArchs();
// "sm_80, sm_90 or sm_90a": for messages that list what is accepted.
std::string KnownCudaArchsText();

// Which devices run which code, the one rule for it (worker matching, the worker's CUBIN check,
// the deploy runtime). `device_arch` is a device's own architecture, "sm_<major><minor>" of its
// compute capability ("sm_90" on an H100). Code built for `arch` runs on it when `arch` is that
// architecture, or its architecture-specific variant ("sm_90a" runs on compute capability 9.0
// only; "sm_90" code never runs on an 8.0 device, nor sm_80 code here on a 9.0 one: records are
// reused for the same architecture only).
bool CudaArchRunsOn(const std::string& arch, const std::string& device_arch);
// The architecture of the devices that run code built for `arch`: "sm_90" for "sm_90a", else
// `arch` itself.
std::string CudaDeviceArchOf(const std::string& arch);
// The known architectures whose code runs on `device_arch`, its own first ({"sm_90", "sm_90a"}
// on 9.0, {"sm_80"} on 8.0, none on 8.6).
std::vector<std::string> KnownCudaArchsRunnableOn(const std::string& device_arch);
// OK when CudaArchRunsOn(arch, device_arch); else FailedPrecondition saying which devices run
// `arch` ("sm_90a code runs only on devices of compute capability 9.0 (sm_90), and this device is
// sm_80").
absl::Status CheckCudaArchRunsOn(const std::string& arch, const std::string& device_arch);
// What to build a CUDA program of target architecture `arch` for, to run it on a device of
// `device_arch`: `arch` when it runs there (sm_90a on a 9.0 device); the device's own when `arch`
// is empty or portable code of another architecture (as workers always did); for an
// architecture-specific `arch` that does not run there, CheckCudaArchRunsOn's error.
absl::StatusOr<std::string> CudaBuildArch(const std::string& arch, const std::string& device_arch);

}  // namespace tessel::schedules
