#pragma once

// What a kernel runs on, with the limits CheckTargetLimits checks. Built-in descriptions exist for
// sm_80 (A100) and sm_90 (H100/H200); the host's comes from the CPU.

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace tessel::schedules {

enum class TargetKind : uint8_t { kHost, kCuda };

struct Target {
  TargetKind kind = TargetKind::kHost;
  std::string arch;         // "sm_90", "sm_80"; "x86_64" for the host
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
  // "cuda -arch=sm_90" or "host".
  std::string ToString() const;
};

// kind "cuda" (arch "sm_80" or "sm_90"; empty arch means sm_90) or "host" (arch ignored).
absl::StatusOr<Target> MakeTarget(const std::string& kind, const std::string& arch = "");
Target CudaTarget(const std::string& arch);  // arch must be sm_80 or sm_90 (checked)
Target HostTarget();                         // the machine this runs on

}  // namespace tessel::schedules
