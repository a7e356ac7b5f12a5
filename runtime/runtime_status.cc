#include "runtime/runtime_status.h"

#include <optional>
#include <string>

#include "absl/strings/cord.h"

namespace tessel::runtime {
namespace {

constexpr char kPayloadUrl[] = "tessel.runtime/status";

}  // namespace

absl::Status WithRuntimeCode(absl::Status status, tessel_status code) {
  status.SetPayload(kPayloadUrl, absl::Cord(std::to_string(static_cast<int>(code))));
  return status;
}

tessel_status RuntimeCodeOf(const absl::Status& status) {
  if (status.ok()) return TESSEL_OK;
  if (auto p = status.GetPayload(kPayloadUrl); p.has_value()) {
    const int code = std::stoi(std::string(*p));
    if (code > TESSEL_OK && code <= TESSEL_ERROR_INTERNAL) return static_cast<tessel_status>(code);
  }
  switch (status.code()) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kOutOfRange:
      return TESSEL_ERROR_INVALID_ARGUMENT;
    case absl::StatusCode::kNotFound:
      return TESSEL_ERROR_NOT_FOUND;
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kDataLoss:
      return TESSEL_ERROR_BAD_FILE;
    case absl::StatusCode::kUnimplemented:
    case absl::StatusCode::kUnavailable:
      return TESSEL_ERROR_UNSUPPORTED;
    default:
      return TESSEL_ERROR_INTERNAL;
  }
}

}  // namespace tessel::runtime
