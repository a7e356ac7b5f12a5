#include "server/dashboard_data.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace tessel::server {

absl::StatusOr<DashboardData> DashboardFromLog(store::TuningLog& log,
                                               const DashboardOptions& options) {
  DashboardData d;
  d.source = log.path();
  d.generated_unix_ms = absl::ToUnixMillis(absl::Now());
  absl::StatusOr<std::vector<store::JobRow>> jobs = log.ListJobs(/*unfinished_only=*/false);
  if (!jobs.ok()) return jobs.status();
  std::map<std::string, DashboardWorker> workers;
  for (const store::JobRow& row : *jobs) {
    if (options.submitted_by.has_value() && row.submitted_by != *options.submitted_by) continue;
    if (options.max_jobs > 0 && static_cast<int>(d.jobs.size()) >= options.max_jobs) {
      ++d.jobs_not_shown;
      continue;
    }
    DashboardJob job;
    job.row = row;
    absl::StatusOr<std::vector<store::TaskRow>> tasks = log.TasksOf(row.id);
    if (!tasks.ok()) return tasks.status();
    for (const store::TaskRow& t : *tasks) {
      DashboardTask task;
      task.row = t;
      absl::StatusOr<std::optional<store::WorkloadRow>> w = log.GetWorkload(t.workload_key);
      if (!w.ok()) return w.status();
      if (w->has_value()) {
        task.workload_name = (*w)->name;
        task.workload_spec = (*w)->spec;
      }
      absl::StatusOr<std::vector<store::Record>> records = log.RecordsOf(t.id);
      if (!records.ok()) return records.status();
      std::stable_sort(
          records->begin(), records->end(),
          [](const store::Record& a, const store::Record& b) { return a.unix_ms < b.unix_ms; });
      for (const store::Record& r : *records) {
        ++task.trials;
        ++task.by_status[measure::MeasureStatusName(r.measurement.status)];
        const double elapsed_s = std::max<int64_t>(0, r.unix_ms - row.created_unix_ms) / 1000.0;
        const double ms = r.measurement.latency_ms();
        if (r.measurement.ok() && ms > 0) {
          ++task.ok;
          // The curve follows the confirmed bests (a screened record is never a task's best).
          if (r.measurement.confirmed() && (task.best_ms == 0 || ms < task.best_ms)) {
            task.best_ms = ms;
            task.curve.push_back({task.trials, elapsed_s, ms});
          }
        }
        task.last_trial_elapsed_ms = static_cast<int64_t>(elapsed_s * 1000);
        if (options.workers_from_records && !r.measurement.worker_id.empty()) {
          DashboardWorker& dw = workers[r.measurement.worker_id];
          dw.worker_id = r.measurement.worker_id;
          if (dw.devices.empty()) {
            dw.devices = r.measurement.device_name.empty()
                             ? "host"
                             : absl::StrCat(r.measurement.device_name, " (device ",
                                            r.measurement.device, ")");
          }
          ++dw.measured;
          dw.last_seen_unix_ms = std::max(dw.last_seen_unix_ms, r.unix_ms);
        }
      }
      if (!task.curve.empty() && task.curve.back().trial != task.trials) {
        task.curve.push_back(
            {task.trials, task.last_trial_elapsed_ms / 1000.0, task.curve.back().best_ms});
      }
      job.trials += task.trials;
      job.tasks.push_back(std::move(task));
    }
    d.jobs.push_back(std::move(job));
  }
  for (auto& [id, w] : workers) d.workers.push_back(std::move(w));
  return d;
}

}  // namespace tessel::server
