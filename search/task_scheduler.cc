#include "search/task_scheduler.h"

#include <algorithm>
#include <limits>

#include "schedules/util/check.h"

namespace tessel::search {

TaskScheduler::TaskScheduler(std::vector<double> weights, TaskSchedulerOptions options)
    : options_(options) {
  TESSEL_CHECK(options_.window > 0);
  for (double w : weights) {
    TESSEL_CHECK(w > 0);
    PerTask t;
    t.weight = w;
    tasks_.push_back(std::move(t));
  }
}

void TaskScheduler::Issued(int task, int64_t n) {
  tasks_[task].issued += n;
  ++tasks_[task].batches;
}

void TaskScheduler::Recorded(int task, double best_ms) { tasks_[task].best_ms.push_back(best_ms); }

void TaskScheduler::Finish(int task) { tasks_[task].finished = true; }

double TaskScheduler::Score(int task) const {
  const PerTask& t = tasks_[task];
  const int64_t n = static_cast<int64_t>(t.best_ms.size());
  const double best = n > 0 ? t.best_ms.back() : 0;
  if (best <= 0) return std::numeric_limits<double>::infinity();
  // Backward: the gain over the last `window` trials (from the first ok result when the window
  // reaches back before it), per trial.
  const int64_t from = std::max<int64_t>(0, n - options_.window);
  double before = t.best_ms[from];
  for (int64_t i = from; i < n && before <= 0; ++i) before = t.best_ms[i];
  const double backward = (before - best) / static_cast<double>(n - from);
  // Forward (optimistic): the average gain rate so far, as if the latency could fall to zero
  // at the pace it took to get here.
  const double forward = best / static_cast<double>(n);
  return t.weight * (options_.backward_share * backward + (1 - options_.backward_share) * forward);
}

int TaskScheduler::Next() const {
  int pick = -1;
  // Round robin until every unfinished task has had its warm-up batches.
  for (int i = 0; i < num_tasks(); ++i) {
    const PerTask& t = tasks_[i];
    if (t.finished || t.batches >= options_.warmup_batches) continue;
    if (pick < 0 || t.batches < tasks_[pick].batches) pick = i;
  }
  if (pick >= 0) return pick;
  double best_score = -1;
  for (int i = 0; i < num_tasks(); ++i) {
    const PerTask& t = tasks_[i];
    if (t.finished) continue;
    const double s = Score(i);
    if (pick < 0 || s > best_score || (s == best_score && t.issued < tasks_[pick].issued)) {
      pick = i;
      best_score = s;
    }
  }
  return pick;
}

}  // namespace tessel::search
