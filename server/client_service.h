#pragma once

// gRPC service Tessel (proto/tessel.proto): the client API. Converts requests into job manager,
// tuning log and registry calls and their answers into proto messages; errors become gRPC
// statuses with the message of the absl::Status (INVALID_ARGUMENT, NOT_FOUND, ...).
//
// Threads: gRPC calls the methods on its own threads, any number at once.

#include <grpcpp/grpcpp.h>

#include <atomic>

#include "proto/tessel.grpc.pb.h"
#include "server/job_manager.h"
#include "server/worker_registry.h"
#include "store/tuning_log.h"

namespace tessel::server {

class ClientService final : public proto::Tessel::Service {
 public:
  ClientService(JobManager* jobs, WorkerRegistry* registry, store::TuningLog* log)
      : jobs_(jobs), registry_(registry), log_(log) {}

  // Ends the WatchJob streams (at shutdown).
  void Stop() { stopped_ = true; }

  grpc::Status SubmitJob(grpc::ServerContext* context, const proto::SubmitJobRequest* request,
                         proto::SubmitJobResponse* response) override;
  grpc::Status GetJob(grpc::ServerContext* context, const proto::GetJobRequest* request,
                      proto::JobInfo* response) override;
  grpc::Status ListJobs(grpc::ServerContext* context, const proto::ListJobsRequest* request,
                        proto::ListJobsResponse* response) override;
  grpc::Status WatchJob(grpc::ServerContext* context, const proto::WatchJobRequest* request,
                        grpc::ServerWriter<proto::JobInfo>* writer) override;
  grpc::Status CancelJob(grpc::ServerContext* context, const proto::CancelJobRequest* request,
                         proto::JobInfo* response) override;
  grpc::Status QueryBest(grpc::ServerContext* context, const proto::QueryBestRequest* request,
                         proto::BestRecord* response) override;
  grpc::Status ListWorkers(grpc::ServerContext* context, const proto::ListWorkersRequest* request,
                           proto::ListWorkersResponse* response) override;

 private:
  JobManager* const jobs_;
  WorkerRegistry* const registry_;
  store::TuningLog* const log_;
  std::atomic<bool> stopped_{false};
};

}  // namespace tessel::server
