// Server load benchmark (issue 5: "the server sustains 64 concurrent worker streams on
// loopback"). Starts a real server (server/server.h) over a tuning log in a temp folder, connects
// N load-generating workers, each one real gRPC stream speaking the worker protocol, that answer
// every batch with SYNTHETIC timings at once (no compile, no measurement: this program measures
// the server, the dispatcher and the log, nothing else), submits one job per --jobs and reports
// results per second committed to the log, how evenly the streams were served, and whether every
// trial was recorded exactly once.
//
//   tessel_bench_server_load [--workers 64] [--trials 20000] [--jobs 4] [--batch 16]

#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "proto/protocol.h"
#include "proto/tessel.grpc.pb.h"
#include "server/server.h"
#include "store/tuning_log.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Flags {
  int workers = 64;
  int64_t trials = 20000;
  int jobs = 4;
  int batch = 16;
};

bool ParseFlag(const std::string& arg, const char* name, int64_t* out) {
  const std::string prefix = absl::StrCat("--", name, "=");
  if (arg.rfind(prefix, 0) != 0) return false;
  if (!absl::SimpleAtoi(arg.substr(prefix.size()), out) || *out < 1) {
    std::fprintf(stderr, "%s needs a positive integer\n", prefix.c_str());
    std::exit(2);
  }
  return true;
}

// One load-generating worker: registers a host device, grants 2 credits, answers each batch with
// a synthetic ok result per candidate and grants the credit back.
struct LoadWorker {
  std::string id;
  std::atomic<int64_t> batches{0};
  std::atomic<int64_t> results{0};
  std::atomic<bool> stop{false};
  std::thread thread;

  void Run(const std::string& address) {
    auto channel = grpc::CreateChannel(address, grpc::InsecureChannelCredentials());
    auto stub = tessel::proto::Worker::NewStub(channel);
    grpc::ClientContext context;
    auto stream = stub->Connect(&context);
    tessel::proto::WorkerMessage hello;
    auto* reg = hello.mutable_register_();
    reg->set_protocol_version(tessel::proto::kWorkerProtocolVersion);
    reg->set_worker_id(id);
    reg->set_host("loopback");
    reg->set_version("load-generator");
    reg->set_max_batches(2);
    auto* dev = reg->add_devices();
    dev->set_kind(tessel::proto::TARGET_KIND_CUDA);
    dev->set_arch("sm_90");
    dev->set_name("synthetic");
    stream->Write(hello);
    tessel::proto::ServerMessage m;
    if (!stream->Read(&m) || !m.has_registered()) {
      std::fprintf(stderr, "%s: registration refused\n", id.c_str());
      return;
    }
    tessel::proto::WorkerMessage credits;
    credits.mutable_credits()->set_batches(2);
    stream->Write(credits);
    std::mt19937_64 rng(std::hash<std::string>()(id));
    std::lognormal_distribution<double> latency(0.0, 0.3);
    while (!stop.load() && stream->Read(&m)) {
      if (!m.has_batch()) continue;
      const auto& b = m.batch();
      for (const auto& c : b.candidates()) {
        tessel::proto::WorkerMessage r;
        auto* res = r.mutable_result();
        res->set_batch_id(b.batch_id());
        res->set_candidate_id(c.id());
        res->set_status(tessel::proto::MEASURE_STATUS_OK);
        const double ms = latency(rng);
        for (int i = 0; i < 10; ++i) res->add_repeats_ms(ms * (1 + 0.001 * i));
        res->set_median_ms(ms);
        res->set_min_ms(ms);
        res->set_max_ms(ms * 1.009);
        res->set_worker_id(id);
        res->set_device_name("synthetic");
        stream->Write(r);
        results.fetch_add(1);
      }
      tessel::proto::WorkerMessage done;
      done.mutable_batch_done()->set_batch_id(b.batch_id());
      stream->Write(done);
      stream->Write(credits);
      batches.fetch_add(1);
    }
    stream->WritesDone();
    context.TryCancel();
    stream->Finish();
  }
};

}  // namespace

int main(int argc, char** argv) {
  Flags f;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    int64_t v = 0;
    if (ParseFlag(a, "workers", &v)) {
      f.workers = static_cast<int>(v);
    } else if (ParseFlag(a, "trials", &v)) {
      f.trials = v;
    } else if (ParseFlag(a, "jobs", &v)) {
      f.jobs = static_cast<int>(v);
    } else if (ParseFlag(a, "batch", &v)) {
      f.batch = static_cast<int>(v);
    } else {
      std::fprintf(stderr,
                   "usage: tessel_bench_server_load [--workers=64] [--trials=20000] [--jobs=4] "
                   "[--batch=16]\n");
      return 2;
    }
  }
  const std::string dir = absl::StrCat(std::filesystem::temp_directory_path().string(),
                                       "/tessel-server-load-", getpid());
  std::filesystem::create_directories(dir);
  tessel::server::ServerOptions so;
  so.db_path = dir + "/load.db";
  so.batch_size = f.batch;
  so.quiet = true;
  auto server = tessel::server::StartServer(so);
  if (!server.ok()) {
    std::fprintf(stderr, "server: %s\n", std::string(server.status().message()).c_str());
    return 1;
  }
  const std::string address = (*server)->address();

  std::vector<std::unique_ptr<LoadWorker>> workers;
  for (int i = 0; i < f.workers; ++i) {
    auto w = std::make_unique<LoadWorker>();
    w->id = absl::StrCat("load-", i);
    workers.push_back(std::move(w));
  }
  for (auto& w : workers) {
    LoadWorker* p = w.get();
    p->thread = std::thread([p, address] { p->Run(address); });
  }

  auto client = tessel::proto::Tessel::NewStub(
      grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  const auto start = Clock::now();
  std::vector<int64_t> job_ids;
  for (int j = 0; j < f.jobs; ++j) {
    tessel::proto::SubmitJobRequest req;
    // CUDA matmuls: design spaces of many thousands of distinct candidates. The server only
    // generates their source; the synthetic workers measure nothing.
    req.add_workloads(absl::StrCat("matmul(M=", 512 + 64 * j, ", N=512, K=512)"));
    req.mutable_target()->set_kind("cuda");
    req.mutable_target()->set_arch("sm_90");
    req.set_total_trials(f.trials / f.jobs);
    req.set_batch_size(f.batch);
    req.set_name(absl::StrCat("load ", j));
    grpc::ClientContext ctx;
    ctx.set_wait_for_ready(true);
    tessel::proto::SubmitJobResponse resp;
    grpc::Status s = client->SubmitJob(&ctx, req, &resp);
    if (!s.ok()) {
      std::fprintf(stderr, "submit: %s\n", s.error_message().c_str());
      return 1;
    }
    job_ids.push_back(resp.job_id());
  }
  int64_t done = 0;
  int64_t budget = 0;
  while (true) {
    done = 0;
    budget = 0;
    bool finished = true;
    for (int64_t id : job_ids) {
      grpc::ClientContext ctx;
      tessel::proto::GetJobRequest req;
      req.set_job_id(id);
      tessel::proto::JobInfo info;
      if (!client->GetJob(&ctx, req, &info).ok()) return 1;
      done += info.trials_done();
      budget += info.trials_budget();
      finished = finished && (info.state() == tessel::proto::JOB_STATE_DONE);
    }
    if (finished) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  for (auto& w : workers) w->stop.store(true);
  (*server)->Shutdown();
  for (auto& w : workers) w->thread.join();

  std::vector<int64_t> per;
  int64_t answered = 0;
  for (auto& w : workers) {
    per.push_back(w->results.load());
    answered += w->results.load();
  }
  std::sort(per.begin(), per.end());
  auto log = tessel::store::OpenTuningLog(so.db_path, {.read_only = true});
  int64_t recorded = 0;
  bool duplicates = false;
  if (log.ok()) {
    for (int64_t id : job_ids) {
      auto tasks = (*log)->TasksOf(id);
      if (!tasks.ok()) continue;
      for (const auto& t : *tasks) {
        auto records = (*log)->RecordsOf(t.id);
        if (!records.ok()) continue;
        recorded += static_cast<int64_t>(records->size());
        std::vector<uint64_t> ids;
        for (const auto& r : *records) ids.push_back(r.candidate_id);
        std::sort(ids.begin(), ids.end());
        duplicates = duplicates || std::adjacent_find(ids.begin(), ids.end()) != ids.end();
      }
    }
  }
  std::printf("server load: %d worker streams, %d jobs, batch %d\n", f.workers, f.jobs, f.batch);
  std::printf("  trials recorded        %lld of %lld (%s duplicate candidates)\n",
              static_cast<long long>(recorded), static_cast<long long>(budget),
              duplicates ? "WITH" : "no");
  std::printf("  results answered       %lld (beyond the budget: dropped, not counted)\n",
              static_cast<long long>(answered));
  std::printf("  wall time              %.2f s\n", seconds);
  std::printf("  results committed/s    %.0f\n", static_cast<double>(recorded) / seconds);
  std::printf("  per stream results     min %lld, median %lld, max %lld\n",
              static_cast<long long>(per.front()), static_cast<long long>(per[per.size() / 2]),
              static_cast<long long>(per.back()));
  const int64_t idle = std::count(per.begin(), per.end(), 0);
  std::printf("  streams never served   %lld\n", static_cast<long long>(idle));
  std::filesystem::remove_all(dir);
  const bool pass = recorded == budget && !duplicates && done == budget;
  std::printf("%s\n", pass ? "PASS" : "FAIL");
  return pass ? 0 : 1;
}
