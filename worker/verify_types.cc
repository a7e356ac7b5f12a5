#include "worker/verify_types.h"

#include <algorithm>
#include <string>
#include <utility>

#include "absl/strings/cord.h"

namespace tessel::worker {
namespace {

constexpr char kFailureKindUrl[] = "type.tessel.dev/tessel.worker.FailureKind";

constexpr FailureKind kAllKinds[] = {FailureKind::kCompileError, FailureKind::kVerifyFailed,
                                     FailureKind::kRuntimeError, FailureKind::kTimeout,
                                     FailureKind::kDeviceLimitExceeded};

}  // namespace

const char* FailureKindName(FailureKind kind) {
  switch (kind) {
    case FailureKind::kCompileError:
      return "compile_error";
    case FailureKind::kVerifyFailed:
      return "verify_failed";
    case FailureKind::kRuntimeError:
      return "runtime_error";
    case FailureKind::kTimeout:
      return "timeout";
    case FailureKind::kDeviceLimitExceeded:
      return "device_limit_exceeded";
  }
  return "?";
}

absl::Status WithFailureKind(absl::Status status, FailureKind kind) {
  if (status.ok()) return status;
  status.SetPayload(kFailureKindUrl, absl::Cord(FailureKindName(kind)));
  return status;
}

std::optional<FailureKind> GetFailureKind(const absl::Status& status) {
  absl::optional<absl::Cord> payload = status.GetPayload(kFailureKindUrl);
  if (!payload.has_value()) return std::nullopt;
  const std::string name(*payload);
  for (FailureKind kind : kAllKinds) {
    if (name == FailureKindName(kind)) return kind;
  }
  return std::nullopt;
}

Timings MakeTimings(std::vector<double> repeats_ms) {
  Timings t;
  t.repeats_ms = std::move(repeats_ms);
  if (t.repeats_ms.empty()) return t;
  std::vector<double> sorted = t.repeats_ms;
  std::sort(sorted.begin(), sorted.end());
  const size_t n = sorted.size();
  t.median_ms = n % 2 == 1 ? sorted[n / 2] : 0.5 * (sorted[n / 2 - 1] + sorted[n / 2]);
  t.min_ms = sorted.front();
  t.max_ms = sorted.back();
  return t;
}

double MedianOf(std::vector<double> values) { return MakeTimings(std::move(values)).median_ms; }

}  // namespace tessel::worker
