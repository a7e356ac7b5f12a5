#include "worker/measure_result.h"

#include <optional>
#include <string>

namespace tessel::worker {

const char* MeasureStatusName(MeasureStatus status) {
  switch (status) {
    case MeasureStatus::kOk:
      return "ok";
    case MeasureStatus::kCompileError:
      return "compile_error";
    case MeasureStatus::kVerifyFailed:
      return "verify_failed";
    case MeasureStatus::kRuntimeError:
      return "runtime_error";
    case MeasureStatus::kTimeout:
      return "timeout";
    case MeasureStatus::kDeviceLimitExceeded:
      return "device_limit_exceeded";
    case MeasureStatus::kWorkerError:
      return "worker_error";
  }
  return "?";
}

MeasureStatus MeasureStatusOf(const absl::Status& status) {
  if (status.ok()) return MeasureStatus::kOk;
  const std::optional<FailureKind> kind = GetFailureKind(status);
  if (!kind.has_value()) return MeasureStatus::kWorkerError;
  switch (*kind) {
    case FailureKind::kCompileError:
      return MeasureStatus::kCompileError;
    case FailureKind::kVerifyFailed:
      return MeasureStatus::kVerifyFailed;
    case FailureKind::kRuntimeError:
      return MeasureStatus::kRuntimeError;
    case FailureKind::kTimeout:
      return MeasureStatus::kTimeout;
    case FailureKind::kDeviceLimitExceeded:
      return MeasureStatus::kDeviceLimitExceeded;
  }
  return MeasureStatus::kWorkerError;
}

CandidateResult CandidateResult::FromStatus(const absl::Status& status) {
  CandidateResult r;
  r.status = MeasureStatusOf(status);
  r.error = std::string(status.message());
  return r;
}

}  // namespace tessel::worker
