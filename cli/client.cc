#include "cli/client.h"

#include <grpcpp/grpcpp.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "proto/protocol.h"

namespace tessel::cli {

std::string DefaultServerAddress() {
  if (const char* env = std::getenv("TESSEL_SERVER"); env != nullptr && env[0] != '\0') {
    return env;
  }
  return "127.0.0.1:7070";
}

void AddTransportFlags(CLI::App* cmd, proto::TransportOptions* transport) {
  cmd->add_option("--tls-ca", transport->tls_ca,
                  "Connect over TLS, trusting this CA certificate (PEM) for the server's");
  cmd->add_option("--tls-cert", transport->tls_cert,
                  "This client's certificate (PEM), for a server that requires one");
  cmd->add_option("--tls-key", transport->tls_key, "The private key (PEM) of --tls-cert");
  cmd->add_option("--token", transport->token,
                  "The token to send (default: $TESSEL_TOKEN); tessel token create makes one");
  cmd->add_option("--timeout", transport->timeout_s,
                  "Seconds to wait for the server's answer to a call (a busy server may need "
                  "more)")
      ->capture_default_str();
}

absl::StatusOr<Client> Client::Connect(const std::string& address,
                                       proto::TransportOptions transport) {
  if (absl::Status s = proto::CheckServerAddress(address); !s.ok()) return s;
  if (!(transport.timeout_s > 0) || !std::isfinite(transport.timeout_s)) {
    return absl::InvalidArgumentError(absl::StrCat("--timeout ", transport.timeout_s,
                                                   ": give a positive number of seconds to wait"));
  }
  if (transport.token.empty()) transport.token = proto::TokenFromEnvironment();
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> credentials =
      proto::MakeChannelCredentials(transport);
  if (!credentials.ok()) return credentials.status();
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(-1);
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  auto channel = grpc::CreateCustomChannel(address, *credentials, args);
  return Client(address, std::move(transport), proto::Tessel::NewStub(channel));
}

absl::Status Client::FromGrpc(const grpc::Status& s) const {
  if (s.ok()) return absl::OkStatus();
  const std::string hint = proto::TransportHint(transport_, s);
  if (s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) {
    // Something answers at the address (else the call fails at once as UNAVAILABLE), but not
    // in time.
    return absl::DeadlineExceededError(absl::StrCat(
        "the server at ", address_, " is busy (deadline of ", transport_.timeout_s,
        " s exceeded): retry, or raise --timeout", hint.empty() ? "" : absl::StrCat("; ", hint)));
  }
  if (s.error_code() == grpc::StatusCode::UNAVAILABLE) {
    return absl::UnavailableError(
        absl::StrCat("no Tessel server answers at ", address_, " (", s.error_message(),
                     "); start one with `tessel serve --db FILE --listen ", address_,
                     "`, or pass --server HOST:PORT (or set TESSEL_SERVER)",
                     hint.empty() ? "" : absl::StrCat("; ", hint)));
  }
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()), s.error_message());
}

// Unary calls fail at once when nothing listens at the address, and give up after --timeout.
void Client::Prepare(grpc::ClientContext* context) const {
  context->set_deadline(
      std::chrono::system_clock::now() +
      std::chrono::microseconds(static_cast<int64_t>(transport_.timeout_s * 1e6)));
  proto::AttachToken(transport_, context);
}

absl::StatusOr<int64_t> Client::SubmitJob(const proto::SubmitJobRequest& request) const {
  grpc::ClientContext context;
  Prepare(&context);
  proto::SubmitJobResponse response;
  if (absl::Status s = FromGrpc(stub_->SubmitJob(&context, request, &response)); !s.ok()) {
    return s;
  }
  return response.job_id();
}

absl::StatusOr<proto::JobInfo> Client::GetJob(int64_t job_id) const {
  grpc::ClientContext context;
  Prepare(&context);
  proto::GetJobRequest request;
  request.set_job_id(job_id);
  proto::JobInfo info;
  if (absl::Status s = FromGrpc(stub_->GetJob(&context, request, &info)); !s.ok()) return s;
  return info;
}

absl::StatusOr<proto::ListJobsResponse> Client::ListJobs(bool unfinished_only) const {
  grpc::ClientContext context;
  Prepare(&context);
  proto::ListJobsRequest request;
  request.set_unfinished_only(unfinished_only);
  proto::ListJobsResponse response;
  if (absl::Status s = FromGrpc(stub_->ListJobs(&context, request, &response)); !s.ok()) {
    return s;
  }
  return response;
}

absl::StatusOr<proto::JobInfo> Client::CancelJob(int64_t job_id) const {
  grpc::ClientContext context;
  Prepare(&context);
  proto::CancelJobRequest request;
  request.set_job_id(job_id);
  proto::JobInfo info;
  if (absl::Status s = FromGrpc(stub_->CancelJob(&context, request, &info)); !s.ok()) return s;
  return info;
}

absl::StatusOr<proto::BestRecord> Client::QueryBest(const proto::QueryBestRequest& request) const {
  grpc::ClientContext context;
  Prepare(&context);
  proto::BestRecord best;
  if (absl::Status s = FromGrpc(stub_->QueryBest(&context, request, &best)); !s.ok()) return s;
  return best;
}

absl::StatusOr<proto::ListWorkersResponse> Client::ListWorkers() const {
  grpc::ClientContext context;
  Prepare(&context);
  proto::ListWorkersRequest request;
  proto::ListWorkersResponse response;
  if (absl::Status s = FromGrpc(stub_->ListWorkers(&context, request, &response)); !s.ok()) {
    return s;
  }
  return response;
}

absl::StatusOr<proto::JobInfo> Client::WatchJob(
    int64_t job_id, const std::function<void(const proto::JobInfo&)>& on_update) const {
  grpc::ClientContext context;
  proto::AttachToken(transport_, &context);
  proto::WatchJobRequest request;
  request.set_job_id(job_id);
  std::unique_ptr<grpc::ClientReader<proto::JobInfo>> reader = stub_->WatchJob(&context, request);
  proto::JobInfo info;
  bool any = false;
  while (reader->Read(&info)) {
    any = true;
    on_update(info);
    if (IsFinished(info.state())) break;
  }
  if (any && IsFinished(info.state())) {
    context.TryCancel();
    reader->Finish();
    return info;
  }
  if (absl::Status s = FromGrpc(reader->Finish()); !s.ok()) return s;
  if (!any) {
    return absl::InternalError(absl::StrCat("the server at ", address_, " ended the watch of job ",
                                            job_id, " without sending its state"));
  }
  return info;
}

absl::StatusOr<std::string> WorkloadArgumentText(const std::string& arg) {
  std::error_code ec;
  if (std::filesystem::is_regular_file(arg, ec)) {
    std::ifstream in(arg, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    if (!in.good() && !in.eof()) {
      return absl::InvalidArgumentError(
          absl::StrCat("cannot read the workload file ", arg, "; check its permissions"));
    }
    return ss.str();
  }
  // Text that is neither a spec nor a definition is most likely a file name mistyped.
  if (arg.find_first_of("(\n=") == std::string::npos) {
    return absl::NotFoundError(
        absl::StrCat("--workload '", arg,
                     "' is neither a built-in spec such as 'matmul(M=1024, N=1024, K=1024)' nor a "
                     "readable file"));
  }
  return arg;
}

const char* JobStateName(proto::JobState state) {
  switch (state) {
    case proto::JOB_STATE_QUEUED:
      return "queued";
    case proto::JOB_STATE_RUNNING:
      return "running";
    case proto::JOB_STATE_DONE:
      return "done";
    case proto::JOB_STATE_CANCELLED:
      return "cancelled";
    case proto::JOB_STATE_FAILED:
      return "failed";
    default:
      return "unknown";
  }
}

bool IsFinished(proto::JobState state) {
  return state == proto::JOB_STATE_DONE || state == proto::JOB_STATE_CANCELLED ||
         state == proto::JOB_STATE_FAILED;
}

}  // namespace tessel::cli
