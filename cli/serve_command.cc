#include "cli/serve_command.h"

#include <pthread.h>
#include <signal.h>

#include <cmath>
#include <iostream>
#include <memory>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "cli/exit_code.h"
#include "cli/screening_flags.h"
#include "server/server.h"

namespace tessel::cli {
namespace {

// The timing flags, unset until given.
struct ServeFlags {
  server::ServerOptions options;
  std::optional<int> min_repeats;
  std::optional<int> max_repeats;
  std::optional<double> min_total_ms;
  std::optional<double> median_precision;
  bool no_flush = false;
  ScreeningFlags screening;
};

int RunServe(ServeFlags& flags) {
  server::ServerOptions& o = flags.options;
  o.version = TESSEL_VERSION;
  if (flags.min_repeats && *flags.min_repeats < 1) {
    std::cerr << "tessel serve: --min-repeats " << *flags.min_repeats
              << ": give at least 1 timed repeat\n";
    return 1;
  }
  if (flags.min_total_ms && !(*flags.min_total_ms >= 0 && std::isfinite(*flags.min_total_ms))) {
    std::cerr << "tessel serve: --min-total-ms " << *flags.min_total_ms
              << ": give 0 or more milliseconds\n";
    return 1;
  }
  if (flags.median_precision && !measure::ValidMedianPrecision(*flags.median_precision)) {
    std::cerr << "tessel serve: --median-precision " << *flags.median_precision
              << ": give 0 (off) or a fraction in (0, 1), e.g. 0.005 for +-0.5%\n";
    return 1;
  }
  if (flags.median_precision) o.timing.median_precision = *flags.median_precision;
  if (flags.min_repeats) o.timing.min_repeats = *flags.min_repeats;
  if (flags.max_repeats) o.timing.max_repeats = *flags.max_repeats;
  if (flags.min_total_ms) o.timing.min_total_ms = *flags.min_total_ms;
  if (flags.no_flush) o.timing.flush_cache = false;
  if (o.timing.max_repeats < 1 || o.timing.min_repeats > o.timing.max_repeats) {
    std::cerr << "tessel serve: --min-repeats " << o.timing.min_repeats << " and --max-repeats "
              << o.timing.max_repeats << " do not fit: give 1 <= min <= max\n";
    return 1;
  }
  absl::StatusOr<server::ScreeningOptions> screening =
      ScreeningFromFlags(flags.screening, o.timing);
  if (!screening.ok()) {
    std::cerr << "tessel serve: " << screening.status().message() << "\n";
    return 1;
  }
  o.screening = *screening;
  // SIGTERM and SIGINT are taken by sigwait below: block them before any server thread starts.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  signal(SIGPIPE, SIG_IGN);
  absl::StatusOr<std::unique_ptr<server::Server>> s = server::StartServer(o);
  if (!s.ok()) {
    std::cerr << "tessel serve: " << s.status().message() << "\n";
    return 1;
  }
  if (const std::string open = server::InsecureListening(o); !open.empty()) {
    std::cerr << "tessel serve: warning: --insecure: listening on " << (*s)->address()
              << ", beyond this machine, " << open
              << ": anyone who can reach the port can submit and cancel jobs, pose as a worker "
                 "and write results into the log\n";
  }
  std::cout << "tessel serve: listening on " << (*s)->address() << ", log " << o.db_path
            << std::endl;
  if (!(*s)->http_address().empty()) {
    std::cout << "tessel serve: metrics on " << (o.tls.enabled() ? "https://" : "http://")
              << (*s)->http_address() << "/metrics, dashboard on "
              << (o.tls.enabled() ? "https://" : "http://") << (*s)->http_address() << "/"
              << std::endl;
  }
  int sig = 0;
  while (sigwait(&set, &sig) != 0) {
  }
  std::cerr << "tessel serve: " << (sig == SIGTERM ? "SIGTERM" : "SIGINT")
            << ": shutting down (unfinished jobs resume at the next start)\n";
  (*s)->Shutdown();
  return 0;
}

}  // namespace

void AddServeCommand(CLI::App& app) {
  auto flags = std::make_shared<ServeFlags>();
  server::ServerOptions& o = flags->options;
  o.listen = "127.0.0.1:7070";  // where the client commands look by default
  CLI::App* cmd = app.add_subcommand(
      "serve",
      "Run the search server: accept tuning jobs (tessel submit), hand their candidates to "
      "workers (tessel worker) and keep every result in the tuning log");
  cmd->add_option("--db", o.db_path, "The tuning log (SQLite file; created when missing)")
      ->required();
  cmd->add_option("--listen,-l", o.listen, "HOST:PORT to listen on (port 0: any free port)")
      ->capture_default_str();
  cmd->add_option("--batch-size", o.batch_size, "Candidates per measure batch, unless a job says")
      ->capture_default_str();
  cmd->add_option("--heartbeat-timeout-s", o.heartbeat_timeout_s,
                  "A worker silent this long is dropped and its work requeued")
      ->capture_default_str();
  cmd->add_option("--registration-timeout-s", o.registration_timeout_s,
                  "A worker stream that does not register by then is ended")
      ->capture_default_str();
  cmd->add_option("--batch-deadline-s", o.batch_deadline_s,
                  "The longest a batch is given: an unanswered batch is requeued by its deadline, "
                  "scaled to its expected time (3x the task's measured time per candidate times "
                  "the candidates its worker holds, plus --batch-deadline-min-s) up to this")
      ->capture_default_str();
  cmd->add_option("--batch-deadline-min-s", o.batch_deadline_min_s,
                  "The least a batch is given, on top of its expected time (compiling, starting)")
      ->capture_default_str();
  cmd->add_option("--max-worker-streams", o.max_worker_streams,
                  "Worker streams open at once (each holds a server thread); more are refused "
                  "until one ends")
      ->capture_default_str();
  cmd->add_option("--candidate-timeout-s", o.candidate_timeout_s,
                  "Time limit per candidate sent to workers (0: the worker's default)")
      ->capture_default_str();
  cmd->add_option("--min-repeats", flags->min_repeats, "Timed repeats per candidate, at least");
  cmd->add_option("--max-repeats", flags->max_repeats, "Timed repeats per candidate, at most");
  cmd->add_option("--min-total-ms", flags->min_total_ms,
                  "Repeat until the repeats add up to this much (ms), unless the median is precise "
                  "sooner (--median-precision)");
  cmd->add_option("--median-precision", flags->median_precision,
                  absl::StrCat("Stop timing a candidate once its median's 95% confidence "
                               "half-width is this fraction of it (default ",
                               measure::TimingOptions{}.median_precision, "; 0: off)"));
  cmd->add_flag("--no-flush", flags->no_flush, "Do not flush caches between timed repeats");
  AddScreeningFlags(cmd, &flags->screening);
  cmd->add_flag("--counters", o.timing.hardware_counters,
                "CUDA: workers also collect DRAM bytes and achieved occupancy (CUPTI)");
  cmd->add_flag("--quiet,-q", o.quiet, "No event lines on stderr");
  cmd->add_option("--tls-cert", o.tls.cert, "Serve TLS with this certificate (PEM)");
  cmd->add_option("--tls-key", o.tls.key, "The private key (PEM) of --tls-cert");
  cmd->add_option("--tls-ca", o.tls.ca,
                  "CA certificate (PEM) that signs client certificates; clients that present one "
                  "must be signed by it");
  cmd->add_flag("--require-client-cert", o.tls.require_client_cert,
                "Refuse clients and workers without a certificate signed by --tls-ca");
  cmd->add_option("--tokens", o.tokens_path,
                  "Tokens file (tessel token create): every call needs a token of the right "
                  "role; read again whenever the file changes");
  cmd->add_flag("--insecure", o.insecure,
                "Allow listening beyond loopback without TLS and tokens (prints a warning)");
  cmd->add_option("--http", o.http_listen,
                  "HOST:PORT of an HTTP server with /metrics (Prometheus) and the dashboard at / "
                  "(port 0: any free port); same TLS and tokens as --listen");
  cmd->callback([flags]() { SetExitCode(RunServe(*flags)); });
}

}  // namespace tessel::cli
