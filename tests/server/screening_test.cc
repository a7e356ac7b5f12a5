// Screening and the live loop's timeline (issue 21): the margin derived from measured noise
// (synthetic pairs), the screening flags' errors, and a real server on port 0 with a real host
// worker whose job screens: clearly slow candidates get the short measurement, the best of every
// task is a confirmed one, and the job's timeline is filled and adds up.

#include <cmath>
#include <limits>
#include <map>
#include <random>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "measure/timing.h"
#include "server/job_timeline.h"
#include "server/screen_margin.h"
#include "tests/cli/cli_test_util.h"
#include "tests/server/server_test_util.h"

namespace tessel::testing {
namespace {

using ::testing::HasSubstr;

TEST(ScreenMargin, IsAHighQuantileOfTheMeasuredNoiseWithinItsFloorAndCeiling) {
  server::ScreenMarginOptions o;
  server::ScreenMargin m(o);
  EXPECT_DOUBLE_EQ(m.Margin(), o.initial);  // no pairs yet
  // Screens within 4% of the confirmed medians, uniformly: the 95% quantile is about 3.8%, the
  // margin 1.5 times that.
  std::mt19937_64 rng(1);
  std::uniform_real_distribution<double> noise(-0.04, 0.04);
  for (int i = 0; i < 200; ++i) {
    const double confirmed = 0.1 + 0.01 * i;
    m.Add(confirmed * (1 + noise(rng)), confirmed);
  }
  EXPECT_EQ(m.pairs(), 200);
  EXPECT_NEAR(m.Margin(), 1.5 * 0.038, 0.004);
  // Quiet measurements: the floor.
  server::ScreenMargin quiet(o);
  for (int i = 0; i < 50; ++i) quiet.Add(1.001, 1.0);
  EXPECT_DOUBLE_EQ(quiet.Margin(), o.floor);
  // Wild ones: the ceiling.
  server::ScreenMargin wild(o);
  for (int i = 0; i < 50; ++i) wild.Add(i % 2 == 0 ? 3.0 : 1.0, 1.0);
  EXPECT_DOUBLE_EQ(wild.Margin(), o.ceiling);
  // Nonsense from a worker is ignored.
  wild.Add(std::nan(""), 1.0);
  wild.Add(-1, 1.0);
  wild.Add(1, std::numeric_limits<double>::infinity());
  EXPECT_EQ(wild.pairs(), 50);
}

TEST(ScreenMargin, FollowsTheNewestPairsAndFallsBackToThePooledOnes) {
  server::ScreenMarginOptions o;
  o.window = 64;
  server::ScreenMargin m(o);
  for (int i = 0; i < 64; ++i) m.Add(1.2, 1.0);  // 20% off: 30% margin
  EXPECT_NEAR(m.Margin(), 0.3, 1e-9);
  for (int i = 0; i < 64; ++i) m.Add(1.04, 1.0);  // the noise went down: 6%
  EXPECT_NEAR(m.Margin(), 0.06, 1e-9);
  // A task with too few pairs of its own takes the job's; without those the initial margin.
  server::ScreenMargin few(o);
  for (int i = 0; i < o.min_pairs - 1; ++i) few.Add(1.5, 1.0);
  EXPECT_NEAR(server::ScreenMargin::MarginOf(few, m), 0.06, 1e-9);
  EXPECT_DOUBLE_EQ(server::ScreenMargin::MarginOf(few, server::ScreenMargin(o)), o.initial);
  few.Add(1.5, 1.0);
  EXPECT_DOUBLE_EQ(server::ScreenMargin::MarginOf(few, m), o.ceiling);
}

TEST(ScreenOptions, ConfirmWithinTheMarginWithoutABestOrWhenAsked) {
  measure::ScreenOptions s;
  EXPECT_TRUE(measure::ShouldConfirm(s, 100));  // disabled: everything is timed in full
  s.enabled = true;
  EXPECT_TRUE(measure::ShouldConfirm(s, 100));  // no best yet
  s.best_ms = 1;
  s.margin = 0.1;
  EXPECT_TRUE(measure::ShouldConfirm(s, 0.5));
  EXPECT_TRUE(measure::ShouldConfirm(s, 1.1));
  EXPECT_FALSE(measure::ShouldConfirm(s, 1.11));
  s.confirm = true;
  EXPECT_TRUE(measure::ShouldConfirm(s, 100));
}

TEST(ScreenOptions, TheScreeningTimingIsTheFullOneCutShort) {
  measure::TimingOptions full;  // 2 warm-ups, 5 to 1000 repeats, 200 ms
  server::ScreeningOptions s;
  s.screen_ms = 4;
  const measure::TimingOptions t = server::ScreenTiming(s, full);
  EXPECT_EQ(t.warmup_runs, 1);
  EXPECT_EQ(t.min_repeats, 3);
  EXPECT_EQ(t.max_repeats, server::kScreenMaxRepeats);  // a few dozen flushed repeats at most
  EXPECT_DOUBLE_EQ(t.min_total_ms, 4);
  EXPECT_EQ(t.flush_cache, full.flush_cache);
  EXPECT_DOUBLE_EQ(t.max_wall_ms, 20);
  EXPECT_TRUE(server::CheckScreeningOptions(s, full).ok());
}

TEST(ScreeningFlags, NonsenseIsRefusedNamingTheFlagAndTheFix) {
  const std::string dir = MakeTempDir("tessel_screen_flags");
  const std::string serve = "serve --db " + dir + "/log.db --listen 127.0.0.1:0 ";
  CliResult r = RunTessel(serve + "--screen-ms -1");
  EXPECT_EQ(r.status, 1);
  EXPECT_THAT(r.output, HasSubstr("tessel serve: --screen-ms -1: give the screening budget in "
                                  "milliseconds (e.g. 5), or 0 to time every candidate in full"));
  r = RunTessel(serve + "--screen-ms 300");
  EXPECT_EQ(r.status, 1);
  EXPECT_THAT(r.output,
              HasSubstr("tessel serve: --screen-ms 300 is not below the full measurement's 200 ms "
                        "(--min-total-ms): screening must be shorter than the measurement it "
                        "saves; lower --screen-ms, or pass --screen-ms 0 to time every candidate "
                        "in full"));
  r = RunTessel(serve + "--min-total-ms 10 --screen-ms 10");
  EXPECT_EQ(r.status, 1);
  EXPECT_THAT(r.output, HasSubstr("--screen-ms 10 is not below the full measurement's 10 ms"));
  r = RunTessel(serve + "--screen-audit 1.5");
  EXPECT_EQ(r.status, 1);
  EXPECT_THAT(r.output, HasSubstr("tessel serve: --screen-audit 1.5: give the fraction of "
                                  "candidates confirmed whatever their screen, from 0 to 1"));
  r = RunTessel(serve + "--screen-min-repeats 0");
  EXPECT_EQ(r.status, 1);
  EXPECT_THAT(r.output,
              HasSubstr("tessel serve: --screen-min-repeats 0: give at least 1 screening repeat"));
  r = RunTessel("tune --target host --db " + dir + "/tune.db --screen-ms nan");
  EXPECT_EQ(r.status, 1);
  EXPECT_THAT(r.output, HasSubstr("tessel tune: --screen-ms nan: give the screening budget"));
}

// Full measurement: exactly 12 repeats; screening: exactly 3 (its budget is far below one run).
server::ServerOptions ScreeningServerOptions(const std::string& db) {
  server::ServerOptions o = TestServerOptions(db);
  o.timing.min_repeats = 12;
  o.timing.max_repeats = 12;
  o.timing.min_total_ms = 1;
  o.screening.screen_ms = 0.001;
  o.screening.min_repeats = 3;
  o.screening.audit = 0.25;  // every 4th candidate confirmed whatever its screen
  return o;
}

TEST(Screening, AJobScreensConfirmsItsBestAndFillsItsTimeline) {
  const std::string dir = MakeTempDir("tessel_screening_");
  const std::string db = dir + "/log.db";
  auto srv = server::StartServer(ScreeningServerOptions(db));
  ASSERT_TRUE(srv.ok()) << srv.status();
  auto client = Client((*srv)->address());
  auto worker = StartHostWorker((*srv)->address(), dir, "w1");
  proto::SubmitJobRequest req =
      HostJob({"matmul(M=64, N=64, K=64)", "softmax(rows=64, cols=256)"}, 16, 4);
  req.set_strategy("random");
  grpc::ClientContext ctx;
  proto::SubmitJobResponse resp;
  ASSERT_TRUE(client->SubmitJob(&ctx, req, &resp).ok());
  const int64_t job = resp.job_id();
  ASSERT_TRUE(WaitForJobState(client.get(), job, proto::JOB_STATE_DONE, absl::Seconds(120)))
      << worker->Log();
  const proto::JobInfo info = GetJob(client.get(), job);
  const std::vector<store::Record> records = RecordsOfJob(db, job);
  ASSERT_EQ(records.size(), 32u);
  std::map<std::string, const proto::TaskInfo*> task_of;
  for (const proto::TaskInfo& t : info.tasks()) task_of[t.workload_key()] = &t;
  std::map<std::string, int64_t> short_records;
  std::map<std::string, double> best_of_log;
  for (const store::Record& r : records) {
    if (!r.measurement.ok()) continue;
    // The log does not keep the kind yet (the records table's timing_kind column is another
    // change); the repeats tell them apart here.
    const size_t n = r.measurement.timings.repeats_ms.size();
    ASSERT_TRUE(n == 3 || n == 12) << n;
    if (n == 3) ++short_records[r.workload_key];
    double& best = best_of_log[r.workload_key];
    if (best == 0 || r.measurement.timings.median_ms < best) {
      best = r.measurement.timings.median_ms;
      // The fastest record of a task is a confirmed one.
      EXPECT_EQ(n, 12u) << "a screened record is the fastest of " << r.workload_key;
    }
  }
  for (const proto::TaskInfo& t : info.tasks()) {
    EXPECT_EQ(t.trials_screened(), short_records[t.workload_key()]);
    // The job's best is the log's best, and confirmed.
    EXPECT_DOUBLE_EQ(t.best_ms(), best_of_log[t.workload_key()]);
    EXPECT_GT(t.screen_margin(), 0);
    // The first candidate of a task has no best to compare with: it is confirmed, with a screen.
    EXPECT_GE(t.screen_pairs(), 1);
  }

  // The timeline: every stage of every candidate, adding up.
  std::map<std::string, proto::TimelineStage> stage;
  for (const proto::TimelineStage& s : info.timeline()) stage[s.name()] = s;
  int64_t ok = 0;
  for (const proto::TaskInfo& t : info.tasks()) ok += t.trials_ok();
  for (const char* name : {"sample", "server queue", "in flight", "  worker queue", "  device",
                           "  transit", "  verify", "  time", "store", "learn", "total"}) {
    ASSERT_TRUE(stage.count(name)) << name;
    // Every candidate has every stage, but a failure may have no verification or timing.
    const bool ok_only = std::string(name) == "  verify" || std::string(name) == "  time";
    EXPECT_LE(stage[name].count(), 32) << name;
    EXPECT_GE(stage[name].count(), ok_only ? ok : 32) << name;
    EXPECT_GE(stage[name].sum_ms(), 0) << name;
    EXPECT_LE(stage[name].median_ms(), stage[name].sum_ms()) << name;
  }
  EXPECT_GT(stage["  time"].sum_ms(), 0);
  EXPECT_GT(stage["  device"].sum_ms(), 0);
  const double eps = 1;  // ms, rounding
  EXPECT_GE(
      stage["  device"].sum_ms() + eps,
      stage["  verify"].sum_ms() + stage["  time"].sum_ms() + stage["  compile wait"].sum_ms());
  EXPECT_GE(stage["in flight"].sum_ms() + eps,
            stage["  worker queue"].sum_ms() + stage["  device"].sum_ms());
  EXPECT_GE(stage["total"].sum_ms() + eps,
            stage["sample"].sum_ms() + stage["server queue"].sum_ms() +
                stage["in flight"].sum_ms() + stage["store"].sum_ms() + stage["learn"].sum_ms());
  (*srv)->Shutdown();
}

TEST(Screening, StatusShowsTheTimeline) {
  const std::string dir = MakeTempDir("tessel_screening_cli_");
  std::string address;
  auto serve = StartServe(dir + "/log.db", "127.0.0.1:0", {}, dir + "/serve.log", &address);
  ASSERT_FALSE(address.empty()) << serve->Log();
  auto worker = StartHostWorker(address, dir, "w1");
  CliResult r = RunTessel("submit --server " + address +
                          " -w 'matmul(M=32, N=32, K=32)' --target host --trials 4 --wait");
  ASSERT_EQ(r.status, 0) << r.output;
  r = RunTessel("status 1 --timeline --server " + address);
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("timeline of job 1: 4 candidates"));
  EXPECT_THAT(r.output, HasSubstr("server queue"));
  EXPECT_THAT(r.output, HasSubstr("  verify"));
  EXPECT_THAT(r.output, HasSubstr("total"));
}

}  // namespace
}  // namespace tessel::testing
