#include "server/screen_margin.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"

namespace tessel::server {

measure::TimingOptions ScreenTiming(const ScreeningOptions& screening,
                                    const measure::TimingOptions& full) {
  measure::TimingOptions t = full;
  t.warmup_runs = std::min(full.warmup_runs, 1);
  t.min_repeats = std::max(1, std::min(full.min_repeats, screening.min_repeats));
  // A few dozen repeats at most: each flushes L2 first (about 0.1 ms on an H100), so a 10 us
  // kernel would otherwise take 500 repeats, 60 ms, to add up to a 5 ms screen; the median of 24
  // flushed repeats is already within a percent or two, well inside any margin.
  t.max_repeats = std::max(t.min_repeats, std::min(full.max_repeats, kScreenMaxRepeats));
  t.min_total_ms = screening.screen_ms;
  t.max_wall_ms = std::min(full.max_wall_ms, std::max(4 * screening.screen_ms, 20.0));
  return t;
}

absl::Status CheckScreeningOptions(const ScreeningOptions& screening,
                                   const measure::TimingOptions& full) {
  if (!(screening.screen_ms >= 0 && std::isfinite(screening.screen_ms))) {
    return absl::InvalidArgumentError(
        absl::StrCat("--screen-ms ", screening.screen_ms,
                     ": give the screening budget in milliseconds (e.g. 5), or 0 to time every "
                     "candidate in full"));
  }
  if (screening.enabled() && screening.screen_ms >= full.min_total_ms) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--screen-ms ", screening.screen_ms, " is not below the full measurement's ",
        full.min_total_ms,
        " ms (--min-total-ms): screening must be shorter than the measurement it saves; lower "
        "--screen-ms, or pass --screen-ms 0 to time every candidate in full"));
  }
  if (!(screening.audit >= 0 && screening.audit <= 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--screen-audit ", screening.audit,
                     ": give the fraction of candidates confirmed whatever their screen, from 0 "
                     "to 1 (e.g. 0.02)"));
  }
  if (screening.min_repeats < 1) {
    return absl::InvalidArgumentError(absl::StrCat("--screen-min-repeats ", screening.min_repeats,
                                                   ": give at least 1 screening repeat"));
  }
  return absl::OkStatus();
}

void ScreenMargin::Add(double screened_ms, double confirmed_ms) {
  if (!(screened_ms > 0 && confirmed_ms > 0 && std::isfinite(screened_ms) &&
        std::isfinite(confirmed_ms))) {
    return;
  }
  relative_.push_back(std::abs(screened_ms / confirmed_ms - 1));
  while (relative_.size() > std::max<size_t>(1, options_.window)) relative_.pop_front();
}

double ScreenMargin::Margin() const {
  if (pairs() < std::max(1, options_.min_pairs)) return options_.initial;
  std::vector<double> sorted(relative_.begin(), relative_.end());
  std::sort(sorted.begin(), sorted.end());
  // The nearest-rank quantile, rounded up: with few pairs a high quantile is the largest.
  const double q = std::clamp(options_.quantile, 0.0, 1.0);
  const size_t rank = static_cast<size_t>(std::ceil(q * static_cast<double>(sorted.size())));
  const double value = sorted[std::clamp<size_t>(rank, 1, sorted.size()) - 1];
  return std::clamp(options_.safety * value, options_.floor, options_.ceiling);
}

double ScreenMargin::MarginOf(const ScreenMargin& own, const ScreenMargin& pooled) {
  if (own.pairs() >= own.options_.min_pairs) return own.Margin();
  if (pooled.pairs() >= pooled.options_.min_pairs) return pooled.Margin();
  return own.options_.initial;
}

}  // namespace tessel::server
