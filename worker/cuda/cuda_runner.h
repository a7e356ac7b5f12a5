#pragma once

// Runs and times CUDA GeneratedSources through the driver API (loaded at run time, see
// cuda_driver.h): a device's primary context and one stream, modules loaded from NVRTC's CUBIN,
// device buffers, launches in order, and timing per DESIGN.md section 6: warm-up runs, then
// repeats, each between two events on the stream with the L2 cache flushed before it (a
// cuMemsetD32Async over a buffer twice the L2 size), until a minimum total time or a maximum
// number of repeats; every repeat and the median are returned, with each repeat's kernel time
// from CUPTI and the SM and memory clocks and temperature right after the repeats (NVML).
//
// Lifetime: CudaPrograms and CudaBuffers must be destroyed before the CudaDevice that made them.
// Threads: a CudaDevice and what it made are used by one thread at a time; every call makes the
// device's context current on the calling thread first.
// Faults: an error from the kernel itself (illegal address, trap, ...) leaves the context
// unusable; the device then refuses further work (is_poisoned()) and the process must be
// restarted (the worker daemon measures in a child process for this reason).

#include <cuda.h>

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "measure/measurement.h"
#include "schedules/codegen/source.h"
#include "worker/cuda/cuda_driver.h"
#include "worker/cuda/nvrtc_compiler.h"
#include "worker/output_compare.h"

namespace tessel::worker {

class CudaVerifier;       // cuda_verifier.h
class NvmlDeviceMonitor;  // nvml_device_monitor.h

// OK when a GPU can be used: the driver loads, cuInit succeeds and there is at least one device;
// otherwise why not. Never crashes, also without libcuda. Threads: any thread.
absl::Status CudaDeviceStatus();
bool CudaDeviceAvailable();

struct CudaDeviceInfo {
  int ordinal = 0;
  std::string name;  // "NVIDIA H100 80GB HBM3"
  int cc_major = 0;
  int cc_minor = 0;
  std::string arch;  // "sm_90"
  int64_t sm_count = 0;
  int64_t l2_bytes = 0;
  int64_t total_memory_bytes = 0;
  int64_t max_threads_per_block = 0;
  int64_t max_shared_per_block = 0;        // without the opt-in (48 KiB)
  int64_t max_shared_per_block_optin = 0;  // after CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
  std::array<int64_t, 3> max_block{0, 0, 0};
  std::array<int64_t, 3> max_grid{0, 0, 0};
  bool cooperative_launch = false;  // can launch kernels that synchronize their whole grid
  int driver_version = 0;           // 13000 for CUDA 13.0
  std::string pci_bus_id;           // "0000:65:00.0" (cuDeviceGetPCIBusId)
};

// What the loader found out about one kernel (cuFuncGetAttribute).
struct CudaKernelInfo {
  std::string entry;
  schedules::LaunchConfig launch;
  std::vector<int> params;
  int registers = 0;
  int64_t static_shared_bytes = 0;
  int64_t local_bytes = 0;  // per thread: spills and local arrays
  int max_threads_per_block = 0;
};

// A loaded module and its kernels, in launch order.
class CudaProgram {
 public:
  CudaProgram(const CudaProgram&) = delete;
  CudaProgram& operator=(const CudaProgram&) = delete;
  ~CudaProgram();

  const std::vector<CudaKernelInfo>& kernels() const { return kernels_; }
  int num_buffers() const { return num_buffers_; }

 private:
  friend class CudaDevice;
  CudaProgram() = default;

  const CudaDriver* driver_ = nullptr;
  CUcontext context_ = nullptr;
  CUmodule module_ = nullptr;
  // Per kernel, in launch order.
  std::vector<CUfunction> functions_;
  std::vector<CudaKernelInfo> kernels_;
  // A cooperative kernel's grid barrier words (LaunchConfig::cooperative), passed after its
  // buffers on every launch; 0 for the other kernels. Zeroed at load; each complete launch leaves
  // them ready for the next.
  std::vector<CUdeviceptr> grid_syncs_;
  int num_buffers_ = 0;
  // The program's buffers (their types, shapes and strides), for the kernels' tensor maps.
  std::vector<schedules::BufferPtr> buffers_;
  // Per kernel: its tensor maps as last encoded, and the buffer addresses they were encoded over.
  // LaunchKernel encodes them again only when those change, not on every timed repeat.
  mutable std::vector<std::vector<CUtensorMap>> tensor_maps_;
  mutable std::vector<std::vector<CUdeviceptr>> tensor_map_addresses_;
};

// One device allocation per buffer of a GeneratedSource (Buffer::AllocatedBytes() each).
class CudaBuffers {
 public:
  CudaBuffers(const CudaBuffers&) = delete;
  CudaBuffers& operator=(const CudaBuffers&) = delete;
  ~CudaBuffers();

  size_t size() const { return ptrs_.size(); }
  CUdeviceptr ptr(size_t i) const { return ptrs_[i]; }
  int64_t bytes(size_t i) const { return bytes_[i]; }
  schedules::BufferRole role(size_t i) const { return roles_[i]; }

 private:
  friend class CudaDevice;
  CudaBuffers() = default;

  const CudaDriver* driver_ = nullptr;
  CUcontext context_ = nullptr;
  std::vector<CUdeviceptr> ptrs_;
  std::vector<int64_t> bytes_;
  std::vector<schedules::BufferRole> roles_;
  std::vector<std::string> names_;
};

class CudaDevice {
 public:
  // Retains the primary context of device `ordinal` (shared with the CUDA runtime and cuBLAS in
  // this process) and creates a non-blocking stream.
  static absl::StatusOr<std::unique_ptr<CudaDevice>> Open(int ordinal = 0);
  CudaDevice(const CudaDevice&) = delete;
  CudaDevice& operator=(const CudaDevice&) = delete;
  ~CudaDevice();

  const CudaDeviceInfo& info() const { return info_; }
  const CudaDriver& driver() const { return *driver_; }
  CUstream stream() const { return stream_; }
  bool is_poisoned() const { return poisoned_; }
  // Makes the device's context current on the calling thread.
  absl::Status MakeCurrent() const;

  // Loads `binary` (from CompileCuda(source, ...)) and resolves every kernel of `source`. Checks
  // each launch against the device and the kernel's attributes (threads per block after register
  // allocation, static + dynamic shared memory, grid and block extents, and for a cooperative
  // kernel that the device can launch one and hold all of its blocks at once): a launch over a
  // limit returns ResourceExhausted with measure::MeasureStatus::kDeviceLimitExceeded. Raises the
  // kernel's dynamic shared memory limit when it asks for more than 48 KiB. Allocates each
  // cooperative kernel's grid barrier words.
  absl::StatusOr<std::unique_ptr<CudaProgram>> Load(const schedules::GeneratedSource& source,
                                                    const CudaBinary& binary);

  // Device buffers for `buffers` (uninitialized).
  absl::StatusOr<std::unique_ptr<CudaBuffers>> Allocate(
      const std::vector<schedules::ProgramBuffer>& buffers);
  // Copies every host buffer (inputs, and the poisoned outputs and workspace) to the device.
  absl::Status Upload(const HostBuffers& host, CudaBuffers* device);
  // Copies outputs and workspace back (and the inputs too when `include_inputs`).
  absl::Status Download(const CudaBuffers& device, HostBuffers* host, bool include_inputs = false);

  // Launches every kernel in order and waits for each, so that a fault names its kernel.
  absl::Status Run(const CudaProgram& program, const CudaBuffers& buffers);
  // Enqueues every kernel in order on stream() without waiting. A cooperative kernel is launched
  // with cuLaunchCooperativeKernel and gets its grid barrier words after its buffers.
  absl::Status LaunchAsync(const CudaProgram& program, const CudaBuffers& buffers);
  // Waits for stream(); reports a fault of anything enqueued.
  absl::Status Synchronize();
  // Enqueues a write of 2x the L2 size on stream() (the buffer is allocated on first use).
  absl::Status FlushL2Async();

  // Times the program as described at the top of this file.
  absl::StatusOr<measure::Timings> Time(const CudaProgram& program, const CudaBuffers& buffers,
                                        const measure::TimingOptions& options = {});
  // The device's GPU verifier (cuda_verifier.h), compiled and loaded on first use; owned by the
  // device.
  absl::StatusOr<CudaVerifier*> Verifier();

  // Runs `run` (which launches on stream() and waits) under the CUPTI range profiler, once per
  // pass the counters need (after an L2 flush when `flush_l2`, as before a timed repeat), and
  // returns DRAM bytes and achieved occupancy.
  absl::StatusOr<measure::HardwareCounters> CollectCounters(
      const std::function<absl::Status()>& run, bool flush_l2);
  // Times whatever `enqueue` puts on stream() (a cuBLAS call, a copy) the same way.
  absl::StatusOr<measure::Timings> TimeRegion(const std::function<absl::Status()>& enqueue,
                                              const measure::TimingOptions& options = {});

 private:
  friend class CudaVerifier;  // launches its own kernels on stream() (cuda_verifier.h)
  CudaDevice() = default;
  // Turns a failed call into a status; marks the context poisoned for a sticky (kernel) error.
  absl::Status Check(CUresult result, const char* call, const std::string& context = "");
  absl::Status Usable() const;
  absl::Status EnsureEvents(size_t pairs);
  // Enqueues kernel `k` of `program` on stream(): the one place that launches a loaded kernel.
  absl::Status LaunchKernel(const CudaProgram& program, size_t k, const CudaBuffers& buffers);

  const CudaDriver* driver_ = nullptr;
  CudaDeviceInfo info_;
  CUdevice device_ = 0;
  CUcontext context_ = nullptr;
  CUstream stream_ = nullptr;
  CUdeviceptr flush_buffer_ = 0;
  int64_t flush_words_ = 0;
  uint32_t flush_value_ = 0;
  std::vector<CUevent> events_;  // start/stop pairs for timing
  // Clocks and temperature after the timed repeats; null when NVML cannot be used, and then
  // `nvml_missing_` says why (every timing's note repeats it).
  std::unique_ptr<NvmlDeviceMonitor> nvml_;
  std::string nvml_missing_;
  bool poisoned_ = false;
  std::unique_ptr<CudaVerifier> verifier_;
};

}  // namespace tessel::worker
