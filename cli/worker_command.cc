#include "cli/worker_command.h"

#include <pthread.h>
#include <signal.h>

#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "cli/exit_code.h"
#include "proto/transport.h"
#include "server/dashboard_page.h"
#include "server/http_server.h"
#include "server/token_store.h"
#include "worker/daemon/worker_daemon.h"
#include "worker/daemon/worker_metrics.h"
#include "worker/isolation/child_main.h"

namespace tessel::cli {
namespace {

struct WorkerFlags {
  worker::WorkerOptions options;
  std::string devices;
  // --http: the worker's own /metrics.
  std::string http;
  std::string http_tokens;
  std::string http_tls_cert;
  std::string http_tls_key;
  bool http_insecure = false;
};

// What `tessel worker --http` serves: the worker's metrics, and a page that shows them.
class WorkerPages final : public server::HttpPages {
 public:
  explicit WorkerPages(worker::WorkerMetrics* metrics) : metrics_(metrics) {}
  std::string Metrics() override { return metrics_->Render(); }
  absl::StatusOr<std::string> Dashboard(const server::Principal&) override {
    return absl::StrCat(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        "<meta http-equiv=\"refresh\" content=\"10\"><title>Tessel worker</title></head>"
        "<body><h1>Tessel worker</h1><p>The jobs, tasks and tuning curves are on the server's "
        "dashboard; this worker's metrics (<a href=\"/metrics\">/metrics</a>):</p><pre>",
        server::HtmlEscape(metrics_->Render()), "</pre></body></html>\n");
  }

 private:
  worker::WorkerMetrics* const metrics_;
};

// Starts the worker's HTTP server when --http is given (null otherwise); `metrics` is fed by
// the daemon.
absl::StatusOr<std::unique_ptr<server::HttpServer>> StartWorkerHttp(
    const WorkerFlags& flags, worker::WorkerMetrics* metrics,
    std::unique_ptr<server::TokenStore>* tokens, std::unique_ptr<WorkerPages>* pages) {
  if (flags.http.empty()) return std::unique_ptr<server::HttpServer>();
  if (!flags.http_tokens.empty()) {
    absl::StatusOr<std::unique_ptr<server::TokenStore>> t =
        server::TokenStore::Open(flags.http_tokens, nullptr);
    if (!t.ok()) return t.status();
    *tokens = std::move(*t);
  }
  server::HttpOptions h;
  h.listen = flags.http;
  h.tls.cert = flags.http_tls_cert;
  h.tls.key = flags.http_tls_key;
  h.insecure = flags.http_insecure;
  h.tls_flags = "--http-tls-cert FILE --http-tls-key FILE";
  h.tokens_flag = "--http-tokens FILE";
  h.insecure_flag = "--http-insecure";
  if (h.tls.enabled() && (h.tls.cert.empty() || h.tls.key.empty())) {
    return absl::InvalidArgumentError(
        "--http-tls-cert and --http-tls-key go together: pass both (a PEM certificate and its "
        "key) or neither");
  }
  *pages = std::make_unique<WorkerPages>(metrics);
  return server::StartHttpServer(h, tokens->get(), pages->get());
}

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
  worker::WorkerMetrics metrics;
  std::unique_ptr<server::TokenStore> tokens;
  std::unique_ptr<WorkerPages> pages;
  if (!flags.http.empty()) {
    // The HTTP server's threads must not take the signals the daemon waits for (it blocks them
    // in its own threads only), nor die of a peer that hangs up mid-answer.
    sigset_t set;
    sigemptyset(&set);
    for (int sig : {SIGTERM, SIGINT, SIGUSR1, SIGUSR2}) sigaddset(&set, sig);
    pthread_sigmask(SIG_BLOCK, &set, nullptr);
    signal(SIGPIPE, SIG_IGN);
  }
  absl::StatusOr<std::unique_ptr<server::HttpServer>> http =
      StartWorkerHttp(flags, &metrics, &tokens, &pages);
  if (!http.ok()) {
    std::cerr << "tessel worker: " << http.status().message() << "\n";
    return 1;
  }
  if (*http != nullptr) {
    o.metrics = &metrics;
    const std::string scheme = flags.http_tls_cert.empty() ? "http://" : "https://";
    std::cerr << "tessel worker: metrics on " << scheme << (*http)->address() << "/metrics"
              << std::endl;
  }
  absl::Status s = worker::RunWorker(o);
  if (*http != nullptr) (*http)->Shutdown();
  if (!s.ok()) {
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
  cmd->add_option("--max-batches", o.max_batches,
                  "Batches held at once (credits); 0: a batch per 4 compile threads, at least 2 "
                  "per device")
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
  cmd->add_option("--http", flags->http,
                  "HOST:PORT of an HTTP server with this worker's /metrics (Prometheus): devices, "
                  "compile pool and cache hits, measuring-process restarts, results");
  cmd->add_option("--http-tokens", flags->http_tokens,
                  "Tokens file (tessel token create): --http requests need a client or admin "
                  "token");
  cmd->add_option("--http-tls-cert", flags->http_tls_cert, "Serve --http over HTTPS (PEM)");
  cmd->add_option("--http-tls-key", flags->http_tls_key, "The private key of --http-tls-cert");
  cmd->add_flag("--http-insecure", flags->http_insecure,
                "Allow --http beyond loopback without HTTPS and tokens");
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
