#include "measure/timing.h"

#include <algorithm>
#include <utility>

namespace tessel::measure {

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

const char* TimingKindName(TimingKind kind) {
  switch (kind) {
    case TimingKind::kConfirmed:
      return "confirmed";
    case TimingKind::kScreened:
      return "screened";
  }
  return "confirmed";
}

std::optional<TimingKind> ParseTimingKind(const std::string& name) {
  for (TimingKind k : {TimingKind::kConfirmed, TimingKind::kScreened}) {
    if (name == TimingKindName(k)) return k;
  }
  return std::nullopt;
}

std::optional<TimingKind> TimingKindOfNumber(int64_t number) {
  for (TimingKind k : {TimingKind::kConfirmed, TimingKind::kScreened}) {
    if (number == static_cast<int64_t>(k)) return k;
  }
  return std::nullopt;
}

double MedianOf(std::vector<double> values) { return MakeTimings(std::move(values)).median_ms; }

bool ShouldConfirm(const ScreenOptions& screen, double screened_median_ms) {
  if (!screen.enabled || screen.confirm || screen.best_ms <= 0) return true;
  return screened_median_ms <= screen.best_ms * (1 + std::max(0.0, screen.margin));
}

}  // namespace tessel::measure
