#include "server/worker_service.h"

#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "proto/convert.h"
#include "proto/protocol.h"
#include "store/record_check.h"

namespace tessel::server {
namespace {

using Stream = grpc::ServerReaderWriter<proto::ServerMessage, proto::WorkerMessage>;

int64_t NowMs() { return absl::ToUnixMillis(absl::Now()); }

// The sending side of one stream.
class StreamConnection final : public WorkerConnection {
 public:
  StreamConnection(grpc::ServerContext* context, Stream* stream)
      : context_(context), stream_(stream) {}

  bool SendBatch(const OutgoingBatch& batch) override {
    proto::ServerMessage m;
    proto::MeasureBatch* b = m.mutable_batch();
    b->set_batch_id(batch.batch_id);
    for (const OutgoingBatch::Item& item : batch.candidates) {
      proto::Candidate* c = b->add_candidates();
      c->set_id(item.candidate_id);
      proto::ToProto(*item.source, c->mutable_source());
      c->set_confirm(item.confirm);
    }
    proto::ToProto(*batch.reference, b->mutable_reference());
    proto::MeasureOptions* o = b->mutable_options();
    proto::ToProto(batch.timing, o->mutable_timing());
    o->set_verify_seed(batch.verify_seed);
    o->set_timeout_s(batch.timeout_s);
    b->set_cuda_arch(batch.cuda_arch);
    if (batch.screen.enabled) {
      proto::ToProto(batch.screen, o->mutable_screen());
      o->mutable_screen()->set_task_id(batch.screen_task);
    }
    return Write(m);
  }

  bool Write(const proto::ServerMessage& m) {
    absl::MutexLock lock(&mu_);
    return !closed_ && stream_->Write(m);
  }

  void Close() override {
    absl::MutexLock lock(&mu_);
    if (!closed_) context_->TryCancel();
    closed_ = true;
  }

  // After Connect's reads end: no write may touch the stream any more.
  void Detach() {
    absl::MutexLock lock(&mu_);
    closed_ = true;
  }

 private:
  grpc::ServerContext* const context_;
  absl::Mutex mu_;
  Stream* const stream_ ABSL_GUARDED_BY(mu_);
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
};

WorkerDevice FromProtoDevice(const proto::Device& d) {
  WorkerDevice w;
  w.ordinal = d.ordinal();
  w.kind = d.kind() == proto::TARGET_KIND_CUDA ? schedules::TargetKind::kCuda
                                               : schedules::TargetKind::kHost;
  w.name = d.name();
  w.arch = d.arch();
  w.sm_count = d.sm_count();
  w.memory_bytes = d.memory_bytes();
  w.cores = d.cores();
  return w;
}

// A worker's result as the server records it: named after the worker's registration (not what
// the result claims), without timings unless ok, and, when store::CheckMeasurement refuses what
// the worker sent, a worker_error saying why (requeued like any worker error: nothing of the
// refused result is stored). `refused` is set to the reason then.
measure::Measurement CheckedResult(const proto::MeasureResult& r, const std::string& worker_id,
                                   std::string* refused) {
  measure::Measurement m = proto::FromProto(r);
  m.worker_id = worker_id;
  if (!m.ok()) m.timings = {};
  absl::Status bad = store::CheckMeasurement(m);
  if (bad.ok()) return m;
  *refused = std::string(bad.message());
  measure::Measurement refusal;
  refusal.status = measure::MeasureStatus::kWorkerError;
  refusal.error = absl::StrCat("worker ", worker_id, " sent an invalid result: ", *refused);
  refusal.worker_id = worker_id;
  refusal.device = m.device;
  refusal.device_name = m.device_name;
  return refusal;
}

}  // namespace

void WorkerService::DropUnregistered(int64_t opened_before_unix_ms) {
  absl::MutexLock lock(&mu_);
  for (auto& [context, opened] : unregistered_) {
    if (opened < opened_before_unix_ms) context->TryCancel();
  }
}

grpc::Status WorkerService::Connect(grpc::ServerContext* context, Stream* stream) {
  const std::string peer = context->peer();
  absl::StatusOr<Principal> caller =
      auth_->Check(*context, {Role::kWorker, Role::kAdmin}, "the worker stream");
  if (!caller.ok()) {
    events_->Log(
        absl::StrCat("a worker stream from ", peer, " was refused: ", caller.status().message()));
    return grpc::Status(static_cast<grpc::StatusCode>(caller.status().code()),
                        std::string(caller.status().message()));
  }
  {
    absl::MutexLock lock(&mu_);
    if (streams_ >= max_streams_) {
      const std::string why = absl::StrCat(
          "the server has ", streams_, streams_ == 1 ? " worker stream" : " worker streams",
          " open, the most it takes "
          "(--max-worker-streams ",
          max_streams_, "): try again later, or raise --max-worker-streams on the server");
      events_->Log(absl::StrCat("a worker stream from ", peer, " was refused: ", why));
      return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED, why);
    }
    ++streams_;
  }
  grpc::Status status = Serve(context, stream, *caller);
  absl::MutexLock lock(&mu_);
  --streams_;
  return status;
}

grpc::Status WorkerService::Serve(grpc::ServerContext* context, Stream* stream,
                                  const Principal& caller) {
  const std::string peer = context->peer();
  proto::WorkerMessage first;
  {
    absl::MutexLock lock(&mu_);
    unregistered_[context] = NowMs();
  }
  const bool read = stream->Read(&first);
  {
    absl::MutexLock lock(&mu_);
    unregistered_.erase(context);
  }
  if (!read) {
    if (context->IsCancelled()) {
      events_->Log(
          absl::StrCat("a worker stream from ", peer, " sent no Register in time: dropped"));
    }
    return grpc::Status::OK;
  }
  auto reject = [&](const std::string& reason) {
    proto::ServerMessage m;
    m.mutable_rejected()->set_reason(reason);
    stream->Write(m);
    events_->Log(absl::StrCat("worker rejected: ", reason));
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, reason);
  };
  if (!first.has_register_()) {
    return reject(
        "the first message of a worker stream must be Register: is the peer a Tessel worker of "
        "the same release?");
  }
  const proto::Register& reg = first.register_();
  if (absl::Status s = proto::CheckWorkerProtocol(reg.protocol_version(), reg.worker_id());
      !s.ok()) {
    return reject(std::string(s.message()));
  }
  if (reg.devices_size() == 0) {
    return reject(absl::StrCat("worker ", reg.worker_id(),
                               " registered no device: start it where it can open a GPU or use "
                               "--target host"));
  }
  WorkerEntry entry;
  entry.worker_id = reg.worker_id().empty() ? peer : reg.worker_id();
  entry.host = reg.host();
  entry.version = reg.version();
  std::vector<std::string> names;
  for (const proto::Device& d : reg.devices()) {
    entry.devices.push_back(FromProtoDevice(d));
    names.push_back(absl::StrCat(d.name(), " (", d.arch(), ")"));
  }
  entry.connected_unix_ms = NowMs();
  entry.last_heard_unix_ms = entry.connected_unix_ms;
  const std::string asked_id = entry.worker_id;
  auto connection = std::make_shared<StreamConnection>(context, stream);
  // The id is made unique first, so that Registered can say it; no batch is sent before the
  // worker grants credits, which it does after Registered.
  std::string worker_id;
  const uint64_t session = registry_->Add(std::move(entry), connection, &worker_id);
  proto::ServerMessage registered;
  registered.mutable_registered()->set_protocol_version(proto::kWorkerProtocolVersion);
  registered.mutable_registered()->set_server_version(server_version_);
  registered.mutable_registered()->set_worker_id(worker_id);
  if (!connection->Write(registered)) {
    connection->Detach();
    registry_->Remove(session);
    return grpc::Status::OK;
  }
  events_->Log(absl::StrCat(
      "worker ", worker_id, " registered (", reg.host(), ", tessel ", reg.version(),
      caller.name.empty() ? "" : absl::StrCat(", token '", caller.name, "'"),
      "): ", absl::StrJoin(names, ", "),
      worker_id != asked_id ? absl::StrCat("; a worker ", asked_id,
                                           " is connected already, so this one is ", worker_id)
                            : ""));

  proto::WorkerMessage m;
  while (stream->Read(&m)) {
    registry_->Heard(session, NowMs());
    switch (m.kind_case()) {
      case proto::WorkerMessage::kCredits:
        registry_->AddCredits(session, static_cast<int>(m.credits().batches()));
        dispatcher_->Dispatch();
        break;
      case proto::WorkerMessage::kResult: {
        const proto::MeasureResult& r = m.result();
        std::string refused;
        measure::Measurement result = CheckedResult(r, worker_id, &refused);
        if (!refused.empty()) {
          events_->Log(absl::StrCat("worker ", worker_id, " sent an invalid result for candidate ",
                                    r.candidate_id(), " of batch ", r.batch_id(), " (", refused,
                                    "): it counts as a worker error"));
        }
        std::optional<QueuedCandidate> accepted =
            dispatcher_->OnResult(session, r.batch_id(), r.candidate_id(),
                                  result.status == measure::MeasureStatus::kWorkerError);
        if (accepted.has_value()) {
          jobs_->OnResult(*accepted, result);
          if (metrics_ != nullptr) metrics_->OnResult(result);
        }
        break;
      }
      case proto::WorkerMessage::kBatchDone:
        dispatcher_->OnBatchDone(session, m.batch_done().batch_id());
        break;
      case proto::WorkerMessage::kReturned: {
        std::vector<uint64_t> ids(m.returned().candidate_ids().begin(),
                                  m.returned().candidate_ids().end());
        dispatcher_->OnReturned(session, m.returned().batch_id(), ids);
        dispatcher_->Dispatch();
        break;
      }
      case proto::WorkerMessage::kHeartbeat:
        break;
      case proto::WorkerMessage::kDraining:
        registry_->SetDraining(session);
        events_->Log(absl::StrCat("worker ", worker_id, " is draining: ", m.draining().reason()));
        break;
      case proto::WorkerMessage::kRegister:
      case proto::WorkerMessage::KIND_NOT_SET:
        break;
    }
  }
  connection->Detach();
  dispatcher_->DropWorker(session);
  registry_->Remove(session);
  events_->Log(absl::StrCat("worker ", worker_id, " disconnected",
                            context->IsCancelled() ? " (stream cancelled)" : ""));
  dispatcher_->Dispatch();
  return grpc::Status::OK;
}

}  // namespace tessel::server
