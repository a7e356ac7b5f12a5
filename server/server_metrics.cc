#include "server/server_metrics.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "server/dispatcher.h"

namespace tessel::server {
namespace {

// Seconds: from a cached host compile to a slow NVRTC compile plus a long timed run.
std::vector<double> SecondsBounds() {
  return {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120};
}

std::string Number(double v) {
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  if (std::isnan(v)) return "NaN";
  return absl::StrFormat("%.10g", v);
}

void Header(std::string* out, const std::string& name, const std::string& type,
            const std::string& help) {
  absl::StrAppend(out, "# HELP ", name, " ", help, "\n# TYPE ", name, " ", type, "\n");
}

void Line(std::string* out, const std::string& name, const std::string& labels, double value) {
  absl::StrAppend(out, name, labels.empty() ? "" : absl::StrCat("{", labels, "}"), " ",
                  Number(value), "\n");
}

}  // namespace

std::string PrometheusLabel(const std::string& value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

Histogram::Histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::Observe(double value) {
  if (!std::isfinite(value) || value < 0) return;
  const size_t i = std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin();
  ++counts_[i];
  sum_ += value;
  ++count_;
}

void Histogram::Render(const std::string& name, const std::string& labels, std::string* out) const {
  const std::string sep = labels.empty() ? "" : ",";
  int64_t cumulative = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cumulative += counts_[i];
    Line(out, name + "_bucket", absl::StrCat(labels, sep, "le=\"", Number(bounds_[i]), "\""),
         static_cast<double>(cumulative));
  }
  cumulative += counts_.back();
  Line(out, name + "_bucket", absl::StrCat(labels, sep, "le=\"+Inf\""),
       static_cast<double>(cumulative));
  Line(out, name + "_sum", labels, sum_);
  Line(out, name + "_count", labels, static_cast<double>(count_));
}

ServerMetrics::ServerMetrics() : measure_s_(SecondsBounds()), compile_s_(SecondsBounds()) {
  // Every status has a line from the start, so that a rate over a new series is never missed.
  for (auto s : {measure::MeasureStatus::kOk, measure::MeasureStatus::kCompileError,
                 measure::MeasureStatus::kVerifyFailed, measure::MeasureStatus::kRuntimeError,
                 measure::MeasureStatus::kTimeout, measure::MeasureStatus::kDeviceLimitExceeded,
                 measure::MeasureStatus::kWorkerError}) {
    results_by_status_[measure::MeasureStatusName(s)] = 0;
  }
}

void ServerMetrics::OnResult(const measure::Measurement& result) {
  absl::MutexLock lock(&mu_);
  ++results_by_status_[measure::MeasureStatusName(result.status)];
  if (result.compile_cache_hit) ++compile_cache_hits_;
  measure_s_.Observe(MeasuredCandidateS(result));
  compile_s_.Observe(result.compile_ms / 1000);
}

void ServerMetrics::Sample(int64_t now_unix_ms, const std::vector<WorkerEntry>& workers) {
  absl::MutexLock lock(&mu_);
  std::map<std::string, BusyTrack> next;
  for (const WorkerEntry& w : workers) {
    BusyTrack t;
    if (auto it = busy_.find(w.worker_id); it != busy_.end()) t = std::move(it->second);
    if (t.last_unix_ms > 0 && now_unix_ms > t.last_unix_ms && t.busy) {
      t.busy_s_total += (now_unix_ms - t.last_unix_ms) / 1000.0;
    }
    if (t.last_unix_ms == 0 || now_unix_ms > t.last_unix_ms) {
      t.window.emplace_back(now_unix_ms, t.busy);
      t.last_unix_ms = now_unix_ms;
    }
    t.busy = w.batches_in_flight > 0;
    while (!t.window.empty() && t.window.front().first < now_unix_ms - kBusyWindowMs) {
      t.window.pop_front();
    }
    next[w.worker_id] = std::move(t);
  }
  busy_ = std::move(next);  // a worker gone is forgotten
}

double ServerMetrics::BusyFractionLocked(const BusyTrack& t) const {
  // Each window entry says whether the worker was busy over the interval that ended at it.
  if (t.window.size() < 2) return t.busy ? 1 : 0;
  double busy = 0, total = 0;
  for (size_t i = 1; i < t.window.size(); ++i) {
    const double dt = static_cast<double>(t.window[i].first - t.window[i - 1].first);
    total += dt;
    if (t.window[i].second) busy += dt;
  }
  return total > 0 ? busy / total : 0;
}

double ServerMetrics::BusyFraction(const std::string& worker_id) {
  absl::MutexLock lock(&mu_);
  auto it = busy_.find(worker_id);
  return it == busy_.end() ? 0 : BusyFractionLocked(it->second);
}

std::string ServerMetrics::Render(const FleetGauges& g) {
  std::string out;
  Header(&out, "tessel_jobs", "gauge", "Jobs in the tuning log by state.");
  for (const auto& [state, n] : g.jobs_by_state) {
    Line(&out, "tessel_jobs", absl::StrCat("state=\"", PrometheusLabel(state), "\""), n);
  }
  Header(&out, "tessel_tasks_running", "gauge", "Tasks of running jobs still tuning.");
  Line(&out, "tessel_tasks_running", "", g.tasks_running);
  Header(&out, "tessel_trials_per_second", "gauge",
         "Trials recorded per second by the unfinished jobs, over the last minute.");
  Line(&out, "tessel_trials_per_second", "", g.trials_per_s);
  Header(&out, "tessel_queue_depth", "gauge", "Candidates queued for a worker, not yet sent.");
  Line(&out, "tessel_queue_depth", "", g.queued_candidates);
  Header(&out, "tessel_candidates_in_flight", "gauge",
         "Candidates sent to workers and not yet recorded.");
  Line(&out, "tessel_candidates_in_flight", "", g.in_flight_candidates);
  Header(&out, "tessel_log_bytes", "gauge", "Size of the tuning log on disk (with its -wal file).");
  Line(&out, "tessel_log_bytes", "", g.log_bytes);

  Header(&out, "tessel_workers", "gauge", "Worker daemons connected.");
  Line(&out, "tessel_workers", "", static_cast<double>(g.workers.size()));
  absl::MutexLock lock(&mu_);
  Header(&out, "tessel_worker_busy_fraction", "gauge",
         "Share of the last minute each worker held a batch.");
  for (const WorkerEntry& w : g.workers) {
    auto it = busy_.find(w.worker_id);
    Line(&out, "tessel_worker_busy_fraction",
         absl::StrCat("worker=\"", PrometheusLabel(w.worker_id), "\""),
         it == busy_.end() ? 0 : BusyFractionLocked(it->second));
  }
  Header(&out, "tessel_worker_busy_seconds_total", "counter",
         "Seconds each worker held a batch since it connected.");
  for (const WorkerEntry& w : g.workers) {
    auto it = busy_.find(w.worker_id);
    Line(&out, "tessel_worker_busy_seconds_total",
         absl::StrCat("worker=\"", PrometheusLabel(w.worker_id), "\""),
         it == busy_.end() ? 0 : it->second.busy_s_total);
  }
  Header(&out, "tessel_worker_batches_in_flight", "gauge", "Batches each worker holds.");
  for (const WorkerEntry& w : g.workers) {
    Line(&out, "tessel_worker_batches_in_flight",
         absl::StrCat("worker=\"", PrometheusLabel(w.worker_id), "\""), w.batches_in_flight);
  }
  Header(&out, "tessel_worker_candidates_measured_total", "counter",
         "Candidates each worker measured since it connected.");
  for (const WorkerEntry& w : g.workers) {
    Line(&out, "tessel_worker_candidates_measured_total",
         absl::StrCat("worker=\"", PrometheusLabel(w.worker_id), "\""),
         static_cast<double>(w.candidates_measured));
  }

  Header(&out, "tessel_results_total", "counter",
         "Measurement results accepted since the server started, by status.");
  for (const auto& [status, n] : results_by_status_) {
    Line(&out, "tessel_results_total", absl::StrCat("status=\"", status, "\""),
         static_cast<double>(n));
  }
  Header(&out, "tessel_compile_cache_hits_total", "counter",
         "Accepted results whose kernel came from the worker's compile cache.");
  Line(&out, "tessel_compile_cache_hits_total", "", static_cast<double>(compile_cache_hits_));
  Header(&out, "tessel_measurement_seconds", "histogram",
         "Seconds a worker spent on one candidate: compiling, verifying and timing it.");
  measure_s_.Render("tessel_measurement_seconds", "", &out);
  Header(&out, "tessel_compile_seconds", "histogram", "Seconds compiling one candidate.");
  compile_s_.Render("tessel_compile_seconds", "", &out);
  return out;
}

}  // namespace tessel::server
