#include "measure/timing.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
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

double MedianHalfWidth(std::vector<double> values) {
  const double n = static_cast<double>(values.size());
  const double spread = 0.98 * std::sqrt(n);
  const double lo = std::floor(n / 2 - spread);  // 1-based ranks
  const double hi = std::ceil(n / 2 + spread + 1);
  if (lo < 1 || hi > n) return std::numeric_limits<double>::infinity();
  std::sort(values.begin(), values.end());
  const double median = MedianOf(values);
  if (!(median > 0)) return std::numeric_limits<double>::infinity();
  return (values[static_cast<size_t>(hi) - 1] - values[static_cast<size_t>(lo) - 1]) / 2 / median;
}

bool ValidMedianPrecision(double p) { return p >= 0 && p < 1; }

bool EnoughRepeats(const TimingOptions& options, const std::vector<double>& repeats_ms,
                   double total_ms) {
  const int64_t n = static_cast<int64_t>(repeats_ms.size());
  if (n >= options.max_repeats) return true;
  if (n < options.min_repeats) return false;
  if (total_ms >= options.min_total_ms) return true;
  return options.median_precision > 0 && MedianHalfWidth(repeats_ms) <= options.median_precision;
}

bool ShouldConfirm(const ScreenOptions& screen, double screened_median_ms) {
  if (!screen.enabled || screen.confirm || screen.best_ms <= 0) return true;
  return screened_median_ms <= screen.best_ms * (1 + std::max(0.0, screen.margin));
}

}  // namespace tessel::measure
