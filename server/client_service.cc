#include "server/client_service.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "proto/convert.h"
#include "schedules/space/candidate.h"
#include "schedules/target/target.h"
#include "schedules/workload/builtins.h"
#include "schedules/workload/key.h"
#include "store/deploy_lookup.h"

namespace tessel::server {
namespace {

grpc::Status ToGrpc(const absl::Status& s) {
  if (s.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()), std::string(s.message()));
}

proto::JobState ToProto(store::JobState s) {
  switch (s) {
    case store::JobState::kQueued:
      return proto::JOB_STATE_QUEUED;
    case store::JobState::kRunning:
      return proto::JOB_STATE_RUNNING;
    case store::JobState::kDone:
      return proto::JOB_STATE_DONE;
    case store::JobState::kCancelled:
      return proto::JOB_STATE_CANCELLED;
    case store::JobState::kFailed:
      return proto::JOB_STATE_FAILED;
  }
  return proto::JOB_STATE_UNSPECIFIED;
}

void ToProto(const JobStatus& s, proto::JobInfo* out) {
  const store::JobRow& r = s.row;
  out->set_job_id(r.id);
  out->set_name(r.name);
  // A job that has results or work out is running even before its first result is stored.
  store::JobState state = r.state;
  out->set_target(r.target_key);
  out->set_strategy(r.strategy);
  out->set_priority(r.priority);
  out->set_trials_budget(r.trials_budget);
  out->set_trials_done(s.trials_done);
  out->set_time_budget_s(r.time_budget_s);
  for (const TaskStatus& t : s.tasks) {
    proto::TaskInfo* ti = out->add_tasks();
    ti->set_task_id(t.row.id);
    ti->set_workload_key(t.row.workload_key);
    ti->set_workload_name(t.workload_name);
    ti->set_workload_spec(t.workload_spec);
    ti->set_state(ToProto(t.row.state));
    ti->set_trials_budget(t.row.trials_budget);
    ti->set_trials_done(t.trials_done);
    ti->set_trials_ok(t.trials_ok);
    ti->set_best_ms(t.best_ms);
    ti->set_flops(t.flops);
    ti->set_bytes(t.bytes);
    ti->set_in_flight(t.in_flight);
    ti->set_note(t.note);
    ti->set_baseline_ms(t.row.baseline_ms);
    ti->set_baseline_label(t.row.baseline_label);
    ti->set_trials_screened(t.trials_screened);
    ti->set_screen_margin(t.screen_margin);
    ti->set_screen_pairs(t.screen_pairs);
    if (state == store::JobState::kQueued && t.in_flight > 0) state = store::JobState::kRunning;
  }
  out->set_state(ToProto(state));
  out->set_created_unix_ms(r.created_unix_ms);
  out->set_finished_unix_ms(r.finished_unix_ms);
  out->set_elapsed_s(s.elapsed_s);
  out->set_trials_per_s(s.trials_per_s);
  out->set_search_s(s.search_s);
  out->set_error(r.error);
  out->set_seed(r.seed);
  out->set_submitted_by(r.submitted_by);
  for (const TimelineStage& stage : s.timeline) {
    proto::TimelineStage* p = out->add_timeline();
    p->set_name(stage.name);
    p->set_count(stage.count);
    p->set_sum_ms(stage.sum_ms);
    p->set_median_ms(stage.median_ms);
    p->set_what(stage.what);
  }
}

constexpr std::initializer_list<Role> kClientRoles = {Role::kClient, Role::kAdmin};

}  // namespace

void ClientService::Describe(const JobStatus& s, proto::JobInfo* out) const {
  ToProto(s, out);
  const store::JobRow& r = s.row;
  if (store::IsFinished(r.state)) return;
  const schedules::TargetKind kind =
      r.target_kind == "cuda" ? schedules::TargetKind::kCuda : schedules::TargetKind::kHost;
  if (registry_->AnyCanServe(kind, r.target_arch)) return;
  out->set_warning(absl::StrCat(
      "no connected worker can measure ", r.target_key, ": the job waits until one connects (",
      kind == schedules::TargetKind::kCuda
          ? absl::StrCat("tessel worker --server HOST:PORT on a machine with an ",
                         schedules::CudaDeviceArchOf(r.target_arch), " GPU")
          : std::string("tessel worker --server HOST:PORT --target host"),
      ")"));
}

absl::StatusOr<JobStatus> ClientService::OwnJob(const Principal& caller, int64_t job_id,
                                                absl::string_view action) {
  absl::StatusOr<JobStatus> s = jobs_->Get(job_id);
  if (!s.ok()) return s.status();
  if (caller.role == Role::kAdmin || s->row.submitted_by == caller.name) return s;
  return absl::PermissionDeniedError(absl::StrCat(
      action, " ", job_id, " is refused: that job was submitted by ",
      s->row.submitted_by.empty() ? "no token (before tokens were required)"
                                  : absl::StrCat("token '", s->row.submitted_by, "'"),
      ", and client token '", caller.name,
      "' reads and cancels only its own jobs; pass that job's token or an admin token with "
      "--token"));
}

grpc::Status ClientService::SubmitJob(grpc::ServerContext* context,
                                      const proto::SubmitJobRequest* req,
                                      proto::SubmitJobResponse* response) {
  absl::StatusOr<Principal> caller = auth_->Check(*context, kClientRoles, "submitting a job");
  if (!caller.ok()) return ToGrpc(caller.status());
  const JobRequest r = JobRequestFromProto(*req, caller->name);
  absl::StatusOr<int64_t> id = jobs_->Submit(r);
  if (!id.ok()) return ToGrpc(id.status());
  response->set_job_id(*id);
  return grpc::Status::OK;
}

grpc::Status ClientService::GetJob(grpc::ServerContext* context, const proto::GetJobRequest* req,
                                   proto::JobInfo* response) {
  absl::StatusOr<Principal> caller = auth_->Check(*context, kClientRoles, "reading a job");
  if (!caller.ok()) return ToGrpc(caller.status());
  absl::StatusOr<JobStatus> s = OwnJob(*caller, req->job_id(), "reading job");
  if (!s.ok()) return ToGrpc(s.status());
  Describe(*s, response);
  return grpc::Status::OK;
}

grpc::Status ClientService::ListJobs(grpc::ServerContext* context,
                                     const proto::ListJobsRequest* req,
                                     proto::ListJobsResponse* response) {
  absl::StatusOr<Principal> caller = auth_->Check(*context, kClientRoles, "listing jobs");
  if (!caller.ok()) return ToGrpc(caller.status());
  absl::StatusOr<std::vector<JobStatus>> jobs = jobs_->List(req->unfinished_only());
  if (!jobs.ok()) return ToGrpc(jobs.status());
  for (const JobStatus& j : *jobs) {
    // A client sees its own jobs only.
    if (caller->role == Role::kAdmin || j.row.submitted_by == caller->name) {
      Describe(j, response->add_jobs());
    }
  }
  return grpc::Status::OK;
}

grpc::Status ClientService::WatchJob(grpc::ServerContext* context,
                                     const proto::WatchJobRequest* req,
                                     grpc::ServerWriter<proto::JobInfo>* writer) {
  absl::StatusOr<Principal> caller = auth_->Check(*context, kClientRoles, "watching a job");
  if (!caller.ok()) return ToGrpc(caller.status());
  absl::StatusOr<JobStatus> s = OwnJob(*caller, req->job_id(), "watching job");
  if (!s.ok()) return ToGrpc(s.status());
  constexpr absl::Duration kMinInterval = absl::Milliseconds(250);
  while (true) {
    proto::JobInfo info;
    Describe(*s, &info);
    if (!writer->Write(info)) return grpc::Status::OK;  // the client went away
    if (store::IsFinished(s->row.state)) return grpc::Status::OK;
    const absl::Time next = absl::Now() + kMinInterval;
    const uint64_t seen = s->version;
    // Waits for a change, checking now and then whether the client or the server went away;
    // in-flight counts are sent at least every second.
    for (int i = 0; i < 4; ++i) {
      if (stopped_) {
        // UNAVAILABLE, as when the server is killed: a watching client may reattach.
        return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                            "the server is shutting down (the job resumes when it starts again)");
      }
      if (context->IsCancelled())
        return grpc::Status(grpc::StatusCode::CANCELLED, "the watch ended");
      s = jobs_->WaitForChange(req->job_id(), seen, absl::Milliseconds(250));
      if (!s.ok()) return ToGrpc(s.status());
      if (s->version > seen || store::IsFinished(s->row.state)) break;
    }
    absl::SleepFor(std::max(absl::ZeroDuration(), next - absl::Now()));
    s = jobs_->Get(req->job_id());
    if (!s.ok()) return ToGrpc(s.status());
  }
}

grpc::Status ClientService::CancelJob(grpc::ServerContext* context,
                                      const proto::CancelJobRequest* req,
                                      proto::JobInfo* response) {
  absl::StatusOr<Principal> caller = auth_->Check(*context, kClientRoles, "cancelling a job");
  if (!caller.ok()) return ToGrpc(caller.status());
  if (absl::StatusOr<JobStatus> own = OwnJob(*caller, req->job_id(), "cancelling job"); !own.ok()) {
    return ToGrpc(own.status());
  }
  absl::StatusOr<JobStatus> s = jobs_->Cancel(req->job_id());
  if (!s.ok()) return ToGrpc(s.status());
  Describe(*s, response);
  return grpc::Status::OK;
}

grpc::Status ClientService::QueryBest(grpc::ServerContext* context,
                                      const proto::QueryBestRequest* req,
                                      proto::BestRecord* response) {
  absl::StatusOr<Principal> caller =
      auth_->Check(*context, kClientRoles, "asking for the best kernel");
  if (!caller.ok()) return ToGrpc(caller.status());
  absl::StatusOr<schedules::Workload> w = schedules::ParseWorkloadText(req->workload());
  if (!w.ok()) {
    return ToGrpc(absl::InvalidArgumentError(absl::StrCat("workload: ", w.status().message())));
  }
  if (req->target().kind().empty()) {
    return ToGrpc(absl::InvalidArgumentError("no target: set the target to host or cuda"));
  }
  absl::StatusOr<schedules::Target> target =
      schedules::MakeTarget(req->target().kind(), req->target().arch());
  if (!target.ok()) return ToGrpc(target.status());
  const std::string key = schedules::WorkloadKey(*w);
  // The same device first, else the same architecture (store/deploy_lookup.h); a record stored
  // without its artifact whose trace no longer replays is passed over.
  const store::DeployQuery query{*w, *target, req->device_name(), {}};
  absl::StatusOr<store::DeployedKernel> found = store::FindDeployedKernel(log_, query);
  if (absl::IsNotFound(found.status())) {
    return ToGrpc(absl::NotFoundError(
        absl::StrCat("no measured kernel for ", w->spec, " (key ", key, ") on ", target->ToString(),
                     ": tune it first (tessel submit or tessel tune)")));
  }
  if (!found.ok()) return ToGrpc(found.status());
  const store::Record& r = found->record;
  response->set_workload_key(key);
  response->set_target(target->ToString());
  response->set_record_id(r.id);
  response->set_job_id(r.job_id);
  response->set_trace_json(r.trace_json);
  response->set_match(found->MatchDescription(query));
  // What was measured; for a record stored without it, the source regenerated from the trace.
  if (absl::Status s = proto::ToProto(found->artifact, response->mutable_artifact()); !s.ok()) {
    return ToGrpc(absl::DataLossError(
        absl::StrCat("the best record ", r.uid, " in the log is damaged: ", s.message())));
  }
  *response->mutable_source() = response->artifact().source();
  if (found->regenerated) {
    response->clear_artifact();
    response->set_regenerated(true);
  }
  response->set_median_ms(r.measurement.timings.median_ms);
  response->set_kernel_median_ms(r.measurement.timings.kernel_median_ms);
  for (double ms : r.measurement.timings.repeats_ms) response->add_repeats_ms(ms);
  response->set_worker_id(r.measurement.worker_id);
  response->set_device_name(r.measurement.device_name);
  response->set_unix_ms(r.unix_ms);
  response->set_records(found->ok_records);
  return grpc::Status::OK;
}

grpc::Status ClientService::ListWorkers(grpc::ServerContext* context,
                                        const proto::ListWorkersRequest*,
                                        proto::ListWorkersResponse* response) {
  absl::StatusOr<Principal> caller = auth_->Check(*context, {Role::kAdmin}, "listing the workers");
  if (!caller.ok()) return ToGrpc(caller.status());
  for (const WorkerEntry& w : registry_->List()) {
    proto::WorkerInfo* info = response->add_workers();
    info->set_worker_id(w.worker_id);
    info->set_host(w.host);
    info->set_version(w.version);
    for (const WorkerDevice& d : w.devices) {
      proto::Device* pd = info->add_devices();
      pd->set_ordinal(d.ordinal);
      pd->set_kind(d.kind == schedules::TargetKind::kCuda ? proto::TARGET_KIND_CUDA
                                                          : proto::TARGET_KIND_HOST);
      pd->set_name(d.name);
      pd->set_arch(d.arch);
      pd->set_sm_count(d.sm_count);
      pd->set_memory_bytes(d.memory_bytes);
      pd->set_cores(d.cores);
    }
    info->set_connected_unix_ms(w.connected_unix_ms);
    info->set_last_heartbeat_unix_ms(w.last_heard_unix_ms);
    info->set_batches_in_flight(static_cast<uint32_t>(w.batches_in_flight));
    info->set_candidates_measured(w.candidates_measured);
    info->set_draining(w.draining);
  }
  return grpc::Status::OK;
}

}  // namespace tessel::server
