#pragma once

// How the client commands show jobs, tasks and workers: a live progress line (submit --wait,
// tune), a job's task table (status, the end of tune), the job list and the worker list.
//
// Threads: pure functions of their arguments, callable from any thread.

#include <iosfwd>
#include <string>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "cli/client.h"
#include "proto/tessel.pb.h"

namespace tessel::cli {

// "12.3 GFLOP/s" for a workload with arithmetic (≥ 4 flops per compulsory byte), else "410 GB/s";
// "-" when ms is 0.
std::string Rate(double flops, double bytes, double ms);

// One line: a bar, trials done of the budget, the best latency and its rate, trials per second
// and the time left. `width` is the bar's width in characters.
std::string ProgressLine(const proto::JobInfo& job, int width = 24);

// A job's header line (and its error or warning), one row per task (workload, state, trials, ok,
// best ms, rate), the notes of tasks that stopped short of their budget, and each screening
// task's screened results and margin.
void PrintJob(std::ostream& out, const proto::JobInfo& job);
// Where the job's candidates' time went (JobInfo.timeline): per stage the candidates, the sum,
// its share of the job's elapsed time and the median per candidate; then trials per second and
// what bounds them. Says so when the server has no timeline for the job (a job finished before
// the server started).
void PrintTimeline(std::ostream& out, const proto::JobInfo& job);
void PrintJobList(std::ostream& out, const proto::ListJobsResponse& jobs);
void PrintWorkers(std::ostream& out, const proto::ListWorkersResponse& workers);

struct WaitOptions {
  std::string command = "tessel";  // names the lines WaitForJob writes ("tessel submit")
  // After losing the server (UNAVAILABLE: it stopped, or was killed), how long to keep trying to
  // reach it again (with backoff) before giving up; zero: give up at once.
  absl::Duration reattach_for = absl::Seconds(120);
  // The job is known to exist (this command submitted it): reattach even when the server is
  // lost before the first update; otherwise only once the watch has shown the job.
  bool job_known = false;
};

// --reattach-s (seconds, default 120) for a command that waits for a job; and its check: 0 or
// more seconds.
void AddReattachFlag(CLI::App* cmd, double* seconds);
absl::Status CheckReattachSeconds(double seconds);

// Watches the job until it is finished, redrawing ProgressLine on `progress` (in place on a
// terminal, else a line every 10 s and at the end); returns the final JobInfo. A server that
// goes away and comes back (a restart resumes the job from its log) is reattached to, saying so
// on `progress`: "COMMAND: lost the server at ADDR; trying again for up to N s to follow job J",
// then "COMMAND: reattached to job J at ADDR".
absl::StatusOr<proto::JobInfo> WaitForJob(const Client& client, int64_t job_id,
                                          std::ostream& progress, bool terminal,
                                          const WaitOptions& options = {});

}  // namespace tessel::cli
