#pragma once

// The server's metrics in the Prometheus text format (version 0.0.4), served on `tessel serve
// --http ADDR` at /metrics. Two kinds of figures:
// - counters and histograms the server feeds as things happen: every result it accepts
//   (OnResult: by status, with the time the worker spent measuring and compiling it), and the
//   workers' busy time (Sample, from the maintenance thread: a worker is busy while it holds a
//   batch);
// - gauges read when scraped (FleetGauges: jobs by state, queue depth, workers, log size), which
//   the caller gathers and passes to Render.
//
// Threads: every method may be called from any thread (one internal mutex).

#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "measure/measurement.h"
#include "server/worker_registry.h"

namespace tessel::server {

// What the server is doing at the moment of a scrape.
struct FleetGauges {
  std::map<std::string, int64_t> jobs_by_state;  // every state name (store::JobStateName)
  int64_t tasks_running = 0;
  double trials_per_s = 0;        // of the unfinished jobs, over the last minute
  int64_t queued_candidates = 0;  // waiting for a worker
  int64_t in_flight_candidates = 0;
  std::vector<WorkerEntry> workers;  // connected
  int64_t log_bytes = 0;             // the tuning log with its -wal file
};

// A cumulative histogram with fixed bucket bounds (seconds).
class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  void Observe(double value);
  // The `name`_bucket, _sum and _count lines, with `labels` ("" or `k="v",...`) on each.
  void Render(const std::string& name, const std::string& labels, std::string* out) const;

 private:
  std::vector<double> bounds_;
  std::vector<int64_t> counts_;  // per bound, not cumulative; one more for +Inf
  double sum_ = 0;
  int64_t count_ = 0;
};

class ServerMetrics {
 public:
  ServerMetrics();

  // A result the server accepted for recording (after the dispatcher's checks).
  void OnResult(const measure::Measurement& result);
  // Called periodically with the connected workers: integrates each one's busy time.
  void Sample(int64_t now_unix_ms, const std::vector<WorkerEntry>& workers);
  // The exposition text: the counters and histograms with `gauges`.
  std::string Render(const FleetGauges& gauges);
  // The share of the last minute `worker_id` held a batch (0 for a worker not sampled).
  double BusyFraction(const std::string& worker_id);

  // Seconds of the window over which a worker's busy fraction is taken.
  static constexpr int64_t kBusyWindowMs = 60'000;

 private:
  struct BusyTrack {
    int64_t last_unix_ms = 0;
    bool busy = false;
    double busy_s_total = 0;
    // (sample time, busy) of the last kBusyWindowMs.
    std::deque<std::pair<int64_t, bool>> window;
  };
  double BusyFractionLocked(const BusyTrack& t) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  absl::Mutex mu_;
  std::map<std::string, int64_t> results_by_status_ ABSL_GUARDED_BY(mu_);
  int64_t compile_cache_hits_ ABSL_GUARDED_BY(mu_) = 0;
  Histogram measure_s_ ABSL_GUARDED_BY(mu_);
  Histogram compile_s_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, BusyTrack> busy_ ABSL_GUARDED_BY(mu_);  // by worker id
};

// `value` as a Prometheus label value (backslash, double quote and newline escaped).
std::string PrometheusLabel(const std::string& value);

}  // namespace tessel::server
