#pragma once

// The server side of the worker protocol (proto/tessel.proto, service Worker), as the worker
// benchmarks drive a real `tessel worker` process: answers its registration, keeps its credits,
// sends measure batches within them, and collects every result. Also a handle on the worker
// process itself (started with posix_spawn, output to a log file).
//
// Threads: gRPC calls Connect on its own thread; every public method may be called from any
// thread.

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "proto/tessel.grpc.pb.h"

namespace tessel::bench {

class WorkerDriver final : public proto::Worker::Service {
 public:
  // Listens on 127.0.0.1 on a free port.
  static absl::StatusOr<std::unique_ptr<WorkerDriver>> Start();
  ~WorkerDriver() override;

  std::string address() const;

  // Waits for a worker to register; returns its Register message.
  absl::StatusOr<proto::Register> WaitForRegistration(absl::Duration timeout);
  // Sends `batch` once the worker has a credit for it (waits up to `timeout`).
  absl::Status SendBatch(const proto::MeasureBatch& batch, absl::Duration timeout);
  // Waits until `n` results have arrived in total (from every batch), and returns them all in
  // arrival order; fewer when `timeout` passes first.
  std::vector<proto::MeasureResult> WaitForResults(size_t n, absl::Duration timeout);
  // How many times a worker registered (a restarted daemon registers again).
  int registrations();
  // Heartbeats received.
  int heartbeats();

  grpc::Status Connect(
      grpc::ServerContext* context,
      grpc::ServerReaderWriter<proto::ServerMessage, proto::WorkerMessage>* stream) override;

 private:
  WorkerDriver() = default;

  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
  absl::Mutex mu_;
  grpc::ServerReaderWriter<proto::ServerMessage, proto::WorkerMessage>* stream_
      ABSL_GUARDED_BY(mu_) = nullptr;
  grpc::ServerContext* context_ ABSL_GUARDED_BY(mu_) = nullptr;
  std::vector<proto::Register> registrations_ ABSL_GUARDED_BY(mu_);
  int64_t credits_ ABSL_GUARDED_BY(mu_) = 0;
  int heartbeats_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<proto::MeasureResult> results_ ABSL_GUARDED_BY(mu_);
};

// A `tessel worker ...` process with stdout and stderr in `log_path`.
class WorkerProcess {
 public:
  // `binary`: the tessel executable; `args` follow it ("worker", "--server", ...).
  WorkerProcess(const std::string& binary, const std::vector<std::string>& args,
                const std::string& log_path);
  ~WorkerProcess();  // SIGKILL if still running
  WorkerProcess(const WorkerProcess&) = delete;
  WorkerProcess& operator=(const WorkerProcess&) = delete;

  pid_t pid() const { return pid_; }
  bool Running();
  // SIGTERM, then the exit status (nullopt: still running after `timeout`, then killed).
  std::optional<int> Stop(absl::Duration timeout);
  std::string LogTail(size_t bytes = 4000) const;

 private:
  std::string log_path_;
  pid_t pid_ = -1;
};

}  // namespace tessel::bench
