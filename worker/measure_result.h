#pragma once

// What measuring one candidate produced (DESIGN.md section 3, MeasureResult): a status kept apart
// from the timings, every repeat, compile time, kernel resources, and who measured it.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "worker/verify_types.h"

namespace tessel::worker {

enum class MeasureStatus : uint8_t {
  kOk,
  kCompileError,
  kVerifyFailed,
  kRuntimeError,
  kTimeout,
  kDeviceLimitExceeded,
  // The worker could not measure (the reference failed, no device, a full disk): not the
  // candidate's fault.
  kWorkerError,
};

// "ok", "compile_error", "verify_failed", "runtime_error", "timeout", "device_limit_exceeded",
// "worker_error".
const char* MeasureStatusName(MeasureStatus status);

// kOk for an OK status; the FailureKind's status when one is attached; kWorkerError otherwise.
MeasureStatus MeasureStatusOf(const absl::Status& status);

struct CandidateResult {
  MeasureStatus status = MeasureStatus::kOk;
  std::string error;  // empty when ok; the compiler's log for a compile error
  Timings timings;    // empty unless ok
  double compile_ms = 0;
  bool compile_cache_hit = false;
  double verify_ms = 0;
  std::vector<KernelResources> kernels;  // CUDA: what the loader reported
  std::string worker_id;
  int device = 0;
  std::string device_name;

  // A result with `status`'s status and message.
  static CandidateResult FromStatus(const absl::Status& status);
};

}  // namespace tessel::worker
