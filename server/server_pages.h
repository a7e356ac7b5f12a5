#pragma once

// What `tessel serve --http` serves (server/http_server.h): the metrics (server/server_metrics.h)
// with the gauges read from the job manager, dispatcher, registry and log at each scrape, and the
// dashboard (server/dashboard_page.h) from the log plus what only the live server knows.
//
// Threads: any, several at once (every part it reads locks for itself).

#include <string>

#include "server/dispatcher.h"
#include "server/http_server.h"
#include "server/job_manager.h"
#include "server/server_metrics.h"
#include "server/worker_registry.h"
#include "store/tuning_log.h"

namespace tessel::server {

class ServerPages final : public HttpPages {
 public:
  // None owned; all must outlive this.
  ServerPages(store::TuningLog* log, JobManager* jobs, Dispatcher* dispatcher,
              WorkerRegistry* registry, ServerMetrics* metrics)
      : log_(log), jobs_(jobs), dispatcher_(dispatcher), registry_(registry), metrics_(metrics) {}

  std::string Metrics() override;
  absl::StatusOr<std::string> Dashboard(const Principal& caller) override;

 private:
  store::TuningLog* const log_;
  JobManager* const jobs_;
  Dispatcher* const dispatcher_;
  WorkerRegistry* const registry_;
  ServerMetrics* const metrics_;
};

// Bytes of the SQLite file at `path` with its -wal file (0 for those missing).
int64_t LogBytes(const std::string& path);

}  // namespace tessel::server
