#pragma once

// gRPC service Worker (proto/tessel.proto): one Connect stream per worker daemon. Checks the
// protocol version (a mismatched peer gets Rejected, then FAILED_PRECONDITION naming both
// versions), registers the worker, then turns its messages into registry, dispatcher and job
// manager calls: credits, results, batch ends, returned candidates, heartbeats, draining. When
// the stream ends, everything the worker held goes back to the queue. A stream that sends no
// Register is ended by DropUnregistered (the server's maintenance thread calls it), so that it
// does not hold its thread for good.
//
// A stream needs a worker or admin token (CallAuth; UNAUTHENTICATED or PERMISSION_DENIED before
// anything is read). Worker ids are unique per connection: a worker registering under an id that
// is connected already gets a distinct one ("gpu-1#2", sent back in Registered), and every
// result is credited to its connection's id, whatever the result claims.
//
// Each stream holds one of gRPC's threads for its life (the synchronous API), so their number is
// bounded: past `max_streams` open streams, a new one is refused with RESOURCE_EXHAUSTED naming
// the limit and --max-worker-streams, before anything is read (the worker retries later).
//
// Threads: gRPC calls Connect on its own threads, one per stream; DropUnregistered may be called
// from any thread.

#include <grpcpp/grpcpp.h>

#include <cstdint>
#include <map>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

#include "proto/tessel.grpc.pb.h"
#include "server/call_auth.h"
#include "server/dispatcher.h"
#include "server/event_log.h"
#include "server/job_manager.h"
#include "server/server_metrics.h"
#include "server/worker_registry.h"

namespace tessel::server {

class WorkerService final : public proto::Worker::Service {
 public:
  WorkerService(WorkerRegistry* registry, Dispatcher* dispatcher, JobManager* jobs,
                const CallAuth* auth, std::string server_version, const EventLog* events,
                int max_streams)
      : registry_(registry),
        dispatcher_(dispatcher),
        jobs_(jobs),
        auth_(auth),
        server_version_(std::move(server_version)),
        events_(events),
        max_streams_(max_streams) {}

  grpc::Status Connect(
      grpc::ServerContext* context,
      grpc::ServerReaderWriter<proto::ServerMessage, proto::WorkerMessage>* stream) override;

  // Cancels the streams opened before `opened_before_unix_ms` that have not registered yet.
  void DropUnregistered(int64_t opened_before_unix_ms);

  // Also tells `metrics` (not owned; may be null) of every result accepted for recording. Call
  // before the service starts.
  void set_metrics(ServerMetrics* metrics) { metrics_ = metrics; }

 private:
  // Connect once the stream has its slot.
  grpc::Status Serve(grpc::ServerContext* context,
                     grpc::ServerReaderWriter<proto::ServerMessage, proto::WorkerMessage>* stream,
                     const Principal& caller);

  WorkerRegistry* const registry_;
  Dispatcher* const dispatcher_;
  JobManager* const jobs_;
  const CallAuth* const auth_;
  ServerMetrics* metrics_ = nullptr;
  const std::string server_version_;
  const EventLog* const events_;
  const int max_streams_;
  absl::Mutex mu_;
  int streams_ ABSL_GUARDED_BY(mu_) = 0;  // open (authenticated) streams
  // The streams waiting for their Register, and when they opened.
  std::map<grpc::ServerContext*, int64_t> unregistered_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tessel::server
