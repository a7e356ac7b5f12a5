#include "search/replay.h"

#include <cstdlib>
#include <fstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "schedules/space/space_generator.h"
#include "schedules/util/fnv1a.h"
#include "schedules/workload/builtins.h"
#include "schedules/workload/key.h"
#include "server/log_readers.h"
#include "store/tuning_log.h"
#include "tests/test_util.h"

namespace tessel::search {
namespace {

using ::testing::HasSubstr;

constexpr char kMatmul[] = "matmul(M=32, N=32, K=32)";

// A log holding `n` distinct real candidates of kMatmul on the host, each with a SYNTHETIC
// latency (a hash of its trace: these tests check the replay machinery, not the search's
// quality) and one in eight failed.
class ReplayTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::MakeTempDir("tessel_replay_");
    ASSERT_FALSE(dir_.empty());
    auto log = store::OpenTuningLog(dir_ + "/log.db");
    ASSERT_TRUE(log.ok()) << log.status();
    log_ = std::move(*log);
    auto w = schedules::ParseWorkloadText(kMatmul);
    ASSERT_TRUE(w.ok()) << w.status();
    workload_ = *w;
    key_ = schedules::WorkloadKey(workload_);
    ASSERT_TRUE(log_->PutWorkload(
                        {key_, schedules::CanonicalText(workload_), workload_.name, workload_.spec})
                    .ok());
  }

  void Record(int n) {
    auto space = schedules::SpaceGenerator::Create(workload_, target_);
    ASSERT_TRUE(space.ok()) << space.status();
    int added = 0;
    for (uint64_t seed = 1; added < n && seed < 100000; ++seed) {
      auto c = space->Sample(seed);
      if (!c.ok()) continue;
      store::Record r;
      r.workload_key = key_;
      r.target_key = target_.ToString();
      r.trace_json = TraceJsonOf(*c->trace);
      r.candidate_id = CandidateIdOf(r.trace_json);
      const uint64_t h = schedules::Fnv1a64(r.trace_json);
      if (h % 8 == 0) {
        r.measurement.status = measure::MeasureStatus::kCompileError;
      } else {
        r.measurement.status = measure::MeasureStatus::kOk;
        r.measurement.timings.median_ms = 0.1 + static_cast<double>(h % 10007) / 1000.0;
        r.measurement.timings.repeats_ms = {r.measurement.timings.median_ms};
      }
      r.job_id = 0;
      r.task_id = 0;
      auto id = log_->AddRecord(&r);
      if (!id.ok()) continue;
      ++added;
      // The same trace recorded again (another job) answers once.
      if (added == 1) {
        store::Record again = r;
        again.uid.clear();
        again.measurement.timings = measure::MakeTimings({99});
        ASSERT_TRUE(log_->AddRecord(&again).ok());
      }
    }
    ASSERT_EQ(added, n);
  }

  std::string dir_;
  std::unique_ptr<store::TuningLog> log_;
  schedules::Workload workload_;
  schedules::Target target_ = schedules::HostTarget();
  std::string key_;
};

TEST_F(ReplayTest, AWorkloadTheLogDoesNotHaveIsNotFoundSayingHowToRecordIt) {
  auto space = server::ReplaySpaceOfLog(log_.get(), "0123456789abcdef", target_);
  ASSERT_FALSE(space.ok());
  EXPECT_EQ(space.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(space.status().message()),
              HasSubstr("has no workload with key 0123456789abcdef"));
  EXPECT_THAT(std::string(space.status().message()),
              HasSubstr("record some with `tessel tune --db"));
}

TEST_F(ReplayTest, AWorkloadWithoutRecordsOfTheTargetIsNotFound) {
  auto space = server::ReplaySpaceOfLog(log_.get(), key_, target_);
  ASSERT_FALSE(space.ok());
  EXPECT_THAT(std::string(space.status().message()),
              HasSubstr("has no records of matmul(M=32, N=32, K=32, "));
  EXPECT_THAT(std::string(space.status().message()), HasSubstr(") on host: record some with"));
}

TEST_F(ReplayTest, RandomSearchReplaysEveryRecordedCandidateOnceWithTheRecordedAnswers) {
  Record(60);
  auto space = server::ReplaySpaceOfLog(log_.get(), key_, target_);
  ASSERT_TRUE(space.ok()) << space.status();
  EXPECT_EQ(space->pool->trace_jsons.size(), 60u);
  EXPECT_GT(space->best_ms, 0);
  ReplayOptions o;
  o.strategy = "random";
  o.seed = 3;
  o.batch_size = 7;
  auto t = RunReplay(*space, o);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->trials, 60);
  EXPECT_FALSE(t->exhausted);
  ASSERT_EQ(t->best_ms.size(), 60u);
  for (size_t i = 1; i < t->best_ms.size(); ++i) {
    if (t->best_ms[i - 1] > 0) {
      EXPECT_LE(t->best_ms[i], t->best_ms[i - 1]);
    }
  }
  // Every candidate was answered, so the last best is the log's best (not the 99 ms repeat).
  EXPECT_DOUBLE_EQ(t->best_ms.back(), space->best_ms);
  EXPECT_EQ(
      TrialsToReach(*t, space->best_ms, 1.0),
      std::find(t->best_ms.begin(), t->best_ms.end(), space->best_ms) - t->best_ms.begin() + 1);
  // Asked for more than the pool holds, the strategy runs dry.
  o.trials = 80;
  auto more = RunReplay(*space, o);
  ASSERT_TRUE(more.ok()) << more.status();
  EXPECT_EQ(more->trials, 60);
  EXPECT_TRUE(more->exhausted);
}

TEST_F(ReplayTest, AReplayStopsAtTheGoalAndIsDeterministicForASeed) {
  Record(40);
  auto space = server::ReplaySpaceOfLog(log_.get(), key_, target_);
  ASSERT_TRUE(space.ok()) << space.status();
  for (const std::string strategy : {"random", "evolutionary"}) {
    ReplayOptions o;
    o.strategy = strategy;
    o.seed = 9;
    o.batch_size = 8;
    o.stop_at_ms = space->best_ms;
    auto a = RunReplay(*space, o);
    auto b = RunReplay(*space, o);
    ASSERT_TRUE(a.ok()) << a.status();
    ASSERT_TRUE(b.ok()) << b.status();
    EXPECT_EQ(a->best_ms, b->best_ms) << strategy;
    EXPECT_DOUBLE_EQ(a->best_ms.back(), space->best_ms) << strategy;
    EXPECT_LE(a->trials, 40) << strategy;
  }
}

}  // namespace
}  // namespace tessel::search
