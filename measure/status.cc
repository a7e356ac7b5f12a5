#include "measure/status.h"

#include <string>

#include "absl/strings/cord.h"

namespace tessel::measure {
namespace {

constexpr char kMeasureStatusUrl[] = "type.tessel.dev/tessel.measure.MeasureStatus";

constexpr MeasureStatus kAllStatuses[] = {
    MeasureStatus::kOk,           MeasureStatus::kCompileError, MeasureStatus::kVerifyFailed,
    MeasureStatus::kRuntimeError, MeasureStatus::kTimeout,      MeasureStatus::kDeviceLimitExceeded,
    MeasureStatus::kWorkerError};

}  // namespace

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

std::optional<MeasureStatus> ParseMeasureStatus(std::string_view name) {
  for (MeasureStatus status : kAllStatuses) {
    if (name == MeasureStatusName(status)) return status;
  }
  return std::nullopt;
}

absl::Status WithMeasureStatus(absl::Status status, MeasureStatus kind) {
  if (status.ok()) return status;
  status.SetPayload(kMeasureStatusUrl, absl::Cord(MeasureStatusName(kind)));
  return status;
}

std::optional<MeasureStatus> AttachedMeasureStatus(const absl::Status& status) {
  absl::optional<absl::Cord> payload = status.GetPayload(kMeasureStatusUrl);
  if (!payload.has_value()) return std::nullopt;
  const std::optional<MeasureStatus> kind = ParseMeasureStatus(std::string(*payload));
  if (kind == MeasureStatus::kOk || kind == MeasureStatus::kWorkerError) return std::nullopt;
  return kind;
}

MeasureStatus MeasureStatusOf(const absl::Status& status) {
  if (status.ok()) return MeasureStatus::kOk;
  return AttachedMeasureStatus(status).value_or(MeasureStatus::kWorkerError);
}

}  // namespace tessel::measure
