#include "cli/report_command.h"

#include <cstdio>
#include <fstream>
#include <iostream>

#include "absl/strings/str_cat.h"
#include "cli/exit_code.h"
#include "server/dashboard_data.h"
#include "server/dashboard_page.h"
#include "store/tuning_log.h"

namespace tessel::cli {

void AddReportCommand(CLI::App& app) {
  auto opts = std::make_shared<ReportOptions>();
  CLI::App* cmd = app.add_subcommand(
      "report",
      "Write the dashboard of a tuning log (jobs, tasks, tuning curves, workers) as one HTML "
      "file, offline");
  cmd->add_option("--db", opts->db, "Tuning log (SQLite file); opened read-only")->required();
  cmd->add_option("--out,-o", opts->out, "HTML file to write")->required();
  cmd->add_option("--max-jobs", opts->max_jobs, "Only the newest N jobs (0: every job)")
      ->capture_default_str();
  cmd->callback([opts]() { SetExitCode(RunReport(*opts)); });
}

int RunReport(const ReportOptions& o) {
  auto fail = [](const absl::Status& s) {
    std::cerr << "tessel report: " << s.message() << "\n";
    return 1;
  };
  if (o.max_jobs < 0) {
    return fail(absl::InvalidArgumentError(
        absl::StrCat("--max-jobs ", o.max_jobs, ": give 0 (every job) or more")));
  }
  store::TuningLogOptions options;
  options.read_only = true;
  auto log = store::OpenTuningLog(o.db, options);
  if (!log.ok()) return fail(log.status());
  server::DashboardOptions dopts;
  dopts.max_jobs = o.max_jobs;
  absl::StatusOr<server::DashboardData> data = server::DashboardFromLog(**log, dopts);
  if (!data.ok()) {
    return fail(absl::Status(data.status().code(),
                             absl::StrCat("cannot read ", o.db, ": ", data.status().message())));
  }
  const std::string page = server::RenderDashboard(*data);
  // Written beside the target and renamed into place: a failed write leaves no partial file.
  const std::string tmp = o.out + ".tmp";
  std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
  if (!out) {
    return fail(absl::PermissionDeniedError(
        absl::StrCat("cannot write ", o.out, "; check that its directory exists and is writable")));
  }
  out << page;
  out.close();
  if (!out || std::rename(tmp.c_str(), o.out.c_str()) != 0) {
    std::remove(tmp.c_str());
    return fail(absl::DataLossError(absl::StrCat("writing ", o.out, " failed")));
  }
  int64_t tasks = 0;
  for (const server::DashboardJob& j : data->jobs) tasks += static_cast<int64_t>(j.tasks.size());
  std::cerr << "tessel report: wrote " << o.out << " (" << data->jobs.size() << " jobs, " << tasks
            << " tasks)\n";
  return 0;
}

}  // namespace tessel::cli
