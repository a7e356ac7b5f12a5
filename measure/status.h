#pragma once

// How a measurement ended (DESIGN.md section 3): the status every layer shares, from the backend
// that fails a candidate to the tuning log that stores it. Inside the worker a failure travels as
// an absl::Status with the status attached as a payload (WithMeasureStatus), so that the daemon
// maps any error of its backends to a result without parsing messages; a status without the
// payload is an infrastructure error (no driver, out of disk): kWorkerError.

#include <cstdint>
#include <optional>
#include <string_view>

#include "absl/status/status.h"

namespace tessel::measure {

enum class MeasureStatus : uint8_t {
  kOk,
  kCompileError,         // the system compiler or NVRTC rejected the source
  kVerifyFailed,         // the outputs differ from the reference (or were not all written)
  kRuntimeError,         // a launch or the kernel itself failed (illegal address, trap, ...)
  kTimeout,              // the kernel or the compiler ran past its time limit
  kDeviceLimitExceeded,  // threads, shared memory or registers over what the device allows
  // The worker could not measure (the reference failed, no device, a full disk): not the
  // candidate's fault.
  kWorkerError,
};

// "ok", "compile_error", "verify_failed", "runtime_error", "timeout", "device_limit_exceeded",
// "worker_error": the names the tuning log stores.
const char* MeasureStatusName(MeasureStatus status);
// The status of a name MeasureStatusName returns; nullopt for any other text.
std::optional<MeasureStatus> ParseMeasureStatus(std::string_view name);

// Returns `status` with `kind` attached (an OK status is returned unchanged). `kind` is a
// failure: neither kOk nor kWorkerError.
absl::Status WithMeasureStatus(absl::Status status, MeasureStatus kind);
// The failure attached by WithMeasureStatus, if any.
std::optional<MeasureStatus> AttachedMeasureStatus(const absl::Status& status);
// kOk for an OK status; the attached failure when there is one; kWorkerError otherwise.
MeasureStatus MeasureStatusOf(const absl::Status& status);

}  // namespace tessel::measure
