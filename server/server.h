#pragma once

// The Tessel server (`tessel serve`, and embedded in `tessel tune`): the client API (service
// Tessel) and the worker protocol (service Worker) of proto/tessel.proto on one gRPC port, over
// a tuning log (store/). It owns the job manager, the dispatcher and the worker registry. On
// start it resumes the unfinished jobs found in the log, counting the trials already recorded.
//
// Threads: Start, address, port and Shutdown may be called from any thread; Shutdown once.

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "measure/measurement.h"
#include "server/screen_margin.h"
#include "server/tls_credentials.h"

namespace tessel::server {

struct ServerOptions {
  std::string db_path;                 // the tuning log (SQLite); created when missing
  std::string listen = "127.0.0.1:0";  // HOST:PORT; port 0 picks a free port
  int batch_size = 16;                 // candidates per measure batch, unless the job says
  double heartbeat_timeout_s = 30;     // a worker silent this long is dropped, its work requeued
  double registration_timeout_s = 10;  // a worker stream that sends no Register by then is ended
  // An in-flight batch not answered by its deadline is requeued. The deadline is scaled to the
  // batch's expected time (server/dispatcher.h): batch_deadline_min_s plus 3 times the time the
  // worker is expected to spend on the batch and on those it holds before it, at most
  // batch_deadline_s.
  double batch_deadline_s = 600;
  double batch_deadline_min_s = 30;
  std::string version;  // the Tessel release, sent to workers
  bool quiet = false;   // no log lines on stderr
  // How workers time each candidate (sent with every batch) and the time limit per candidate
  // (0: the worker's default).
  measure::TimingOptions timing;
  double candidate_timeout_s = 0;
  // Screening (server/screen_margin.h): every candidate first gets a short measurement, and the
  // full `timing` only when it can matter. Screening is off when its budget is not below
  // timing.min_total_ms (the full measurement is as short already); the flags of `tessel serve`
  // and `tessel tune` refuse such a combination when both are given.
  ScreeningOptions screening;
  double tick_s = 0.2;  // the maintenance thread's period (deadlines, heartbeats)
  // Worker streams open at once (each holds a thread of the server); more are refused with
  // RESOURCE_EXHAUSTED until one ends.
  int max_worker_streams = 256;
  // Trust (README, Security). TLS for both services; the tokens file (server/tokens_file.h,
  // read again when it changes); empty: no tokens, every call is taken as an admin's. Listening
  // beyond loopback needs TLS and tokens, or `insecure`.
  TlsOptions tls;
  std::string tokens_path;
  bool insecure = false;
  // HOST:PORT of the HTTP server (server/http_server.h: /metrics and the dashboard at /); empty:
  // none. Same TLS and tokens as the gRPC services; beyond loopback it needs both, or insecure.
  std::string http_listen;
};

class Server {
 public:
  virtual ~Server() = default;
  // HOST:PORT the server listens on (the chosen port when asked for port 0).
  virtual std::string address() const = 0;
  virtual int port() const = 0;
  // HOST:PORT of the HTTP server (the chosen port for port 0); empty without one.
  virtual std::string http_address() const { return ""; }
  // Stops accepting, ends the streams, stops dispatch; committed results stay in the log.
  // Unfinished jobs stay unfinished in the log and resume at the next start.
  virtual void Shutdown() = 0;
  // Blocks until Shutdown (from another thread or a signal handler's thread).
  virtual void Wait() = 0;
};

// Opens (or creates) the log, takes its lock (store::LogLock: one server per log, held until the
// server is destroyed), resumes unfinished jobs and starts listening (one server per port: no
// port sharing). Fails with a message naming the problem for an unreadable, unwritable or foreign
// database, a log another server holds (naming that server), or an address that cannot be bound
// (CheckListenAddress: malformed, not of this machine, or a port in use); a TLS file or tokens file
// that cannot be used; and an address beyond loopback without TLS and tokens unless
// options.insecure (InsecureListening says why); and an HTTP address (options.http_listen) that
// is malformed, taken, or beyond loopback without TLS and tokens unless options.insecure.
absl::StatusOr<std::unique_ptr<Server>> StartServer(const ServerOptions& options);

// What listening as `options` says leaves open, when it reaches beyond loopback without TLS or
// tokens ("without TLS and tokens"); empty when nothing is. StartServer refuses such options
// unless options.insecure; `tessel serve --insecure` prints it as a warning.
std::string InsecureListening(const ServerOptions& options);

}  // namespace tessel::server
