#pragma once

// gRPC service Tessel (proto/tessel.proto): the client API. Converts requests into job manager,
// tuning log and registry calls and their answers into proto messages; errors become gRPC
// statuses with the message of the absl::Status (INVALID_ARGUMENT, NOT_FOUND, ...).
//
// Every call is checked by CallAuth first: SubmitJob and QueryBest need a client or admin token;
// GetJob, WatchJob and CancelJob too, and a client token only for a job it submitted
// (PERMISSION_DENIED otherwise); ListJobs lists a client token's own jobs (an admin's: all);
// ListWorkers needs an admin token. A job records the name of the token that submitted it.
//
// Threads: gRPC calls the methods on its own threads, any number at once.

#include <grpcpp/grpcpp.h>

#include <atomic>

#include "proto/tessel.grpc.pb.h"
#include "server/call_auth.h"
#include "server/job_manager.h"
#include "server/worker_registry.h"
#include "store/tuning_log.h"

namespace tessel::server {

class ClientService final : public proto::Tessel::Service {
 public:
  ClientService(JobManager* jobs, WorkerRegistry* registry, store::TuningLog* log,
                const CallAuth* auth)
      : jobs_(jobs), registry_(registry), log_(log), auth_(auth) {}

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
  // The job as a client sees it; an unfinished job that no connected worker can serve says so
  // in JobInfo.warning.
  void Describe(const JobStatus& s, proto::JobInfo* out) const;
  // The job `job_id` when `caller` may see it: an admin any job, a client its own ones.
  absl::StatusOr<JobStatus> OwnJob(const Principal& caller, int64_t job_id,
                                   absl::string_view action);

  JobManager* const jobs_;
  WorkerRegistry* const registry_;
  store::TuningLog* const log_;
  const CallAuth* const auth_;
  std::atomic<bool> stopped_{false};
};

}  // namespace tessel::server
