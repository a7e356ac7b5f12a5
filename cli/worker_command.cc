#include "cli/worker_command.h"

#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "cli/exit_code.h"
#include "proto/transport.h"
#include "worker/daemon/worker_daemon.h"
#include "worker/isolation/child_main.h"

namespace tessel::cli {
namespace {

struct WorkerFlags {
  worker::WorkerOptions options;
  std::string devices;
};

int RunWorkerCommand(WorkerFlags& flags) {
  worker::WorkerOptions& o = flags.options;
  o.version = TESSEL_VERSION;
  if (o.transport.token.empty()) o.transport.token = proto::TokenFromEnvironment();
  if (!flags.devices.empty()) {
    for (absl::string_view part : absl::StrSplit(flags.devices, ',')) {
      int ordinal = -1;
      if (!absl::SimpleAtoi(part, &ordinal) || ordinal < 0) {
        std::cerr << "tessel worker: --devices '" << flags.devices
                  << "' is not a list of GPU numbers: pass e.g. --devices 0,1\n";
        return 1;
      }
      o.devices.push_back(ordinal);
    }
  }
  if (absl::Status s = worker::RunWorker(o); !s.ok()) {
    std::cerr << "tessel worker: " << s.message() << "\n";
    return 1;
  }
  return 0;
}

}  // namespace

void AddWorkerCommand(CLI::App& app) {
  auto flags = std::make_shared<WorkerFlags>();
  worker::WorkerOptions& o = flags->options;
  CLI::App* cmd = app.add_subcommand(
      "worker",
      "Run a worker daemon: connect to a Tessel server, measure the candidates it sends on this "
      "machine's GPUs (or its CPU) and stream the results back");
  cmd->add_option("--server,-s", o.server, "HOST:PORT of the server")->required();
  cmd->add_option("--target,-t", o.target, "host, cuda, or auto (cuda when a GPU is present)")
      ->capture_default_str();
  cmd->add_option("--devices,-d", flags->devices, "GPUs to measure on, e.g. 0,1 (default: all)");
  cmd->add_option("--compile-threads", o.compile_threads,
                  "Compiler threads (default: one per core)");
  cmd->add_option("--cache", o.cache_dir,
                  "Compile cache directory (default: $XDG_CACHE_HOME/tessel or ~/.cache/tessel)");
  cmd->add_option("--worker-id", o.worker_id,
                  "Name sent to the server (default: HOST:PID; made unique by the server when a "
                  "worker of that name is connected)");
  cmd->add_option("--tls-ca", o.transport.tls_ca,
                  "Connect over TLS, trusting this CA certificate (PEM) for the server's");
  cmd->add_option("--tls-cert", o.transport.tls_cert,
                  "This worker's certificate (PEM), for a server that requires one");
  cmd->add_option("--tls-key", o.transport.tls_key, "The private key (PEM) of --tls-cert");
  cmd->add_option("--token", o.transport.token,
                  "A worker token (default: $TESSEL_TOKEN); tessel token create --role worker "
                  "makes one");
  cmd->add_option("--max-batches", o.max_batches, "Batches held at once (credits)")
      ->capture_default_str();
  cmd->add_option("--heartbeat-s", o.heartbeat_s, "Seconds between heartbeats")
      ->capture_default_str();
  cmd->add_option("--reconnect-initial-s", o.reconnect_initial_s,
                  "First delay before reconnecting (doubled each time)")
      ->capture_default_str();
  cmd->add_option("--reconnect-max-s", o.reconnect_max_s, "Longest delay before reconnecting")
      ->capture_default_str();
  cmd->add_option("--drain-timeout-s", o.drain_timeout_s,
                  "After SIGTERM, seconds to finish the batches held before returning the rest")
      ->capture_default_str();
  cmd->add_option("--candidate-timeout-s", o.candidate_timeout_s,
                  "Time limit per candidate when the server sets none")
      ->capture_default_str();
  cmd->add_option("--register-timeout-s", o.register_timeout_s,
                  "Time for the server to answer the registration before reconnecting")
      ->capture_default_str();
  cmd->callback([flags]() { SetExitCode(RunWorkerCommand(*flags)); });

  // The worker's measuring child process; not for users (no help entry).
  auto child = std::make_shared<worker::ChildMainOptions>();
  CLI::App* hidden = app.add_subcommand("__measure-child", "");
  hidden->group("");
  hidden->add_option("--target", child->target);
  hidden->add_option("--device", child->device);
  hidden->add_option("--fd", child->fd);
  hidden->callback([child]() { SetExitCode(worker::RunMeasureChild(*child)); });
}

}  // namespace tessel::cli
