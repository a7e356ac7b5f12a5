#pragma once

// What the dashboard shows (server/dashboard_page.h draws it): jobs, their tasks with each one's
// tuning curve (the best latency so far against trials and against time), and workers. Built
// from a tuning log alone (DashboardFromLog: `tessel report`, offline), to which a live server
// adds what only it knows (workers connected, candidates queued and in flight).
//
// Threads: DashboardFromLog may be called from any thread (the log serializes its statements).

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "store/tuning_log.h"

namespace tessel::server {

// The best latency after `trial` trials (1-based), `elapsed_s` after the job was created.
struct CurvePoint {
  int64_t trial = 0;
  double elapsed_s = 0;
  double best_ms = 0;
};

struct DashboardTask {
  store::TaskRow row;
  std::string workload_name;  // family ("matmul") or "custom"
  std::string workload_spec;
  int64_t trials = 0;  // records of every status
  int64_t ok = 0;
  double best_ms = 0;  // 0 while none is ok
  std::map<std::string, int64_t> by_status;
  // One point at each improvement, and one at the last trial: a step curve.
  std::vector<CurvePoint> curve;
  int64_t last_trial_elapsed_ms = 0;
  // Live servers only (-1 offline).
  int64_t queued = -1;
  int64_t in_flight = -1;
};

struct DashboardJob {
  store::JobRow row;
  std::vector<DashboardTask> tasks;
  int64_t trials = 0;
};

struct DashboardWorker {
  std::string worker_id;
  std::string host;            // live only
  std::string devices;         // "NVIDIA H100 (sm_90)", "host (16 cores)"
  int64_t measured = 0;        // live: since it connected; offline: records it measured
  int batches_in_flight = -1;  // live only
  double busy_fraction = -1;   // live only
  int64_t last_seen_unix_ms = 0;
};

struct DashboardData {
  std::string source;  // the log's path
  bool live = false;   // from a running server (the page refreshes itself)
  int64_t generated_unix_ms = 0;
  std::vector<DashboardJob> jobs;  // newest first
  std::vector<DashboardWorker> workers;
  int64_t jobs_not_shown = 0;  // past max_jobs
};

struct DashboardOptions {
  int max_jobs = 50;  // the newest; 0: every job
  // Only the jobs this token name submitted (a client's view); nullopt: every job.
  std::optional<std::string> submitted_by;
  // List the workers that measured the records shown (offline); a live server lists its own.
  bool workers_from_records = true;
};

absl::StatusOr<DashboardData> DashboardFromLog(store::TuningLog& log,
                                               const DashboardOptions& options);

}  // namespace tessel::server
