// The server end to end: a real server on port 0 over a SQLite log in a temp dir, real
// `tessel worker --target host` processes, clients through gRPC. What the server trusts of its
// peers and its log (issue 20): a worker that speaks the real protocol and lies (an inf or
// negative time reported as ok, a result for a candidate it was not sent, a second answer) gets
// nothing of that into the log; a log that already holds a poisoned row still starts guided jobs.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/protocol.h"
#include "schedules/codegen/codegen_version.h"
#include "schedules/target/target.h"
#include "server/dispatcher.h"
#include "server/listen_address.h"
#include "tests/cli/cli_test_util.h"
#include "tests/server/server_test_util.h"
#include "tests/store/store_test_util.h"

namespace tessel::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kMatmul[] = "matmul(M=32, N=32, K=32)";
constexpr char kSoftmax[] = "softmax(rows=8, cols=64)";

class ServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = MakeTempDir("tessel_server_");
    ASSERT_FALSE(dir_.empty());
    db_ = dir_ + "/log.db";
  }
  void StartInProcess(server::ServerOptions o) {
    auto s = server::StartServer(o);
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = std::move(*s);
    client_ = Client(server_->address());
  }
  int64_t Submit(const proto::SubmitJobRequest& r) {
    grpc::ClientContext ctx;
    proto::SubmitJobResponse resp;
    grpc::Status s = client_->SubmitJob(&ctx, r, &resp);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return resp.job_id();
  }
  grpc::Status SubmitError(const proto::SubmitJobRequest& r) {
    grpc::ClientContext ctx;
    proto::SubmitJobResponse resp;
    return client_->SubmitJob(&ctx, r, &resp);
  }

  std::string dir_;
  std::string db_;
  std::unique_ptr<server::Server> server_;
  std::unique_ptr<proto::Tessel::Stub> client_;
};

TEST_F(ServerTest, SubmitRecordsEveryTrialAndQueryBestReturnsTheFastest) {
  server::ServerOptions o = TestServerOptions(db_);
  StartInProcess(o);
  auto w = StartHostWorker(server_->address(), dir_, "w1");
  const int64_t job = Submit(HostJob({kMatmul, kSoftmax}, 4, 2));
  ASSERT_GT(job, 0);
  ASSERT_TRUE(WaitForJobState(client_.get(), job, proto::JOB_STATE_DONE, absl::Seconds(60)))
      << w->Log();
  proto::JobInfo info = GetJob(client_.get(), job);
  EXPECT_EQ(info.trials_done(), 8);
  ASSERT_EQ(info.tasks_size(), 2);
  for (const proto::TaskInfo& t : info.tasks()) {
    EXPECT_EQ(t.trials_done(), 4);
    EXPECT_EQ(t.state(), proto::JOB_STATE_DONE);
    EXPECT_GT(t.best_ms(), 0);
    EXPECT_GT(t.flops(), 0);
  }
  std::vector<store::Record> records = RecordsOfJob(db_, job);
  ASSERT_EQ(records.size(), 8u);
  double best = 0;
  for (const store::Record& r : records) {
    if (r.workload_key != info.tasks(0).workload_key() ||
        r.measurement.status != measure::MeasureStatus::kOk)
      continue;
    EXPECT_EQ(r.measurement.timings.repeats_ms.size(), 3u);
    EXPECT_EQ(r.measurement.worker_id, "w1");
    if (best == 0 || r.measurement.timings.median_ms < best) best = r.measurement.timings.median_ms;
  }
  ASSERT_GT(best, 0);
  // Without screening, every record is a full (confirmed) measurement; the host worker has no
  // CUPTI or NVML, so no kernel times, counters or clocks, and no note about them either.
  for (const store::Record& r : records) {
    EXPECT_EQ(r.measurement.timings.kind, measure::TimingKind::kConfirmed);
    EXPECT_TRUE(r.measurement.timings.kernel_repeats_ms.empty());
    EXPECT_FALSE(r.measurement.timings.counters.has_value());
    EXPECT_FALSE(r.measurement.timings.device_state.known());
  }
  EXPECT_EQ(RawQuery(db_, "SELECT group_concat(DISTINCT timing_kind) FROM records"), "1");
  grpc::ClientContext ctx;
  proto::QueryBestRequest q;
  q.set_workload(kMatmul);
  q.mutable_target()->set_kind("host");
  proto::BestRecord rec;
  grpc::Status s = client_->QueryBest(&ctx, q, &rec);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_DOUBLE_EQ(rec.median_ms(), best);
  EXPECT_EQ(rec.job_id(), job);
  EXPECT_NE(rec.source().code().find("extern \"C\""), std::string::npos);
  EXPECT_NE(rec.trace_json(), "null");
  EXPECT_EQ(rec.records(), info.tasks(0).trials_ok());
  // The worker sent what it compiled, and the best record answers with it (issue 19).
  ASSERT_TRUE(rec.has_artifact());
  EXPECT_FALSE(rec.regenerated());
  EXPECT_EQ(rec.artifact().source().code(), rec.source().code());
  EXPECT_EQ(rec.artifact().codegen_version(), schedules::kCodegenVersion);
  EXPECT_EQ(rec.artifact().device_arch(), schedules::HostTarget().arch);
  EXPECT_GT(rec.artifact().multiprocessor_count(), 0);
  EXPECT_THAT(rec.artifact().compile_options(), HasSubstr("-O3"));
  EXPECT_FALSE(rec.artifact().compiler_version().empty());
  const std::string cpu = schedules::HostTarget().device_name;
  EXPECT_EQ(rec.match(), "same architecture (host), measured on " + cpu);
  // Asked for the device it was measured on, that match answers.
  grpc::ClientContext ctx2;
  q.set_device_name(cpu);
  ASSERT_TRUE(client_->QueryBest(&ctx2, q, &rec).ok());
  EXPECT_EQ(rec.match(), "same device (" + cpu + ")");
  EXPECT_DOUBLE_EQ(rec.median_ms(), best);
}

TEST_F(ServerTest, ASharedBudgetIsSpentByTheTaskSchedulerRoundRobinFirst) {
  StartInProcess(TestServerOptions(db_));
  auto w = StartHostWorker(server_->address(), dir_, "w1");
  proto::SubmitJobRequest r = HostJob({kMatmul, kSoftmax}, 0, 2);
  r.set_total_trials(10);
  const int64_t job = Submit(r);
  ASSERT_GT(job, 0);
  ASSERT_TRUE(WaitForJobState(client_.get(), job, proto::JOB_STATE_DONE, absl::Seconds(90)))
      << w->Log();
  proto::JobInfo info = GetJob(client_.get(), job);
  EXPECT_EQ(info.trials_budget(), 10);
  EXPECT_EQ(info.trials_done(), 10);
  ASSERT_EQ(info.tasks_size(), 2);
  int64_t sum = 0;
  for (const proto::TaskInfo& t : info.tasks()) {
    // A task's own budget is its cap (the whole budget); the round robin gave each one batch.
    EXPECT_EQ(t.trials_budget(), 10);
    EXPECT_GE(t.trials_done(), 2);
    EXPECT_EQ(t.state(), proto::JOB_STATE_DONE);
    sum += t.trials_done();
  }
  EXPECT_EQ(sum, 10);
  EXPECT_EQ(RecordsOfJob(db_, job).size(), 10u);
}

TEST_F(ServerTest, AGuidedJobStartsFromAModelOfTheLogsRecordsAndSavesItWhenDone) {
  {
    // A log that already holds 1,200 real host measurements (another job's).
    auto log = store::OpenTuningLog(db_);
    ASSERT_TRUE(log.ok()) << log.status();
    std::istringstream in(ReplayFixtureJsonl());
    auto imported = (*log)->ImportJsonl(in);
    ASSERT_TRUE(imported.ok()) << imported.status();
    ASSERT_EQ(imported->records_added, 1200);
  }
  StartInProcess(TestServerOptions(db_));
  auto w = StartHostWorker(server_->address(), dir_, "w1");
  proto::SubmitJobRequest r = HostJob({kReplayFixtureWorkload}, 4, 4);
  r.set_strategy("");  // the default: evolutionary
  const int64_t job = Submit(r);
  ASSERT_GT(job, 0);
  ASSERT_TRUE(WaitForJobState(client_.get(), job, proto::JOB_STATE_DONE, absl::Seconds(90)))
      << w->Log();
  proto::JobInfo info = GetJob(client_.get(), job);
  EXPECT_EQ(info.strategy(), "evolutionary");
  EXPECT_EQ(info.trials_done(), 4);
  EXPECT_GT(info.search_s(), 0);
  // None of the 4 is one of the 1,200 already measured.
  std::vector<store::Record> mine = RecordsOfJob(db_, job);
  ASSERT_EQ(mine.size(), 4u);
  auto log = store::OpenTuningLog(db_);
  ASSERT_TRUE(log.ok());
  int64_t same = 0;
  ASSERT_TRUE((*log)
                  ->ForEachRecordOfTarget("host",
                                          [&](const store::Record& rec) {
                                            if (rec.job_id != job) {
                                              for (const store::Record& m : mine)
                                                same += m.trace_json == rec.trace_json;
                                            }
                                            return true;
                                          })
                  .ok());
  EXPECT_EQ(same, 0);
  // The model trained on the log's records was saved when the job ended.
  auto model = (*log)->LatestCostModel("host", "xgboost");
  ASSERT_TRUE(model.ok()) << model.status();
  ASSERT_TRUE(model->has_value());
  EXPECT_FALSE((*model)->blob.empty());
  EXPECT_NE((*model)->meta_json.find("\"examples\":1204"), std::string::npos)
      << (*model)->meta_json;
  EXPECT_NE((*model)->meta_json.find("\"family\":\"matmul\""), std::string::npos)
      << (*model)->meta_json;
}

TEST_F(ServerTest, AKilledWorkersCandidatesAreMeasuredByAnotherAndCountedOnce) {
  StartInProcess(TestServerOptions(db_));
  auto a = StartHostWorker(server_->address(), dir_, "a", 1);
  const int64_t job = Submit(HostJob({kMatmul}, 8, 4));
  // Kill a once it has sent a result: the rest of its batch is in flight.
  ASSERT_TRUE(
      WaitUntil([&] { return GetJob(client_.get(), job).trials_done() >= 1; }, absl::Seconds(30)));
  a->Signal(SIGKILL);
  a->Wait(absl::Seconds(5));
  const int64_t done_by_a = GetJob(client_.get(), job).trials_done();
  ASSERT_LT(done_by_a, 8);
  auto b = StartHostWorker(server_->address(), dir_, "b", 1);
  ASSERT_TRUE(WaitForJobState(client_.get(), job, proto::JOB_STATE_DONE, absl::Seconds(60)))
      << b->Log();
  std::vector<store::Record> records = RecordsOfJob(db_, job);
  EXPECT_EQ(records.size(), 8u);
  std::set<uint64_t> ids;
  std::map<std::string, int> by_worker;
  for (const store::Record& r : records) {
    ids.insert(r.candidate_id);
    ++by_worker[r.measurement.worker_id];
  }
  EXPECT_EQ(ids.size(), 8u) << "a candidate was recorded twice";
  EXPECT_GE(by_worker["a"], 1);
  EXPECT_EQ(by_worker["b"], 8 - by_worker["a"]);
  EXPECT_EQ(GetJob(client_.get(), job).trials_done(), 8);
}

TEST_F(ServerTest, ASilentWorkerIsDroppedAndItsWorkRequeued) {
  server::ServerOptions o = TestServerOptions(db_);
  o.heartbeat_timeout_s = 1;
  StartInProcess(o);
  auto a = StartHostWorker(server_->address(), dir_, "a", 1);
  const int64_t job = Submit(HostJob({kMatmul}, 6, 3));
  ASSERT_TRUE(
      WaitUntil([&] { return GetJob(client_.get(), job).trials_done() >= 1; }, absl::Seconds(30)));
  a->Signal(SIGSTOP);  // alive but silent: no results, no heartbeats
  auto b = StartHostWorker(server_->address(), dir_, "b", 1);
  ASSERT_TRUE(WaitForJobState(client_.get(), job, proto::JOB_STATE_DONE, absl::Seconds(60)));
  std::vector<store::Record> records = RecordsOfJob(db_, job);
  std::set<uint64_t> ids;
  for (const store::Record& r : records) ids.insert(r.candidate_id);
  EXPECT_EQ(records.size(), 6u);
  EXPECT_EQ(ids.size(), 6u);
  {
    // b may finish the job before a's heartbeat deadline passes (when a had no batch in flight
    // when it stopped): wait for the drop rather than race it.
    proto::ListWorkersResponse resp;
    ASSERT_TRUE(WaitUntil(
        [&] {
          grpc::ClientContext c;
          resp.Clear();
          return client_->ListWorkers(&c, proto::ListWorkersRequest(), &resp).ok() &&
                 resp.workers_size() == 1;
        },
        absl::Seconds(10)))
        << resp.DebugString();
    EXPECT_EQ(resp.workers(0).worker_id(), "b");
    EXPECT_GT(resp.workers(0).candidates_measured(), 0);
  }
  // a wakes up after being dropped: whatever it sends for its old batch is not recorded again.
  a->Signal(SIGCONT);
  absl::SleepFor(absl::Milliseconds(500));
  EXPECT_EQ(RecordsOfJob(db_, job).size(), 6u);
  a->Signal(SIGKILL);
}

TEST_F(ServerTest, AKilledServerResumesItsJobWithoutLosingOrRecountingTrials) {
  auto serve_args = [&](const std::string& listen) {
    std::vector<std::string> a = {"serve", "--db", db_, "--listen", listen, "--batch-size", "2"};
    for (const std::string& f : FastServeFlags()) a.push_back(f);
    return a;
  };
  auto serve = std::make_unique<TesselProcess>(serve_args("127.0.0.1:0"), dir_ + "/serve1.log");
  std::string address;
  ASSERT_TRUE(WaitUntil(
      [&] {
        const std::string log = serve->Log();
        const size_t at = log.find("listening on ");
        if (at == std::string::npos || log.find(", log", at) == std::string::npos) return false;
        address = log.substr(at + 13, log.find(", log", at) - at - 13);
        return true;
      },
      absl::Seconds(10)))
      << serve->Log();
  EXPECT_THAT(serve->Log(), HasSubstr("tessel serve: listening on 127.0.0.1:"));
  client_ = Client(address);
  auto w = StartHostWorker(address, dir_, "w", 1);
  const int64_t job = Submit(HostJob({kSoftmax}, 10, 2));
  ASSERT_TRUE(
      WaitUntil([&] { return GetJob(client_.get(), job).trials_done() >= 3; }, absl::Seconds(30)));
  serve->Signal(SIGKILL);
  serve->Wait(absl::Seconds(5));
  const std::vector<store::Record> before = RecordsOfJob(db_, job);
  ASSERT_GE(before.size(), 3u);
  ASSERT_LT(before.size(), 10u);

  auto again = std::make_unique<TesselProcess>(serve_args(address), dir_ + "/serve2.log");
  ASSERT_TRUE(WaitUntil([&] { return again->Log().find("listening on") != std::string::npos; },
                        absl::Seconds(10)))
      << again->Log();
  client_ = Client(address);  // the old channel saw its server die
  EXPECT_THAT(again->Log(),
              HasSubstr(absl::StrCat("job ", job, " resumed with ", before.size(), " of 10")));
  ASSERT_TRUE(WaitForJobState(client_.get(), job, proto::JOB_STATE_DONE, absl::Seconds(60)))
      << again->Log() << w->Log();
  {
    // The resumed task's first batch is given a deadline from what its records took, not from
    // the 5 s a candidate assumed of a task never timed (30 + 3 x 2 x 5 = 60 s).
    const std::string log = again->Log();
    std::smatch m;
    ASSERT_TRUE(
        std::regex_search(log, m, std::regex("candidates to w \\(deadline ([0-9.e+-]+) s\\)")))
        << log;
    EXPECT_LT(std::stod(m[1]), 60.0) << log;
  }
  const std::vector<store::Record> after = RecordsOfJob(db_, job);
  EXPECT_EQ(after.size(), 10u);
  std::map<int64_t, const store::Record*> by_id;
  std::set<uint64_t> candidates;
  for (const store::Record& r : after) {
    by_id[r.id] = &r;
    candidates.insert(r.candidate_id);
  }
  EXPECT_EQ(candidates.size(), 10u) << "a candidate was recorded twice";
  for (const store::Record& r : before) {
    ASSERT_EQ(by_id.count(r.id), 1u) << "record " << r.id << " was lost";
    EXPECT_EQ(by_id[r.id]->candidate_id, r.candidate_id);
    EXPECT_EQ(by_id[r.id]->measurement.timings.median_ms, r.measurement.timings.median_ms);
  }
  EXPECT_EQ(GetJob(client_.get(), job).trials_done(), 10);
  again->Signal(SIGTERM);
  EXPECT_EQ(again->Wait(absl::Seconds(10)), 0);
}

// The jobs' order in the log (by record id).
std::vector<int64_t> JobOrder(const std::string& db, const std::vector<int64_t>& jobs) {
  std::vector<std::pair<int64_t, int64_t>> order;
  for (int64_t job : jobs) {
    for (const store::Record& r : RecordsOfJob(db, job)) order.push_back({r.id, job});
  }
  std::sort(order.begin(), order.end());
  std::vector<int64_t> out;
  for (auto& [id, job] : order) out.push_back(job);
  return out;
}

TEST_F(ServerTest, AHigherPriorityJobIsServedFirst) {
  StartInProcess(TestServerOptions(db_));
  // Both jobs wait for a worker; the higher priority one was submitted last.
  const int64_t low = Submit(HostJob({kMatmul}, 4, 2, /*priority=*/0));
  const int64_t high = Submit(HostJob({kSoftmax}, 4, 2, /*priority=*/5));
  auto w = StartHostWorker(server_->address(), dir_, "w", 1);
  ASSERT_TRUE(WaitForJobState(client_.get(), low, proto::JOB_STATE_DONE, absl::Seconds(60)));
  EXPECT_EQ(GetJob(client_.get(), high).state(), proto::JOB_STATE_DONE);
  EXPECT_EQ(JobOrder(db_, {low, high}),
            (std::vector<int64_t>{high, high, high, high, low, low, low, low}));
}

TEST_F(ServerTest, JobsOfEqualPriorityTakeTurns) {
  StartInProcess(TestServerOptions(db_));
  const int64_t a = Submit(HostJob({kMatmul}, 4, 2));
  const int64_t b = Submit(HostJob({kSoftmax}, 4, 2));
  auto w = StartHostWorker(server_->address(), dir_, "w", 1);
  ASSERT_TRUE(WaitForJobState(client_.get(), a, proto::JOB_STATE_DONE, absl::Seconds(60)));
  ASSERT_TRUE(WaitForJobState(client_.get(), b, proto::JOB_STATE_DONE, absl::Seconds(60)));
  // One batch of 2 at a time, alternating.
  EXPECT_EQ(JobOrder(db_, {a, b}), (std::vector<int64_t>{a, a, b, b, a, a, b, b}));
}

TEST_F(ServerTest, CancelStopsDispatchAtOnce) {
  StartInProcess(TestServerOptions(db_));
  auto w = StartHostWorker(server_->address(), dir_, "w", 1);
  const int64_t job = Submit(HostJob({kMatmul}, 40, 2));
  ASSERT_TRUE(
      WaitUntil([&] { return GetJob(client_.get(), job).trials_done() >= 2; }, absl::Seconds(30)));
  grpc::ClientContext ctx;
  proto::CancelJobRequest req;
  req.set_job_id(job);
  proto::JobInfo cancelled;
  ASSERT_TRUE(client_->CancelJob(&ctx, req, &cancelled).ok());
  EXPECT_EQ(cancelled.state(), proto::JOB_STATE_CANCELLED);
  ASSERT_EQ(cancelled.tasks_size(), 1);
  const int64_t bound = cancelled.trials_done() + cancelled.tasks(0).in_flight();
  EXPECT_LE(cancelled.tasks(0).in_flight(), 2);
  // Let what was in flight land, then nothing more comes.
  ASSERT_TRUE(WaitUntil(
      [&] {
        grpc::ClientContext c;
        proto::ListWorkersResponse resp;
        client_->ListWorkers(&c, proto::ListWorkersRequest(), &resp);
        return resp.workers_size() == 1 && resp.workers(0).batches_in_flight() == 0;
      },
      absl::Seconds(30)));
  absl::SleepFor(absl::Seconds(1));
  const size_t final_count = RecordsOfJob(db_, job).size();
  EXPECT_LE(static_cast<int64_t>(final_count), bound);
  EXPECT_LT(final_count, 40u);
  EXPECT_EQ(GetJob(client_.get(), job).state(), proto::JOB_STATE_CANCELLED);
}

TEST_F(ServerTest, AJobEndsWhenItsTimeBudgetIsSpent) {
  StartInProcess(TestServerOptions(db_));
  auto w = StartHostWorker(server_->address(), dir_, "w", 1);
  proto::SubmitJobRequest r = HostJob({kMatmul}, 100000, 2);
  r.set_time_budget_s(1.5);
  const int64_t job = Submit(r);
  ASSERT_TRUE(WaitForJobState(client_.get(), job, proto::JOB_STATE_DONE, absl::Seconds(30)));
  const proto::JobInfo info = GetJob(client_.get(), job);
  EXPECT_LT(info.trials_done(), 100000);
  EXPECT_GE(info.elapsed_s(), 1.5);
  EXPECT_GT(info.finished_unix_ms(), 0);
  EXPECT_EQ(info.tasks(0).state(), proto::JOB_STATE_DONE);
}

TEST_F(ServerTest, BadSubmissionsAreRefusedWithTheirReasonAndNothingIsStored) {
  StartInProcess(TestServerOptions(db_));
  struct Case {
    proto::SubmitJobRequest request;
    grpc::StatusCode code;
    std::string message;
  };
  std::vector<Case> cases;
  auto job = [](const std::string& workload) { return HostJob({workload}, 4, 2); };
  cases.push_back({job("A = input(f32, [4, 4]\nB[i] = sum(j) A[i, j]\noutput B"),
                   grpc::StatusCode::INVALID_ARGUMENT, "line 1, column 10: unclosed '('"});
  cases.push_back({job("convolution(N=1)"), grpc::StatusCode::INVALID_ARGUMENT,
                   "unknown workload family 'convolution'; known families: matmul"});
  cases.push_back({job("matmul(M=0, N=32, K=32)"), grpc::StatusCode::INVALID_ARGUMENT,
                   "parameter M of matmul must be a positive integer, found 0"});
  cases.push_back(
      {job("matmul(M=-4, N=32, K=32)"), grpc::StatusCode::INVALID_ARGUMENT, "found -4"});
  cases.push_back({job("matmul(M=9223372036854775807, N=9223372036854775807, K=2)"),
                   grpc::StatusCode::INVALID_ARGUMENT,
                   "more elements than a 64-bit integer can count"});
  proto::SubmitJobRequest zero = job(kMatmul);
  zero.set_trials_per_task(0);
  cases.push_back({zero, grpc::StatusCode::INVALID_ARGUMENT, "zero trial budget"});
  proto::SubmitJobRequest gpu = job(kMatmul);
  gpu.mutable_target()->set_kind("tpu");
  cases.push_back({gpu, grpc::StatusCode::INVALID_ARGUMENT, "unknown target 'tpu'"});
  proto::SubmitJobRequest arch = job(kMatmul);
  arch.mutable_target()->set_kind("cuda");
  arch.mutable_target()->set_arch("sm_75");
  cases.push_back({arch, grpc::StatusCode::INVALID_ARGUMENT,
                   "unknown CUDA architecture 'sm_75'; use sm_80, sm_90 or sm_90a, the "
                   "architectures Tessel has a built-in description of"});
  proto::SubmitJobRequest strategy = job(kMatmul);
  strategy.set_strategy("genetic");
  cases.push_back(
      {strategy, grpc::StatusCode::INVALID_ARGUMENT,
       "unknown search strategy 'genetic': use one of evolutionary, annealing, random"});
  proto::SubmitJobRequest none = job(kMatmul);
  none.clear_workloads();
  cases.push_back({none, grpc::StatusCode::INVALID_ARGUMENT, "no workload"});
  proto::SubmitJobRequest twice = HostJob({kMatmul, "matmul(M=32, K=32, N=32)"}, 4, 2);
  cases.push_back({twice, grpc::StatusCode::INVALID_ARGUMENT, "the same workload"});
  proto::SubmitJobRequest notarget = job(kMatmul);
  notarget.clear_target();
  cases.push_back({notarget, grpc::StatusCode::INVALID_ARGUMENT, "no target"});
  for (const Case& c : cases) {
    grpc::Status s = SubmitError(c.request);
    EXPECT_EQ(s.error_code(), c.code) << c.request.DebugString() << s.error_message();
    EXPECT_THAT(s.error_message(), HasSubstr(c.message)) << c.request.DebugString();
  }
  {
    grpc::ClientContext ctx;
    proto::GetJobRequest req;
    req.set_job_id(424242);
    proto::JobInfo info;
    grpc::Status s = client_->GetJob(&ctx, req, &info);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
    EXPECT_THAT(s.error_message(), HasSubstr("job 424242 does not exist"));
  }
  {
    grpc::ClientContext ctx;
    proto::CancelJobRequest req;
    req.set_job_id(424242);
    proto::JobInfo info;
    EXPECT_EQ(client_->CancelJob(&ctx, req, &info).error_code(), grpc::StatusCode::NOT_FOUND);
  }
  {
    grpc::ClientContext ctx;
    proto::QueryBestRequest q;
    q.set_workload(kMatmul);
    q.mutable_target()->set_kind("host");
    proto::BestRecord rec;
    grpc::Status s = client_->QueryBest(&ctx, q, &rec);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
    EXPECT_THAT(s.error_message(), HasSubstr("no measured kernel"));
  }
  // Nothing was stored.
  grpc::ClientContext ctx;
  proto::ListJobsResponse jobs;
  ASSERT_TRUE(client_->ListJobs(&ctx, proto::ListJobsRequest(), &jobs).ok());
  EXPECT_EQ(jobs.jobs_size(), 0);
  auto log = store::OpenTuningLog(db_);
  ASSERT_TRUE(log.ok());
  std::ostringstream exported;
  ASSERT_TRUE((*log)->ExportJsonl(exported).ok());
  EXPECT_EQ(exported.str(), "");
}

TEST_F(ServerTest, AWorkerOfAnotherProtocolVersionIsRejectedNamingBothVersions) {
  StartInProcess(TestServerOptions(db_));
  auto stub = proto::Worker::NewStub(
      grpc::CreateChannel(server_->address(), grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  auto stream = stub->Connect(&ctx);
  proto::WorkerMessage hello;
  hello.mutable_register_()->set_protocol_version(proto::kWorkerProtocolVersion + 98);
  hello.mutable_register_()->set_worker_id("old");
  ASSERT_TRUE(stream->Write(hello));
  proto::ServerMessage answer;
  ASSERT_TRUE(stream->Read(&answer));
  ASSERT_TRUE(answer.has_rejected());
  EXPECT_THAT(answer.rejected().reason(),
              HasSubstr(absl::StrCat("speaks version ", proto::kWorkerProtocolVersion + 98)));
  EXPECT_THAT(answer.rejected().reason(), HasSubstr(absl::StrCat("this server speaks version ",
                                                                 proto::kWorkerProtocolVersion)));
  stream->WritesDone();
  grpc::Status s = stream->Finish();
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(s.error_message(), HasSubstr("version"));
}

TEST_F(ServerTest, WatchJobStreamsProgressUntilTheJobIsDone) {
  StartInProcess(TestServerOptions(db_));
  auto w = StartHostWorker(server_->address(), dir_, "w");
  const int64_t job = Submit(HostJob({kSoftmax}, 4, 2));
  grpc::ClientContext ctx;
  proto::WatchJobRequest req;
  req.set_job_id(job);
  auto reader = client_->WatchJob(&ctx, req);
  proto::JobInfo info;
  std::vector<int64_t> done;
  while (reader->Read(&info)) done.push_back(info.trials_done());
  EXPECT_TRUE(reader->Finish().ok());
  ASSERT_GE(done.size(), 2u);
  EXPECT_EQ(info.state(), proto::JOB_STATE_DONE);
  EXPECT_EQ(done.back(), 4);
  EXPECT_TRUE(std::is_sorted(done.begin(), done.end()));
}

// A worker of the real protocol that answers every candidate of every batch with `lie` (its
// batch and candidate ids filled in), then with a result for a candidate it was not sent and a
// second answer for the first one, until the stream ends.
class LyingWorker {
 public:
  LyingWorker(const std::string& address, std::function<proto::MeasureResult(int)> lie)
      : stub_(proto::Worker::NewStub(
            grpc::CreateChannel(address, grpc::InsecureChannelCredentials()))),
        lie_(std::move(lie)) {
    thread_ = std::thread([this] { Run(); });
  }
  ~LyingWorker() {
    ctx_.TryCancel();
    thread_.join();
  }
  int answered() const { return answered_; }

 private:
  void Run() {
    auto stream = stub_->Connect(&ctx_);
    proto::WorkerMessage hello;
    proto::Register* reg = hello.mutable_register_();
    reg->set_protocol_version(proto::kWorkerProtocolVersion);
    reg->set_worker_id("liar");
    reg->set_host("nowhere");
    proto::Device* d = reg->add_devices();
    d->set_kind(proto::TARGET_KIND_HOST);
    d->set_name("Test CPU");
    d->set_arch("x86_64");
    if (!stream->Write(hello)) return;
    proto::ServerMessage in;
    if (!stream->Read(&in) || !in.has_registered()) return;
    proto::WorkerMessage credits;
    credits.mutable_credits()->set_batches(1);
    if (!stream->Write(credits)) return;
    while (stream->Read(&in)) {
      if (!in.has_batch()) continue;
      const proto::MeasureBatch& b = in.batch();
      std::vector<proto::WorkerMessage> out;
      for (const proto::Candidate& c : b.candidates()) {
        proto::WorkerMessage m;
        *m.mutable_result() = lie_(answered_++);
        m.mutable_result()->set_batch_id(b.batch_id());
        m.mutable_result()->set_candidate_id(c.id());
        out.push_back(m);
      }
      // Not one of its candidates, and the first one again with a plausible time.
      proto::WorkerMessage stranger = out[0];
      stranger.mutable_result()->set_candidate_id(987654321);
      out.push_back(stranger);
      proto::WorkerMessage again = out[0];
      again.mutable_result()->clear_repeats_ms();
      again.mutable_result()->add_repeats_ms(0.5);
      again.mutable_result()->set_median_ms(0.5);
      out.push_back(again);
      proto::WorkerMessage done;
      done.mutable_batch_done()->set_batch_id(b.batch_id());
      out.push_back(done);
      out.push_back(credits);
      for (const proto::WorkerMessage& m : out) {
        if (!stream->Write(m)) return;
      }
    }
  }

  grpc::ClientContext ctx_;
  std::unique_ptr<proto::Worker::Stub> stub_;
  std::function<proto::MeasureResult(int)> lie_;
  std::atomic<int> answered_{0};
  std::thread thread_;
};

proto::Device HostDevice() {
  proto::Device d;
  d.set_kind(proto::TARGET_KIND_HOST);
  d.set_name("Test CPU");
  d.set_arch("x86_64");
  return d;
}

proto::Device CudaDevice(const std::string& arch) {
  proto::Device d;
  d.set_kind(proto::TARGET_KIND_CUDA);
  d.set_name("Test GPU " + arch);
  d.set_arch(arch);
  return d;
}

// A worker of the real protocol that registers one device (the host by default), grants one
// credit and sends a heartbeat every 0.2 s, but never answers a batch: alive to the heartbeat
// check, useless to a job. It keeps what each batch asked to compile for (cuda_arch).
class SilentWorker {
 public:
  explicit SilentWorker(const std::string& address, proto::Device device = HostDevice(),
                        std::string worker_id = "silent")
      : stub_(proto::Worker::NewStub(
            grpc::CreateChannel(address, grpc::InsecureChannelCredentials()))),
        device_(std::move(device)),
        worker_id_(std::move(worker_id)) {
    thread_ = std::thread([this] { Run(); });
  }
  ~SilentWorker() {
    stop_ = true;
    ctx_.TryCancel();
    thread_.join();
  }
  int batches() const { return batches_; }
  std::vector<std::string> cuda_archs() {
    absl::MutexLock lock(&mu_);
    return cuda_archs_;
  }

 private:
  void Run() {
    auto stream = stub_->Connect(&ctx_);
    proto::WorkerMessage hello;
    proto::Register* reg = hello.mutable_register_();
    reg->set_protocol_version(proto::kWorkerProtocolVersion);
    reg->set_worker_id(worker_id_);
    reg->set_host("nowhere");
    *reg->add_devices() = device_;
    if (!stream->Write(hello)) return;
    proto::ServerMessage in;
    if (!stream->Read(&in) || !in.has_registered()) return;
    proto::WorkerMessage credits;
    credits.mutable_credits()->set_batches(1);
    if (!stream->Write(credits)) return;
    // Reads and writes of one stream may run on two threads, one of each.
    std::thread heartbeats([&] {
      proto::WorkerMessage beat;
      beat.mutable_heartbeat();
      while (!stop_ && stream->Write(beat)) absl::SleepFor(absl::Milliseconds(200));
    });
    while (stream->Read(&in)) {
      if (!in.has_batch()) continue;
      {
        absl::MutexLock lock(&mu_);
        cuda_archs_.push_back(in.batch().cuda_arch());
      }
      ++batches_;
    }
    stop_ = true;
    heartbeats.join();
  }

  grpc::ClientContext ctx_;
  std::unique_ptr<proto::Worker::Stub> stub_;
  const proto::Device device_;
  const std::string worker_id_;
  absl::Mutex mu_;
  std::vector<std::string> cuda_archs_ ABSL_GUARDED_BY(mu_);
  std::atomic<int> batches_{0};
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

proto::SubmitJobRequest CudaJob(const std::string& arch) {
  proto::SubmitJobRequest r = HostJob({kSoftmax}, 2, 2);  // one batch: every trial at once
  r.mutable_target()->set_kind("cuda");
  r.mutable_target()->set_arch(arch);
  return r;
}

TEST(DevicesMatch, A90GpuServesSm90AndSm90aAndNoOtherGpuServesSm90a) {
  auto gpu = [](const std::string& arch) {
    server::WorkerDevice d;
    d.kind = schedules::TargetKind::kCuda;
    d.arch = arch;
    return std::vector<server::WorkerDevice>{d};
  };
  const auto cuda = schedules::TargetKind::kCuda;
  EXPECT_TRUE(server::DevicesMatch(gpu("sm_90"), cuda, "sm_90"));
  EXPECT_TRUE(server::DevicesMatch(gpu("sm_90"), cuda, "sm_90a"));
  EXPECT_FALSE(server::DevicesMatch(gpu("sm_90"), cuda, "sm_80"));
  EXPECT_TRUE(server::DevicesMatch(gpu("sm_80"), cuda, "sm_80"));
  EXPECT_FALSE(server::DevicesMatch(gpu("sm_80"), cuda, "sm_90a"));
  EXPECT_FALSE(server::DevicesMatch(gpu("sm_89"), cuda, "sm_90a"));
  EXPECT_FALSE(server::DevicesMatch(gpu("sm_100"), cuda, "sm_90a"));
  server::WorkerDevice host;
  EXPECT_FALSE(server::DevicesMatch({host}, cuda, "sm_90a"));
  EXPECT_TRUE(server::DevicesMatch({host}, schedules::TargetKind::kHost, ""));
}

// Worker matching end to end: workers of the real protocol with an 8.0 GPU and 9.0 GPUs. An sm_90a
// job waits (saying for what) while only the 8.0 GPU is connected, goes to the 9.0 GPU when it
// connects, with batches that say to compile for sm_90a; an sm_90 job goes to a 9.0 GPU saying
// sm_90, an sm_80 job to the 8.0 GPU; and the 8.0 GPU never gets the sm_90a batch.
TEST_F(ServerTest, AnSm90aJobGoesToA90GpuOnlyAndItsBatchesSayToCompileForSm90a) {
  StartInProcess(TestServerOptions(db_));
  SilentWorker a100(server_->address(), CudaDevice("sm_80"), "a100");
  auto workers = [&] {
    grpc::ClientContext c;
    proto::ListWorkersResponse resp;
    return client_->ListWorkers(&c, proto::ListWorkersRequest(), &resp).ok() ? resp.workers_size()
                                                                             : -1;
  };
  ASSERT_TRUE(WaitUntil([&] { return workers() == 1; }, absl::Seconds(10)));
  const int64_t hopper = Submit(CudaJob("sm_90a"));
  ASSERT_GT(hopper, 0);
  EXPECT_EQ(GetJob(client_.get(), hopper).target(), "cuda -arch=sm_90a");
  EXPECT_EQ(GetJob(client_.get(), hopper).warning(),
            "no connected worker can measure cuda -arch=sm_90a: the job waits until one connects "
            "(tessel worker --server HOST:PORT on a machine with an sm_90 GPU)");
  absl::SleepFor(absl::Seconds(1));  // many dispatcher ticks
  EXPECT_EQ(a100.batches(), 0);

  SilentWorker h100(server_->address(), CudaDevice("sm_90"), "h100");
  ASSERT_TRUE(WaitUntil([&] { return h100.batches() == 1; }, absl::Seconds(30)));
  EXPECT_THAT(h100.cuda_archs(), ::testing::ElementsAre("sm_90a"));
  EXPECT_EQ(GetJob(client_.get(), hopper).warning(), "");

  const int64_t ampere = Submit(CudaJob("sm_80"));
  ASSERT_GT(ampere, 0);
  ASSERT_TRUE(WaitUntil([&] { return a100.batches() == 1; }, absl::Seconds(30)));
  EXPECT_THAT(a100.cuda_archs(), ::testing::ElementsAre("sm_80"));

  SilentWorker h200(server_->address(), CudaDevice("sm_90"), "h200");
  const int64_t portable = Submit(CudaJob("sm_90"));
  ASSERT_GT(portable, 0);
  ASSERT_TRUE(WaitUntil([&] { return h200.batches() == 1; }, absl::Seconds(30)));
  EXPECT_THAT(h200.cuda_archs(), ::testing::ElementsAre("sm_90"));
  EXPECT_EQ(h100.batches(), 1);  // its one credit is still held by the sm_90a batch
  EXPECT_EQ(a100.batches(), 1);
}

TEST(BatchDeadline, IsTheLeastPlusThreeTimesTheExpectedTimeUpToTheCeiling) {
  server::DispatcherOptions o;  // 30 s at least, 600 s at most
  EXPECT_DOUBLE_EQ(server::BatchDeadlineS(o, 0), 30);
  EXPECT_DOUBLE_EQ(server::BatchDeadlineS(o, 10), 60);
  EXPECT_DOUBLE_EQ(server::BatchDeadlineS(o, 1000), 600);
  o.batch_deadline_min_s = 1;
  EXPECT_DOUBLE_EQ(server::BatchDeadlineS(o, 0.5), 2.5);
}

// The sending side of a worker stream that keeps what it is sent.
class KeptBatches final : public server::WorkerConnection {
 public:
  bool SendBatch(const server::OutgoingBatch& batch) override {
    sent.push_back(batch);
    return true;
  }
  void Close() override {}
  std::vector<server::OutgoingBatch> sent;
};

// A batch sent to a worker that holds another one is given time for both: the worker measures
// its batches one after the other.
TEST(BatchDeadline, ABatchBehindAnotherHasTimeForBoth) {
  server::WorkerRegistry registry;
  server::EventLog events(/*quiet=*/true);
  server::DispatcherOptions o;  // 30 s at least, 3 x expected, 5 s a candidate before timings
  server::Dispatcher dispatcher(&registry, o, &events);
  auto connection = std::make_shared<KeptBatches>();
  server::WorkerEntry entry;
  entry.worker_id = "w";
  entry.devices.push_back({});
  const uint64_t session = registry.Add(entry, connection);
  registry.AddCredits(session, 2);
  server::TaskDispatch task;
  task.task_id = 1;
  task.batch_size = 2;
  dispatcher.AddTask(task);
  std::vector<server::QueuedCandidate> candidates;
  for (uint64_t id = 1; id <= 4; ++id) candidates.push_back({1, id, "", nullptr, 0});
  dispatcher.Enqueue(candidates);
  EXPECT_EQ(dispatcher.Dispatch(), 2);
  ASSERT_EQ(connection->sent.size(), 2u);
  EXPECT_DOUBLE_EQ(connection->sent[0].deadline_s, 30 + 3 * (2 * 5));
  EXPECT_DOUBLE_EQ(connection->sent[1].deadline_s, 30 + 3 * (2 * 5 + 2 * 5));
}

// A task resumed from the log starts from what its records took (compiling, verifying, the
// repeats), not from the 5 s guess.
TEST(BatchDeadline, AResumedTaskStartsFromItsRecordsTimes) {
  measure::Measurement m;
  m.compile_ms = 400;
  m.verify_ms = 50;
  m.timings = measure::MakeTimings({10, 20, 20});
  EXPECT_DOUBLE_EQ(server::MeasuredCandidateS(m), 0.5);
  server::WorkerRegistry registry;
  server::EventLog events(/*quiet=*/true);
  server::Dispatcher dispatcher(&registry, server::DispatcherOptions(), &events);
  auto connection = std::make_shared<KeptBatches>();
  server::WorkerEntry entry;
  entry.devices.push_back({});
  registry.AddCredits(registry.Add(entry, connection), 1);
  server::TaskDispatch task;
  task.task_id = 1;
  task.batch_size = 4;
  task.expected_candidate_s = server::MeasuredCandidateS(m);
  dispatcher.AddTask(task);
  dispatcher.Enqueue({{1, 1, "", nullptr, 0}, {1, 2, "", nullptr, 0}});
  ASSERT_EQ(dispatcher.Dispatch(), 1);
  EXPECT_DOUBLE_EQ(connection->sent[0].deadline_s, 30 + 3 * (2 * 0.5));
}

// Issue 20, point 5: a worker that takes a batch and never answers held it for the 600 s batch
// deadline. The deadline is now scaled to the batch's expected time: the silent worker loses its
// batch in seconds and a real worker finishes the job, while the heartbeats keep the silent one
// connected (it is not the heartbeat check that frees its batch).
TEST_F(ServerTest, ASilentWorkerLosesItsBatchAtADeadlineScaledToTheBatch) {
  std::string address;
  auto serve = StartServe(db_, "127.0.0.1:0", {"--batch-deadline-min-s", "1"}, dir_ + "/serve.log",
                          &address);
  ASSERT_FALSE(address.empty()) << serve->Log();
  client_ = Client(address);
  auto real = StartHostWorker(address, dir_, "real", 1);
  const int64_t job = Submit(HostJob({kSoftmax}, 12, 2));
  ASSERT_GT(job, 0);
  // The task's candidates have been timed before the silent worker takes a batch.
  ASSERT_TRUE(
      WaitUntil([&] { return GetJob(client_.get(), job).trials_done() >= 2; }, absl::Seconds(30)))
      << serve->Log() << real->Log();
  const absl::Time start = absl::Now();
  SilentWorker silent(address);
  ASSERT_TRUE(WaitForJobState(client_.get(), job, proto::JOB_STATE_DONE, absl::Seconds(90)))
      << serve->Log();
  EXPECT_LT(absl::Now() - start, absl::Seconds(60));  // not the 600 s ceiling
  EXPECT_GE(silent.batches(), 1) << serve->Log();
  const std::string log = serve->Log();
  std::smatch m;
  ASSERT_TRUE(std::regex_search(
      log, m,
      std::regex("batch [0-9]+: silent answered 0 of its 2 candidates within the batch's "
                 "deadline of ([0-9.e+-]+) s \\(about [0-9.e+-]+ s a candidate expected\\): the "
                 "2 unanswered go back to the queue for another worker")))
      << log;
  EXPECT_LT(std::stod(m[1]), 30.0) << log;
  EXPECT_THAT(log, HasSubstr("candidates to silent (deadline "));
  std::vector<store::Record> records = RecordsOfJob(db_, job);
  std::set<uint64_t> ids;
  for (const store::Record& r : records) {
    ids.insert(r.candidate_id);
    EXPECT_EQ(r.measurement.worker_id, "real");
  }
  EXPECT_EQ(records.size(), 12u);
  EXPECT_EQ(ids.size(), 12u);
  // Still connected: its heartbeats kept it registered the whole time.
  grpc::ClientContext ctx;
  proto::ListWorkersResponse workers;
  ASSERT_TRUE(client_->ListWorkers(&ctx, proto::ListWorkersRequest(), &workers).ok());
  std::set<std::string> names;
  for (const proto::WorkerInfo& w : workers.workers()) names.insert(w.worker_id());
  EXPECT_EQ(names, (std::set<std::string>{"real", "silent"}));
}

TEST(ServeFlags, ALeastBatchDeadlineOverTheCeilingIsRefused) {
  const std::string dir = MakeTempDir("tessel_serve_flags");
  CliResult r = RunTessel("serve --db " + dir +
                          "/log.db --listen 127.0.0.1:0 "
                          "--batch-deadline-min-s 700");
  EXPECT_EQ(r.status, 1);
  EXPECT_THAT(r.output,
              HasSubstr("tessel serve: the least batch deadline (--batch-deadline-min-s 700) "
                        "must be a positive number of seconds no greater than the batch deadline "
                        "(--batch-deadline-s 600)"));
}

// Issue 20, point 5: 500 idle worker streams held 509 threads. Each stream holds a thread of the
// synchronous server, so their number is bounded: past the limit a stream is refused with
// RESOURCE_EXHAUSTED naming it, and a real worker that meets the limit retries until a slot frees.
TEST_F(ServerTest, WorkerStreamsPastTheLimitAreRefusedNamingItUntilOneEnds) {
  server::ServerOptions o = TestServerOptions(db_);
  o.max_worker_streams = 1;
  StartInProcess(o);
  auto silent = std::make_unique<SilentWorker>(server_->address());
  ASSERT_TRUE(WaitUntil(
      [&] {
        grpc::ClientContext c;
        proto::ListWorkersResponse resp;
        return client_->ListWorkers(&c, proto::ListWorkersRequest(), &resp).ok() &&
               resp.workers_size() == 1;
      },
      absl::Seconds(10)));
  const std::string full =
      "the server has 1 worker stream open, the most it takes (--max-worker-streams 1): try "
      "again later, or raise --max-worker-streams on the server";
  {
    auto stub = proto::Worker::NewStub(
        grpc::CreateChannel(server_->address(), grpc::InsecureChannelCredentials()));
    grpc::ClientContext ctx;
    auto stream = stub->Connect(&ctx);
    proto::ServerMessage m;
    EXPECT_FALSE(stream->Read(&m));
    grpc::Status s = stream->Finish();
    EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
    EXPECT_EQ(s.error_message(), full);
  }
  auto w = StartHostWorker(server_->address(), dir_, "w");
  ASSERT_TRUE(
      WaitUntil([&] { return w->Log().find(full) != std::string::npos; }, absl::Seconds(10)))
      << w->Log();
  EXPECT_THAT(w->Log(), HasSubstr("the server at " + server_->address() +
                                  " takes no more workers now: " + full));
  // The slot frees when the silent worker leaves: the real one gets in and measures a job.
  silent.reset();
  const int64_t job = Submit(HostJob({kSoftmax}, 2, 2));
  ASSERT_TRUE(WaitForJobState(client_.get(), job, proto::JOB_STATE_DONE, absl::Seconds(60)))
      << w->Log();
}

TEST(ServeFlags, NoWorkerStreamsIsRefused) {
  const std::string dir = MakeTempDir("tessel_serve_flags");
  CliResult r =
      RunTessel("serve --db " + dir + "/log.db --listen 127.0.0.1:0 --max-worker-streams 0");
  EXPECT_EQ(r.status, 1);
  EXPECT_THAT(r.output, HasSubstr("tessel serve: --max-worker-streams 0: give at least 1 (one per "
                                  "worker daemon)"));
}

proto::MeasureResult OkResult(std::vector<double> repeats, double median) {
  proto::MeasureResult r;
  r.set_status(proto::MEASURE_STATUS_OK);
  for (double ms : repeats) r.add_repeats_ms(ms);
  r.set_median_ms(median);
  r.set_worker_id("someone-else");
  return r;
}

TEST_F(ServerTest, AWorkersInvalidTimesNeverReachTheLog) {
  StartInProcess(TestServerOptions(db_));
  const double inf = std::numeric_limits<double>::infinity();
  LyingWorker liar(server_->address(), [&](int i) {
    return i % 2 == 0 ? OkResult({inf}, inf) : OkResult({-5.0}, -5.0);
  });
  const int64_t job = Submit(HostJob({kMatmul}, 2, 2));
  ASSERT_TRUE(WaitForJobState(client_.get(), job, proto::JOB_STATE_DONE, absl::Seconds(60)));
  // Each candidate was refused 3 times (a worker error is retried), then recorded as that error.
  EXPECT_EQ(liar.answered(), 6);
  std::vector<store::Record> records = RecordsOfJob(db_, job);
  ASSERT_EQ(records.size(), 2u);
  for (const store::Record& r : records) {
    EXPECT_EQ(r.measurement.status, measure::MeasureStatus::kWorkerError);
    EXPECT_THAT(r.measurement.error, HasSubstr("worker liar sent an invalid result: repeat 0 is "));
    EXPECT_THAT(r.measurement.error, HasSubstr(" ms; a time must be finite and positive"));
    EXPECT_EQ(r.measurement.worker_id, "liar");  // not the id the result claimed
    EXPECT_TRUE(r.measurement.timings.repeats_ms.empty());
    EXPECT_NE(r.candidate_id, 987654321u);
  }
  EXPECT_EQ(RawQuery(db_, "SELECT count(*) FROM records"), "2");
  auto log = store::OpenTuningLog(db_);
  ASSERT_TRUE(log.ok());
  auto bad = (*log)->BadRecords();
  ASSERT_TRUE(bad.ok());
  EXPECT_TRUE(bad->empty());
  // Nothing was measured ok: best says so instead of reporting an impossible time.
  grpc::ClientContext ctx;
  proto::QueryBestRequest q;
  q.set_workload(kMatmul);
  q.mutable_target()->set_kind("host");
  proto::BestRecord best;
  EXPECT_EQ(client_->QueryBest(&ctx, q, &best).error_code(), grpc::StatusCode::NOT_FOUND);
}

TEST_F(ServerTest, EveryFigureAWorkerMeasuredIsStoredWithItsRecord) {
  StartInProcess(TestServerOptions(db_));
  // What a CUDA worker sends: CUPTI kernel times, counters, clocks and temperature; the first
  // result a screened timing (a slower one, as screening leaves it), the second confirmed.
  int sent = 0;
  LyingWorker worker(server_->address(), [&](int) {
    const bool screened = sent++ == 0;
    proto::MeasureResult r =
        screened ? OkResult({3.0, 3.1, 3.2}, 3.1) : OkResult({2.0, 2.1, 2.2}, 2.1);
    for (double ms : {1.9, 2.0, 2.05}) r.add_kernel_repeats_ms(ms);
    r.set_kernel_median_ms(2.0);
    r.mutable_counters()->set_dram_read_bytes(1.5e9);
    r.mutable_counters()->set_dram_write_bytes(0.5e9);
    r.mutable_counters()->set_achieved_occupancy(62.5);
    r.mutable_device_state()->set_sm_clock_mhz(1980);
    r.mutable_device_state()->set_memory_clock_mhz(2619);
    r.mutable_device_state()->set_temperature_c(51);
    r.set_timing_note("a note");
    r.set_timing_kind(screened ? proto::TIMING_KIND_SCREENED : proto::TIMING_KIND_CONFIRMED);
    return r;
  });
  const int64_t job = Submit(HostJob({kMatmul}, 2, 2));
  ASSERT_TRUE(WaitForJobState(client_.get(), job, proto::JOB_STATE_DONE, absl::Seconds(60)));
  std::vector<store::Record> records = RecordsOfJob(db_, job);
  ASSERT_EQ(records.size(), 2u);
  for (const store::Record& r : records) {
    const measure::Timings& t = r.measurement.timings;
    ASSERT_EQ(r.measurement.status, measure::MeasureStatus::kOk) << r.measurement.error;
    EXPECT_EQ(t.kernel_repeats_ms, (std::vector<double>{1.9, 2.0, 2.05}));
    EXPECT_EQ(t.kernel_median_ms, 2.0);
    ASSERT_TRUE(t.counters.has_value());
    EXPECT_EQ(t.counters->dram_read_bytes, 1.5e9);
    EXPECT_EQ(t.counters->dram_write_bytes, 0.5e9);
    EXPECT_EQ(t.counters->achieved_occupancy, 62.5);
    EXPECT_EQ(t.device_state.sm_clock_mhz, 1980);
    EXPECT_EQ(t.device_state.memory_clock_mhz, 2619);
    EXPECT_EQ(t.device_state.temperature_c, 51);
    EXPECT_EQ(t.note, "a note");
    EXPECT_EQ(t.kind,
              t.median_ms > 3 ? measure::TimingKind::kScreened : measure::TimingKind::kConfirmed);
  }
  // And the best, the confirmed record, answers with its CUPTI median.
  grpc::ClientContext ctx;
  proto::QueryBestRequest q;
  q.set_workload(kMatmul);
  q.mutable_target()->set_kind("host");
  proto::BestRecord best;
  ASSERT_TRUE(client_->QueryBest(&ctx, q, &best).ok());
  EXPECT_EQ(best.kernel_median_ms(), 2.0);
}

TEST_F(ServerTest, AResultThatContradictsItsRepeatsIsRefused) {
  StartInProcess(TestServerOptions(db_));
  LyingWorker liar(server_->address(), [&](int) {
    return OkResult({2.0, 2.1, 2.2}, 0.0001);
  });  // a "fast" median
  const int64_t job = Submit(HostJob({kMatmul}, 1, 1));
  ASSERT_TRUE(WaitForJobState(client_.get(), job, proto::JOB_STATE_DONE, absl::Seconds(60)));
  std::vector<store::Record> records = RecordsOfJob(db_, job);
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].measurement.error,
            "worker liar sent an invalid result: median_ms 0.0001 lies outside its repeats (2 to "
            "2.2 ms)");
}

TEST_F(ServerTest, APoisonedRowDoesNotStopGuidedJobs) {
  {
    auto log = store::OpenTuningLog(db_);
    ASSERT_TRUE(log.ok()) << log.status();
    std::istringstream in(ReplayFixtureJsonl());
    ASSERT_TRUE((*log)->ImportJsonl(in).ok());
  }
  // What issue 20 saw after a worker reported inf: repeats_ms [null] on an ok row.
  ASSERT_EQ(RawExec(db_,
                    "UPDATE records SET repeats_ms = '[null]', median_ms = 9e999 WHERE id = "
                    "(SELECT min(id) FROM records WHERE status = 'ok')"),
            "");
  StartInProcess(TestServerOptions(db_));
  auto w = StartHostWorker(server_->address(), dir_, "w1");
  // A family with records (the poisoned row's) and one without.
  proto::SubmitJobRequest r = HostJob({kReplayFixtureWorkload, "softmax(rows=8, cols=64)"}, 2, 2);
  r.set_strategy("");  // the default: evolutionary, from a cost model of the log
  const int64_t job = Submit(r);
  ASSERT_GT(job, 0);
  ASSERT_TRUE(WaitForJobState(client_.get(), job, proto::JOB_STATE_DONE, absl::Seconds(90)))
      << w->Log();
  EXPECT_EQ(GetJob(client_.get(), job).trials_done(), 4);
}

TEST_F(ServerTest, ASecondServerOnTheSameLogNamesTheHolderAndExits) {
  StartInProcess(TestServerOptions(db_));
  char host[256] = "";
  gethostname(host, sizeof(host) - 1);
  const std::string holder =
      absl::StrCat("the tuning log ", db_, " is in use by another tessel server (pid ", getpid(),
                   " on host ", host, " since ");
  const std::string fix =
      absl::StrCat("; lock file ", db_, ".lock): stop that server first, or pass another --db");
  auto second = server::StartServer(TestServerOptions(db_));
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(second.status().message(), HasSubstr(holder));
  EXPECT_THAT(second.status().message(), HasSubstr(fix));
  // `tessel serve` says the same and exits.
  CliResult r = RunTessel("serve --db " + db_ + " --listen 127.0.0.1:0");
  EXPECT_EQ(r.status, 1);
  EXPECT_THAT(r.output, HasSubstr("tessel serve: " + holder));
  EXPECT_THAT(r.output, Not(HasSubstr("listening")));
  // Once the first is gone the log is free again.
  server_->Shutdown();
  server_.reset();
  auto third = server::StartServer(TestServerOptions(db_));
  EXPECT_TRUE(third.ok()) << third.status();
}

TEST_F(ServerTest, ASecondServerOnATakenPortFailsSayingThePortIsInUse) {
  StartInProcess(TestServerOptions(db_));
  // The server's socket is not shared: even a socket asking for SO_REUSEPORT cannot bind it.
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  const int one = 1;
  ASSERT_EQ(setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)), 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(server_->port()));
  inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
  EXPECT_NE(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  EXPECT_EQ(errno, EADDRINUSE);
  close(fd);

  server::ServerOptions o = TestServerOptions(dir_ + "/other.db");
  o.listen = server_->address();
  auto second = server::StartServer(o);
  ASSERT_FALSE(second.ok());
  const std::string message =
      absl::StrCat("cannot listen on ", server_->address(), ": port ", server_->port(),
                   " is in use (another tessel serve or another program holds it); stop that one "
                   "or pass another --listen HOST:PORT");
  EXPECT_EQ(second.status().message(), message);
  // `tessel serve` prints only that (no gRPC log lines first).
  CliResult r = RunTessel("serve --db " + dir_ + "/third.db --listen " + server_->address());
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.output, "tessel serve: " + message + "\n");
}

TEST(ListenAddress, AMalformedAddressOrPortIsRefusedSayingWhatToGive) {
  for (const char* bad :
       {"127.0.0.1:99999", "127.0.0.1:", "127.0.0.1:-1", "127.0.0.1:7x", "7070", ":7070"}) {
    EXPECT_EQ(server::CheckListenAddress(bad).message(),
              absl::StrCat("--listen ", bad,
                           ": give HOST:PORT with a port from 0 (any free port) to 65535, e.g. "
                           "127.0.0.1:7070"));
  }
  EXPECT_EQ(server::CheckListenAddress("no-such-host.invalid:7070").message(),
            "--listen no-such-host.invalid:7070: host no-such-host.invalid is not a name or "
            "address this machine can resolve; pass an address such as 127.0.0.1");
  EXPECT_EQ(server::CheckListenAddress("192.0.2.1:0").message(),
            "cannot listen on 192.0.2.1:0: 192.0.2.1 is not an address of this machine; pass one "
            "of its addresses, e.g. 127.0.0.1");
  EXPECT_TRUE(server::CheckListenAddress("127.0.0.1:0").ok());
  EXPECT_TRUE(server::CheckListenAddress("localhost:0").ok());
  CliResult r =
      RunTessel("serve --db " + MakeTempDir("tessel_listen") + "/log.db --listen 127.0.0.1:99999");
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.output,
            "tessel serve: --listen 127.0.0.1:99999: give HOST:PORT with a port from 0 (any free "
            "port) to 65535, e.g. 127.0.0.1:7070\n");
}

TEST_F(ServerTest, AJobBeyondTheLimitsIsRefusedSayingWhichAndNothingIsStored) {
  StartInProcess(TestServerOptions(db_));
  std::vector<std::string> many;
  for (int i = 1; i <= 101; ++i) many.push_back(absl::StrCat("softmax(rows=4, cols=", 4 * i, ")"));
  grpc::Status s = SubmitError(HostJob(many, 4, 2));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(s.error_message(),
            "the job lists 101 workloads, more than the most one job may list (100): split them "
            "over several jobs");
  proto::SubmitJobRequest named = HostJob({kSoftmax}, 4, 2);
  named.set_name(std::string(300, 'n'));
  s = SubmitError(named);
  EXPECT_EQ(s.error_message(), "the job name ('" + std::string(77, 'n') +
                                   "...') is 300 bytes, more than the most a name may have (256): "
                                   "give a shorter one");
  const std::string huge = "softmax(rows=4, cols=8)" + std::string(70000, ' ');
  s = SubmitError(HostJob({huge}, 4, 2));
  EXPECT_EQ(s.error_message(),
            "workload 1 ('softmax(rows=4, cols=8)" + std::string(54, ' ') +
                "...') is 70023 bytes, more than the most a workload text may have (65536): give "
                "a spec or a definition of its tensors and statements only");
  // Names no target or strategy has are quoted short (issue 20, point 9: errors echoed 100 KB
  // inputs in full).
  proto::SubmitJobRequest kind = HostJob({kSoftmax}, 4, 2);
  kind.mutable_target()->set_kind(std::string(100000, 'k'));
  s = SubmitError(kind);
  EXPECT_EQ(s.error_message(), "the target ('" + std::string(77, 'k') +
                                   "...') is 100000 bytes, longer than any known one: use host "
                                   "or cuda");
  proto::SubmitJobRequest arch = HostJob({kSoftmax}, 4, 2);
  arch.mutable_target()->set_kind("cuda");
  arch.mutable_target()->set_arch("sm_" + std::string(100, '9'));
  s = SubmitError(arch);
  EXPECT_EQ(s.error_message(), "the CUDA architecture ('sm_" + std::string(74, '9') +
                                   "...') is 103 bytes, longer than any known one: use sm_80, "
                                   "sm_90 or sm_90a");
  proto::SubmitJobRequest strategy = HostJob({kSoftmax}, 4, 2);
  strategy.set_strategy(std::string(65, 's'));
  s = SubmitError(strategy);
  EXPECT_EQ(s.error_message(), "the search strategy ('" + std::string(65, 's') +
                                   "') is 65 bytes, longer than any known one: use evolutionary, "
                                   "annealing or random");
  // A message past the receive limit is refused by gRPC before it is read.
  proto::SubmitJobRequest giant = HostJob({kSoftmax}, 4, 2);
  giant.set_name(std::string(20 << 20, 'x'));
  s = SubmitError(giant);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  grpc::ClientContext ctx;
  proto::ListJobsResponse jobs;
  ASSERT_TRUE(client_->ListJobs(&ctx, proto::ListJobsRequest(), &jobs).ok());
  EXPECT_EQ(jobs.jobs_size(), 0);
}

// Issue 22: a job's baselines are checked by the server too (it does not trust the client); a
// refused one stores nothing, an accepted one is stored with its task and reported by GetJob.
TEST_F(ServerTest, BaselinesAreCheckedByTheServerAndStoredWithTheirTask) {
  StartInProcess(TestServerOptions(db_));
  auto with = [](const std::string& workload, double ms, const std::string& label) {
    proto::SubmitJobRequest r = HostJob({kMatmul, kSoftmax}, 4, 2);
    proto::Baseline* b = r.add_baselines();
    b->set_workload(workload);
    b->set_ms(ms);
    b->set_label(label);
    return r;
  };
  const std::string quote = absl::StrCat("baseline 1 ('", kMatmul, "')");
  struct Case {
    proto::SubmitJobRequest request;
    std::string message;
  };
  std::vector<Case> cases;
  cases.push_back({with("softmax(rows=8, cols=128)", 1, "cuBLAS"),
                   "baseline 1 ('softmax(rows=8, cols=128)') is not one of the job's workloads: "
                   "give each baseline for a workload the job lists, by its spec as listed"});
  cases.push_back({with("no workload at all", 1, "cuBLAS"),
                   "baseline 1 ('no workload at all') is not one of the job's workloads"});
  cases.push_back({with(kMatmul, 0, "cuBLAS"),
                   quote + " has latency 0 ms: a baseline is a positive number of milliseconds, "
                           "e.g. 0.42"});
  cases.push_back({with(kMatmul, -2, "cuBLAS"), quote + " has latency -2 ms"});
  cases.push_back({with(kMatmul, std::numeric_limits<double>::infinity(), "cuBLAS"),
                   quote + " has latency inf ms"});
  cases.push_back({with(kMatmul, std::nan(""), "cuBLAS"), quote + " has latency nan ms"});
  cases.push_back({with(kMatmul, 1, std::string(65, 'l')),
                   quote + " has a label of 65 bytes, more than a label may have (64): give a "
                           "short one such as \"PyTorch eager\""});
  cases.push_back({with(kMatmul, 1, "two\nlines"),
                   quote + " has a label with a control character (a line break?): give one line "
                           "of text such as \"cuBLAS\""});
  proto::SubmitJobRequest twice = with(kMatmul, 1, "cuBLAS");
  *twice.add_baselines() = twice.baselines(0);
  twice.mutable_baselines(1)->set_workload("matmul(M=32, K=32, N=32)");  // the same workload
  cases.push_back({twice,
                   "baseline 2 ('matmul(M=32, K=32, N=32)') is the second baseline of workload 1: "
                   "give each workload at most one baseline"});
  proto::SubmitJobRequest huge = with(std::string(70000, 'm'), 1, "cuBLAS");
  cases.push_back({huge, "names a workload of 70000 bytes, more than any workload text may have"});
  for (const Case& c : cases) {
    grpc::Status s = SubmitError(c.request);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
    EXPECT_THAT(s.error_message(), HasSubstr(c.message));
  }
  {
    grpc::ClientContext ctx;
    proto::ListJobsResponse jobs;
    ASSERT_TRUE(client_->ListJobs(&ctx, proto::ListJobsRequest(), &jobs).ok());
    EXPECT_EQ(jobs.jobs_size(), 0);
  }

  // Named by another text of the same workload; the label defaults.
  const int64_t job = Submit(with("matmul(K=32, N=32, M=32)", 0.25, ""));
  ASSERT_GT(job, 0);
  proto::JobInfo info = GetJob(client_.get(), job);
  ASSERT_EQ(info.tasks_size(), 2);
  EXPECT_EQ(info.tasks(0).baseline_ms(), 0.25);
  EXPECT_EQ(info.tasks(0).baseline_label(), "baseline");
  EXPECT_EQ(info.tasks(1).baseline_ms(), 0);
  EXPECT_EQ(info.tasks(1).baseline_label(), "");
  server_->Shutdown();
  server_.reset();
  auto log = store::OpenTuningLog(db_);
  ASSERT_TRUE(log.ok()) << log.status();
  auto tasks = (*log)->TasksOf(job);
  ASSERT_TRUE(tasks.ok()) << tasks.status();
  ASSERT_EQ(tasks->size(), 2u);
  EXPECT_EQ((*tasks)[0].baseline_ms, 0.25);
  EXPECT_EQ((*tasks)[0].baseline_label, "baseline");
  EXPECT_EQ((*tasks)[1].baseline_ms, 0);
}

TEST_F(ServerTest, AWorkerStreamThatNeverRegistersIsEnded) {
  server::ServerOptions o = TestServerOptions(db_);
  o.registration_timeout_s = 0.5;
  StartInProcess(o);
  auto stub = proto::Worker::NewStub(
      grpc::CreateChannel(server_->address(), grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  auto stream = stub->Connect(&ctx);
  const absl::Time start = absl::Now();
  proto::ServerMessage m;
  EXPECT_FALSE(stream->Read(&m));  // ended by the server, not by the 30 s deadline
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
  EXPECT_NE(stream->Finish().error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  // A worker that registers in time is kept past the timeout.
  auto w = StartHostWorker(server_->address(), dir_, "w");
  const int64_t job = Submit(HostJob({kSoftmax}, 2, 2));
  ASSERT_TRUE(WaitForJobState(client_.get(), job, proto::JOB_STATE_DONE, absl::Seconds(60)));
}

}  // namespace
}  // namespace tessel::testing
