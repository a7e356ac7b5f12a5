#pragma once

// The screening margin of a task, from the noise measured on it (DESIGN.md section 6; issue 21).
//
// A candidate is confirmed (timed in full) when its screened latency is at most the task's best
// confirmed latency times (1 + margin) (latencies as measure::Timings::latency_ms ranks them).
// Screening misses a candidate that is really faster than the best only when its screen
// overestimates it by more than the margin, so the margin is a high quantile of how far screens
// land from the full measurement: every candidate that got both gives a pair (screened, confirmed),
// and the margin is
//     clamp(safety * quantile(|screened / confirmed - 1|), floor, ceiling)
// over the newest `window` pairs. Before `min_pairs` pairs it is `initial` (conservative: most
// candidates near the best are confirmed, and those are the pairs it learns from).
//
// Threads: one thread at a time (the job manager holds its lock).

#include <cstddef>
#include <deque>

#include "absl/status/status.h"
#include "measure/timing.h"

namespace tessel::server {

struct ScreenMarginOptions {
  double quantile = 0.95;  // of the relative differences
  double safety = 1.5;     // times the quantile: the quantile of few pairs is itself noisy
  double floor = 0.03;     // never tighter: a margin below the noise floor misses winners
  double ceiling = 0.5;    // never looser: beyond, screening saves little
  double initial = 0.25;   // before min_pairs pairs
  int min_pairs = 8;
  size_t window = 256;  // newest pairs kept
};

// How the server screens candidates (`tessel serve` and `tessel tune`: --screen-ms,
// --screen-audit). Sent with every batch as measure::ScreenOptions.
struct ScreeningOptions {
  // The screening measurement's budget per candidate (its min_total_ms); 0: no screening, every
  // candidate gets the full measurement (the behaviour before issue 21).
  double screen_ms = 5;
  int min_repeats = 3;  // screening repeats at least (at most the full measurement's)
  // The fraction of candidates confirmed whatever their screen says: an unbiased sample of the
  // screening noise (the candidates near the best are confirmed anyway and give most pairs).
  double audit = 0.02;
  ScreenMarginOptions margin;

  bool enabled() const { return screen_ms > 0; }
};

// At most this many screening repeats (each after an L2 flush).
inline constexpr int kScreenMaxRepeats = 24;

// The screening TimingOptions for a server whose full measurement is `full`: at most one warm-up
// run, ScreeningOptions::min_repeats (at most full's) up to kScreenMaxRepeats (at most full's
// max_repeats) until screen_ms is measured; on the host at most a few times screen_ms of wall
// time.
measure::TimingOptions ScreenTiming(const ScreeningOptions& screening,
                                    const measure::TimingOptions& full);

// OK when the options make sense with the full measurement `full`; otherwise InvalidArgument
// naming the flag and the fix (a negative or non-finite --screen-ms, a screening budget not
// below the full measurement's --min-total-ms, --screen-audit outside 0..1, --screen-min-repeats
// below 1).
absl::Status CheckScreeningOptions(const ScreeningOptions& screening,
                                   const measure::TimingOptions& full);

class ScreenMargin {
 public:
  explicit ScreenMargin(ScreenMarginOptions options = {}) : options_(options) {}

  // A candidate that got both measurements. Pairs that are not finite and positive are ignored
  // (a worker's figures are not trusted).
  void Add(double screened_ms, double confirmed_ms);
  int pairs() const { return static_cast<int>(relative_.size()); }
  // The margin now (see the top of this file).
  double Margin() const;
  // The margin of `own` when it has min_pairs pairs, else of `pooled` (e.g. the job's, over its
  // tasks) when that has, else the initial one.
  static double MarginOf(const ScreenMargin& own, const ScreenMargin& pooled);

  const ScreenMarginOptions& options() const { return options_; }

 private:
  ScreenMarginOptions options_;
  std::deque<double> relative_;  // |screened / confirmed - 1|, newest last
};

}  // namespace tessel::server
