#pragma once

// A SubmitJob request as the server takes it: the domain type (JobRequest), its conversion from
// the proto (JobRequestFromProto: the one place the server reads a SubmitJobRequest), the limits
// on it, and its check (CheckJobRequest), which turns it into what a job is made of or says what
// is wrong with it (InvalidArgument naming the problem and the fix). The check reads nothing but
// the request: the tuning log is not touched (the job manager stores a checked job).
//
// Threads: free functions of their arguments, callable from any thread.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/tessel.pb.h"
#include "schedules/target/target.h"
#include "schedules/workload/workload.h"

namespace tessel::server {

// A Baseline of a SubmitJobRequest: what `workload` takes in another implementation.
struct BaselineRequest {
  std::string workload;  // one of the job's workloads (its text as listed, or of the same key)
  double ms = 0;
  std::string label;  // empty: kDefaultBaselineLabel
};

// SubmitJobRequest as a domain type (proto/tessel.proto documents the fields).
struct JobRequest {
  std::vector<std::string> workloads;
  std::string target_kind;
  std::string target_arch;
  int64_t trials_per_task = 0;
  int64_t total_trials = 0;
  double time_budget_s = 0;
  std::string strategy;
  int priority = 0;
  std::string name;
  uint64_t seed = 0;
  int batch_size = 0;
  std::vector<BaselineRequest> baselines;
  std::string submitted_by;  // the name of the submitting token (empty without tokens)
};

// The largest budgets and batch a job may ask for.
inline constexpr int64_t kMaxTrials = int64_t{1} << 32;
inline constexpr int kMaxBatchSize = 4096;
// The most workloads one job may list, and the longest workload text and job name: a job is
// checked (each workload parsed and built) while its client waits, and its texts are stored.
inline constexpr size_t kMaxWorkloadsPerJob = 100;
inline constexpr size_t kMaxWorkloadBytes = 64 * 1024;
inline constexpr size_t kMaxJobNameBytes = 256;
// The longest target kind, architecture or strategy name a request may give (the known ones are
// far shorter).
inline constexpr size_t kMaxNameBytes = 64;
// The longest baseline label (it is drawn beside the line on a tuning curve), and the label of a
// baseline given without one.
inline constexpr size_t kMaxBaselineLabelBytes = 64;
inline constexpr char kDefaultBaselineLabel[] = "baseline";

// A request as CheckJobRequest accepts it: its workloads parsed (each with a design space and a
// reference kernel on the target), their keys (distinct), the target, and each task's budget.
struct CheckedJob {
  std::vector<schedules::Workload> workloads;
  std::vector<std::string> keys;
  schedules::Target target;
  std::vector<int64_t> budgets;  // per task, parallel to workloads
  // Per task, parallel to workloads: the baseline's latency (0: none) and label ("" when none).
  std::vector<double> baseline_ms;
  std::vector<std::string> baseline_labels;
};

// The request's fields as they are; `submitted_by` is the name of the caller's token.
JobRequest JobRequestFromProto(const proto::SubmitJobRequest& request, std::string submitted_by);

absl::StatusOr<CheckedJob> CheckJobRequest(const JobRequest& request);

// The first line of `text`, cut to 80 characters: how errors and the server's log quote a
// workload or a name.
std::string ShortQuote(const std::string& text);

}  // namespace tessel::server
