// The HTTP side of the server (`tessel serve --http`): /metrics scraped during a real job (a real
// server on port 0, a real `tessel worker --target host`, a SQLite log in a temp dir), the
// dashboard and `tessel report` holding each task's tuning curve, the same tokens as the gRPC
// API, and the messages of a bad, taken or unprotected --http address.

#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>
#include <map>
#include <regex>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_format.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/dashboard_data.h"
#include "server/dashboard_page.h"
#include "server/server_metrics.h"
#include "server/tokens_file.h"
#include "tests/cli/cli_test_util.h"
#include "tests/server/server_test_util.h"

namespace tessel::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kMatmul[] = "matmul(M=32, N=32, K=32)";
constexpr char kSoftmax[] = "softmax(rows=8, cols=64)";

// The value of the sample `series` (name with its labels, as printed) in exposition `text`; -1
// when absent.
double Sample(const std::string& text, const std::string& series) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.size() > series.size() && line.compare(0, series.size(), series) == 0 &&
        line[series.size()] == ' ') {
      return std::stod(line.substr(series.size() + 1));
    }
  }
  return -1;
}

double ResultsTotal(const std::string& text) {
  double total = 0;
  for (const char* s : {"ok", "compile_error", "verify_failed", "runtime_error", "timeout",
                        "device_limit_exceeded", "worker_error"}) {
    total += std::max(0.0, Sample(text, absl::StrCat("tessel_results_total{status=\"", s, "\"}")));
  }
  return total;
}

// GET `path` of the HTTP server at HOST:PORT, with `token` as a bearer token unless empty.
httplib::Result Get(const std::string& address, const std::string& path,
                    const std::string& token = "") {
  const size_t colon = address.rfind(':');
  httplib::Client c(address.substr(0, colon), std::stoi(address.substr(colon + 1)));
  c.set_read_timeout(30, 0);
  httplib::Headers h;
  if (!token.empty()) h.emplace("Authorization", "Bearer " + token);
  return c.Get(path.c_str(), h);
}

// The <svg ...>...</svg> element with id `id` in `page`; empty when absent.
std::string SvgById(const std::string& page, const std::string& id) {
  const size_t at = page.find("<svg id=\"" + id + "\"");
  if (at == std::string::npos) return "";
  const size_t end = page.find("</svg>", at);
  return end == std::string::npos ? "" : page.substr(at, end + 6 - at);
}

class HttpTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = MakeTempDir("tessel_http_");
    ASSERT_FALSE(dir_.empty());
    db_ = dir_ + "/log.db";
  }
  server::ServerOptions Options() {
    server::ServerOptions o = TestServerOptions(db_);
    o.http_listen = "127.0.0.1:0";
    return o;
  }
  void Start(const server::ServerOptions& o) {
    auto s = server::StartServer(o);
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = std::move(*s);
    client_ = Client(server_->address());
    ASSERT_FALSE(server_->http_address().empty());
  }
  int64_t Submit(const proto::SubmitJobRequest& r) {
    grpc::ClientContext ctx;
    proto::SubmitJobResponse resp;
    grpc::Status s = client_->SubmitJob(&ctx, r, &resp);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return resp.job_id();
  }
  std::string Metrics() {
    httplib::Result r = Get(server_->http_address(), "/metrics");
    EXPECT_TRUE(r) << "no answer from " << server_->http_address();
    if (!r) return "";
    EXPECT_EQ(r->status, 200) << r->body;
    EXPECT_THAT(r->get_header_value("Content-Type"), HasSubstr("text/plain; version=0.0.4"));
    return r->body;
  }
  absl::Status StartError(const server::ServerOptions& o) {
    return server::StartServer(o).status();
  }

  std::string dir_, db_;
  std::unique_ptr<server::Server> server_;
  std::unique_ptr<proto::Tessel::Stub> client_;
};

TEST_F(HttpTest, MetricsMoveWhileAJobRuns) {
  Start(Options());
  const std::string before = Metrics();
  EXPECT_EQ(Sample(before, "tessel_workers"), 0) << before;
  EXPECT_EQ(ResultsTotal(before), 0) << before;
  EXPECT_EQ(Sample(before, "tessel_jobs{state=\"running\"}"), 0) << before;
  EXPECT_EQ(Sample(before, "tessel_measurement_seconds_count"), 0) << before;
  EXPECT_GT(Sample(before, "tessel_log_bytes"), 0) << before;

  auto w = StartHostWorker(server_->address(), dir_, "w1", 1);
  const int64_t job = Submit(HostJob({kMatmul}, 24, 2));
  ASSERT_GT(job, 0);
  // Scraped while the job runs: a worker, a running job, and results counted.
  std::string during;
  ASSERT_TRUE(WaitUntil(
      [&] {
        during = Metrics();
        return ResultsTotal(during) >= 2 && Sample(during, "tessel_jobs{state=\"running\"}") == 1;
      },
      absl::Seconds(60)))
      << during << w->Log();
  EXPECT_EQ(Sample(during, "tessel_workers"), 1) << during;
  EXPECT_EQ(Sample(during, "tessel_worker_batches_in_flight{worker=\"w1\"}") >= 0, true) << during;
  EXPECT_GE(Sample(during, "tessel_tasks_running"), 1) << during;

  ASSERT_TRUE(WaitForJobState(client_.get(), job, proto::JOB_STATE_DONE, absl::Seconds(120)))
      << w->Log();
  const std::string after = Metrics();
  // Every result the job recorded was counted once, by status, with its measuring time.
  std::map<std::string, int> by_status;
  for (const store::Record& r : RecordsOfJob(db_, job)) {
    ++by_status[measure::MeasureStatusName(r.measurement.status)];
  }
  EXPECT_EQ(ResultsTotal(after), 24) << after;
  for (const auto& [status, n] : by_status) {
    EXPECT_EQ(Sample(after, absl::StrCat("tessel_results_total{status=\"", status, "\"}")), n)
        << status << "\n"
        << after;
  }
  EXPECT_GT(ResultsTotal(after), ResultsTotal(during));
  EXPECT_EQ(Sample(after, "tessel_measurement_seconds_count"), 24) << after;
  EXPECT_EQ(Sample(after, "tessel_measurement_seconds_bucket{le=\"+Inf\"}"), 24) << after;
  EXPECT_GT(Sample(after, "tessel_measurement_seconds_sum"), 0) << after;
  EXPECT_EQ(Sample(after, "tessel_jobs{state=\"done\"}"), 1) << after;
  EXPECT_EQ(Sample(after, "tessel_jobs{state=\"running\"}"), 0) << after;
  EXPECT_EQ(Sample(after, "tessel_queue_depth"), 0) << after;
  EXPECT_EQ(Sample(after, "tessel_worker_candidates_measured_total{worker=\"w1\"}"), 24) << after;
  // The worker held a batch for part of the run: some busy time, a fraction in [0, 1].
  EXPECT_GT(Sample(after, "tessel_worker_busy_seconds_total{worker=\"w1\"}"), 0) << after;
  const double busy = Sample(after, "tessel_worker_busy_fraction{worker=\"w1\"}");
  EXPECT_GT(busy, 0) << after;
  EXPECT_LE(busy, 1) << after;
  EXPECT_GT(Sample(after, "tessel_log_bytes"), Sample(before, "tessel_log_bytes")) << after;
  // Every sample line belongs to a declared metric.
  std::istringstream in(after);
  std::string line;
  std::set<std::string> declared;
  while (std::getline(in, line)) {
    if (line.rfind("# TYPE ", 0) == 0) {
      declared.insert(line.substr(7, line.find(' ', 7) - 7));
    } else if (!line.empty() && line[0] != '#') {
      std::string name = line.substr(0, line.find_first_of("{ "));
      for (const char* suffix : {"_bucket", "_sum", "_count"}) {
        if (!declared.count(name) && absl::EndsWith(name, suffix)) {
          name = name.substr(0, name.size() - strlen(suffix));
        }
      }
      EXPECT_TRUE(declared.count(name)) << line;
    }
  }
}

TEST_F(HttpTest, TheDashboardAndTheReportHoldEachTasksCurve) {
  Start(Options());
  auto w = StartHostWorker(server_->address(), dir_, "w1");
  const int64_t job = Submit(HostJob({kMatmul, kSoftmax}, 6, 2));
  ASSERT_GT(job, 0);
  ASSERT_TRUE(WaitForJobState(client_.get(), job, proto::JOB_STATE_DONE, absl::Seconds(120)))
      << w->Log();
  proto::JobInfo info = GetJob(client_.get(), job);
  ASSERT_EQ(info.tasks_size(), 2);

  httplib::Result live = Get(server_->http_address(), "/");
  ASSERT_TRUE(live);
  ASSERT_EQ(live->status, 200) << live->body;
  EXPECT_THAT(live->get_header_value("Content-Type"), HasSubstr("text/html"));
  EXPECT_THAT(live->body, Not(HasSubstr("<script")));
  EXPECT_THAT(live->body, HasSubstr("<meta http-equiv=\"refresh\""));
  EXPECT_THAT(live->body, HasSubstr("<td>w1</td>"));  // the connected worker
  EXPECT_THAT(live->body, HasSubstr(absl::StrCat("id=\"job-", job, "\"")));

  server_->Shutdown();
  server_.reset();
  const std::string out = dir_ + "/report.html";
  CliResult r = RunTessel(absl::StrCat("report --db ", db_, " --out ", out));
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("wrote " + out + " (1 jobs, 2 tasks)"));
  std::ifstream f(out);
  std::stringstream report;
  report << f.rdbuf();
  EXPECT_THAT(report.str(), Not(HasSubstr("<script")));
  EXPECT_THAT(report.str(), Not(HasSubstr("http-equiv=\"refresh\"")));
  EXPECT_THAT(report.str(), HasSubstr("<td>w1</td>"));  // from the records

  for (const proto::TaskInfo& t : info.tasks()) {
    // The best latency of the log, as each curve carries it.
    double best = 0;
    int ok = 0;
    for (const store::Record& rec : RecordsOfJob(db_, job)) {
      if (rec.task_id != t.task_id() || !rec.measurement.ok()) continue;
      ++ok;
      if (best == 0 || rec.measurement.latency_ms() < best) best = rec.measurement.latency_ms();
    }
    ASSERT_GT(ok, 0);
    for (const char* axis : {"trials", "time"}) {
      const std::string id = absl::StrCat("curve-", axis, "-", t.task_id());
      const std::string in_live = SvgById(live->body, id);
      const std::string in_report = SvgById(report.str(), id);
      ASSERT_FALSE(in_live.empty()) << id << "\n" << live->body;
      ASSERT_FALSE(in_report.empty()) << id << "\n" << report.str();
      EXPECT_THAT(in_live, HasSubstr(absl::StrFormat("data-best-ms=\"%.6g\"", best)));
      EXPECT_THAT(in_live, HasSubstr("<polyline class=\"best\" points=\""));
      // One improvement at least: as many dots as the curve has points.
      EXPECT_THAT(in_live, HasSubstr("<circle"));
      // One piece of code draws both, from the same log.
      EXPECT_EQ(in_live, in_report);
      // The job was given no baseline: no line, no ratio.
      EXPECT_THAT(in_live, Not(HasSubstr("baseline")));
    }
  }
  EXPECT_THAT(report.str(), Not(HasSubstr("vs baseline")));
}

// Issue 22: a job submitted (by `tessel submit`, as a user does) with a baseline for one of its
// workloads has it as a dashed line, labelled with its label and latency, on both curves of that
// task, in the live dashboard and in `tessel report`; the task table gives best vs baseline; the
// other task has no line.
TEST_F(HttpTest, ABaselineIsALineOnBothCurvesOfItsTaskInTheDashboardAndTheReport) {
  Start(Options());
  auto w = StartHostWorker(server_->address(), dir_, "w1");
  const std::string tsv = dir_ + "/baselines.tsv";
  std::ofstream(tsv) << kMatmul << "\t0.0005\t100\n";
  CliResult submitted = RunTessel(absl::StrCat(
      "submit --server ", server_->address(), " --target host --trials-per-task 6 --batch-size 2 ",
      "--seed 11 --workload '", kMatmul, "' --workload '", kSoftmax, "' --baselines ", tsv,
      " --baseline-label cuBLAS --wait"));
  ASSERT_EQ(submitted.status, 0) << submitted.output << w->Log();
  // The final table gives the ratio.
  EXPECT_THAT(submitted.output, HasSubstr("vs baseline"));
  EXPECT_THAT(submitted.output, HasSubstr("cuBLAS 0.0005 ms"));
  proto::ListJobsResponse jobs;
  {
    grpc::ClientContext ctx;
    ASSERT_TRUE(client_->ListJobs(&ctx, proto::ListJobsRequest(), &jobs).ok());
  }
  ASSERT_EQ(jobs.jobs_size(), 1);
  const proto::JobInfo info = jobs.jobs(0);
  ASSERT_EQ(info.tasks_size(), 2);
  const proto::TaskInfo& matmul = info.tasks(0);
  const proto::TaskInfo& softmax = info.tasks(1);
  EXPECT_EQ(matmul.baseline_ms(), 0.0005);
  EXPECT_EQ(matmul.baseline_label(), "cuBLAS");
  EXPECT_EQ(softmax.baseline_ms(), 0);
  ASSERT_GT(matmul.best_ms(), 0);

  httplib::Result live = Get(server_->http_address(), "/");
  ASSERT_TRUE(live);
  ASSERT_EQ(live->status, 200) << live->body;
  server_->Shutdown();
  server_.reset();
  const std::string out = dir_ + "/report.html";
  CliResult r = RunTessel(absl::StrCat("report --db ", db_, " --out ", out));
  ASSERT_EQ(r.status, 0) << r.output;
  std::ifstream f(out);
  std::stringstream report;
  report << f.rdbuf();

  const std::string ratio = absl::StrFormat("%.2fx", 0.0005 / matmul.best_ms());
  for (const std::string& page : {live->body, report.str()}) {
    for (const char* axis : {"trials", "time"}) {
      const std::string with = SvgById(page, absl::StrCat("curve-", axis, "-", matmul.task_id()));
      ASSERT_FALSE(with.empty()) << page;
      EXPECT_THAT(with, HasSubstr("data-baseline-ms=\"0.0005\""));
      EXPECT_THAT(with, HasSubstr("<line class=\"baseline\""));
      EXPECT_THAT(with, HasSubstr("stroke-dasharray="));
      EXPECT_THAT(with, HasSubstr(">cuBLAS 0.0005 ms</text>"));
      const std::string without =
          SvgById(page, absl::StrCat("curve-", axis, "-", softmax.task_id()));
      ASSERT_FALSE(without.empty()) << page;
      EXPECT_THAT(without, Not(HasSubstr("baseline")));
    }
    EXPECT_THAT(page, HasSubstr("vs baseline (&gt;1: faster)"));
    EXPECT_THAT(page, HasSubstr("<td>cuBLAS 0.0005 ms</td><td class=\"num ratio\">" + ratio));
  }
}

// The y range of a curve holds its baseline, above or below the curve: the line is inside the
// plot, and a baseline far from the curve switches to a log scale as a long curve does.
TEST(DashboardPage, TheBaselineIsInsideThePlotWhereverItLies) {
  for (double baseline : {0.01, 1.5, 400.0}) {
    server::DashboardData d;
    server::DashboardJob j;
    j.row.id = 1;
    j.row.target_key = "host";
    server::DashboardTask t;
    t.row.id = 7;
    t.row.trials_budget = 4;
    t.row.baseline_ms = baseline;
    t.row.baseline_label = "PyTorch eager";
    t.trials = 4;
    t.ok = 4;
    t.best_ms = 1;
    t.curve = {{1, 1, 2}, {3, 3, 1}, {4, 4, 1}};
    j.tasks.push_back(t);
    d.jobs.push_back(j);
    const std::string svg = SvgById(server::RenderDashboard(d), "curve-trials-7");
    std::smatch m;
    ASSERT_TRUE(
        std::regex_search(svg, m,
                          std::regex("<line class=\"baseline\" x1=\"[0-9.]+\" x2=\"[0-9.]+\" "
                                     "y1=\"([0-9.]+)\"")))
        << svg;
    // The plot spans y 12 to 164 (kTop, kHeight - kBottom of dashboard_page.cc).
    const double y = std::stod(m[1]);
    EXPECT_GE(y, 12) << baseline << "\n" << svg;
    EXPECT_LE(y, 164) << baseline << "\n" << svg;
    EXPECT_THAT(svg, HasSubstr(absl::StrFormat(">PyTorch eager %.4g ms</text>", baseline)));
    EXPECT_EQ(absl::StrContains(svg, "log scale"), baseline != 1.5) << svg;
  }
}

TEST(DashboardCurve, StepsDownAtEachImprovementAndEndsAtTheLastTrial) {
  const std::string dir = MakeTempDir("tessel_curve_");
  auto log = store::OpenTuningLog(dir + "/log.db");
  ASSERT_TRUE(log.ok()) << log.status();
  store::WorkloadRow w{"k1", "canonical", "matmul", "matmul(M=8, N=8, K=8)"};
  ASSERT_TRUE((*log)->PutWorkload(w).ok());
  store::JobRow job;
  job.name = "curve";
  job.target_kind = "host";
  job.target_key = "host";
  job.strategy = "random";
  job.trials_budget = 5;
  job.created_unix_ms = 1'000'000;
  std::vector<store::TaskRow> tasks = {{0, 0, "k1", 5, store::JobState::kRunning}};
  ASSERT_TRUE((*log)->CreateJob(&job, &tasks).ok());
  // Latencies 4, fail, 2, 3, 1 at 1 s intervals.
  const std::vector<double> ms = {4, 0, 2, 3, 1};
  for (size_t i = 0; i < ms.size(); ++i) {
    store::Record r;
    r.workload_key = "k1";
    r.target_key = "host";
    r.job_id = job.id;
    r.task_id = tasks[0].id;
    r.candidate_id = i + 1;
    r.trace_json = "null";
    r.unix_ms = job.created_unix_ms + 1000 * static_cast<int64_t>(i + 1);
    if (ms[i] > 0) {
      r.measurement.timings.repeats_ms = {ms[i]};
      r.measurement.timings.median_ms = ms[i];
      r.measurement.timings.min_ms = ms[i];
      r.measurement.timings.max_ms = ms[i];
    } else {
      r.measurement = measure::Measurement::FromStatus(measure::WithMeasureStatus(
          absl::InternalError("bad"), measure::MeasureStatus::kCompileError));
    }
    auto id = (*log)->AddRecord(&r);
    ASSERT_TRUE(id.ok()) << id.status();
  }
  auto d = server::DashboardFromLog(**log, {});
  ASSERT_TRUE(d.ok()) << d.status();
  ASSERT_EQ(d->jobs.size(), 1u);
  const server::DashboardTask& t = d->jobs[0].tasks.at(0);
  EXPECT_EQ(t.trials, 5);
  EXPECT_EQ(t.ok, 4);
  EXPECT_EQ(t.best_ms, 1);
  EXPECT_EQ(t.by_status.at("compile_error"), 1);
  ASSERT_EQ(t.curve.size(), 3u);
  EXPECT_EQ(t.curve[0].trial, 1);
  EXPECT_EQ(t.curve[0].best_ms, 4);
  EXPECT_EQ(t.curve[0].elapsed_s, 1);
  EXPECT_EQ(t.curve[1].trial, 3);
  EXPECT_EQ(t.curve[1].best_ms, 2);
  EXPECT_EQ(t.curve[2].trial, 5);
  EXPECT_EQ(t.curve[2].best_ms, 1);
  EXPECT_EQ(t.curve[2].elapsed_s, 5);
  const std::string page = server::RenderDashboard(*d);
  // A step: x of trial 3 appears with the old best (4 ms) and the new (2 ms).
  EXPECT_THAT(page, HasSubstr("id=\"curve-trials-" + std::to_string(tasks[0].id) + "\""));
  EXPECT_THAT(page, HasSubstr("compile_error 1"));
  EXPECT_THAT(page, HasSubstr("matmul(M=8, N=8, K=8)"));
}

TEST(DashboardPage, EscapesWhatUsersWrote) {
  server::DashboardData d;
  d.source = "/tmp/<log>.db";
  server::DashboardJob j;
  j.row.id = 1;
  j.row.name = "<script>alert(1)</script>";
  j.row.target_key = "host";
  d.jobs.push_back(j);
  const std::string page = server::RenderDashboard(d);
  EXPECT_THAT(page, Not(HasSubstr("<script>")));
  EXPECT_THAT(page, HasSubstr("&lt;script&gt;alert(1)&lt;/script&gt;"));
  EXPECT_THAT(page, HasSubstr("/tmp/&lt;log&gt;.db"));
}

TEST(ServerMetrics, LabelValuesAreEscaped) {
  EXPECT_EQ(server::PrometheusLabel("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
  server::ServerMetrics m;
  server::FleetGauges g;
  server::WorkerEntry w;
  w.worker_id = "odd\"id";
  g.workers.push_back(w);
  EXPECT_THAT(m.Render(g), HasSubstr("tessel_worker_busy_fraction{worker=\"odd\\\"id\"} 0\n"));
}

TEST(ServerMetrics, BusyFractionIsTheShareOfTheLastMinuteWithABatchHeld) {
  server::ServerMetrics m;
  server::WorkerEntry w;
  w.worker_id = "w";
  int64_t t = 1'000'000;
  // Idle 10 s, busy 30 s, idle 20 s: busy half of the... sampled every second.
  for (int i = 0; i < 60; ++i, t += 1000) {
    w.batches_in_flight = (i >= 10 && i < 40) ? 1 : 0;
    m.Sample(t, {w});
  }
  m.Sample(t, {w});
  EXPECT_NEAR(m.BusyFraction("w"), 30.0 / 60, 0.02);
  server::FleetGauges g;
  g.workers = {w};
  EXPECT_NEAR(Sample(m.Render(g), "tessel_worker_busy_seconds_total{worker=\"w\"}"), 30, 0.01);
  // A minute later, idle all along: 0.
  for (int i = 0; i < 61; ++i, t += 1000) {
    w.batches_in_flight = 0;
    m.Sample(t, {w});
  }
  EXPECT_EQ(m.BusyFraction("w"), 0);
}

TEST_F(HttpTest, ABadHttpAddressIsRefusedNamingIt) {
  server::ServerOptions o = Options();
  o.http_listen = "nonsense";
  EXPECT_EQ(StartError(o).message(),
            "--http nonsense: give HOST:PORT with a port from 0 (any free port) to 65535, e.g. "
            "127.0.0.1:7070");
  o.http_listen = "127.0.0.1:70000";
  EXPECT_THAT(StartError(o).message(), HasSubstr("--http 127.0.0.1:70000: give HOST:PORT"));
  // The server let go of the log: a good address starts.
  o.http_listen = "127.0.0.1:0";
  Start(o);
}

TEST_F(HttpTest, ATakenHttpPortIsRefusedNamingIt) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(listen(fd, 1), 0);
  socklen_t len = sizeof(addr);
  ASSERT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  const int port = ntohs(addr.sin_port);
  server::ServerOptions o = Options();
  o.http_listen = absl::StrCat("127.0.0.1:", port);
  EXPECT_EQ(StartError(o).message(),
            absl::StrCat("--http: cannot listen on 127.0.0.1:", port, ": port ", port,
                         " is in use (another tessel serve or another program holds it); stop "
                         "that one or pass another --http HOST:PORT"));
  close(fd);
}

TEST_F(HttpTest, HttpBeyondLoopbackNeedsTlsAndTokensOrInsecure) {
  server::ServerOptions o = Options();
  o.http_listen = "0.0.0.0:0";
  EXPECT_EQ(StartError(o).message(),
            "--http 0.0.0.0:0 reaches beyond this machine without TLS and tokens: anyone who can "
            "reach the port could read every job, workload and worker (and the tokens would "
            "cross the network in the clear without TLS). Pass --tls-cert FILE --tls-key FILE "
            "and --tokens FILE (README, Security), serve HTTP on 127.0.0.1, or pass --insecure "
            "on a network you trust");
  o.insecure = true;
  Start(o);
  const std::string port = server_->http_address().substr(server_->http_address().rfind(':'));
  httplib::Result r = Get("127.0.0.1" + port, "/metrics");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
}

TEST_F(HttpTest, ScrapesNeedAClientOrAdminTokenWhenTheServerHasTokens) {
  const std::string tokens = dir_ + "/tokens";
  std::map<std::string, std::string> token;
  for (const auto& [role, name] :
       std::vector<std::pair<server::Role, std::string>>{{server::Role::kClient, "alice"},
                                                         {server::Role::kClient, "bob"},
                                                         {server::Role::kWorker, "w1"},
                                                         {server::Role::kAdmin, "root"}}) {
    auto t = server::CreateToken(tokens, role, name);
    ASSERT_TRUE(t.ok()) << t.status();
    token[name] = t->token;
  }
  server::ServerOptions o = Options();
  o.tokens_path = tokens;
  Start(o);
  const std::string http = server_->http_address();
  httplib::Result none = Get(http, "/metrics");
  ASSERT_TRUE(none);
  EXPECT_EQ(none->status, 401);
  EXPECT_EQ(none->get_header_value("WWW-Authenticate"), "Bearer");
  EXPECT_EQ(none->body,
            "reading the metrics needs a client or admin token, and this request carried none: "
            "send the header `Authorization: Bearer TOKEN` with a client or admin token (an "
            "admin makes one with `tessel token create --role client --tokens FILE`)\n");
  httplib::Result unknown = Get(http, "/metrics", "not-a-token");
  ASSERT_TRUE(unknown);
  EXPECT_EQ(unknown->status, 401);
  EXPECT_THAT(unknown->body, HasSubstr("reading the metrics: this server does not know the token "
                                       "given (mistyped, revoked, or made for another tokens "
                                       "file)"));
  httplib::Result worker = Get(http, "/", token.at("w1"));
  ASSERT_TRUE(worker);
  EXPECT_EQ(worker->status, 403);
  EXPECT_EQ(worker->body,
            "reading the dashboard needs a client or admin token, and token 'w1' "
            "is a worker token\n");
  httplib::Result dash = Get(http, "/", "");
  ASSERT_TRUE(dash);
  EXPECT_EQ(dash->status, 401);
  EXPECT_THAT(dash->body, Not(HasSubstr("<html")));
  httplib::Result ok = Get(http, "/metrics", token.at("alice"));
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200);
  EXPECT_GE(Sample(ok->body, "tessel_workers"), 0);

  // A client sees its own jobs on the dashboard, an admin every job.
  auto submit_as = [&](const std::string& name) {
    grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", "Bearer " + token.at(name));
    proto::SubmitJobResponse resp;
    grpc::Status s = client_->SubmitJob(&ctx, HostJob({kMatmul}, 2, 2), &resp);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return resp.job_id();
  };
  const int64_t alices = submit_as("alice");
  const int64_t bobs = submit_as("bob");
  httplib::Result alice_page = Get(http, "/", token.at("alice"));
  ASSERT_TRUE(alice_page);
  EXPECT_THAT(alice_page->body, HasSubstr(absl::StrCat("id=\"job-", alices, "\"")));
  EXPECT_THAT(alice_page->body, Not(HasSubstr(absl::StrCat("id=\"job-", bobs, "\""))));
  httplib::Result root_page = Get(http, "/", token.at("root"));
  ASSERT_TRUE(root_page);
  EXPECT_THAT(root_page->body, HasSubstr(absl::StrCat("id=\"job-", alices, "\"")));
  EXPECT_THAT(root_page->body, HasSubstr(absl::StrCat("id=\"job-", bobs, "\"")));
}

TEST_F(HttpTest, WithTheServersCertificateItSpeaksHttpsAndMayListenBeyondLoopback) {
  // A self-signed certificate for 127.0.0.1 (EC: fast to make).
  const std::string cert = dir_ + "/server.pem", key = dir_ + "/server.key";
  ASSERT_EQ(std::system(("openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 "
                         "-nodes -keyout " +
                         key + " -out " + cert +
                         " -days 2 -subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1 "
                         ">/dev/null 2>&1")
                            .c_str()),
            0);
  const std::string tokens = dir_ + "/tokens";
  auto admin = server::CreateToken(tokens, server::Role::kAdmin, "ops");
  ASSERT_TRUE(admin.ok()) << admin.status();
  server::ServerOptions o = Options();
  o.tls.cert = cert;
  o.tls.key = key;
  o.tokens_path = tokens;
  o.http_listen = "0.0.0.0:0";  // beyond loopback: allowed with TLS and tokens
  Start(o);
  const std::string port = server_->http_address().substr(server_->http_address().rfind(':') + 1);
  httplib::SSLClient tls("127.0.0.1", std::stoi(port));
  tls.set_ca_cert_path(cert.c_str());
  tls.enable_server_certificate_verification(true);
  httplib::Result r = tls.Get("/metrics", {{"Authorization", "Bearer " + admin->token}});
  ASSERT_TRUE(r) << httplib::to_string(r.error());
  EXPECT_EQ(r->status, 200);
  EXPECT_GE(Sample(r->body, "tessel_workers"), 0) << r->body;
  httplib::Result no_token = tls.Get("/");
  ASSERT_TRUE(no_token);
  EXPECT_EQ(no_token->status, 401);
  // Plain HTTP gets no page.
  httplib::Result plain = Get("127.0.0.1:" + port, "/metrics", admin->token);
  EXPECT_FALSE(plain && plain->status == 200);
}

// The HTTP address a `tessel worker --http` process announced on its log; empty when it did
// not within 10 s.
std::string WorkerHttpAddress(TesselProcess& worker) {
  std::string http;
  WaitUntil(
      [&] {
        std::smatch m;
        static const std::regex kMetrics("metrics on http://([0-9.]+:[0-9]+)/metrics");
        const std::string log = worker.Log();
        if (!std::regex_search(log, m, kMetrics)) return false;
        http = m[1];
        return true;
      },
      absl::Seconds(10));
  return http;
}

TEST_F(HttpTest, AWorkerServesItsOwnMetrics) {
  Start(Options());
  TesselProcess w(
      {"worker", "--server", server_->address(), "--target", "host", "--worker-id", "w1", "--cache",
       dir_ + "/cache", "--heartbeat-s", "0.2", "--http", "127.0.0.1:0"},
      dir_ + "/w1.log");
  const std::string http = WorkerHttpAddress(w);
  ASSERT_FALSE(http.empty()) << w.Log();
  const int64_t job = Submit(HostJob({kMatmul}, 6, 2));
  ASSERT_GT(job, 0);
  ASSERT_TRUE(WaitForJobState(client_.get(), job, proto::JOB_STATE_DONE, absl::Seconds(120)))
      << w.Log();
  httplib::Result r = Get(http, "/metrics");
  ASSERT_TRUE(r) << w.Log();
  ASSERT_EQ(r->status, 200);
  const std::string& m = r->body;
  EXPECT_EQ(Sample(m, "tessel_worker_connected"), 1) << m;
  EXPECT_EQ(Sample(m, "tessel_worker_connects_total"), 1) << m;
  EXPECT_THAT(
      m, HasSubstr("tessel_worker_info{worker=\"w1\",server=\"" + server_->address() + "\"} 1"));
  EXPECT_THAT(m, HasSubstr("tessel_worker_device_info{device=\"0\",kind=\"host\""));
  EXPECT_GT(Sample(m, "tessel_worker_compile_threads"), 0) << m;
  double results = 0;
  for (const char* s : {"ok", "compile_error", "verify_failed", "runtime_error", "timeout",
                        "device_limit_exceeded", "worker_error"}) {
    results += Sample(m, absl::StrCat("tessel_worker_results_total{status=\"", s, "\"}"));
  }
  EXPECT_EQ(results, 6) << m;
  EXPECT_EQ(Sample(m, "tessel_worker_results_total{status=\"ok\"}"),
            static_cast<double>(GetJob(client_.get(), job).tasks(0).trials_ok()))
      << m;
  // Every candidate and the reference went through the pool: compiled or found in its cache.
  const double compiled = Sample(m, "tessel_worker_compilations_total");
  const double hits = Sample(m, "tessel_worker_compile_cache_hits_total{cache=\"memory\"}") +
                      Sample(m, "tessel_worker_compile_cache_hits_total{cache=\"disk\"}");
  EXPECT_GE(compiled + hits, 6) << m;
  EXPECT_NEAR(Sample(m, "tessel_worker_compile_cache_hit_ratio"), hits / (compiled + hits), 1e-6);
  EXPECT_EQ(Sample(m, "tessel_worker_child_restarts_total{device=\"0\"}"), 0) << m;
  EXPECT_GT(Sample(m, "tessel_worker_measure_seconds_total"), 0) << m;
  // It still drains on SIGTERM.
  w.Signal(SIGTERM);
  EXPECT_EQ(w.Wait(absl::Seconds(30)), 0) << w.Log();
}

TEST(WorkerCli, TheHttpFlagsAreChecked) {
  const std::string dir = MakeTempDir("tessel_worker_http_");
  const std::string base = "worker --server 127.0.0.1:1 --target host --cache " + dir + "/c ";
  CliResult bad = RunTessel(base + "--http nope");
  EXPECT_EQ(bad.status, 1);
  EXPECT_THAT(bad.output, HasSubstr("tessel worker: --http nope: give HOST:PORT with a port from "
                                    "0 (any free port) to 65535"));
  CliResult open = RunTessel(base + "--http 0.0.0.0:0");
  EXPECT_EQ(open.status, 1);
  EXPECT_THAT(open.output,
              HasSubstr("tessel worker: --http 0.0.0.0:0 reaches beyond this machine without TLS "
                        "and tokens"));
  EXPECT_THAT(open.output,
              HasSubstr("Pass --http-tls-cert FILE --http-tls-key FILE and --http-tokens FILE "
                        "(README, Security), serve HTTP on 127.0.0.1, or pass --http-insecure on "
                        "a network you trust"));
  CliResult half = RunTessel(base + "--http 127.0.0.1:0 --http-tls-cert " + dir + "/x.pem");
  EXPECT_EQ(half.status, 1);
  EXPECT_THAT(half.output, HasSubstr("tessel worker: --http-tls-cert and --http-tls-key go "
                                     "together: pass both (a PEM certificate and its key) or "
                                     "neither"));
  CliResult no_tokens = RunTessel(base + "--http 127.0.0.1:0 --http-tokens " + dir + "/none");
  EXPECT_EQ(no_tokens.status, 1);
  EXPECT_THAT(no_tokens.output,
              HasSubstr("tessel worker: cannot read the tokens file " + dir + "/none"));
}

TEST(WorkerCli, ItsMetricsNeedATokenWithHttpTokens) {
  const std::string dir = MakeTempDir("tessel_worker_http_");
  auto client = server::CreateToken(dir + "/tokens", server::Role::kClient, "prometheus");
  ASSERT_TRUE(client.ok()) << client.status();
  // No server to talk to: the worker keeps reconnecting, and serves its metrics meanwhile.
  TesselProcess w({"worker", "--server", "127.0.0.1:1", "--target", "host", "--cache", dir + "/c",
                   "--http", "127.0.0.1:0", "--http-tokens", dir + "/tokens"},
                  dir + "/w.log");
  const std::string http = WorkerHttpAddress(w);
  ASSERT_FALSE(http.empty()) << w.Log();
  httplib::Result none = Get(http, "/metrics");
  ASSERT_TRUE(none);
  EXPECT_EQ(none->status, 401);
  EXPECT_THAT(none->body, HasSubstr("reading the metrics needs a client or admin token"));
  httplib::Result ok = Get(http, "/metrics", client->token);
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200);
  EXPECT_EQ(Sample(ok->body, "tessel_worker_connected"), 0) << ok->body;
}

TEST(ServeCli, TheHttpFlagIsCheckedAndAnnounced) {
  const std::string dir = MakeTempDir("tessel_http_cli_");
  CliResult bad = RunTessel("serve --db " + dir + "/log.db --listen 127.0.0.1:0 --http nope");
  EXPECT_EQ(bad.status, 1);
  EXPECT_THAT(bad.output, HasSubstr("tessel serve: --http nope: give HOST:PORT"));
  std::string address;
  auto serve = StartServe(dir + "/log2.db", "127.0.0.1:0", {"--http", "127.0.0.1:0"},
                          dir + "/serve.log", &address);
  ASSERT_FALSE(address.empty()) << serve->Log();
  std::string http;
  ASSERT_TRUE(WaitUntil(
      [&] {
        const std::string log = serve->Log();
        std::smatch m;
        static const std::regex kMetrics("metrics on http://([0-9.]+:[0-9]+)/metrics");
        if (!std::regex_search(log, m, kMetrics)) return false;
        http = m[1];
        return true;
      },
      absl::Seconds(10)))
      << serve->Log();
  httplib::Result r = Get(http, "/metrics");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_GE(Sample(r->body, "tessel_log_bytes"), 0);
}

TEST(ReportCli, AMissingLogOrAnUnwritableOutputIsNamed) {
  const std::string dir = MakeTempDir("tessel_report_cli_");
  CliResult missing = RunTessel("report --db " + dir + "/none.db --out " + dir + "/r.html");
  EXPECT_EQ(missing.status, 1);
  EXPECT_THAT(missing.output, HasSubstr("tessel report: "));
  EXPECT_THAT(missing.output, HasSubstr(dir + "/none.db"));
  // An empty log gives a page that says so.
  {
    auto log = store::OpenTuningLog(dir + "/empty.db");
    ASSERT_TRUE(log.ok());
  }
  CliResult empty = RunTessel("report --db " + dir + "/empty.db --out " + dir + "/r.html");
  EXPECT_EQ(empty.status, 0) << empty.output;
  std::ifstream f(dir + "/r.html");
  std::stringstream page;
  page << f.rdbuf();
  EXPECT_THAT(page.str(), HasSubstr("No job yet."));
  CliResult unwritable =
      RunTessel("report --db " + dir + "/empty.db --out " + dir + "/no/such/dir/r.html");
  EXPECT_EQ(unwritable.status, 1);
  EXPECT_THAT(unwritable.output,
              HasSubstr("tessel report: cannot write " + dir +
                        "/no/such/dir/r.html; check that its directory exists and is writable"));
  CliResult negative =
      RunTessel("report --db " + dir + "/empty.db --out " + dir + "/r.html --max-jobs -1");
  EXPECT_EQ(negative.status, 1);
  EXPECT_THAT(negative.output,
              HasSubstr("tessel report: --max-jobs -1: give 0 (every job) or more"));
}

}  // namespace
}  // namespace tessel::testing
