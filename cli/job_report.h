#pragma once

// How the client commands show jobs, tasks and workers: a live progress line (submit --wait,
// tune), a job's task table (status, the end of tune), the job list and the worker list.
//
// Threads: pure functions of their arguments, callable from any thread.

#include <iosfwd>
#include <string>

#include "absl/status/statusor.h"
#include "cli/client.h"
#include "proto/tessel.pb.h"

namespace tessel::cli {

// "12.3 GFLOP/s" for a workload with arithmetic (≥ 4 flops per compulsory byte), else "410 GB/s";
// "-" when ms is 0.
std::string Rate(double flops, double bytes, double ms);

// One line: a bar, trials done of the budget, the best latency and its rate, trials per second
// and the time left. `width` is the bar's width in characters.
std::string ProgressLine(const proto::JobInfo& job, int width = 24);

// A job's header line and one row per task (workload, state, trials, ok, best ms, rate).
void PrintJob(std::ostream& out, const proto::JobInfo& job);
void PrintJobList(std::ostream& out, const proto::ListJobsResponse& jobs);
void PrintWorkers(std::ostream& out, const proto::ListWorkersResponse& workers);

// Watches the job until it is finished, redrawing ProgressLine on `progress` (in place on a
// terminal, else a line every 10 s and at the end); returns the final JobInfo.
absl::StatusOr<proto::JobInfo> WaitForJob(const Client& client, int64_t job_id,
                                          std::ostream& progress, bool terminal);

}  // namespace tessel::cli
