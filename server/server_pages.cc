#include "server/server_pages.h"

#include <sys/stat.h>

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "server/dashboard_page.h"

namespace tessel::server {
namespace {

std::string DevicesText(const std::vector<WorkerDevice>& devices) {
  std::vector<std::string> parts;
  for (const WorkerDevice& d : devices) {
    if (d.kind == schedules::TargetKind::kHost) {
      parts.push_back(absl::StrCat(d.name.empty() ? "host" : d.name, " (", d.cores, " cores)"));
    } else {
      parts.push_back(absl::StrCat(d.name, " (", d.arch, ", ", d.sm_count, " SMs)"));
    }
  }
  return absl::StrJoin(parts, ", ");
}

}  // namespace

int64_t LogBytes(const std::string& path) {
  int64_t total = 0;
  for (const std::string& p : {path, path + "-wal"}) {
    struct stat st {};
    if (stat(p.c_str(), &st) == 0) total += st.st_size;
  }
  return total;
}

std::string ServerPages::Metrics() {
  FleetGauges g;
  for (auto s : {store::JobState::kQueued, store::JobState::kRunning, store::JobState::kDone,
                 store::JobState::kCancelled, store::JobState::kFailed}) {
    g.jobs_by_state[store::JobStateName(s)] = 0;
  }
  if (absl::StatusOr<std::vector<store::JobRow>> rows = log_->ListJobs(false); rows.ok()) {
    for (const store::JobRow& r : *rows) ++g.jobs_by_state[store::JobStateName(r.state)];
  }
  if (absl::StatusOr<std::vector<JobStatus>> live = jobs_->List(/*unfinished_only=*/true);
      live.ok()) {
    for (const JobStatus& j : *live) {
      g.trials_per_s += j.trials_per_s;
      for (const TaskStatus& t : j.tasks) {
        if (!store::IsFinished(t.row.state)) ++g.tasks_running;
        g.queued_candidates += static_cast<int64_t>(dispatcher_->Queued(t.row.id));
        g.in_flight_candidates += static_cast<int64_t>(dispatcher_->InFlight(t.row.id));
      }
    }
  }
  g.workers = registry_->List();
  g.log_bytes = LogBytes(log_->path());
  return metrics_->Render(g);
}

absl::StatusOr<std::string> ServerPages::Dashboard(const Principal& caller) {
  DashboardOptions o;
  o.workers_from_records = false;
  if (caller.role != Role::kAdmin) o.submitted_by = caller.name;
  absl::StatusOr<DashboardData> d = DashboardFromLog(*log_, o);
  if (!d.ok()) return d.status();
  d->live = true;
  for (DashboardJob& j : d->jobs) {
    for (DashboardTask& t : j.tasks) {
      t.queued = static_cast<int64_t>(dispatcher_->Queued(t.row.id));
      t.in_flight = static_cast<int64_t>(dispatcher_->InFlight(t.row.id));
    }
  }
  if (caller.role == Role::kAdmin) {  // a client sees its jobs, not the fleet
    for (const WorkerEntry& w : registry_->List()) {
      DashboardWorker dw;
      dw.worker_id = w.worker_id;
      dw.host = w.host;
      dw.devices = DevicesText(w.devices);
      dw.measured = w.candidates_measured;
      dw.batches_in_flight = w.batches_in_flight;
      dw.busy_fraction = metrics_->BusyFraction(w.worker_id);
      dw.last_seen_unix_ms = w.last_heard_unix_ms;
      d->workers.push_back(std::move(dw));
    }
  }
  return RenderDashboard(*d);
}

}  // namespace tessel::server
