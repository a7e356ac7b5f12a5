#pragma once

// The client side of the Tessel API (service Tessel in proto/tessel.proto), shared by the
// commands that talk to a server: submit, jobs, status, cancel, workers, best --server and tune.
//
// Threads: a Client may be used from any thread (gRPC stubs are thread-safe).

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "proto/tessel.grpc.pb.h"
#include "proto/transport.h"

namespace tessel::cli {

// The server address the client commands use when --server is not given: $TESSEL_SERVER, or
// 127.0.0.1:7070 (what `tessel serve` listens on by default).
std::string DefaultServerAddress();

// Adds --tls-ca, --tls-cert, --tls-key, --token and --timeout to a command that talks to a
// server.
void AddTransportFlags(CLI::App* cmd, proto::TransportOptions* transport);

class Client {
 public:
  // Checks `address` (HOST:PORT) and transport.timeout_s, and opens a channel, over TLS when
  // `transport` says so (its files are read now); connecting happens at the first call. Every call
  // carries the token: transport.token, else $TESSEL_TOKEN.
  static absl::StatusOr<Client> Connect(const std::string& address,
                                        proto::TransportOptions transport = {});

  const std::string& address() const { return address_; }

  absl::StatusOr<int64_t> SubmitJob(const proto::SubmitJobRequest& request) const;
  absl::StatusOr<proto::JobInfo> GetJob(int64_t job_id) const;
  absl::StatusOr<proto::ListJobsResponse> ListJobs(bool unfinished_only) const;
  absl::StatusOr<proto::JobInfo> CancelJob(int64_t job_id) const;
  absl::StatusOr<proto::BestRecord> QueryBest(const proto::QueryBestRequest& request) const;
  absl::StatusOr<proto::ListWorkersResponse> ListWorkers() const;
  // Calls `on_update` with every JobInfo the server streams until the job is finished; returns
  // the last one.
  absl::StatusOr<proto::JobInfo> WatchJob(
      int64_t job_id, const std::function<void(const proto::JobInfo&)>& on_update) const;

 private:
  Client(std::string address, proto::TransportOptions transport,
         std::shared_ptr<proto::Tessel::Stub> stub)
      : address_(std::move(address)), transport_(std::move(transport)), stub_(std::move(stub)) {}
  // A gRPC status as an absl::Status. UNAVAILABLE (nothing answers at the address: "no Tessel
  // server answers at ADDR ...", with how to start one) and DEADLINE_EXCEEDED (something
  // answers, not in time: "the server at ADDR is busy ...", retry or raise --timeout) keep their
  // codes, each with its message.
  absl::Status FromGrpc(const grpc::Status& s) const;
  // The deadline (transport.timeout_s) and the token.
  void Prepare(grpc::ClientContext* context) const;

  std::string address_;
  proto::TransportOptions transport_;
  std::shared_ptr<proto::Tessel::Stub> stub_;
};

// What the server is sent for a --workload argument (the server reads no files): the contents
// of the file it names (as schedules::LoadWorkload reads one), or the spec / definition itself.
absl::StatusOr<std::string> WorkloadArgumentText(const std::string& arg);

// "queued", "running", "done", "cancelled", "failed".
const char* JobStateName(proto::JobState state);
bool IsFinished(proto::JobState state);

}  // namespace tessel::cli
