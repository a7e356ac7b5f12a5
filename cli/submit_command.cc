#include "cli/submit_command.h"

#include <unistd.h>

#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "cli/baseline_flags.h"
#include "cli/client.h"
#include "cli/exit_code.h"
#include "cli/job_report.h"
#include "schedules/target/target.h"

namespace tessel::cli {
namespace {

struct SubmitFlags {
  std::string server;
  proto::TransportOptions transport;
  std::vector<std::string> workloads;
  std::string target = "host";
  std::string arch;
  int64_t trials = 0;
  int64_t trials_per_task = 0;
  double time_budget_s = 0;
  std::string strategy = "evolutionary";
  int priority = 0;
  std::string name;
  uint64_t seed = 0;
  int batch_size = 0;
  bool wait = false;
  double reattach_s = 120;
  BaselineFlags baselines;
};

int RunSubmit(const SubmitFlags& f) {
  auto fail = [](const absl::Status& s) {
    std::cerr << "tessel submit: " << s.message() << "\n";
    return 1;
  };
  if (absl::Status s = CheckReattachSeconds(f.reattach_s); !s.ok()) return fail(s);
  proto::SubmitJobRequest request;
  for (const std::string& w : f.workloads) {
    absl::StatusOr<std::string> text = WorkloadArgumentText(w);
    if (!text.ok()) return fail(text.status());
    request.add_workloads(*text);
  }
  request.mutable_target()->set_kind(f.target);
  request.mutable_target()->set_arch(f.arch);
  request.set_total_trials(f.trials);
  request.set_trials_per_task(f.trials_per_task);
  request.set_time_budget_s(f.time_budget_s);
  request.set_strategy(f.strategy);
  request.set_priority(f.priority);
  request.set_name(f.name);
  request.set_seed(f.seed);
  request.set_batch_size(f.batch_size);
  if (absl::Status s = AddBaselinesToRequest(f.baselines, f.workloads, &request); !s.ok()) {
    return fail(s);
  }

  absl::StatusOr<Client> client =
      Client::Connect(f.server.empty() ? DefaultServerAddress() : f.server, f.transport);
  if (!client.ok()) return fail(client.status());
  absl::StatusOr<int64_t> job = client->SubmitJob(request);
  if (!job.ok()) return fail(job.status());
  std::cout << "job " << *job << " submitted to " << client->address() << "\n";
  if (!f.wait) {
    // A job no worker can serve waits silently otherwise.
    absl::StatusOr<proto::JobInfo> info = client->GetJob(*job);
    if (info.ok() && !info->warning().empty()) {
      std::cerr << "tessel submit: warning: " << info->warning() << "\n";
    }
    return 0;
  }
  WaitOptions wait;
  wait.command = "tessel submit";
  wait.reattach_for = absl::Seconds(f.reattach_s);
  wait.job_known = true;
  absl::StatusOr<proto::JobInfo> last = WaitForJob(*client, *job, std::cerr, isatty(2) != 0, wait);
  if (!last.ok()) return fail(last.status());
  PrintJob(std::cout, *last);
  return last->state() == proto::JOB_STATE_DONE ? 0 : 2;
}

}  // namespace

void AddSubmitCommand(CLI::App& app) {
  auto f = std::make_shared<SubmitFlags>();
  CLI::App* cmd = app.add_subcommand("submit", "Submit a tuning job to a Tessel server");
  cmd->add_option("--server,-s", f->server,
                  "HOST:PORT of the server (default: $TESSEL_SERVER or 127.0.0.1:7070)");
  AddTransportFlags(cmd, &f->transport);
  cmd->add_option("--workload,-w", f->workloads,
                  "Built-in spec, definition or file; repeat for several tasks")
      ->required();
  cmd->add_option("--target,-t", f->target, "host or cuda")->capture_default_str();
  cmd->add_option(
      "--arch", f->arch,
      absl::StrCat("CUDA architecture (", schedules::KnownCudaArchsText(), "; default sm_90)"));
  cmd->add_option("--trials,-n", f->trials, "Trials over all tasks");
  cmd->add_option("--trials-per-task", f->trials_per_task,
                  "Trials per task (instead of, or with, --trials)");
  cmd->add_option("--time-budget-s", f->time_budget_s, "Stop after this many seconds (0: none)");
  cmd->add_option("--strategy", f->strategy,
                  "Search strategy: evolutionary (guided by the cost model), annealing or random")
      ->capture_default_str();
  cmd->add_option("--priority", f->priority, "Higher is served first")->capture_default_str();
  cmd->add_option("--name", f->name, "A name to show in tessel jobs");
  cmd->add_option("--seed", f->seed, "Seed of the search (0: the server picks one)");
  cmd->add_option("--batch-size", f->batch_size, "Candidates per measure batch (0: the server's)");
  AddBaselineFlags(cmd, &f->baselines);
  cmd->add_flag("--wait", f->wait, "Show progress until the job is finished, then its results");
  AddReattachFlag(cmd, &f->reattach_s);
  cmd->callback([f]() { SetExitCode(RunSubmit(*f)); });
}

}  // namespace tessel::cli
