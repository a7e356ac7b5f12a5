#include "cli/job_commands.h"

#include <unistd.h>

#include <iostream>
#include <memory>
#include <string>

#include "cli/client.h"
#include "cli/exit_code.h"
#include "cli/job_report.h"

namespace tessel::cli {
namespace {

struct JobFlags {
  std::string server;
  proto::TransportOptions transport;
  int64_t job_id = 0;
  bool unfinished = false;
  bool wait = false;
  bool timeline = false;
  double reattach_s = 120;
};

// Runs `body` with a client for the flags' server; prints its error as "tessel CMD: message".
template <typename Body>
int WithClient(const char* command, const JobFlags& f, Body body) {
  absl::StatusOr<Client> client =
      Client::Connect(f.server.empty() ? DefaultServerAddress() : f.server, f.transport);
  absl::Status s = client.ok() ? body(*client) : client.status();
  if (!s.ok()) {
    std::cerr << "tessel " << command << ": " << s.message() << "\n";
    return 1;
  }
  return 0;
}

CLI::App* AddServerFlag(CLI::App* cmd, JobFlags* f) {
  cmd->add_option("--server,-s", f->server,
                  "HOST:PORT of the server (default: $TESSEL_SERVER or 127.0.0.1:7070)");
  AddTransportFlags(cmd, &f->transport);
  return cmd;
}

}  // namespace

void AddJobCommands(CLI::App& app) {
  {
    auto f = std::make_shared<JobFlags>();
    CLI::App* cmd = AddServerFlag(app.add_subcommand("jobs", "List a server's jobs"), f.get());
    cmd->add_flag("--unfinished", f->unfinished, "Only jobs that are queued or running");
    cmd->callback([f]() {
      SetExitCode(WithClient("jobs", *f, [&](const Client& c) -> absl::Status {
        absl::StatusOr<proto::ListJobsResponse> jobs = c.ListJobs(f->unfinished);
        if (!jobs.ok()) return jobs.status();
        PrintJobList(std::cout, *jobs);
        return absl::OkStatus();
      }));
    });
  }
  {
    auto f = std::make_shared<JobFlags>();
    CLI::App* cmd =
        AddServerFlag(app.add_subcommand("status", "Show a job's tasks and progress"), f.get());
    cmd->add_option("job", f->job_id, "The job id (tessel jobs lists them)")->required();
    cmd->add_flag("--wait", f->wait, "Show progress until the job is finished");
    cmd->add_flag("--timeline,-v", f->timeline,
                  "Also show where the candidates' time went (sample, queue, compile, verify, "
                  "time, store, ...)");
    AddReattachFlag(cmd, &f->reattach_s);
    cmd->callback([f]() {
      SetExitCode(WithClient("status", *f, [&](const Client& c) -> absl::Status {
        if (absl::Status s = CheckReattachSeconds(f->reattach_s); !s.ok()) return s;
        WaitOptions wait;
        wait.command = "tessel status";
        wait.reattach_for = absl::Seconds(f->reattach_s);
        absl::StatusOr<proto::JobInfo> job =
            f->wait ? WaitForJob(c, f->job_id, std::cerr, isatty(2) != 0, wait)
                    : c.GetJob(f->job_id);
        if (!job.ok()) return job.status();
        PrintJob(std::cout, *job);
        if (f->timeline) PrintTimeline(std::cout, *job);
        return absl::OkStatus();
      }));
    });
  }
  {
    auto f = std::make_shared<JobFlags>();
    CLI::App* cmd = AddServerFlag(
        app.add_subcommand("cancel", "Cancel a job: nothing more of it is dispatched"), f.get());
    cmd->add_option("job", f->job_id, "The job id (tessel jobs lists them)")->required();
    cmd->callback([f]() {
      SetExitCode(WithClient("cancel", *f, [&](const Client& c) -> absl::Status {
        absl::StatusOr<proto::JobInfo> job = c.CancelJob(f->job_id);
        if (!job.ok()) return job.status();
        PrintJob(std::cout, *job);
        return absl::OkStatus();
      }));
    });
  }
  {
    auto f = std::make_shared<JobFlags>();
    CLI::App* cmd = AddServerFlag(
        app.add_subcommand("workers", "List the workers connected to a server"), f.get());
    cmd->callback([f]() {
      SetExitCode(WithClient("workers", *f, [&](const Client& c) -> absl::Status {
        absl::StatusOr<proto::ListWorkersResponse> w = c.ListWorkers();
        if (!w.ok()) return w.status();
        PrintWorkers(std::cout, *w);
        return absl::OkStatus();
      }));
    });
  }
}

}  // namespace tessel::cli
