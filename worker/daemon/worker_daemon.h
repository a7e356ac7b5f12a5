#pragma once

// The worker daemon (`tessel worker`): connects to the server's Worker service, registers its
// devices, receives measure batches within the credits it grants, compiles candidates on a pool
// of threads (cached, overlapped with measurement), measures each in an isolated child process
// per device (worker/isolation/), and streams one result per candidate back as soon as it is
// measured. The protocol is described at the top of proto/tessel.proto.
//
// Threads (all inside RunWorker):
// - the calling thread: the connection loop (connect, register, read the server's messages,
//   reconnect with exponential backoff when the server goes away);
// - one thread per device: takes batches, waits for their compilations, measures candidates in
//   the device's child process, sends the results;
// - the compile pool's threads (worker/compile_pool.h);
// - a heartbeat thread;
// - a signal thread: SIGTERM or SIGINT starts a drain (no new batches; the batches held are
//   finished within drain_timeout_s, what is left is returned to the server), a second one
//   ends the drain at once.
// Every event is logged as one line on stderr.

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/notification.h"
#include "proto/transport.h"
#include "worker/daemon/worker_metrics.h"

namespace tessel::worker {

struct WorkerOptions {
  std::string server;  // HOST:PORT of the server's Worker service
  // TLS (tls_ca: the CA of the server's certificate; tls_cert and tls_key when the server
  // requires a client certificate) and the worker token sent with the stream.
  proto::TransportOptions transport;
  std::string target = "auto";  // host, cuda, or auto (cuda when a GPU can be opened)
  std::vector<int> devices;     // CUDA ordinals; empty: every GPU
  int compile_threads = 0;      // 0: one per core
  std::string cache_dir;        // compile cache; empty: $XDG_CACHE_HOME/tessel or ~/.cache/tessel
  std::string worker_id;        // empty: <hostname>:<pid>
  std::string version;          // the Tessel release sent with the registration
  // Credits: batches held at once; 0: WorkerCredits of the compile pool and the devices.
  int max_batches = 0;
  double heartbeat_s = 5;            // between heartbeats
  double reconnect_initial_s = 0.2;  // first reconnect delay, doubled up to reconnect_max_s
  double reconnect_max_s = 10;
  double drain_timeout_s = 120;     // after SIGTERM, to finish the batches held
  double candidate_timeout_s = 60;  // per candidate when the batch does not set timeout_s
  double register_timeout_s = 30;   // for the server's answer to the registration
  std::string executable;           // binary of the measuring children; empty: this one
  // A worker embedded in another process (`tessel tune`): the process owns SIGTERM and SIGINT
  // (handle_signals = false) and stops the worker by notifying `stop`, which drains it as
  // SIGTERM does. The notification must outlive RunWorker.
  bool handle_signals = true;
  bool quiet = false;  // no log lines on stderr
  absl::Notification* stop = nullptr;
  // Told of the worker's devices, connection, compile pool, restarts and results (`tessel worker
  // --http`); not owned, may be null; must outlive RunWorker.
  WorkerMetrics* metrics = nullptr;
};

// Runs the daemon until a SIGTERM or SIGINT has drained it (returns OK) or a fatal error: a bad
// option, no usable device, the server rejected the registration or its token
// (UNAUTHENTICATED, PERMISSION_DENIED) or speaks another protocol version (returns it; these do
// not get better by retrying). Blocks SIGTERM and SIGINT in the
// calling thread (and so in every thread it starts) to receive them on its signal thread, unless
// handle_signals is false; notifying options.stop drains it likewise.
// The credits a worker grants when not told (WorkerOptions::max_batches 0): enough batches in hand
// that its compile pool always has the next candidates to compile while its devices measure (a
// device measures a batch of small kernels in a fraction of the time the pool needs to compile
// it, so with too few batches in hand the devices wait for compilations): a batch per four
// compile threads, and at least two per device.
int WorkerCredits(int compile_threads, int devices);

absl::Status RunWorker(const WorkerOptions& options);

}  // namespace tessel::worker
