// The live loop's timeline and screening's effect on it (issue 21). Runs what `tessel tune` runs:
// a real server (server/server.h) over a tuning log in a temp folder and a real worker daemon
// (worker/worker_daemon.h, its measuring children being `tessel __measure-child`) on the host or
// the GPU, tunes a mix of workloads with one job, and prints where each candidate's wall time went
// (server/job_timeline.h), trials per second, and each task's best and screening margin.
//
// With --compare it runs the same job (same seed, same workloads) twice, screening on and off,
// and prints per workload the trials and the seconds each run needed to reach 95% of the best
// latency either run found, so that screening is seen not to make the search worse per trial.
// With --seeds=N it does so for N seeds (S, S+1, ...): one seed's trials to 95% hang on which
// candidates happen to come first, so the means over seeds and workloads are what compare.
//
// tessel_bench_live_timeline [--target=host|cuda] [--trials=N] [--screen-ms=MS] [--compare]
//       [--seeds=N] [--workload=SPEC]... [--strategy=evolutionary] [--seed=S] [--batch=N]
//       [--worker-batches=N]
//       [--min-total-ms=MS] [--tessel=PATH] [--keep=DIR]
//
// --tessel is the tessel binary the worker starts its measuring children from (default: `tessel`
// beside this program, else this build's cli/tessel). --keep keeps the tuning logs there.

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "proto/tessel.grpc.pb.h"
#include "server/server.h"
#include "store/tuning_log.h"
#include "worker/daemon/worker_daemon.h"

namespace {

namespace proto = tessel::proto;
namespace server = tessel::server;

struct Flags {
  std::string target = "host";
  int64_t trials = 0;  // per workload; 0: 24 on the host, 200 on the GPU
  double screen_ms = 5;
  bool compare = false;
  std::vector<std::string> workloads;
  std::string strategy = "evolutionary";
  uint64_t seed = 1;
  int seeds = 1;  // --compare: seeds S, S+1, ... S+seeds-1
  int batch = 16;
  int worker_batches = 0;  // the worker's credits; 0: its default
  double min_total_ms = 200;
  std::string tessel;
  std::string keep;
};

[[noreturn]] void Usage(const std::string& why) {
  std::fprintf(stderr, "tessel_bench_live_timeline: %s\n", why.c_str());
  std::exit(2);
}

std::vector<std::string> DefaultWorkloads(bool cuda) {
  if (cuda) {
    // Kernels under a millisecond on an H100 once tuned.
    return {"matmul(M=1024, N=1024, K=1024, dtype=f16)",
            "matmul(M=512, N=512, K=512, dtype=f16)",
            "matmul(M=2048, N=512, K=1024, dtype=f16)",
            "matmul_bias_gelu(M=1024, N=1024, K=512, dtype=f16)",
            "softmax(rows=4096, cols=1024, dtype=f16)",
            "layernorm(rows=4096, cols=1024, dtype=f16)",
            "reduce(rows=4096, cols=4096, dtype=f16)",
            "conv2d(N=8, C=64, H=28, W=28, K=64, R=3, S=3, padding=1, dtype=f16)"};
  }
  return {"matmul(M=64, N=64, K=64)", "softmax(rows=64, cols=512)", "layernorm(rows=64, cols=512)",
          "reduce(rows=64, cols=1024)"};
}

std::string SelfDir() {
  std::error_code ec;
  return std::filesystem::read_symlink("/proc/self/exe", ec).parent_path().string();
}

std::string FindTessel() {
  const std::string beside = SelfDir() + "/tessel";
  if (access(beside.c_str(), X_OK) == 0) return beside;
  return std::string(TESSEL_BINARY_DIR) + "/cli/tessel";
}

struct TaskResult {
  std::string spec;
  std::vector<double> medians;  // ok records in id order; failures as 0
  std::vector<int64_t> unix_ms;
  double best_ms = 0;
  double margin = 0;
  int64_t screened = 0;
  int64_t pairs = 0;
};

struct RunResult {
  proto::JobInfo job;
  std::map<std::string, TaskResult> tasks;  // by workload key
  double wall_s = 0;
};

RunResult RunJob(const Flags& f, const std::vector<std::string>& workloads, double screen_ms,
                 const std::string& dir, uint64_t seed) {
  std::filesystem::create_directories(dir);
  const std::string db = dir + "/log.db";
  std::filesystem::remove(db);
  server::ServerOptions so;
  so.db_path = db;
  so.listen = "127.0.0.1:0";
  so.version = "bench";
  so.quiet = true;
  so.timing.min_total_ms = f.min_total_ms;
  if (f.target == "host") so.timing.max_wall_ms = 1000;  // as `tessel tune` on the host
  so.screening.screen_ms = screen_ms;
  so.batch_size = f.batch;
  absl::StatusOr<std::unique_ptr<tessel::server::Server>> srv = tessel::server::StartServer(so);
  if (!srv.ok()) Usage(std::string(srv.status().message()));
  absl::Notification stop;
  std::thread worker([&] {
    tessel::worker::WorkerOptions wo;
    wo.server = (*srv)->address();
    wo.target = f.target;
    wo.version = "bench";
    wo.worker_id = "bench";
    wo.handle_signals = false;
    wo.stop = &stop;
    wo.quiet = true;
    wo.executable = f.tessel;
    wo.cache_dir = dir + "/cache";
    if (f.worker_batches > 0) wo.max_batches = f.worker_batches;
    absl::Status s = tessel::worker::RunWorker(wo);
    if (!s.ok()) std::fprintf(stderr, "worker: %s\n", std::string(s.message()).c_str());
  });
  auto stub = proto::Tessel::NewStub(
      grpc::CreateChannel((*srv)->address(), grpc::InsecureChannelCredentials()));
  proto::SubmitJobRequest req;
  for (const std::string& w : workloads) req.add_workloads(w);
  req.mutable_target()->set_kind(f.target);
  req.set_trials_per_task(f.trials);
  req.set_strategy(f.strategy);
  req.set_seed(seed);
  req.set_batch_size(f.batch);
  proto::SubmitJobResponse resp;
  {
    grpc::ClientContext ctx;
    grpc::Status s = stub->SubmitJob(&ctx, req, &resp);
    if (!s.ok()) Usage(s.error_message());
  }
  const auto start = std::chrono::steady_clock::now();
  RunResult out;
  while (true) {
    grpc::ClientContext ctx;
    proto::GetJobRequest g;
    g.set_job_id(resp.job_id());
    if (!stub->GetJob(&ctx, g, &out.job).ok()) Usage("GetJob failed");
    const proto::JobState st = out.job.state();
    if (st == proto::JOB_STATE_DONE || st == proto::JOB_STATE_FAILED ||
        st == proto::JOB_STATE_CANCELLED) {
      break;
    }
    std::fprintf(stderr, "\r  %s: %ld/%ld trials, %.1f trials/s   ",
                 screen_ms > 0 ? "screening" : "no screening",
                 static_cast<long>(out.job.trials_done()),
                 static_cast<long>(out.job.trials_budget()), out.job.trials_per_s());
    absl::SleepFor(absl::Milliseconds(500));
  }
  std::fprintf(stderr, "\n");
  out.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  stop.Notify();
  worker.join();
  (*srv)->Shutdown();
  srv->reset();
  auto log = tessel::store::OpenTuningLog(db);
  if (!log.ok()) Usage(std::string(log.status().message()));
  auto tasks = (*log)->TasksOf(resp.job_id());
  if (!tasks.ok()) Usage(std::string(tasks.status().message()));
  for (const proto::TaskInfo& t : out.job.tasks()) {
    TaskResult& r = out.tasks[t.workload_key()];
    r.spec = t.workload_spec();
    r.best_ms = t.best_ms();
    r.margin = t.screen_margin();
    r.screened = t.trials_screened();
    r.pairs = t.screen_pairs();
  }
  for (const tessel::store::TaskRow& t : *tasks) {
    auto records = (*log)->RecordsOf(t.id);
    if (!records.ok()) continue;
    for (const tessel::store::Record& rec : *records) {
      TaskResult& r = out.tasks[t.workload_key];
      r.medians.push_back(rec.measurement.latency_ms());
      r.unix_ms.push_back(rec.unix_ms);
    }
  }
  return out;
}

void PrintTimeline(const RunResult& r) {
  const proto::JobInfo& job = r.job;
  std::printf("%ld trials in %.1f s: %.2f trials/s end to end\n",
              static_cast<long>(job.trials_done()), r.wall_s,
              static_cast<double>(job.trials_done()) / r.wall_s);
  std::printf("  %-16s %10s %12s %9s %12s  %s\n", "stage", "candidates", "sum s", "% wall",
              "median ms", "what");
  for (const proto::TimelineStage& s : job.timeline()) {
    std::printf("  %-16s %10ld %12.3f %8.1f%% %12.3f  %s\n", s.name().c_str(),
                static_cast<long>(s.count()), s.sum_ms() / 1000,
                100 * s.sum_ms() / (1000 * r.wall_s), s.median_ms(), s.what().c_str());
  }
  std::printf("  %-52s %12s %9s %9s %7s\n", "task", "best ms", "screened", "margin", "pairs");
  for (const auto& [key, t] : r.tasks) {
    std::printf("  %-52s %12.4f %5ld/%-3zu %8.1f%% %7ld\n", t.spec.substr(0, 52).c_str(), t.best_ms,
                static_cast<long>(t.screened), t.medians.size(), 100 * t.margin,
                static_cast<long>(t.pairs));
  }
}

// The trials (1-based) and the seconds since the first record at which the best so far reached
// `limit`; 0 when never.
std::pair<int64_t, double> Reach(const TaskResult& t, double limit) {
  double best = 0;
  for (size_t i = 0; i < t.medians.size(); ++i) {
    if (t.medians[i] > 0 && (best == 0 || t.medians[i] < best)) best = t.medians[i];
    if (best > 0 && best <= limit) {
      return {static_cast<int64_t>(i) + 1,
              static_cast<double>(t.unix_ms[i] - t.unix_ms.front()) / 1000};
    }
  }
  return {0, 0};
}

}  // namespace

int main(int argc, char** argv) {
  Flags f;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&](const char* name, std::string* out) {
      const std::string prefix = absl::StrCat("--", name, "=");
      if (a.rfind(prefix, 0) != 0) return false;
      *out = a.substr(prefix.size());
      return true;
    };
    std::string v;
    if (value("target", &f.target)) continue;
    if (value("strategy", &f.strategy)) continue;
    if (value("tessel", &f.tessel)) continue;
    if (value("keep", &f.keep)) continue;
    if (value("workload", &v)) {
      f.workloads.push_back(v);
      continue;
    }
    if (a == "--compare") {
      f.compare = true;
      continue;
    }
    if (value("trials", &v)) {
      if (!absl::SimpleAtoi(v, &f.trials) || f.trials < 1) Usage("--trials needs a positive count");
      continue;
    }
    if (value("batch", &v)) {
      if (!absl::SimpleAtoi(v, &f.batch) || f.batch < 1) Usage("--batch needs a positive count");
      continue;
    }
    if (value("worker-batches", &v)) {
      if (!absl::SimpleAtoi(v, &f.worker_batches) || f.worker_batches < 1) {
        Usage("--worker-batches needs a positive count");
      }
      continue;
    }
    if (value("seeds", &v)) {
      if (!absl::SimpleAtoi(v, &f.seeds) || f.seeds < 1) Usage("--seeds needs a positive count");
      continue;
    }
    if (value("seed", &v)) {
      if (!absl::SimpleAtoi(v, &f.seed)) Usage("--seed needs an integer");
      continue;
    }
    if (value("screen-ms", &v)) {
      if (!absl::SimpleAtod(v, &f.screen_ms) || f.screen_ms < 0) {
        Usage("--screen-ms needs 0 or more milliseconds");
      }
      continue;
    }
    if (value("min-total-ms", &v)) {
      if (!absl::SimpleAtod(v, &f.min_total_ms) || f.min_total_ms < 0) {
        Usage("--min-total-ms needs 0 or more milliseconds");
      }
      continue;
    }
    Usage(absl::StrCat("unknown argument '", a, "'; see the top of bench/live_timeline.cc"));
  }
  if (f.target != "host" && f.target != "cuda") Usage("--target is host or cuda");
  const bool cuda = f.target == "cuda";
  if (f.trials == 0) f.trials = cuda ? 200 : 24;
  if (f.workloads.empty()) f.workloads = DefaultWorkloads(cuda);
  if (f.tessel.empty()) f.tessel = FindTessel();
  const std::string dir =
      f.keep.empty() ? absl::StrCat("/tmp/tessel_live_timeline_", getpid()) : f.keep;

  std::printf(
      "live timeline: %s, %zu workloads x %ld trials, strategy %s, seed %lu, batch %d, "
      "full measurement %.0f ms\n",
      f.target.c_str(), f.workloads.size(), static_cast<long>(f.trials), f.strategy.c_str(),
      static_cast<unsigned long>(f.seed), f.batch, f.min_total_ms);
  std::printf("\n== screening %.3g ms ==\n", f.screen_ms);
  RunResult with = RunJob(f, f.workloads, f.screen_ms, dir + "/screen", f.seed);
  PrintTimeline(with);
  if (!f.compare) {
    if (f.keep.empty()) std::filesystem::remove_all(dir);
    return 0;
  }
  std::printf("\n== no screening ==\n");
  RunResult without = RunJob(f, f.workloads, 0, dir + "/full", f.seed);
  PrintTimeline(without);
  // Per seed, the two runs; per workload and seed, the trials each needed.
  std::vector<std::pair<RunResult, RunResult>> runs;
  runs.emplace_back(std::move(with), std::move(without));
  for (int k = 1; k < f.seeds; ++k) {
    const uint64_t seed = f.seed + static_cast<uint64_t>(k);
    RunResult w = RunJob(f, f.workloads, f.screen_ms, absl::StrCat(dir, "/screen-", seed), seed);
    RunResult o = RunJob(f, f.workloads, 0, absl::StrCat(dir, "/full-", seed), seed);
    runs.emplace_back(std::move(w), std::move(o));
  }
  std::printf(
      "\ntrials (and seconds) to reach 95%% of the best either run of a seed found, "
      "seeds %lu to %lu\n",
      static_cast<unsigned long>(f.seed),
      static_cast<unsigned long>(f.seed + static_cast<uint64_t>(f.seeds) - 1));
  std::printf("  %-52s %18s %18s\n", "workload", "screening", "no screening");
  double tw = 0, to = 0, sw = 0, so = 0;
  int64_t nw = 0, no = 0, cells = 0;
  for (const auto& [key, first] : runs.front().first.tasks) {
    std::string cw, co;
    for (const auto& [a_run, b_run] : runs) {
      auto a_it = a_run.tasks.find(key);
      auto b_it = b_run.tasks.find(key);
      if (a_it == a_run.tasks.end() || b_it == b_run.tasks.end()) continue;
      double best = 0;
      for (const TaskResult* r : {&a_it->second, &b_it->second}) {
        for (double m : r->medians) {
          if (m > 0 && (best == 0 || m < best)) best = m;
        }
      }
      if (best == 0) continue;
      ++cells;
      const auto a = Reach(a_it->second, best / 0.95);
      const auto b = Reach(b_it->second, best / 0.95);
      auto cell = [](std::pair<int64_t, double> r) {
        return r.first == 0 ? std::string("never") : absl::StrCat(r.first);
      };
      absl::StrAppend(&cw, cw.empty() ? "" : " ", cell(a));
      absl::StrAppend(&co, co.empty() ? "" : " ", cell(b));
      if (a.first > 0) tw += static_cast<double>(a.first), sw += a.second, ++nw;
      if (b.first > 0) to += static_cast<double>(b.first), so += b.second, ++no;
    }
    std::printf("  %-52s %18s %18s\n", first.spec.substr(0, 52).c_str(), cw.c_str(), co.c_str());
  }
  auto mean = [](double sum, int64_t n) { return n > 0 ? sum / static_cast<double>(n) : 0.0; };
  std::printf(
      "  mean trials to 95%%: screening %.1f (%ld of %ld reached, %.1f s), no screening "
      "%.1f (%ld, %.1f s)\n",
      mean(tw, nw), static_cast<long>(nw), static_cast<long>(cells), mean(sw, nw), mean(to, no),
      static_cast<long>(no), mean(so, no));
  double rw = 0, ro = 0;
  for (const auto& [a_run, b_run] : runs) {
    rw += static_cast<double>(a_run.job.trials_done()) / a_run.wall_s;
    ro += static_cast<double>(b_run.job.trials_done()) / b_run.wall_s;
  }
  std::printf("  trials/s (mean over seeds): screening %.2f, no screening %.2f\n",
              rw / static_cast<double>(runs.size()), ro / static_cast<double>(runs.size()));
  if (f.keep.empty()) std::filesystem::remove_all(dir);
  return 0;
}
