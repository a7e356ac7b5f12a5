#pragma once

// The GPU half of verification (DESIGN.md section 6) for CUDA programs: the same method as the
// host functions of worker/output_compare.h, without moving the buffers through the host.
//   - FillInputs writes exactly the bytes worker::FillInputs writes on the host (the generator of
//     worker/input_gen.h is compiled into both), fresh for every seed, never zeros;
//   - PoisonOutputs writes the poison NaN (or 0xa5 bytes) into every output and workspace buffer;
//   - FirstChangedElement regenerates an input and finds the first element a program changed;
//   - CompareBuffer applies CompareBuffer's rule (worker/output_compare.h) in two passes on the
//   device
//     (the reference's rms, then every element of the candidate) and downloads only per-block
//     statistics and the few elements the message quotes, so its verdict and message are those of
//     the host comparison.
// The kernels are compiled with NVRTC once per process and architecture and loaded once per
// CudaVerifier. Everything is enqueued on the device's stream.
//
// Lifetime: destroy the CudaVerifier before its CudaDevice.
// Threads: one thread at a time (like the CudaDevice).

#include <cuda.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "schedules/lower/program.h"
#include "worker/cuda/cuda_runner.h"
#include "worker/output_compare.h"

namespace tessel::worker {

// The CUDA C++ source of the verifier's kernels (the generator of input_gen.h included).
const std::string& CudaVerifierSource();
// Its NVRTC options for `arch` (no fused multiply-add: the comparison's arithmetic is the host's).
NvrtcOptions CudaVerifierNvrtcOptions(const std::string& arch);

class CudaVerifier {
 public:
  // Compiles (once per process and architecture) and loads the kernels on `device` (not owned).
  static absl::StatusOr<std::unique_ptr<CudaVerifier>> Create(CudaDevice* device);
  CudaVerifier(const CudaVerifier&) = delete;
  CudaVerifier& operator=(const CudaVerifier&) = delete;
  ~CudaVerifier();

  CudaDevice& device() const { return *device_; }

  // worker::FillInputs on the device buffers `device` (allocated from `buffers`).
  absl::Status FillInputs(const std::vector<schedules::ProgramBuffer>& buffers, uint64_t seed,
                          const FillOptions& options, CudaBuffers* device);
  // worker::PoisonOutputs on the device buffers.
  absl::Status PoisonOutputs(const std::vector<schedules::ProgramBuffer>& buffers,
                             CudaBuffers* device);
  // The first storage element of input buffer `buffer_index` (of `buffer`, at `ptr`) that differs
  // from what FillInputs(seed, options) wrote, or -1 when none does.
  absl::StatusOr<int64_t> FirstChangedElement(const schedules::Buffer& buffer, int64_t buffer_index,
                                              uint64_t seed, const FillOptions& options,
                                              CUdeviceptr ptr);
  // Enqueues a device-to-device copy of `bytes` bytes.
  absl::Status Copy(CUdeviceptr to, CUdeviceptr from, size_t bytes);
  // worker::CompareBuffer on device buffers of `buffer`'s AllocatedBytes() each: the same
  // verdict, status code, measure::MeasureStatus and message.
  absl::Status CompareBuffer(const schedules::Buffer& buffer, CUdeviceptr reference,
                             CUdeviceptr candidate, const Tolerance& tolerance);

 private:
  explicit CudaVerifier(CudaDevice* device) : device_(device) {}
  absl::Status Launch(CUfunction fn, int64_t n, std::vector<void*> args);
  absl::StatusOr<CompareStats> Pass(CUfunction fn, int64_t n, std::vector<void*> args);
  absl::Status Download(void* host, CUdeviceptr ptr, size_t bytes);

  CudaDevice* device_;
  CUmodule module_ = nullptr;
  CUfunction fill_ = nullptr, poison_ = nullptr, check_ = nullptr;
  CUfunction ref_stats_ = nullptr, cand_stats_ = nullptr, exact_stats_ = nullptr;
  CUdeviceptr scratch_ = 0;  // per-block statistics, then the first changed element
  int max_blocks_ = 0;
};

}  // namespace tessel::worker
