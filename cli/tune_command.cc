#include "cli/tune_command.h"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "cli/baseline_flags.h"
#include "cli/client.h"
#include "cli/exit_code.h"
#include "cli/job_report.h"
#include "schedules/target/target.h"
#include "server/server.h"
#include "worker/daemon/worker_daemon.h"
#ifdef TESSEL_HAVE_CUDA
#include "worker/cuda/cuda_runner.h"
#endif

namespace tessel::cli {

namespace {

bool HaveGpu() {
#ifdef TESSEL_HAVE_CUDA
  return worker::CudaDeviceAvailable();
#else
  return false;
#endif
}

std::string DefaultWorkload(bool cuda) {
  return cuda ? "matmul(M=1024, N=1024, K=1024, dtype=f32)"
              : "matmul(M=256, N=256, K=256, dtype=f32)";
}

std::string Quote(const std::string& s) {
  if (s.find('\n') != std::string::npos) return "FILE";
  return absl::StrCat("'", s, "'");
}

}  // namespace

std::string DefaultLogPath() {
  if (const char* env = std::getenv("TESSEL_DB"); env != nullptr && env[0] != '\0') return env;
  if (const char* xdg = std::getenv("XDG_DATA_HOME"); xdg != nullptr && xdg[0] != '\0') {
    return absl::StrCat(xdg, "/tessel/tuning.db");
  }
  if (const char* home = std::getenv("HOME"); home != nullptr && home[0] != '\0') {
    return absl::StrCat(home, "/.local/share/tessel/tuning.db");
  }
  return "tessel-tuning.db";
}

void AddTuneCommand(CLI::App& app) {
  auto opts = std::make_shared<TuneOptions>();
  CLI::App* cmd = app.add_subcommand(
      "tune",
      "Tune workloads here: a server and a worker in one process (the GPU when there is one, "
      "else the host), results in the tuning log");
  cmd->add_option("--workload,-w", opts->workloads,
                  "Built-in spec, definition or file; repeat for several (default: a 1024^3 f32 "
                  "matmul on the GPU, 256^3 on the host)");
  cmd->add_option("--trials,-n", opts->trials, "Trials per workload")->capture_default_str();
  cmd->add_option("--db", opts->db,
                  "The tuning log (default: $TESSEL_DB or ~/.local/share/tessel/tuning.db)");
  cmd->add_option("--target,-t", opts->target, "auto, host or cuda")->capture_default_str();
  cmd->add_option(
      "--arch", opts->arch,
      absl::StrCat(
          "CUDA architecture: ", schedules::KnownCudaArchsText(),
          " (default: the GPU's; sm_90a for Hopper's architecture-specific instructions)"));
  cmd->add_option("--strategy", opts->strategy,
                  "Search strategy: evolutionary (guided by the cost model), annealing or random")
      ->capture_default_str();
  cmd->add_option("--seed", opts->seed, "Seed of the search (0: the server picks one)");
  AddBaselineFlags(cmd, &opts->baselines);
  cmd->add_flag("--quiet,-q", opts->quiet, "Do not print the fastest kernel's source");
  cmd->add_flag("--verbose,-v", opts->verbose,
                "Show the server's and the worker's log, and the job's timeline at the end");
  cmd->add_flag("--timeline", opts->timeline,
                "Show where the candidates' time went (sample, queue, compile, verify, time, "
                "store, ...) at the end");
  AddScreeningFlags(cmd, &opts->screening);
  cmd->callback([opts]() { SetExitCode(RunTune(*opts)); });
}

int RunTune(const TuneOptions& o) {
  auto fail = [](const absl::Status& s) {
    std::cerr << "tessel tune: " << s.message() << "\n";
    return 1;
  };
  std::string kind = o.target;
  if (kind == "auto") kind = HaveGpu() ? "cuda" : "host";
  if (kind != "host" && kind != "cuda") {
    return fail(absl::InvalidArgumentError(
        absl::StrCat("unknown --target '", o.target, "'; use auto, host or cuda")));
  }
  if (kind == "cuda" && !HaveGpu()) {
    return fail(absl::FailedPreconditionError(
        "--target cuda needs a CUDA GPU and driver, and none was found; use --target host"));
  }
  std::string arch = o.arch;
#ifdef TESSEL_HAVE_CUDA
  if (kind == "cuda") {
    auto device = worker::CudaDevice::Open(0);
    if (!device.ok()) return fail(device.status());
    const worker::CudaDeviceInfo& info = (*device)->info();
    if (arch.empty()) arch = info.arch;
    // The embedded worker measures on this machine's GPU: a job for an architecture whose code it
    // does not run would wait for another worker forever.
    if (absl::StatusOr<schedules::Target> t = schedules::MakeTarget("cuda", arch); !t.ok()) {
      return fail(t.status());
    }
    if (absl::Status runs = schedules::CheckCudaArchRunsOn(arch, info.arch); !runs.ok()) {
      return fail(absl::FailedPreconditionError(absl::StrCat(
          "--arch ", arch, ": GPU 0 (", info.name, ") cannot run its kernels: ", runs.message(),
          "; leave --arch out to tune for ", info.arch,
          ", or tessel submit the job to a server that has a worker with such a GPU")));
    }
  }
#endif
  if (o.trials < 1) {
    return fail(absl::InvalidArgumentError(
        absl::StrCat("--trials ", o.trials, ": tune needs at least 1 trial per workload")));
  }
  const std::string db = o.db.empty() ? DefaultLogPath() : o.db;
  if (std::filesystem::path parent = std::filesystem::path(db).parent_path(); !parent.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(parent, ec);
  }

  // The job's request, checked (its baselines) before a server starts.
  std::vector<std::string> workloads = o.workloads;
  if (workloads.empty()) workloads.push_back(DefaultWorkload(kind == "cuda"));
  proto::SubmitJobRequest request;
  for (const std::string& w : workloads) request.add_workloads(w);
  request.mutable_target()->set_kind(kind);
  request.mutable_target()->set_arch(arch);
  request.set_trials_per_task(o.trials);
  request.set_strategy(o.strategy);
  request.set_seed(o.seed);
  request.set_name("tessel tune");
  if (absl::Status s = AddBaselinesToRequest(o.baselines, workloads, &request); !s.ok()) {
    return fail(s);
  }

  // SIGINT and SIGTERM go to the watcher below: block them before any thread starts.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  server::ServerOptions so;
  so.db_path = db;
  so.listen = "127.0.0.1:0";
  so.version = TESSEL_VERSION;
  so.quiet = !o.verbose;
  if (kind == "host") {
    // A host candidate is timed for at most 1 s of wall time (cache flushes included) once its
    // minimum repeats are done: a quick start, not a benchmark (tessel serve keeps the default).
    so.timing.max_wall_ms = 1000;
  }
  absl::StatusOr<server::ScreeningOptions> screening = ScreeningFromFlags(o.screening, so.timing);
  if (!screening.ok()) return fail(screening.status());
  so.screening = *screening;
  absl::StatusOr<std::unique_ptr<server::Server>> srv = server::StartServer(so);
  if (!srv.ok()) return fail(srv.status());

  absl::Notification stop_worker;
  absl::Status worker_status;
  std::thread worker_thread([&] {
    worker::WorkerOptions wo;
    wo.server = (*srv)->address();
    wo.target = kind;
    wo.version = TESSEL_VERSION;
    wo.worker_id = "tune-local";
    wo.handle_signals = false;
    wo.stop = &stop_worker;
    wo.quiet = !o.verbose;
    wo.drain_timeout_s = 10;
    worker_status = worker::RunWorker(wo);
  });
  auto finish = [&](int code) {
    stop_worker.Notify();
    worker_thread.join();
    (*srv)->Shutdown();
    if (!worker_status.ok())
      std::cerr << "tessel tune: worker: " << worker_status.message() << "\n";
    return code;
  };

  absl::StatusOr<Client> client = Client::Connect((*srv)->address());
  if (!client.ok()) return finish(fail(client.status()));
  absl::StatusOr<int64_t> job = client->SubmitJob(request);
  if (!job.ok()) return finish(fail(job.status()));
  std::cerr << "tessel tune: job " << *job << " on " << (kind == "cuda" ? "cuda " + arch : kind)
            << ", " << o.trials << " trials per workload, log " << db << "\n";

  // Ctrl-C cancels the job; WaitForJob then sees it finished.
  std::atomic<bool> done{false};
  std::thread watcher([&] {
    const timespec tick{0, 100 * 1000 * 1000};
    while (!done.load()) {
      if (sigtimedwait(&signals, nullptr, &tick) > 0) {
        std::cerr << "\ntessel tune: interrupted; cancelling job " << *job
                  << " (what was measured stays in the log)\n";
        (void)client->CancelJob(*job);
        return;
      }
    }
  });
  WaitOptions wait;
  wait.command = "tessel tune";
  wait.reattach_for = absl::ZeroDuration();  // the server is this process's
  absl::StatusOr<proto::JobInfo> last = WaitForJob(*client, *job, std::cerr, isatty(2) != 0, wait);
  done.store(true);
  watcher.join();
  if (!last.ok()) return finish(fail(last.status()));

  std::cout << "\n";
  PrintJob(std::cout, *last);
  if (o.verbose || o.timeline) PrintTimeline(std::cout, *last);
  bool any = false;
  for (const proto::TaskInfo& t : last->tasks()) any = any || t.best_ms() > 0;
  if (any && !o.quiet && last->tasks_size() == 1) {
    proto::QueryBestRequest q;
    q.set_workload(workloads[0]);
    *q.mutable_target() = request.target();
    absl::StatusOr<proto::BestRecord> best = client->QueryBest(q);
    if (best.ok()) std::cout << "\n// fastest kernel\n" << best->source().code() << "\n";
  }
  std::cout << "\nresults are in the tuning log " << db << "; the best kernel of a workload:\n"
            << "  tessel best --db " << db << " --workload " << Quote(workloads[0]) << " --target "
            << kind << (kind == "cuda" ? " --arch " + arch : "") << "\n";
  if (!any) std::cerr << "tessel tune: no candidate measured successfully\n";
  return finish(any && last->state() == proto::JOB_STATE_DONE ? 0 : 1);
}

}  // namespace tessel::cli
