// What the tuning log accepts (store/record_check.h), and a log that already holds poisoned rows
// (written straight into the file with SQL, as a log of an older Tessel or a hand edit may):
// every reader skips them with one warning each, and BadRecords / QuarantineRecords find them
// and move them aside without losing them.

#include "store/record_check.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <sstream>

#include "schedules/space/candidate.h"
#include "schedules/space/space_generator.h"
#include "schedules/workload/builtins.h"
#include "schedules/workload/key.h"
#include "store/tuning_log.h"
#include "tests/store/store_test_util.h"
#include "tests/test_util.h"

namespace tessel::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr double kInf = std::numeric_limits<double>::infinity();

measure::Measurement Ok(std::vector<double> repeats) {
  measure::Measurement m;
  m.timings = measure::MakeTimings(std::move(repeats));
  return m;
}

std::string Problem(const measure::Measurement& m) {
  return std::string(store::CheckMeasurement(m).message());
}

TEST(RecordCheck, AGoodMeasurementPasses) {
  EXPECT_TRUE(store::CheckMeasurement(Ok({1.0, 2.0, 3.0})).ok());
  measure::Measurement failed;
  failed.status = measure::MeasureStatus::kCompileError;
  failed.error = "no";
  EXPECT_TRUE(store::CheckMeasurement(failed).ok());
}

TEST(RecordCheck, EachBadMeasurementIsRefusedSayingWhy) {
  EXPECT_EQ(Problem(Ok({})), "an ok result has no timed repeat; it needs at least one");
  measure::Measurement inf = Ok({1.0});
  inf.timings.repeats_ms = {kInf};
  inf.timings.median_ms = kInf;
  EXPECT_EQ(Problem(inf), "repeat 0 is inf ms; a time must be finite and positive");
  EXPECT_EQ(Problem(Ok({1.0, -5.0})), "repeat 1 is -5 ms; a time must be finite and positive");
  EXPECT_EQ(Problem(Ok({1.0, std::nan("")})),
            "repeat 1 is nan ms; a time must be finite and positive");
  measure::Measurement negative_median = Ok({1.0});
  negative_median.timings.median_ms = -5;
  EXPECT_EQ(Problem(negative_median),
            "median_ms is -5; the median of an ok result must be finite and positive");
  measure::Measurement outside = Ok({1.0, 2.0});
  outside.timings.median_ms = 0.0001;
  EXPECT_EQ(Problem(outside), "median_ms 0.0001 lies outside its repeats (1 to 2 ms)");
  measure::Measurement timed_failure = Ok({1.0});
  timed_failure.status = measure::MeasureStatus::kVerifyFailed;
  EXPECT_EQ(Problem(timed_failure),
            "a verify_failed result carries timings (1 repeats, median_ms 1); only an ok result "
            "is timed");
  measure::Measurement compile = Ok({1.0});
  compile.compile_ms = -1;
  EXPECT_EQ(Problem(compile),
            "compile_ms -1 and verify_ms 0: times must be finite and not negative");
  measure::Measurement resources = Ok({1.0});
  resources.kernels = {{"k", -3, 0, 0, 0}};
  EXPECT_EQ(Problem(resources),
            "kernel 'k' has negative resources (registers -3, shared bytes 0 + 0, local bytes 0)");
}

TEST(RecordCheck, EachBadFigureIsRefusedSayingWhy) {
  measure::Measurement good = Ok({1.0, 2.0});
  good.timings.kernel_repeats_ms = {0.9, 1.9};
  good.timings.kernel_median_ms = 1.4;
  good.timings.counters = measure::HardwareCounters{1e9, 0, 50};
  good.timings.device_state = {1980, 2619, 45};
  good.timings.kind = measure::TimingKind::kScreened;
  EXPECT_TRUE(store::CheckMeasurement(good).ok());

  measure::Measurement kernel = good;
  kernel.timings.kernel_repeats_ms[1] = kInf;
  EXPECT_EQ(Problem(kernel),
            "kernel repeat 1 is inf ms; a CUPTI kernel time must be finite and not negative");
  kernel = good;
  kernel.timings.kernel_median_ms = -1;
  EXPECT_EQ(Problem(kernel),
            "kernel_median_ms is -1; the CUPTI kernel median must be finite and not negative");
  measure::Measurement counters = good;
  counters.timings.counters->dram_write_bytes = std::nan("");
  EXPECT_EQ(Problem(counters),
            "hardware counters (DRAM bytes read 1e+09, written nan, achieved occupancy 50%) must "
            "be finite and not negative");
  measure::Measurement state = good;
  state.timings.device_state.temperature_c = -3;
  EXPECT_EQ(Problem(state),
            "device state (SM clock 1980 MHz, memory clock 2619 MHz, temperature -3 C) must not be "
            "negative; 0 means unknown");
  measure::Measurement kind = good;
  kind.timings.kind = static_cast<measure::TimingKind>(5);
  EXPECT_EQ(Problem(kind), "timing kind 5 is neither confirmed (1) nor screened (2)");
  measure::Measurement failed;
  failed.status = measure::MeasureStatus::kRuntimeError;
  failed.timings.kernel_repeats_ms = {0.5};
  failed.timings.kernel_median_ms = 0.5;
  EXPECT_EQ(Problem(failed),
            "a runtime_error result carries timings (0 repeats, median_ms 0, 1 kernel repeats, "
            "kernel_median_ms 0.5); only an ok result is timed");
}

TEST(RecordCheck, ATraceMustReplayOnItsWorkloadForAKnownTarget) {
  auto w = schedules::ParseWorkloadSpec("softmax(rows=4, cols=32)");
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_TRUE(store::CheckReplays(*w, "host", "null").ok());
  EXPECT_EQ(store::CheckReplays(*w, "cuda -arch=sm_75", "null").message(),
            "target 'cuda -arch=sm_75' is not one this build knows (host, cuda -arch=sm_80, cuda "
            "-arch=sm_90, cuda -arch=sm_90a)");
  EXPECT_THAT(
      store::CheckReplays(*w, "host", "{\"version\": 1, \"insts\": [{\"kind\": \"x\"}]}").message(),
      HasSubstr("its trace cannot be read: "));
  // A trace of another workload.
  auto other = schedules::ParseWorkloadSpec("matmul(M=32, N=32, K=32)");
  ASSERT_TRUE(other.ok());
  auto space = schedules::SpaceGenerator::Create(*other, schedules::HostTarget());
  ASSERT_TRUE(space.ok());
  std::string trace;
  for (uint64_t seed = 1; trace.empty() && seed < 100; ++seed) {
    auto c = space->Sample(seed);
    if (c.ok() && c->trace) trace = c->trace->ToJson().dump();
  }
  ASSERT_FALSE(trace.empty());
  EXPECT_TRUE(store::CheckReplays(*other, "host", trace).ok());
  EXPECT_THAT(store::CheckReplays(*w, "host", trace).message(),
              HasSubstr("its trace does not replay on its workload for host: "));
}

TEST(RecordCheck, AddRecordRefusesABadMeasurementAndStoresNothing) {
  auto log = store::OpenTuningLog(MakeTempDir("tessel_check") + "/log.db");
  ASSERT_TRUE(log.ok()) << log.status();
  store::Record r = MakeTestRecord(1);
  r.measurement.timings.repeats_ms = {kInf};
  r.measurement.timings.median_ms = kInf;
  auto id = (*log)->AddRecord(&r);
  EXPECT_EQ(id.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(id.status().message(), "repeat 0 is inf ms; a time must be finite and positive");
  std::vector<store::Record> batch = {MakeTestRecord(2), r};
  EXPECT_EQ((*log)->AddRecords(&batch).message(),
            "repeat 0 is inf ms; a time must be finite and positive");
  EXPECT_EQ(RawQuery((*log)->path(), "SELECT count(*) FROM records"), "0");
}

// A log with good records of workload "w" on host and three poisoned rows written with SQL.
class PoisonedLog : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = MakeTempDir("tessel_poisoned") + "/log.db";
    {
      auto log = store::OpenTuningLog(path_);
      ASSERT_TRUE(log.ok()) << log.status();
      std::vector<store::Record> good = {MakeTestRecord(1, "w"), MakeTestRecord(2, "w"),
                                         MakeTestRecord(3, "w")};
      ASSERT_TRUE((*log)->AddRecords(&good).ok());
    }
    // What issue 20 saw: median inf stored as ok, its repeats exported as [null]; a negative
    // median that sorts first; a status no reader knows.
    ASSERT_EQ(RawExec(path_,
                      "INSERT INTO records (uid, workload_key, target_key, candidate_id, trace, "
                      "status, repeats_ms, median_ms, unix_ms) VALUES "
                      "('inf', 'w', 'host', 101, 'null', 'ok', '[null]', 9e999, 1), "
                      "('negative', 'w', 'host', 102, 'null', 'ok', '[-5.0]', -5.0, 2), "
                      "('status', 'w', 'host', 103, 'null', 'fast', '[]', 0, 3)"),
              "");
    store::TuningLogOptions o;
    o.on_bad_row = [this](const std::string& line) { warnings_.push_back(line); };
    auto log = store::OpenTuningLog(path_, o);
    ASSERT_TRUE(log.ok()) << log.status();
    log_ = std::move(*log);
  }

  std::string path_;
  std::vector<std::string> warnings_;
  std::unique_ptr<store::TuningLog> log_;
};

TEST_F(PoisonedLog, BestAndTopKSkipThePoisonedRowsAndWarnOnce) {
  auto best = log_->Best("w", "host");
  ASSERT_TRUE(best.ok()) << best.status();
  ASSERT_TRUE(best->has_value());
  EXPECT_EQ((*best)->candidate_id, 1u);
  EXPECT_GT((*best)->measurement.timings.median_ms, 0);
  auto top = log_->TopK("w", "host", 2);
  ASSERT_TRUE(top.ok()) << top.status();
  ASSERT_EQ(top->size(), 2u);
  EXPECT_EQ((*top)[1].candidate_id, 2u);
  ASSERT_EQ(warnings_.size(), 1u);  // the negative median sorts first; inf comes after these
  EXPECT_EQ(warnings_[0], "skipping record 5 (uid negative) of " + path_ +
                              ": repeat 0 is -5 ms; a time must be finite and positive" +
                              "; `tessel check --db " + path_ +
                              " --quarantine` moves such records aside");
}

TEST_F(PoisonedLog, EveryReaderSkipsThemAndEachIsReportedOnce) {
  std::vector<uint64_t> seen;
  ASSERT_TRUE(log_->ForEachRecordOfTarget("host",
                                          [&](const store::Record& r) {
                                            seen.push_back(r.candidate_id);
                                            return true;
                                          })
                  .ok());
  EXPECT_THAT(seen, ElementsAre(1u, 2u, 3u));
  std::ostringstream out;
  ASSERT_TRUE(log_->ExportJsonl(out).ok());
  const std::string exported = out.str();
  EXPECT_EQ(std::count(exported.begin(), exported.end(), '\n'), 3);
  EXPECT_EQ(exported.find("[null]"), std::string::npos);
  ASSERT_EQ(warnings_.size(), 3u);
  EXPECT_THAT(warnings_[0], HasSubstr("skipping record 4 (uid inf) of " + path_ +
                                      ": malformed repeats_ms: [null]"));
  EXPECT_THAT(warnings_[1], HasSubstr("record 5 (uid negative)"));
  EXPECT_THAT(warnings_[2],
              HasSubstr("skipping record 6 (uid status) of " + path_ +
                        ": unknown status in the tuning log: fast; `tessel check --db"));
  auto counts = log_->TopK("w", "host", 10);
  ASSERT_TRUE(counts.ok());
  EXPECT_EQ(counts->size(), 3u);
  EXPECT_EQ(warnings_.size(), 3u);  // not again
}

TEST_F(PoisonedLog, CountOkCountsOnlyTheRowsReadersRead) {
  // Two of the poisoned rows say ok: counting them would put "the best of 5 ok records" over a
  // best chosen among 3.
  auto n = log_->CountOk("w", "host");
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_EQ(*n, 3);
  ASSERT_EQ(warnings_.size(), 2u);
  EXPECT_THAT(warnings_[0], HasSubstr("skipping record 4 (uid inf)"));
  EXPECT_THAT(warnings_[1], HasSubstr("skipping record 5 (uid negative)"));
}

TEST_F(PoisonedLog, CountsOfATaskLeaveItsBadRowsOutOfOkAndBest) {
  // The good rows and two bad ones of a task: every row is a trial; ok and the best are those
  // the readers accept.
  ASSERT_EQ(RawExec(path_,
                    "INSERT INTO jobs (id, name, target_kind, target_arch, target_key, strategy, "
                    "priority, trials_budget, time_budget_s, seed, batch_size, state, "
                    "created_unix_ms) VALUES (1, 'j', 'host', '', 'host', 'random', 0, 10, 0, 1, "
                    "1, 'running', 1); INSERT INTO tasks (id, job_id, workload_key, "
                    "trials_budget, state) VALUES (1, 1, 'w', 10, 'running'); UPDATE records SET "
                    "task_id = 1, job_id = 1 WHERE candidate_id IN (1, 101, 102, 103)"),
            "");
  auto c = log_->CountsOf(1);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->trials, 4);
  EXPECT_EQ(c->ok, 1);
  EXPECT_GT(c->best_ms, 0);
}

TEST_F(PoisonedLog, ForEachRecordPagesPastARunOfBadRows) {
  // More bad rows than a page (512) between good ones: the reader must not stop at them.
  std::string sql =
      "INSERT INTO records (uid, workload_key, target_key, trace, status, "
      "repeats_ms, median_ms, unix_ms) VALUES ";
  for (int i = 0; i < 600; ++i) {
    sql += absl::StrCat(i ? ", " : "", "('run", i, "', 'w', 'host', 'null', 'ok', '[0]', 0, 1)");
  }
  ASSERT_EQ(RawExec(path_, sql), "");
  std::vector<store::Record> late = {MakeTestRecord(9, "w")};
  ASSERT_TRUE(log_->AddRecords(&late).ok());
  int64_t n = 0;
  ASSERT_TRUE(log_->ForEachRecordOfTarget("host",
                                          [&](const store::Record&) {
                                            ++n;
                                            return true;
                                          })
                  .ok());
  EXPECT_EQ(n, 4);
  EXPECT_EQ(warnings_.size(), 603u);
}

TEST_F(PoisonedLog, BadRecordsListsThemAndQuarantineMovesThemAsideLosingNothing) {
  auto bad = log_->BadRecords();
  ASSERT_TRUE(bad.ok()) << bad.status();
  ASSERT_EQ(bad->size(), 3u);
  EXPECT_EQ((*bad)[0].id, 4);
  EXPECT_EQ((*bad)[0].uid, "inf");
  EXPECT_EQ((*bad)[0].workload_key, "w");
  EXPECT_EQ((*bad)[0].target_key, "host");
  EXPECT_EQ((*bad)[0].problem, "malformed repeats_ms: [null]");
  EXPECT_EQ((*bad)[1].problem, "repeat 0 is -5 ms; a time must be finite and positive");
  EXPECT_EQ((*bad)[2].problem, "unknown status in the tuning log: fast");
  auto moved = log_->QuarantineRecords(*bad);
  ASSERT_TRUE(moved.ok()) << moved.status();
  EXPECT_EQ(*moved, 3);
  auto none = log_->BadRecords();
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
  EXPECT_EQ(RawQuery(path_, "SELECT count(*) FROM records"), "3");
  EXPECT_EQ(RawQuery(path_,
                     "SELECT uid || ' ' || repeats_ms || ' ' || median_ms || ' ' || reason FROM "
                     "quarantined_records ORDER BY id",
                     0, true),
            "inf [null] Inf malformed repeats_ms: [null]\n"
            "negative [-5.0] -5.0 repeat 0 is -5 ms; a time must be finite and positive\n"
            "status [] 0.0 unknown status in the tuning log: fast");
  // Again: nothing left to move, the table is kept.
  moved = log_->QuarantineRecords(*bad);
  ASSERT_TRUE(moved.ok()) << moved.status();
  EXPECT_EQ(*moved, 0);
  EXPECT_EQ(RawQuery(path_, "SELECT count(*) FROM quarantined_records"), "3");
}

TEST_F(PoisonedLog, AHugeBadFieldIsQuotedShort) {
  std::string huge = "[";
  for (int i = 0; i < 50000; ++i) huge += "1,";
  huge += "null]";
  ASSERT_EQ(RawExec(path_, "UPDATE records SET repeats_ms = '" + huge + "' WHERE uid = 'inf'"), "");
  auto bad = log_->BadRecords();
  ASSERT_TRUE(bad.ok());
  ASSERT_FALSE(bad->empty());
  EXPECT_EQ((*bad)[0].problem,
            "malformed repeats_ms: " + huge.substr(0, 77) + "... (100006 bytes)");
}

}  // namespace
}  // namespace tessel::testing
