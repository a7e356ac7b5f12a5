#pragma once

// The dispatcher: a queue of candidates per task, and the batches in flight.
//
// - A batch holds candidates of one task plus that workload's reference source, and goes only to
//   a worker with a device for the task's target (WorkerRegistry's DevicesMatch) and a credit
//   left.
// - Between jobs: strictly higher priority first; among equal priorities, the job served least
//   recently (round-robin); within a job, its tasks round-robin likewise.
// - An in-flight batch has a deadline, scaled to the time it is expected to take (BatchDeadlineS):
//   the task's seconds per candidate, as measured between the results workers sent for it
//   (before the first: TaskDispatch::expected_candidate_s, else a prior of 5 s), times
//   the candidates the worker holds (this batch's and those sent to it before). A worker that
//   takes a batch and never answers loses it in about that time, not in the ceiling's 600 s.
//   The unanswered candidates of a batch go back to the front of their task's queue when its
//   worker disconnects or falls silent (DropWorker), returns them (OnReturned), ends the batch
//   without answering them (OnBatchDone) or misses the deadline (Tick). The credit the batch
//   took stays taken: a worker that never answers gets no more work.
// - A result is accepted once per (task, candidate): a second result for a candidate already
//   accepted (a late answer after a requeue) is dropped, so nothing is counted twice. A
//   worker_error result (not the candidate's fault) is requeued up to max_attempts times.
//
// Threads: every method may be called from any thread. Lock order: the job manager's mutex,
// then the dispatcher's, then the registry's. Batches are sent with no dispatcher lock held.

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_set>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "measure/measurement.h"
#include "schedules/codegen/source.h"
#include "schedules/target/target.h"
#include "server/event_log.h"
#include "server/worker_registry.h"

namespace tessel::server {

struct DispatcherOptions {
  // A batch's deadline: batch_deadline_min_s (room to compile and start) plus deadline_slack
  // times its expected measuring time, at most batch_deadline_s.
  double batch_deadline_s = 600;
  double batch_deadline_min_s = 30;
  double deadline_slack = 3;
  // Seconds per candidate expected of a task none of whose candidates has been timed yet.
  double prior_candidate_s = 5;
  int max_attempts = 3;  // worker_error results before the error is accepted as the result
};

// The deadline, in seconds from its sending, of a batch whose worker is expected to spend
// `expected_s` on it and on what it holds already: min(batch_deadline_s, batch_deadline_min_s +
// deadline_slack * expected_s).
double BatchDeadlineS(const DispatcherOptions& options, double expected_s);

// What the dispatcher knows of a task.
struct TaskDispatch {
  int64_t task_id = 0;
  int64_t job_id = 0;
  int priority = 0;
  schedules::TargetKind kind = schedules::TargetKind::kHost;
  std::string arch;
  int batch_size = 16;
  std::shared_ptr<const schedules::GeneratedSource> reference;
  measure::TimingOptions timing;
  uint64_t verify_seed = 0;
  double timeout_s = 0;
  // Seconds a candidate is expected to take before any is timed here (from the task's records
  // in the log, when it resumes: MeasuredCandidateS); 0: DispatcherOptions::prior_candidate_s.
  double expected_candidate_s = 0;
  // Screening (measure::ScreenOptions; disabled: every candidate timed in full). Its best_ms and
  // margin change as results come (SetScreening); every round(1 / screen_audit)-th candidate of
  // the task is sent with confirm set.
  measure::ScreenOptions screen;
  double screen_audit = 0;
};

// What measuring `m` took the worker, as far as the measurement tells: compiling, verifying and
// the timed repeats, in seconds.
double MeasuredCandidateS(const measure::Measurement& m);

struct QueuedCandidate {
  int64_t task_id = 0;
  uint64_t candidate_id = 0;
  std::string trace_json;
  std::shared_ptr<const schedules::GeneratedSource> source;
  int attempts = 0;  // worker_error results so far
  // The timeline (server/job_timeline.h): the search's time for it, when it was enqueued and
  // when its (last) batch was sent.
  double sample_ms = -1;
  double build_ms = -1;  // of sample_ms's call: CPU time building, summed over its threads
  std::chrono::steady_clock::time_point enqueued{};
  std::chrono::steady_clock::time_point sent{};
};

class Dispatcher {
 public:
  Dispatcher(WorkerRegistry* registry, DispatcherOptions options, const EventLog* log)
      : registry_(registry), options_(options), log_(log) {}

  void AddTask(TaskDispatch task);
  // Drops the task's queued candidates; its in-flight batches still deliver their results.
  // Returns how many were dropped.
  size_t RemoveTask(int64_t task_id);
  void Enqueue(std::vector<QueuedCandidate> candidates);
  // Queued (not sent) and in-flight (sent and unanswered, or answered and not yet Recorded)
  // candidates of a task.
  size_t Queued(int64_t task_id);
  size_t InFlight(int64_t task_id);
  // Credits of the workers that can serve the task.
  int FreeCredits(int64_t task_id);
  // The task's best confirmed median and screening margin, for the batches sent from now on.
  void SetScreening(int64_t task_id, double best_ms, double margin);

  // Sends what can be sent now. Returns the number of batches sent.
  int Dispatch();

  // A result from the worker of `session`. Returns the candidate when the result is to be
  // recorded; nullopt when it is dropped (a duplicate, an unknown batch) or requeued.
  std::optional<QueuedCandidate> OnResult(uint64_t session, uint64_t batch_id,
                                          uint64_t candidate_id, bool worker_error);
  // The result of `c` could not be recorded (the log failed): measure it again.
  void Unaccept(QueuedCandidate c);
  // The job manager is done with an accepted result (recorded and counted, or dropped): it no
  // longer counts as in flight.
  void Recorded(int64_t task_id);
  void OnReturned(uint64_t session, uint64_t batch_id, const std::vector<uint64_t>& ids);
  void OnBatchDone(uint64_t session, uint64_t batch_id);
  // The worker is gone: requeue everything it held.
  void DropWorker(uint64_t session);
  // Requeues the batches past their deadline.
  void Tick(int64_t now_unix_ms);

 private:
  struct Batch {
    uint64_t batch_id = 0;
    uint64_t session = 0;
    int64_t task_id = 0;
    int64_t sent_unix_ms = 0;
    int64_t deadline_unix_ms = 0;
    double expected_candidate_s = 0;  // the task's estimate when the batch was sent
    size_t sent = 0;                  // candidates sent
    bool expired = false;             // requeued at its deadline; kept for late results
    std::map<uint64_t, QueuedCandidate> unanswered;
  };
  struct Task {
    TaskDispatch info;
    std::deque<QueuedCandidate> queue;
    std::unordered_set<uint64_t> accepted;
    int64_t recording = 0;  // accepted, not yet Recorded
    uint64_t last_served = 0;
    bool removed = false;
    // Seconds between a worker's consecutive results when the later one is of this task (or
    // between the sending of a batch to an idle worker and its first result): the newest
    // kTimedResults.
    std::deque<double> candidate_s;
    int64_t sent = 0;  // candidates sent (requeued ones again), for the screening audit
  };
  static constexpr size_t kTimedResults = 16;
  // The seconds a candidate of `t` is expected to take: the longest of its timed results, or
  // before the first its info.expected_candidate_s, else options_.prior_candidate_s.
  double ExpectedCandidateSLocked(const Task& t) const;
  // What the worker of `session` is expected to spend on the candidates it holds unanswered.
  double HeldSLocked(uint64_t session) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RequeueLocked(QueuedCandidate c) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Requeues what `b` has unanswered and forgets it; `why` for the log.
  void EndBatchLocked(uint64_t batch_id, const std::string& why) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  Task* PickTaskLocked(const std::vector<WorkerDevice>& devices) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  WorkerRegistry* const registry_;
  const DispatcherOptions options_;
  const EventLog* const log_;

  absl::Mutex mu_;
  std::map<int64_t, Task> tasks_ ABSL_GUARDED_BY(mu_);
  std::map<int64_t, uint64_t> job_last_served_ ABSL_GUARDED_BY(mu_);
  std::map<uint64_t, Batch> batches_ ABSL_GUARDED_BY(mu_);
  uint64_t next_batch_id_ ABSL_GUARDED_BY(mu_) = 1;
  uint64_t serve_clock_ ABSL_GUARDED_BY(mu_) = 0;
  // When each worker last made progress: its last result, or the sending of a batch when it
  // held nothing unanswered.
  std::map<uint64_t, int64_t> progress_unix_ms_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tessel::server
