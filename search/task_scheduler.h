#pragma once

// The task scheduler (DESIGN.md section 5): a job that tunes several workloads (tasks) from one
// shared trial budget decides, batch by batch, which task gets the next trials.
//
// - Round robin first: every task gets `warmup_batches` batches before any gets more.
// - Then the batch goes where the job's total time falls fastest. The job's objective is
//   sum_i weight_i * best_ms_i (weight: how often the workload runs; 1 by default), so a task's
//   score is weight_i times its expected latency gain per trial: a blend of the gain it made over
//   its last `window` recorded trials (backward) and its average gain rate so far, best_i divided
//   by its trials (optimistic forward), with weight `backward_share` on the backward part
//   (Ansor's gradient scheduler, simplified). A task's gain is in milliseconds, so a task that
//   takes a larger share of the total time counts more for the same relative improvement. The
//   backward part dominates (0.9): the batch goes where the latency is falling fastest; the
//   forward part decides between stalled tasks, in favour of the larger, less-tried ones.
// - A task with no successful measurement yet after the warm-up scores highest (it must be
//   measured before it can be judged); ties go to the task with the fewest trials issued.
// - Finished tasks (budget cap reached, design space dry) are never picked.
//
// Threads: not thread-safe; the owner (the job manager) serializes the calls.

#include <cstdint>
#include <string>
#include <vector>

namespace tessel::search {

struct TaskSchedulerOptions {
  int64_t warmup_batches = 1;
  int64_t window = 64;  // trials of the backward gain
  double backward_share = 0.9;
};

class TaskScheduler {
 public:
  // One weight per task (each > 0).
  explicit TaskScheduler(std::vector<double> weights, TaskSchedulerOptions options = {});

  // A batch of `n` proposals was handed to `task`.
  void Issued(int task, int64_t n);
  // `task` recorded one more trial; `best_ms` is its best latency after it (0: none ok yet).
  void Recorded(int task, double best_ms);
  void Finish(int task);

  // The task the next batch should go to; -1 when every task is finished.
  int Next() const;
  // The score Next compares (public for tests and the job report).
  double Score(int task) const;
  int64_t issued(int task) const { return tasks_[task].issued; }
  int64_t batches(int task) const { return tasks_[task].batches; }
  int num_tasks() const { return static_cast<int>(tasks_.size()); }

 private:
  struct PerTask {
    double weight = 1;
    int64_t issued = 0;
    int64_t batches = 0;
    bool finished = false;
    std::vector<double> best_ms;  // after each recorded trial
  };
  std::vector<PerTask> tasks_;
  TaskSchedulerOptions options_;
};

}  // namespace tessel::search
