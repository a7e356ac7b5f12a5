#pragma once

// The job manager: validates and creates tuning jobs, feeds their tasks' candidates to the
// dispatcher, records every result in the tuning log, and moves jobs and tasks through their
// states (queued -> running -> done | cancelled | failed).
//
// - SubmitJob validates everything before anything is stored: a refused request leaves the log
//   untouched. Errors are InvalidArgument with a message naming the problem and the fix.
// - Each running task asks its search strategy for candidates so that its queue holds enough to
//   fill every matching worker's credits (at least two batches), never issuing more distinct
//   candidates than its budget.
// - A result is written to the log (one transaction) BEFORE it is counted and before the
//   strategy hears of it. A task is done at its budget (or when its design space runs dry); a
//   job is done when all its tasks are, or when its time budget (counted from its creation) is
//   spent.
// - Cancel: the job and its unfinished tasks become cancelled at once and their queued
//   candidates are dropped. Results of batches already in flight are still recorded and counted
//   (a task never issues more than its budget, so they never count beyond it); no new batch of
//   the job is sent.
// - Resume (at start): unfinished jobs of the log are loaded with the trials already recorded
//   counted, and their strategies never propose a trace already measured.
//
// Threads: every public method may be called from any thread; Pump and Tick run on the
// server's maintenance thread. Lock order: the job manager's mutex, then the dispatcher's.

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "costmodel/cost_model.h"
#include "measure/measurement.h"
#include "schedules/target/target.h"
#include "schedules/workload/workload.h"
#include "search/search_strategy.h"
#include "search/task_scheduler.h"
#include "server/dispatcher.h"
#include "server/event_log.h"
#include "server/job_request.h"
#include "server/job_timeline.h"
#include "server/screen_margin.h"
#include "store/tuning_log.h"

namespace tessel::server {

struct JobManagerOptions {
  int default_batch_size = 16;
  // The cost model of the guided strategies ("xgboost" or "random"), one per target, shared by
  // every job of that target (costmodel/cost_model.h).
  std::string cost_model = "xgboost";
  measure::TimingOptions timing;   // sent with every batch
  double candidate_timeout_s = 0;  // per candidate; 0: the worker's default
  // Screening (server/screen_margin.h): the short measurement every candidate gets, and the
  // margin of each task derived from its measured noise. Disabled: every candidate timed in full.
  ScreeningOptions screening;
};

struct TaskStatus {
  store::TaskRow row;
  std::string workload_name;
  std::string workload_spec;
  int64_t trials_done = 0;
  int64_t trials_ok = 0;
  double best_ms = 0;
  double flops = 0;
  int64_t bytes = 0;
  int64_t in_flight = 0;
  // Why the task finished short of its budget, when it did because its design space has no new
  // candidate (known for the tasks finished since the server started).
  std::string note;
  // Screening, since the server started running the task: ok results that got only the
  // screening measurement, the margin its batches are sent with (0: no screening), and the
  // candidates that gave a (screened, confirmed) pair.
  int64_t trials_screened = 0;
  double screen_margin = 0;
  int64_t screen_pairs = 0;
};

struct JobStatus {
  store::JobRow row;
  std::vector<TaskStatus> tasks;
  int64_t trials_done = 0;
  double elapsed_s = 0;
  double trials_per_s = 0;  // over the last minute
  double search_s = 0;      // in the search strategies (GenerateCandidates, NotifyResults)
  uint64_t version = 0;     // grows at every change
  // Where its candidates' time went (server/job_timeline.h), for the results of this server's run
  // of the job; empty for a job that is not in memory.
  std::vector<TimelineStage> timeline;
};

class JobManager {
 public:
  JobManager(store::TuningLog* log, Dispatcher* dispatcher, JobManagerOptions options,
             const EventLog* events);

  // Loads the unfinished jobs of the log. Called once, before the services start.
  absl::Status Resume();

  absl::StatusOr<int64_t> Submit(const JobRequest& request);
  // NotFound naming the job when there is none.
  absl::StatusOr<JobStatus> Get(int64_t job_id);
  absl::StatusOr<std::vector<JobStatus>> List(bool unfinished_only);
  absl::StatusOr<JobStatus> Cancel(int64_t job_id);
  // Waits until the job's version exceeds `seen_version`, the job is finished, Stop is called or
  // `timeout` passes; returns the job then.
  absl::StatusOr<JobStatus> WaitForChange(int64_t job_id, uint64_t seen_version,
                                          absl::Duration timeout);

  // A result the dispatcher accepted, as the worker service checked it (no timings unless ok,
  // store::CheckMeasurement holds): recorded, then counted.
  void OnResult(const QueuedCandidate& candidate, const measure::Measurement& result);

  // Tops up the tasks' queues. Returns the candidates enqueued.
  int Pump();
  // Ends the jobs whose time budget is spent.
  void Tick(int64_t now_unix_ms);
  // Wakes every WaitForChange; no more work is issued.
  void Stop();

 private:
  struct Task {
    store::TaskRow row;
    schedules::Workload workload;
    std::string workload_name;
    std::string workload_spec;
    std::unique_ptr<search::SearchStrategy> strategy;
    int index = 0;       // in its job
    int64_t issued = 0;  // distinct candidates handed to the dispatcher (recorded included)
    int64_t done = 0;    // recorded
    int64_t ok = 0;
    double best_ms = 0;  // the best confirmed median (screened results never count)
    std::string note;    // TaskStatus::note
    int64_t screened = 0;
    ScreenMargin margin;  // the pairs of this task
  };
  struct Job {
    store::JobRow row;
    std::vector<std::unique_ptr<Task>> tasks;
    // A shared budget: the job's trials budget is less than the sum of its tasks' caps, and the
    // scheduler decides which task gets the next batch. Null when every task has its own budget.
    std::unique_ptr<search::TaskScheduler> scheduler;
    std::deque<int64_t> result_unix_ms;
    double search_s = 0;  // time in its strategies  // the last minute's results, for the rate
    uint64_t version = 1;
    ScreenMargin margin;  // the pairs of every task: a task with too few of its own uses these
    JobTimeline timeline;
  };

  // The cost model of `target` and workload `family` (costmodel::WorkloadFamily) for a job of
  // `strategy` (null for random search): made on first use from every record of that target
  // and family in the log (transfer), then shared and taught by every task of that target and
  // family. Call without mu_ held (the first call rebuilds the log's candidates).
  absl::StatusOr<std::shared_ptr<costmodel::CostModel>> ModelFor(const schedules::Target& target,
                                                                 const std::string& family,
                                                                 const std::string& strategy);
  // Stores the models of the target that are trained in the log (the family in their meta).
  void SaveModelsLocked(const std::string& target_key) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Builds the in-memory job (strategies, dispatcher tasks) from its rows; `measured` per task.
  absl::Status LoadJobLocked(const store::JobRow& row, const std::vector<store::TaskRow>& tasks,
                             const std::vector<std::vector<store::Record>>& measured)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void FinishTaskLocked(Job& job, Task& task, store::JobState state, const std::string& why)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void FinishJobLocked(Job& job, store::JobState state, const std::string& why)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ChangedLocked(Job& job) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A job with a shared budget whose tasks have recorded it all: its tasks are done.
  void FinishIfSharedBudgetSpentLocked(Job& job) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The screening margin of `task` now (its own pairs, else its job's, else the initial one).
  double MarginLocked(const Job& job, const Task& task) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Tops up one task's queue; returns the candidates enqueued, or -1 when the job failed.
  int64_t TopUpLocked(Job& job, Task& task, int64_t limit) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  JobStatus StatusLocked(Job& job) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A finished job of the log that is not in memory.
  absl::StatusOr<JobStatus> StatusFromLog(const store::JobRow& row);

  store::TuningLog* const log_;
  Dispatcher* const dispatcher_;
  const JobManagerOptions options_;
  const EventLog* const events_;

  absl::Mutex mu_;
  absl::CondVar changed_;
  std::map<int64_t, std::unique_ptr<Job>> jobs_ ABSL_GUARDED_BY(mu_);
  std::map<int64_t, std::pair<Job*, Task*>> tasks_ ABSL_GUARDED_BY(mu_);
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  // Cost models by (target key, workload family): made by ModelFor under models_mu_ alone; looked
  // up under mu_ then models_mu_ (briefly). The models themselves are used under mu_, which
  // serializes every strategy call.
  absl::Mutex models_mu_ ABSL_ACQUIRED_AFTER(mu_);
  std::map<std::pair<std::string, std::string>, std::shared_ptr<costmodel::CostModel>> models_
      ABSL_GUARDED_BY(models_mu_);
};

}  // namespace tessel::server
