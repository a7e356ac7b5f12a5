#include "bench/worker_driver.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

#include <chrono>
#include <fstream>
#include <optional>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "proto/protocol.h"

extern char** environ;

namespace tessel::bench {

absl::StatusOr<std::unique_ptr<WorkerDriver>> WorkerDriver::Start() {
  auto d = std::unique_ptr<WorkerDriver>(new WorkerDriver());
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &d->port_);
  builder.RegisterService(d.get());
  // Batches of hundreds of candidates with their sources are larger than gRPC's 4 MiB default.
  builder.SetMaxReceiveMessageSize(256 << 20);
  builder.SetMaxSendMessageSize(256 << 20);
  d->server_ = builder.BuildAndStart();
  if (d->server_ == nullptr || d->port_ == 0) {
    return absl::UnavailableError(
        "the benchmark's worker server could not listen on 127.0.0.1 (any port): check that "
        "loopback networking works here");
  }
  return d;
}

WorkerDriver::~WorkerDriver() {
  if (server_ == nullptr) return;
  {
    absl::MutexLock lock(&mu_);
    if (context_ != nullptr) context_->TryCancel();
  }
  server_->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(500));
  server_->Wait();
}

std::string WorkerDriver::address() const { return absl::StrCat("127.0.0.1:", port_); }

grpc::Status WorkerDriver::Connect(
    grpc::ServerContext* context,
    grpc::ServerReaderWriter<proto::ServerMessage, proto::WorkerMessage>* stream) {
  proto::WorkerMessage first;
  if (!stream->Read(&first)) return grpc::Status::OK;
  if (!first.has_register_()) {
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                        "the first message of a worker must be Register");
  }
  if (absl::Status v = proto::CheckWorkerProtocol(first.register_().protocol_version(),
                                                  first.register_().worker_id());
      !v.ok()) {
    proto::ServerMessage m;
    m.mutable_rejected()->set_reason(std::string(v.message()));
    stream->Write(m);
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, std::string(v.message()));
  }
  {
    absl::MutexLock lock(&mu_);
    proto::ServerMessage reg;
    reg.mutable_registered()->set_protocol_version(proto::kWorkerProtocolVersion);
    reg.mutable_registered()->set_server_version("tessel_bench_worker");
    stream->Write(reg);
    stream_ = stream;
    context_ = context;
    credits_ = 0;
    registrations_.push_back(first.register_());
  }
  proto::WorkerMessage m;
  while (stream->Read(&m)) {
    absl::MutexLock lock(&mu_);
    switch (m.kind_case()) {
      case proto::WorkerMessage::kCredits:
        credits_ += m.credits().batches();
        break;
      case proto::WorkerMessage::kResult:
        results_.push_back(m.result());
        break;
      case proto::WorkerMessage::kHeartbeat:
        ++heartbeats_;
        break;
      default:
        break;
    }
  }
  absl::MutexLock lock(&mu_);
  stream_ = nullptr;
  context_ = nullptr;
  return grpc::Status::OK;
}

absl::StatusOr<proto::Register> WorkerDriver::WaitForRegistration(absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  auto registered = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !registrations_.empty(); };
  if (!mu_.AwaitWithTimeout(absl::Condition(&registered), timeout)) {
    return absl::DeadlineExceededError(
        absl::StrCat("no worker registered within ", absl::FormatDuration(timeout),
                     ": see the worker's log (is --binary the tessel executable, can it reach ",
                     address(), "?)"));
  }
  return registrations_.back();
}

absl::Status WorkerDriver::SendBatch(const proto::MeasureBatch& batch, absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return stream_ != nullptr && credits_ > 0;
  };
  if (!mu_.AwaitWithTimeout(absl::Condition(&ready), timeout)) {
    return absl::DeadlineExceededError(
        absl::StrCat("batch ", batch.batch_id(), ": the worker granted no credit within ",
                     absl::FormatDuration(timeout), " (it is stuck or disconnected: see its log)"));
  }
  proto::ServerMessage m;
  *m.mutable_batch() = batch;
  if (!stream_->Write(m)) {
    return absl::UnavailableError(
        absl::StrCat("batch ", batch.batch_id(), ": the worker's stream closed while sending"));
  }
  --credits_;
  return absl::OkStatus();
}

std::vector<proto::MeasureResult> WorkerDriver::WaitForResults(size_t n, absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  auto enough = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return results_.size() >= n; };
  mu_.AwaitWithTimeout(absl::Condition(&enough), timeout);
  return results_;
}

int WorkerDriver::registrations() {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(registrations_.size());
}

int WorkerDriver::heartbeats() {
  absl::MutexLock lock(&mu_);
  return heartbeats_;
}

WorkerProcess::WorkerProcess(const std::string& binary, const std::vector<std::string>& args,
                             const std::string& log_path)
    : log_path_(log_path) {
  std::vector<std::string> argv = {binary};
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<char*> cargv;
  for (std::string& a : argv) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                   0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  if (posix_spawn(&pid_, cargv[0], &actions, nullptr, cargv.data(), environ) != 0) pid_ = -1;
  posix_spawn_file_actions_destroy(&actions);
}

WorkerProcess::~WorkerProcess() {
  if (pid_ > 0) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
}

bool WorkerProcess::Running() {
  if (pid_ <= 0) return false;
  return waitpid(pid_, nullptr, WNOHANG) == 0;
}

std::optional<int> WorkerProcess::Stop(absl::Duration timeout) {
  if (pid_ <= 0) return std::nullopt;
  kill(pid_, SIGTERM);
  const absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
  return std::nullopt;
}

std::string WorkerProcess::LogTail(size_t bytes) const {
  std::ifstream in(log_path_);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string s = ss.str();
  return s.size() > bytes ? s.substr(s.size() - bytes) : s;
}

}  // namespace tessel::bench
