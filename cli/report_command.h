#pragma once

#include <string>

#include "CLI/CLI.hpp"

namespace tessel::cli {

// `tessel report --db LOG --out report.html [--max-jobs N]`: the dashboard of `tessel serve
// --http` (server/dashboard_page.h: jobs, tasks, each task's tuning curve, the workers that
// measured them) for a tuning log, written offline as one self-contained HTML file.
struct ReportOptions {
  std::string db;
  std::string out;
  int max_jobs = 0;  // the newest; 0: every job
};

void AddReportCommand(CLI::App& app);
int RunReport(const ReportOptions& options);

}  // namespace tessel::cli
