#include "search/task_scheduler.h"

#include <cmath>

#include "gtest/gtest.h"

namespace tessel::search {
namespace {

// Records `n` trials of `task` whose best falls from `from` to `to` linearly.
void Improve(TaskScheduler& s, int task, int n, double from, double to) {
  for (int i = 0; i < n; ++i) s.Recorded(task, from + (to - from) * (i + 1) / n);
}

TEST(TaskScheduler, GivesEveryTaskItsWarmupBatchesRoundRobinFirst) {
  TaskScheduler s({1, 1, 1}, {.warmup_batches = 2});
  std::vector<int> order;
  for (int i = 0; i < 6; ++i) {
    const int t = s.Next();
    order.push_back(t);
    s.Issued(t, 8);
  }
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 0, 1, 2}));
}

TEST(TaskScheduler, AfterWarmupTheTaskWhoseLatencyFallsFastestWins) {
  TaskScheduler s({1, 1}, {.warmup_batches = 1, .window = 16});
  s.Issued(0, 16);
  s.Issued(1, 16);
  Improve(s, 0, 16, 10.0, 9.9);  // stalled
  Improve(s, 1, 16, 10.0, 5.0);  // still falling fast
  EXPECT_GT(s.Score(1), s.Score(0));
  EXPECT_EQ(s.Next(), 1);
}

TEST(TaskScheduler, ATaskWithALargerShareOfTheTotalTimeCountsMore) {
  // Both improve by the same fraction; the one that takes ten times longer gains ten times the
  // milliseconds, and so does a task of weight 10 (it runs ten times per inference).
  TaskScheduler s({1, 1, 10}, {.warmup_batches = 1, .window = 8});
  for (int t = 0; t < 3; ++t) s.Issued(t, 8);
  Improve(s, 0, 8, 1.0, 0.8);
  Improve(s, 1, 8, 10.0, 8.0);
  Improve(s, 2, 8, 1.0, 0.8);
  EXPECT_NEAR(s.Score(1) / s.Score(0), 10.0, 1e-9);
  EXPECT_NEAR(s.Score(2) / s.Score(0), 10.0, 1e-9);
}

TEST(TaskScheduler, ATaskWithoutASuccessIsMeasuredBeforeTheOthersAreJudged) {
  TaskScheduler s({1, 1}, {.warmup_batches = 1});
  s.Issued(0, 4);
  s.Issued(1, 4);
  Improve(s, 0, 4, 2.0, 1.0);
  for (int i = 0; i < 4; ++i) s.Recorded(1, 0);  // every trial failed
  EXPECT_TRUE(std::isinf(s.Score(1)));
  EXPECT_EQ(s.Next(), 1);
}

TEST(TaskScheduler, FinishedTasksAreNeverPickedAndAllFinishedGivesMinusOne) {
  TaskScheduler s({1, 1}, {.warmup_batches = 1});
  s.Finish(0);
  EXPECT_EQ(s.Next(), 1);
  s.Issued(1, 4);
  Improve(s, 1, 4, 2.0, 1.0);
  EXPECT_EQ(s.Next(), 1);
  s.Finish(1);
  EXPECT_EQ(s.Next(), -1);
}

TEST(TaskScheduler, EqualScoresGoToTheTaskWithFewestTrials) {
  TaskScheduler s({1, 1}, {.warmup_batches = 1, .window = 4});
  s.Issued(0, 8);
  s.Issued(1, 4);
  Improve(s, 0, 4, 1.0, 1.0);
  Improve(s, 1, 4, 1.0, 1.0);
  EXPECT_EQ(s.Next(), 1);
}

}  // namespace
}  // namespace tessel::search
