// The SQLite tuning log on real files in a temp folder: schema and pragmas, workloads, jobs,
// tasks, records and their queries, cost models, concurrency, and every error of Open.

#include "store/tuning_log.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "store/sqlite_tuning_log.h"
#include "tests/store/store_test_util.h"
#include "tests/test_util.h"

namespace tessel::testing {
namespace {

using store::JobRow;
using store::JobState;
using store::OpenTuningLog;
using store::Record;
using store::TaskRow;
using store::TuningLog;
using store::WorkloadRow;
using ::testing::HasSubstr;
using ::testing::MatchesRegex;
using ::testing::Not;

std::unique_ptr<TuningLog> MustOpen(const std::string& path, bool read_only = false) {
  store::TuningLogOptions o;
  o.read_only = read_only;
  auto log = OpenTuningLog(path, o);
  EXPECT_TRUE(log.ok()) << log.status();
  return log.ok() ? std::move(*log) : nullptr;
}

std::string NewLogPath() { return MakeTempDir("tessel_store") + "/log.db"; }

// This build's schema version, as PRAGMA user_version prints it (the tests do not hard-code it:
// migrations are appended by more than one change at a time).
std::string Latest() { return std::to_string(store::LatestSchemaVersion()); }
std::string Next() { return std::to_string(store::LatestSchemaVersion() + 1); }

TEST(TuningLog, NewFileHasSchemaApplicationIdAndWal) {
  const std::string path = NewLogPath();
  {
    auto log = MustOpen(path);
    ASSERT_NE(log, nullptr);
    EXPECT_EQ(log->path(), path);
  }
  EXPECT_EQ(RawQuery(path, "PRAGMA application_id"),
            std::to_string(store::kTuningLogApplicationId));
  EXPECT_EQ(RawQuery(path, "PRAGMA user_version"), Latest());
  EXPECT_EQ(RawQuery(path, "PRAGMA journal_mode"), "wal");
  EXPECT_EQ(RawQuery(path, "PRAGMA page_size"), "16384");
  EXPECT_EQ(RawQuery(path,
                     "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name IN "
                     "('workloads', 'jobs', 'tasks', 'records', 'cost_models')"),
            "5");
  EXPECT_EQ(RawQuery(path,
                     "SELECT count(*) FROM sqlite_master WHERE type = 'index' AND name IN "
                     "('records_best', 'records_task_candidate', 'records_target')"),
            "3");
  // Reopening a current log changes nothing.
  auto again = MustOpen(path);
  EXPECT_NE(again, nullptr);
}

TEST(TuningLog, TopKUsesTheBestIndex) {
  const std::string path = NewLogPath();
  MustOpen(path);
  const std::string plan = RawQuery(
      path,
      "EXPLAIN QUERY PLAN SELECT * FROM records WHERE workload_key = 'a' AND target_key = 'b' "
      "AND status = 'ok' AND timing_kind = 1 ORDER BY latency_ms, id LIMIT 5",
      /*col=*/3, /*all_rows=*/true);
  EXPECT_THAT(plan, HasSubstr("INDEX records_best (workload_key=? AND target_key=? AND status=?)"));
  EXPECT_THAT(plan, Not(HasSubstr("TEMP B-TREE")));  // no sort: the index gives the order
  const std::string device_plan = RawQuery(
      path,
      "EXPLAIN QUERY PLAN SELECT * FROM records WHERE workload_key = 'a' AND target_key = 'b' "
      "AND device_name = 'd' AND status = 'ok' AND timing_kind = 1 ORDER BY latency_ms, id LIMIT 1",
      3, true);
  EXPECT_THAT(device_plan, HasSubstr("INDEX records_device"));
  EXPECT_THAT(device_plan, Not(HasSubstr("TEMP B-TREE")));
  const std::string per_task = RawQuery(
      path, "EXPLAIN QUERY PLAN SELECT id FROM records WHERE task_id = 3 ORDER BY id", 3, true);
  EXPECT_THAT(per_task, HasSubstr("records_task_candidate"));
}

TEST(TuningLog, WorkloadsAreIdempotentByKey) {
  auto log = MustOpen(NewLogPath());
  ASSERT_TRUE(log->PutWorkload({"k1", "canon", "matmul", "matmul(M=1)"}).ok());
  ASSERT_TRUE(log->PutWorkload({"k1", "canon", "matmul", "second spec"}).ok());
  auto w = log->GetWorkload("k1");
  ASSERT_TRUE(w.ok() && w->has_value());
  EXPECT_EQ((*w)->spec, "matmul(M=1)");
  EXPECT_EQ((*w)->canonical, "canon");
  auto none = log->GetWorkload("nope");
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
}

JobRow TestJob(const std::string& name) {
  JobRow j;
  j.name = name;
  j.target_kind = "cuda";
  j.target_arch = "sm_90";
  j.target_key = "cuda -arch=sm_90";
  j.strategy = "random";
  j.priority = 3;
  j.trials_budget = 100;
  j.time_budget_s = 2.5;
  j.seed = 0xfedcba9876543210ull;  // above INT64_MAX: stored bit for bit
  j.batch_size = 16;
  return j;
}

TEST(TuningLog, JobsAndTasks) {
  auto log = MustOpen(NewLogPath());
  ASSERT_TRUE(log->PutWorkload({"k1", "c1", "matmul", "s1"}).ok());
  ASSERT_TRUE(log->PutWorkload({"k2", "c2", "softmax", "s2"}).ok());
  JobRow j1 = TestJob("first");
  std::vector<TaskRow> tasks(2);
  tasks[0].workload_key = "k1";
  tasks[0].trials_budget = 60;
  tasks[1].workload_key = "k2";
  tasks[1].trials_budget = 40;
  ASSERT_TRUE(log->CreateJob(&j1, &tasks).ok());
  EXPECT_GT(j1.id, 0);
  EXPECT_GT(j1.created_unix_ms, 0);
  EXPECT_GT(tasks[0].id, 0);
  EXPECT_NE(tasks[0].id, tasks[1].id);
  EXPECT_EQ(tasks[1].job_id, j1.id);

  auto got = log->GetJob(j1.id);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->name, "first");
  EXPECT_EQ(got->target_key, "cuda -arch=sm_90");
  EXPECT_EQ(got->seed, 0xfedcba9876543210ull);
  EXPECT_EQ(got->time_budget_s, 2.5);
  EXPECT_EQ(got->state, JobState::kQueued);
  EXPECT_EQ(got->finished_unix_ms, 0);

  JobRow j2 = TestJob("second");
  std::vector<TaskRow> none;
  ASSERT_TRUE(log->CreateJob(&j2, &none).ok());
  ASSERT_TRUE(log->SetJobState(j1.id, JobState::kFailed, "worker lost").ok());
  got = log->GetJob(j1.id);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->state, JobState::kFailed);
  EXPECT_EQ(got->error, "worker lost");
  EXPECT_GT(got->finished_unix_ms, 0);

  auto all = log->ListJobs(false);
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 2u);
  EXPECT_EQ((*all)[0].id, j2.id);  // newest first
  auto unfinished = log->ListJobs(true);
  ASSERT_TRUE(unfinished.ok());
  ASSERT_EQ(unfinished->size(), 1u);
  EXPECT_EQ((*unfinished)[0].id, j2.id);

  ASSERT_TRUE(log->SetTaskState(tasks[1].id, JobState::kDone).ok());
  auto t = log->TasksOf(j1.id);
  ASSERT_TRUE(t.ok());
  ASSERT_EQ(t->size(), 2u);
  EXPECT_EQ((*t)[0].workload_key, "k1");
  EXPECT_EQ((*t)[0].trials_budget, 60);
  EXPECT_EQ((*t)[1].state, JobState::kDone);
}

TEST(TuningLog, MissingJobOrTaskIsNotFound) {
  auto log = MustOpen(NewLogPath());
  auto j = log->GetJob(42);
  EXPECT_EQ(j.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(j.status().message(), HasSubstr("no job 42 in"));
  absl::Status s = log->SetJobState(42, JobState::kDone);
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(s.message(), HasSubstr("no job 42"));
  s = log->SetTaskState(7, JobState::kDone);
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(s.message(), HasSubstr("no task 7"));
}

TEST(TuningLog, TaskOfAnUnknownWorkloadIsRefusedAndNothingStored) {
  auto log = MustOpen(NewLogPath());
  JobRow j = TestJob("j");
  std::vector<TaskRow> tasks(1);
  tasks[0].workload_key = "missing";
  absl::Status s = log->CreateJob(&j, &tasks);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("a task names workload missing, which is not in the tuning "
                                     "log; PutWorkload it first"));
  auto jobs = log->ListJobs(false);
  ASSERT_TRUE(jobs.ok());
  EXPECT_TRUE(jobs->empty());  // the job's row was rolled back with it
}

TEST(TuningLog, AddRecordAssignsIdUidAndTimeAndReadsBackWhole) {
  auto log = MustOpen(NewLogPath());
  ASSERT_TRUE(log->PutWorkload({"k1", "c1", "matmul", "s1"}).ok());
  JobRow j = TestJob("j");
  std::vector<TaskRow> tasks(1);
  tasks[0].workload_key = "k1";
  ASSERT_TRUE(log->CreateJob(&j, &tasks).ok());

  Record r = MakeTestRecord(3, "k1", "cuda -arch=sm_90");
  r.job_id = j.id;
  r.task_id = tasks[0].id;
  r.unix_ms = 0;
  auto id = log->AddRecord(&r);
  ASSERT_TRUE(id.ok()) << id.status();
  EXPECT_EQ(*id, r.id);
  EXPECT_THAT(r.uid, MatchesRegex("[0-9a-f]{32}"));
  EXPECT_GT(r.unix_ms, 1600000000000);

  Record r2 = MakeTestRecord(4, "k1", "cuda -arch=sm_90");
  ASSERT_TRUE(log->AddRecord(&r2).ok());
  EXPECT_NE(r2.uid, r.uid);

  auto rs = log->RecordsOf(tasks[0].id);
  ASSERT_TRUE(rs.ok()) << rs.status();
  ASSERT_EQ(rs->size(), 1u);
  const Record& got = (*rs)[0];
  EXPECT_EQ(got.id, r.id);
  EXPECT_EQ(got.uid, r.uid);
  EXPECT_EQ(got.job_id, j.id);
  EXPECT_EQ(got.task_id, tasks[0].id);
  EXPECT_EQ(got.workload_key, "k1");
  EXPECT_EQ(got.target_key, "cuda -arch=sm_90");
  EXPECT_EQ(got.unix_ms, r.unix_ms);
  Record want = got;
  want.unix_ms = MakeTestRecord(3).unix_ms;
  EXPECT_EQ(DiffTestRecord(want, 3), "");
}

TEST(TuningLog, CandidateOfATaskIsStoredOnce) {
  auto log = MustOpen(NewLogPath());
  ASSERT_TRUE(log->PutWorkload({"k1", "c1", "matmul", "s1"}).ok());
  JobRow j = TestJob("j");
  std::vector<TaskRow> tasks(1);
  tasks[0].workload_key = "k1";
  ASSERT_TRUE(log->CreateJob(&j, &tasks).ok());
  Record a = MakeTestRecord(1, "k1");
  a.job_id = j.id;
  a.task_id = tasks[0].id;
  Record b = a;
  ASSERT_TRUE(log->AddRecord(&a).ok());
  auto dup = log->AddRecord(&b);
  EXPECT_EQ(dup.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(dup.status().message(),
              HasSubstr("candidate 1 of task " + std::to_string(tasks[0].id) +
                        " is already in the tuning log"));
  // Task 0 (not from a job) is never a duplicate.
  Record c = MakeTestRecord(1, "k1"), d = MakeTestRecord(1, "k1");
  EXPECT_TRUE(log->AddRecord(&c).ok());
  EXPECT_TRUE(log->AddRecord(&d).ok());
  // The same uid is.
  Record e = MakeTestRecord(2, "k1");
  e.uid = c.uid;
  auto same_uid = log->AddRecord(&e);
  EXPECT_EQ(same_uid.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(same_uid.status().message(),
              HasSubstr("a record with uid " + c.uid + " is already in the tuning log"));
  auto counts = log->CountsOf(tasks[0].id);
  ASSERT_TRUE(counts.ok());
  EXPECT_EQ(counts->trials, 1);
}

TEST(TuningLog, RecordOfAnUnknownTaskIsRefused) {
  auto log = MustOpen(NewLogPath());
  Record r = MakeTestRecord(1);
  r.job_id = 5;
  r.task_id = 9;
  auto id = log->AddRecord(&r);
  EXPECT_EQ(id.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(id.status().message(),
              HasSubstr("names job 5 and task 9, which are not in the tuning log"));
}

TEST(TuningLog, RecordWithBadTraceIsRefused) {
  auto log = MustOpen(NewLogPath());
  Record r = MakeTestRecord(1);
  r.trace_json = "{not json";
  auto id = log->AddRecord(&r);
  EXPECT_EQ(id.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(id.status().message(), HasSubstr("trace_json must be a trace's JSON"));
}

TEST(TuningLog, AddRecordsIsAllOrNone) {
  auto log = MustOpen(NewLogPath());
  std::vector<Record> batch;
  for (int i = 0; i < 10; ++i) batch.push_back(MakeTestRecord(i));
  batch[7].task_id = 12345;  // no such task: the whole batch fails
  batch[7].job_id = 1;
  absl::Status s = log->AddRecords(&batch);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  for (const Record& r : batch) EXPECT_EQ(r.id, 0);
  auto n = log->CountOk("00000000000000aa", "host");
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 0);

  batch[7].task_id = 0;
  batch[7].job_id = 0;
  Record first = MakeTestRecord(100);
  ASSERT_TRUE(log->AddRecord(&first).ok());
  batch[2].uid = first.uid;  // a duplicate is skipped, the others stored
  ASSERT_TRUE(log->AddRecords(&batch).ok());
  EXPECT_EQ(batch[2].id, 0);
  std::set<int64_t> ids;
  for (int i = 0; i < 10; ++i) {
    if (i != 2) {
      EXPECT_GT(batch[i].id, 0);
      ids.insert(batch[i].id);
    }
  }
  EXPECT_EQ(ids.size(), 9u);
}

TEST(TuningLog, TopKBestAndCountOk) {
  auto log = MustOpen(NewLogPath());
  std::vector<Record> batch;
  const double medians[] = {5.0, 2.0, 9.0, 1.5, 3.0, 2.0};
  for (int i = 0; i < 6; ++i) {
    Record r = MakeTestRecord(i, "w", "cuda -arch=sm_90");
    r.measurement.status = measure::MeasureStatus::kOk;
    r.measurement.timings = measure::MakeTimings({medians[i]});
    batch.push_back(r);
  }
  Record failed = MakeTestRecord(10, "w", "cuda -arch=sm_90");
  failed.measurement.status = measure::MeasureStatus::kTimeout;
  failed.measurement.timings = {};
  batch.push_back(failed);
  Record other_target = MakeTestRecord(11, "w", "cuda -arch=sm_80");
  other_target.measurement.timings = measure::MakeTimings({0.1});
  batch.push_back(other_target);
  Record other_workload = MakeTestRecord(12, "v", "cuda -arch=sm_90");
  other_workload.measurement.timings = measure::MakeTimings({0.1});
  batch.push_back(other_workload);
  ASSERT_TRUE(log->AddRecords(&batch).ok());

  auto top = log->TopK("w", "cuda -arch=sm_90", 3);
  ASSERT_TRUE(top.ok()) << top.status();
  ASSERT_EQ(top->size(), 3u);
  EXPECT_EQ((*top)[0].measurement.timings.median_ms, 1.5);
  EXPECT_EQ((*top)[1].measurement.timings.median_ms, 2.0);
  EXPECT_EQ((*top)[2].measurement.timings.median_ms, 2.0);
  EXPECT_LT((*top)[1].id, (*top)[2].id);  // ties: first measured first
  auto best = log->Best("w", "cuda -arch=sm_90");
  ASSERT_TRUE(best.ok() && best->has_value());
  EXPECT_EQ((*best)->candidate_id, 3u);
  auto none = log->Best("w", "host");
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
  auto n = log->CountOk("w", "cuda -arch=sm_90");
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 6);
  auto all = log->TopK("w", "cuda -arch=sm_90", 100);
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->size(), 6u);
}

// A record ranks by its latency (measure::Timings::latency_ms): the CUPTI kernel median where it
// has one, else the event median. Best, top-k, a device's best, a task's counts and the artifact a
// device keeps all follow it.
TEST(TuningLog, RecordsRankByTheKernelMedianWhereTheyHaveOne) {
  const std::string path = NewLogPath();
  auto log = MustOpen(path);
  ASSERT_NE(log, nullptr);
  // (event median, kernel median): ranks by 0.5, 0.7, 0.9 — not by the event medians.
  const double figures[][2] = {{1.0, 0.5}, {0.9, 0.0}, {0.8, 0.7}};
  std::vector<Record> batch;
  for (int i = 0; i < 3; ++i) {
    Record r = MakeTestRecord(i, "w", "cuda -arch=sm_90");
    r.measurement.timings = measure::MakeTimings({figures[i][0]});
    if (figures[i][1] > 0) {
      r.measurement.timings.kernel_repeats_ms = {figures[i][1]};
      r.measurement.timings.kernel_median_ms = figures[i][1];
    }
    batch.push_back(r);
  }
  ASSERT_TRUE(log->AddRecords(&batch).ok());
  auto top = log->TopK("w", "cuda -arch=sm_90", 3);
  ASSERT_TRUE(top.ok()) << top.status();
  ASSERT_EQ(top->size(), 3u);
  EXPECT_EQ((*top)[0].candidate_id, 0u);
  EXPECT_EQ((*top)[1].candidate_id, 2u);
  EXPECT_EQ((*top)[2].candidate_id, 1u);
  EXPECT_EQ((*top)[0].measurement.latency_ms(), 0.5);
  EXPECT_EQ((*top)[2].measurement.latency_ms(), 0.9);
  auto device_top = log->TopKOnDevice("w", "cuda -arch=sm_90", batch[0].measurement.device_name, 1);
  ASSERT_TRUE(device_top.ok()) << device_top.status();
  ASSERT_EQ(device_top->size(), 1u);
  EXPECT_EQ((*device_top)[0].candidate_id, 0u);
  EXPECT_EQ(RawQuery(path,
                     "SELECT group_concat(printf('%.1f', latency_ms), ' ') FROM (SELECT "
                     "latency_ms FROM records ORDER BY id)"),
            "0.5 0.9 0.7");
}

TEST(TuningLog, CountsOfATask) {
  auto log = MustOpen(NewLogPath());
  ASSERT_TRUE(log->PutWorkload({"k1", "c1", "matmul", "s1"}).ok());
  JobRow j = TestJob("j");
  std::vector<TaskRow> tasks(1);
  tasks[0].workload_key = "k1";
  ASSERT_TRUE(log->CreateJob(&j, &tasks).ok());
  auto empty = log->CountsOf(tasks[0].id);
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(empty->trials, 0);
  EXPECT_EQ(empty->best_ms, 0);
  std::vector<Record> batch;
  for (int i = 0; i < 10; ++i) {
    Record r = MakeTestRecord(i, "k1");
    r.job_id = j.id;
    r.task_id = tasks[0].id;
    batch.push_back(r);
  }
  ASSERT_TRUE(log->AddRecords(&batch).ok());
  auto c = log->CountsOf(tasks[0].id);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->trials, 10);
  EXPECT_EQ(c->ok, 8);  // records 4 and 9 failed to compile
  EXPECT_EQ(c->best_ms, MakeTestRecord(0).measurement.latency_ms());  // its CUPTI kernel median
}

TEST(TuningLog, ForEachRecordOfTargetStreamsInIdOrderAndStops) {
  auto log = MustOpen(NewLogPath());
  std::vector<Record> batch;
  for (int i = 0; i < 1200; ++i) batch.push_back(MakeTestRecord(i, "w", i % 3 ? "host" : "cuda"));
  ASSERT_TRUE(log->AddRecords(&batch).ok());
  int64_t last = 0, n = 0;
  ASSERT_TRUE(log->ForEachRecordOfTarget("host",
                                         [&](const Record& r) {
                                           EXPECT_GT(r.id, last);
                                           EXPECT_EQ(r.target_key, "host");
                                           last = r.id;
                                           ++n;
                                           return true;
                                         })
                  .ok());
  EXPECT_EQ(n, 800);
  n = 0;
  ASSERT_TRUE(log->ForEachRecordOfTarget("host", [&](const Record&) { return ++n < 10; }).ok());
  EXPECT_EQ(n, 10);
  // The callback may call into the log.
  n = 0;
  ASSERT_TRUE(log->ForEachRecordOfTarget("cuda",
                                         [&](const Record& r) {
                                           auto w = log->GetWorkload(r.workload_key);
                                           EXPECT_TRUE(w.ok());
                                           return ++n < 3;
                                         })
                  .ok());
}

TEST(TuningLog, LatestCostModelOfTargetAndKind) {
  auto log = MustOpen(NewLogPath());
  auto none = log->LatestCostModel("host", "xgboost");
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
  std::string bytes("\0\1\2model", 8);
  store::CostModelRow a{0, "host", "xgboost", 1, bytes, "{\"records\": 10}", 0};
  store::CostModelRow b{0, "host", "xgboost", 2, bytes + "v2", "{}", 0};
  store::CostModelRow c{0, "cuda -arch=sm_90", "xgboost", 2, "other", "{}", 0};
  ASSERT_TRUE(log->SaveCostModel(&a).ok());
  ASSERT_TRUE(log->SaveCostModel(&b).ok());
  ASSERT_TRUE(log->SaveCostModel(&c).ok());
  auto m = log->LatestCostModel("host", "xgboost");
  ASSERT_TRUE(m.ok() && m->has_value());
  EXPECT_EQ((*m)->id, b.id);
  EXPECT_EQ((*m)->blob, bytes + "v2");  // binary, NUL bytes included
  EXPECT_EQ((*m)->feature_version, 2);
  EXPECT_GT((*m)->unix_ms, 0);
}

TEST(TuningLog, ConcurrentWritersAndReaders) {
  auto log = MustOpen(NewLogPath());
  std::vector<std::thread> threads;
  std::vector<std::vector<int64_t>> ids(4);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 100; ++i) {
        Record r = MakeTestRecord(t * 1000 + i);
        auto id = log->AddRecord(&r);
        EXPECT_TRUE(id.ok()) << id.status();
        if (id.ok()) ids[t].push_back(*id);
        auto top = log->TopK(r.workload_key, r.target_key, 5);
        EXPECT_TRUE(top.ok());
      }
    });
  }
  for (auto& th : threads) th.join();
  std::set<int64_t> all;
  for (auto& v : ids) all.insert(v.begin(), v.end());
  EXPECT_EQ(all.size(), 400u);
}

TEST(TuningLog, TwoConnectionsToOneFile) {
  const std::string path = NewLogPath();
  auto writer = MustOpen(path);
  auto reader = MustOpen(path, /*read_only=*/true);
  ASSERT_NE(reader, nullptr);
  Record r = MakeTestRecord(0);
  ASSERT_TRUE(writer->AddRecord(&r).ok());
  auto best = reader->Best(r.workload_key, r.target_key);
  ASSERT_TRUE(best.ok() && best->has_value());
  EXPECT_EQ((*best)->uid, r.uid);
}

TEST(TuningLog, ReadOnlyLogRefusesWrites) {
  const std::string path = NewLogPath();
  { MustOpen(path); }
  auto log = MustOpen(path, /*read_only=*/true);
  ASSERT_NE(log, nullptr);
  Record r = MakeTestRecord(0);
  auto id = log->AddRecord(&r);
  EXPECT_EQ(id.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(id.status().message(), HasSubstr("was opened read-only"));
  auto best = log->Best("x", "host");
  EXPECT_TRUE(best.ok());
}

// ---- Open: refusals, each leaving the file as it was ----

absl::Status OpenStatus(const std::string& path, bool read_only = false) {
  store::TuningLogOptions o;
  o.read_only = read_only;
  return OpenTuningLog(path, o).status();
}

TEST(TuningLogOpen, FileThatIsNotSqliteIsRefusedUntouched) {
  const std::string path = MakeTempDir("tessel_store") + "/notes.txt";
  std::ofstream(path) << "these are my notes, not a database\n" << std::string(5000, 'x');
  const std::string before = ReadBytes(path);
  absl::Status s = OpenStatus(path);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(s.message(), path +
                             " is not a Tessel tuning log (not an SQLite database); pass a new "
                             "file or a log written by tessel serve");
  EXPECT_EQ(ReadBytes(path), before);
  EXPECT_EQ(OpenStatus(path, true).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(ReadBytes(path), before);
}

TEST(TuningLogOpen, OtherSqliteDatabaseIsRefusedUntouched) {
  const std::string path = MakeTempDir("tessel_store") + "/other.db";
  ASSERT_EQ(RawExec(path,
                    "PRAGMA application_id = 1234; CREATE TABLE t(x); INSERT INTO t "
                    "VALUES (1)"),
            "");
  const std::string before = ReadBytes(path);
  absl::Status s = OpenStatus(path);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(s.message(), path + " is not a Tessel tuning log (application id 1234, expected " +
                             std::to_string(store::kTuningLogApplicationId) +
                             "); pass a new file or a log written by tessel serve");
  EXPECT_EQ(ReadBytes(path), before);
  EXPECT_EQ(RawQuery(path, "PRAGMA journal_mode"), "delete");  // not switched to WAL
}

TEST(TuningLogOpen, NewerSchemaIsRefusedUntouched) {
  const std::string path = NewLogPath();
  { MustOpen(path); }
  ASSERT_EQ(RawExec(path, "PRAGMA user_version = " + Next()), "");
  const std::string before = ReadBytes(path);
  for (bool read_only : {false, true}) {
    absl::Status s = OpenStatus(path, read_only);
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_EQ(s.message(), path + " was written by a newer Tessel (schema " + Next() +
                               ", this build reads up to " + Latest() + "); upgrade Tessel");
    EXPECT_EQ(ReadBytes(path), before);
  }
}

TEST(TuningLogOpen, ReadOnlyOpenOfAMissingFile) {
  const std::string path = MakeTempDir("tessel_store") + "/missing.db";
  absl::Status s = OpenStatus(path, /*read_only=*/true);
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(s.message(), "tuning log " + path +
                             " does not exist; check the path (a read-only open never creates "
                             "a log)");
  EXPECT_FALSE(std::ifstream(path).good());
}

TEST(TuningLogOpen, ReadOnlyOpenOfAnEmptyFile) {
  const std::string path = MakeTempDir("tessel_store") + "/empty.db";
  std::ofstream(path).close();
  absl::Status s = OpenStatus(path, /*read_only=*/true);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("is not a Tessel tuning log (an empty database)"));
  EXPECT_EQ(ReadBytes(path), "");
}

TEST(TuningLogOpen, DirectoryThatDoesNotExist) {
  const std::string dir = MakeTempDir("tessel_store") + "/no/such";
  absl::Status s = OpenStatus(dir + "/log.db");
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(s.message(), "cannot create tuning log " + dir + "/log.db: directory " + dir +
                             " does not exist; create it first (mkdir -p " + dir + ")");
}

TEST(TuningLogOpen, PathThatIsADirectory) {
  const std::string dir = MakeTempDir("tessel_store");
  absl::Status s = OpenStatus(dir);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(),
            dir + " is a directory; pass the tuning log's file, e.g. " + dir + "/tessel.db");
}

TEST(TuningLogOpen, EmptyPath) {
  absl::Status s = OpenStatus("");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "no tuning log path given; pass a file such as tessel.db");
}

// ---- Migrations ----

TEST(TuningLogMigration, EmptySqliteFileBecomesALog) {
  // A zero-byte file is a valid empty SQLite database (version 0): it is migrated to the latest.
  const std::string path = MakeTempDir("tessel_store") + "/zero.db";
  std::ofstream(path).close();
  auto log = MustOpen(path);
  ASSERT_NE(log, nullptr);
  Record r = MakeTestRecord(1);
  EXPECT_TRUE(log->AddRecord(&r).ok());
  EXPECT_EQ(RawQuery(path, "PRAGMA user_version"), Latest());
  EXPECT_EQ(RawQuery(path, "PRAGMA application_id"),
            std::to_string(store::kTuningLogApplicationId));
}

// The schema of this build plus one more step, as a later Tessel would have it.
std::vector<store::Migration> WithNextVersion(const std::string& sql) {
  std::vector<store::Migration> m = store::TuningLogMigrations();
  m.push_back({store::LatestSchemaVersion() + 1, "records get a note", sql});
  return m;
}

// A version-1 log made by hand (the v1 schema's own SQL, no Tessel opening code), with a record.
std::string MakeVersion1File() {
  const std::string path = MakeTempDir("tessel_store") + "/v1.db";
  const std::string v1 = store::TuningLogMigrations()[0].sql;
  EXPECT_EQ(RawExec(path, "PRAGMA journal_mode = WAL; BEGIN; " + v1 +
                              "INSERT INTO records (uid, workload_key, target_key, trace, status, "
                              "repeats_ms, median_ms, unix_ms) VALUES ('u1', 'w', 'host', 'null', "
                              "'ok', '[1.5,2.5]', 2.0, 1700000000000); "
                              "PRAGMA user_version = 1; PRAGMA application_id = " +
                              std::to_string(store::kTuningLogApplicationId) + "; COMMIT;"),
            "");
  return path;
}

TEST(TuningLogMigration, Version1FileMigratesToTheNextVersionAndKeepsItsRecords) {
  const std::string path = MakeVersion1File();
  auto migrations =
      WithNextVersion("ALTER TABLE records ADD COLUMN note TEXT NOT NULL DEFAULT 'none';");
  {
    auto log = store::OpenSqliteTuningLog(path, {}, migrations);
    ASSERT_TRUE(log.ok()) << log.status();
    auto best = (*log)->Best("w", "host");
    ASSERT_TRUE(best.ok() && best->has_value()) << best.status();
    EXPECT_EQ((*best)->uid, "u1");
    EXPECT_EQ((*best)->measurement.timings.repeats_ms, (std::vector<double>{1.5, 2.5}));
    Record r = MakeTestRecord(1, "w", "host");
    EXPECT_TRUE((*log)->AddRecord(&r).ok());
  }
  EXPECT_EQ(RawQuery(path, "PRAGMA user_version"), Next());
  EXPECT_EQ(RawQuery(path, "SELECT note FROM records WHERE uid = 'u1'"), "none");
  // Version 2's step ran on the way: jobs name the token that submitted them.
  EXPECT_EQ(RawQuery(path,
                     "SELECT count(*) FROM pragma_table_info('jobs') WHERE name = "
                     "'submitted_by'"),
            "1");
  EXPECT_EQ(RawQuery(path, "SELECT count(*) FROM records"), "2");
  // Version 3's step too: records keep their artifacts, which the version-1 record has none of.
  EXPECT_EQ(RawQuery(path, "SELECT count(*) FROM artifacts"), "0");
  // Version 4's step too: tasks keep their baselines, none for a version-1 log's.
  EXPECT_EQ(RawQuery(path,
                     "SELECT count(*) FROM pragma_table_info('tasks') WHERE name IN "
                     "('baseline_ms', 'baseline_label')"),
            "2");
  // Version 5's too: the version-1 record is a confirmed timing without CUPTI figures.
  EXPECT_EQ(RawQuery(path,
                     "SELECT timing_kind || ' ' || kernel_repeats_ms FROM records WHERE "
                     "uid = 'u1'"),
            "1 []");
  // This build now refuses it, naming both versions.
  absl::Status s = OpenStatus(path);
  EXPECT_THAT(s.message(), HasSubstr("(schema " + Next() + ", this build reads up to " + Latest() +
                                     "); upgrade Tessel"));
}

TEST(TuningLogMigration, ReadOnlyOpenDoesNotMigrate) {
  const std::string path = MakeVersion1File();
  store::TuningLogOptions ro;
  ro.read_only = true;
  auto log = store::OpenSqliteTuningLog(path, ro, WithNextVersion("ALTER TABLE records ADD note;"));
  EXPECT_EQ(log.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(log.status().message(), path + " has schema 1 and this build reads schema " + Next() +
                                        "; open it once for writing (tessel serve or tessel "
                                        "import) to migrate it");
  EXPECT_EQ(RawQuery(path, "PRAGMA user_version"), "1");
}

TEST(TuningLogMigration, FailingStepRollsBackWholly) {
  const std::string path = MakeVersion1File();
  // The step's first statement succeeds, its second fails: neither may remain.
  auto log = store::OpenSqliteTuningLog(
      path, {}, WithNextVersion("CREATE TABLE extra(x); ALTER TABLE no_such_table ADD y;"));
  EXPECT_FALSE(log.ok());
  EXPECT_THAT(log.status().message(),
              HasSubstr("migrating " + path + " from schema 1 to " + Next() + " failed at step " +
                        Next() + " (records get a note)"));
  EXPECT_THAT(log.status().message(), HasSubstr("the file is unchanged"));
  EXPECT_EQ(RawQuery(path, "PRAGMA user_version"), "1");
  EXPECT_EQ(RawQuery(path, "SELECT count(*) FROM sqlite_master WHERE name = 'extra'"), "0");
  // And the current build still opens it.
  EXPECT_NE(MustOpen(path), nullptr);
}

// A version-3 log made by hand (the SQL of steps 1 to 3, no Tessel opening code): a record as a
// version-3 Tessel stored it, and a quarantined_records table as its first quarantine made it.
std::string MakeVersion3File() {
  const std::string path = MakeTempDir("tessel_store") + "/v3.db";
  std::string steps;
  for (const store::Migration& m : store::TuningLogMigrations()) {
    if (m.version <= 3) steps += m.sql;
  }
  EXPECT_EQ(
      RawExec(path, "PRAGMA journal_mode = WAL; BEGIN; " + steps +
                        "INSERT INTO records (uid, workload_key, target_key, trace, status, "
                        "repeats_ms, median_ms, worker_id, device_name, unix_ms) VALUES ('u3', "
                        "'w', 'cuda -arch=sm_90', 'null', 'ok', '[1.5,2.5,2.0]', 2.0, 'w0', "
                        "'NVIDIA H100 80GB HBM3', 1700000000000); "
                        "CREATE TABLE quarantined_records AS SELECT *, '' AS reason, 0 AS "
                        "quarantined_unix_ms FROM records WHERE 0; "
                        "PRAGMA user_version = 3; PRAGMA application_id = " +
                        std::to_string(store::kTuningLogApplicationId) + "; COMMIT;"),
      "");
  return path;
}

TEST(TuningLogMigration, Version3FileKeepsItsRecordsAsConfirmedWithoutTheNewFigures) {
  const std::string path = MakeVersion3File();
  Record r = MakeTestRecord(3, "w", "cuda -arch=sm_90");
  {
    auto log = MustOpen(path);
    ASSERT_NE(log, nullptr);
    auto best = log->Best("w", "cuda -arch=sm_90");
    ASSERT_TRUE(best.ok() && best->has_value()) << best.status();
    const measure::Timings& t = (*best)->measurement.timings;
    EXPECT_EQ((*best)->uid, "u3");
    EXPECT_EQ(t.repeats_ms, (std::vector<double>{1.5, 2.5, 2.0}));
    EXPECT_EQ(t.median_ms, 2.0);
    // Every record before version 5 was a full measurement; its other figures were not kept.
    EXPECT_EQ(t.kind, measure::TimingKind::kConfirmed);
    EXPECT_TRUE(t.kernel_repeats_ms.empty());
    EXPECT_EQ(t.kernel_median_ms, 0);
    EXPECT_FALSE(t.counters.has_value());
    EXPECT_FALSE(t.device_state.known());
    EXPECT_EQ(t.note, "");

    // New records keep every figure in the migrated log.
    ASSERT_TRUE(log->AddRecord(&r).ok());
    auto rs = log->TopK("w", "cuda -arch=sm_90", 10);
    ASSERT_TRUE(rs.ok()) << rs.status();
    ASSERT_EQ(rs->size(), 2u);
    const Record& added = (*rs)[0].uid == r.uid ? (*rs)[0] : (*rs)[1];
    EXPECT_EQ(DiffTestRecord(added, 3), "");

    // A quarantine table of version 3 takes the rows of this build: its new columns are added.
    auto moved = log->QuarantineRecords({{(*best)->id, "u3", "w", "cuda -arch=sm_90", "test"},
                                         {r.id, r.uid, "w", "cuda -arch=sm_90", "test"}});
    ASSERT_TRUE(moved.ok()) << moved.status();
    EXPECT_EQ(*moved, 2);
  }
  EXPECT_EQ(RawQuery(path, "PRAGMA user_version"), Latest());
  EXPECT_EQ(RawQuery(path, "SELECT count(*) FROM records"), "0");
  EXPECT_EQ(RawQuery(path,
                     "SELECT uid || ' ' || timing_kind || ' ' || printf('%.6f', kernel_median_ms) "
                     "|| ' ' || ifnull(dram_read_bytes, 'null') || ' ' || sm_clock_mhz FROM "
                     "quarantined_records ORDER BY id",
                     0, /*all_rows=*/true),
            "u3 1 0.000000 null 0\n" + r.uid + " 1 " +
                absl::StrFormat("%.6f", r.measurement.timings.kernel_median_ms) +
                " 1500000003.0 1758");
}

TEST(TuningLog, RecordKeepsEveryMeasuredFigure) {
  const std::string path = NewLogPath();
  auto log = MustOpen(path);
  ASSERT_NE(log, nullptr);
  // Record 3: CUPTI kernel times, counters, clocks, confirmed. Record 5: no counters (a note
  // says why), screened. Record 4: a compile error, without timings.
  std::vector<Record> rs = {MakeTestRecord(3, "w", "cuda -arch=sm_90"),
                            MakeTestRecord(5, "w", "cuda -arch=sm_90"),
                            MakeTestRecord(4, "w", "cuda -arch=sm_90")};
  ASSERT_TRUE(rs[0].measurement.timings.counters.has_value());
  ASSERT_EQ(rs[1].measurement.timings.kind, measure::TimingKind::kScreened);
  ASSERT_TRUE(log->AddRecords(&rs).ok());
  // Every reader reads them back whole: the scan a cost model trains on, and top-k.
  std::vector<Record> scanned;
  ASSERT_TRUE(log->ForEachRecordOfTarget("cuda -arch=sm_90",
                                         [&](const Record& x) {
                                           scanned.push_back(x);
                                           return true;
                                         })
                  .ok());
  ASSERT_EQ(scanned.size(), 3u);
  for (const Record& got : scanned) {
    EXPECT_EQ(DiffTestRecord(got, static_cast<int64_t>(got.candidate_id)), "")
        << "record " << got.candidate_id;
  }
  auto top = log->TopK("w", "cuda -arch=sm_90", 10);
  ASSERT_TRUE(top.ok()) << top.status();
  ASSERT_EQ(top->size(), 1u);  // the ok confirmed one: a screened timing never ranks
  for (const Record& got : *top) {
    EXPECT_EQ(DiffTestRecord(got, static_cast<int64_t>(got.candidate_id)), "");
  }
  const measure::Timings& t3 = rs[0].measurement.timings;
  EXPECT_EQ(RawQuery(path,
                     "SELECT timing_kind || ' ' || sm_clock_mhz || ' ' || "
                     "memory_clock_mhz || ' ' || temperature_c || ' ' || dram_read_bytes "
                     "FROM records WHERE uid = '" +
                         rs[0].uid + "'"),
            "1 1758 2619 43 1500000003.0");
  EXPECT_EQ(RawQuery(path, "SELECT printf('%.6f', kernel_median_ms) FROM records WHERE uid = '" +
                               rs[0].uid + "'"),
            absl::StrFormat("%.6f", t3.kernel_median_ms));
  // Not collected is NULL, not 0: a counter of 0 bytes is a measurement.
  EXPECT_EQ(RawQuery(path,
                     "SELECT timing_kind || ' ' || ifnull(dram_read_bytes, 'null') || ' ' "
                     "|| ifnull(achieved_occupancy, 'null') || ' ' || timing_note FROM "
                     "records WHERE uid = '" +
                         rs[1].uid + "'"),
            "2 null null no hardware counters: not asked for (record 5)");
  EXPECT_EQ(RawQuery(path,
                     "SELECT json_array_length(kernel_repeats_ms) FROM records WHERE "
                     "uid = '" +
                         rs[1].uid + "'"),
            "10");
}

TEST(TuningLog, UnknownTimingKindInARowIsABadRow) {
  const std::string path = NewLogPath();
  auto log = MustOpen(path);
  ASSERT_NE(log, nullptr);
  Record r = MakeTestRecord(3, "w", "host");
  ASSERT_TRUE(log->AddRecord(&r).ok());
  ASSERT_EQ(RawExec(path, "UPDATE records SET timing_kind = 7"), "");
  auto bad = log->BadRecords();
  ASSERT_TRUE(bad.ok()) << bad.status();
  ASSERT_EQ(bad->size(), 1u);
  EXPECT_EQ((*bad)[0].problem, "unknown timing_kind 7 in the tuning log (1 confirmed, 2 screened)");
}

}  // namespace
}  // namespace tessel::testing
