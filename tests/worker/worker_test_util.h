#pragma once

// Shared by the worker daemon tests: a small fake of the server side of the worker protocol
// (the real gRPC server on a loopback port, written in the test), a handle on a real `tessel
// worker` process, and host candidates with planted faults.

#include <fcntl.h>
#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "proto/convert.h"
#include "proto/protocol.h"
#include "proto/tessel.grpc.pb.h"
#include "schedules/codegen/source.h"
#include "schedules/target/target.h"
#include "schedules/util/check.h"
#include "schedules/workload/builtins.h"
#include "tests/e2e/e2e_util.h"

extern char** environ;

namespace tessel::testing {

struct FakeWorkerServerOptions {
  uint32_t protocol_version = proto::kWorkerProtocolVersion;  // sent in Registered
  std::string reject_reason;                                  // non-empty: reject
  bool silent = false;                                        // never answer the registration
};

// The server side of the worker protocol, as a test drives it: answers a registration (or rejects
// it), records every message the worker sends, and sends what the test asks for.
class FakeWorkerServer final : public proto::Worker::Service {
 public:
  using Options = FakeWorkerServerOptions;

  // Listens on 127.0.0.1:`port` (0: any free port).
  static std::unique_ptr<FakeWorkerServer> Start(int port = 0, Options options = {}) {
    auto s = std::unique_ptr<FakeWorkerServer>(new FakeWorkerServer(options));
    grpc::ServerBuilder builder;
    builder.AddListeningPort(absl::StrCat("127.0.0.1:", port), grpc::InsecureServerCredentials(),
                             &s->port_);
    builder.RegisterService(s.get());
    s->server_ = builder.BuildAndStart();
    if (s->server_ == nullptr || s->port_ == 0) return nullptr;
    return s;
  }
  ~FakeWorkerServer() override { Shutdown(); }

  int port() const { return port_; }
  std::string address() const { return absl::StrCat("127.0.0.1:", port_); }

  // Ends every stream (the worker sees the server go away) and stops listening.
  void Shutdown() {
    if (server_ == nullptr) return;
    {
      absl::MutexLock lock(&mu_);
      if (context_ != nullptr) context_->TryCancel();
    }
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(200));
    server_->Wait();
    server_.reset();
  }

  grpc::Status Connect(
      grpc::ServerContext* context,
      grpc::ServerReaderWriter<proto::ServerMessage, proto::WorkerMessage>* stream) override {
    proto::WorkerMessage first;
    if (!stream->Read(&first)) return grpc::Status::OK;
    if (!first.has_register_()) {
      Record(first);
      return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "first message must register");
    }
    if (options_.silent) {
      Record(first);
      proto::WorkerMessage ignored;
      while (stream->Read(&ignored)) {
      }
      return grpc::Status::OK;
    }
    absl::Status version = proto::CheckWorkerProtocol(first.register_().protocol_version(),
                                                      first.register_().worker_id());
    std::string reject = options_.reject_reason;
    if (!version.ok()) reject = std::string(version.message());
    if (!reject.empty()) {
      proto::ServerMessage m;
      m.mutable_rejected()->set_reason(reject);
      stream->Write(m);
      Record(first);
      return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, reject);
    }
    proto::ServerMessage reg;
    reg.mutable_registered()->set_protocol_version(options_.protocol_version);
    reg.mutable_registered()->set_server_version("fake");
    {
      absl::MutexLock lock(&mu_);
      stream_ = stream;
      context_ = context;
      ++connections_;
      stream->Write(reg);
    }
    Record(first);  // after the stream is ready for Send: a test that saw it may send
    proto::WorkerMessage m;
    while (stream->Read(&m)) Record(m);
    {
      absl::MutexLock lock(&mu_);
      stream_ = nullptr;
      context_ = nullptr;
      closed_by_worker_ = true;
      changed_.SignalAll();
    }
    return grpc::Status::OK;
  }

  bool Send(const proto::ServerMessage& m) {
    absl::MutexLock lock(&mu_);
    return stream_ != nullptr && stream_->Write(m);
  }

  // Waits until some message received since the start matches `pred` and returns the first
  // match at or after index `from` (its index in `*index` when given).
  std::optional<proto::WorkerMessage> WaitFor(
      const std::function<bool(const proto::WorkerMessage&)>& pred,
      absl::Duration timeout = absl::Seconds(30), size_t from = 0, size_t* index = nullptr) {
    const absl::Time deadline = absl::Now() + timeout;
    absl::MutexLock lock(&mu_);
    while (true) {
      for (size_t i = from; i < received_.size(); ++i) {
        if (pred(received_[i])) {
          if (index != nullptr) *index = i;
          return received_[i];
        }
      }
      if (changed_.WaitWithDeadline(&mu_, deadline)) return std::nullopt;
    }
  }

  // Waits for `n` results of `batch_id`, in arrival order.
  std::vector<proto::MeasureResult> WaitForResults(uint64_t batch_id, size_t n,
                                                   absl::Duration timeout = absl::Seconds(60)) {
    const absl::Time deadline = absl::Now() + timeout;
    absl::MutexLock lock(&mu_);
    while (true) {
      std::vector<proto::MeasureResult> out;
      for (const proto::WorkerMessage& m : received_) {
        if (m.has_result() && m.result().batch_id() == batch_id) out.push_back(m.result());
      }
      if (out.size() >= n) return out;
      if (changed_.WaitWithDeadline(&mu_, deadline)) return out;
    }
  }

  bool WaitUntilClosedByWorker(absl::Duration timeout) {
    const absl::Time deadline = absl::Now() + timeout;
    absl::MutexLock lock(&mu_);
    while (!closed_by_worker_) {
      if (changed_.WaitWithDeadline(&mu_, deadline)) return closed_by_worker_;
    }
    return true;
  }

  size_t received_count() {
    absl::MutexLock lock(&mu_);
    return received_.size();
  }
  int connections() {
    absl::MutexLock lock(&mu_);
    return connections_;
  }

 private:
  explicit FakeWorkerServer(Options options) : options_(std::move(options)) {}
  void Record(const proto::WorkerMessage& m) {
    absl::MutexLock lock(&mu_);
    received_.push_back(m);
    changed_.SignalAll();
  }

  Options options_;
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
  absl::Mutex mu_;
  absl::CondVar changed_;
  std::vector<proto::WorkerMessage> received_ ABSL_GUARDED_BY(mu_);
  grpc::ServerReaderWriter<proto::ServerMessage, proto::WorkerMessage>* stream_
      ABSL_GUARDED_BY(mu_) = nullptr;
  grpc::ServerContext* context_ ABSL_GUARDED_BY(mu_) = nullptr;
  int connections_ ABSL_GUARDED_BY(mu_) = 0;
  bool closed_by_worker_ ABSL_GUARDED_BY(mu_) = false;
};

// The tessel binary of this build ($TESSEL_BINARY overrides it, e.g. in a relocated bundle).
inline std::string TesselBinary() {
  if (const char* b = std::getenv("TESSEL_BINARY"); b != nullptr && b[0] != '\0') return b;
  return std::string(TESSEL_BINARY_DIR) + "/cli/tessel";
}

// A `tessel <args>` process with stdout and stderr in a log file.
class TesselProcess {
 public:
  TesselProcess(const std::vector<std::string>& args, const std::string& log_path)
      : log_path_(log_path) {
    std::vector<std::string> argv = {TesselBinary()};
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
  ~TesselProcess() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  bool started() const { return pid_ > 0; }
  void Signal(int sig) {
    if (pid_ > 0) kill(pid_, sig);
  }
  // The exit status, or nullopt when it is still running after `timeout`.
  std::optional<int> Wait(absl::Duration timeout) {
    const absl::Time deadline = absl::Now() + timeout;
    while (pid_ > 0) {
      int status = 0;
      const pid_t r = waitpid(pid_, &status, WNOHANG);
      if (r == pid_) {
        pid_ = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      if (absl::Now() > deadline) return std::nullopt;
      absl::SleepFor(absl::Milliseconds(10));
    }
    return std::nullopt;
  }
  std::string Log() const {
    std::ifstream in(log_path_);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }

 private:
  std::string log_path_;
  pid_t pid_ = -1;
};

// A small host workload's reference source; candidates are variants of it.
inline schedules::GeneratedSource HostMatmulSource() {
  absl::StatusOr<schedules::Workload> w = schedules::ParseWorkloadSpec("matmul(M=16, N=12, K=8)");
  TESSEL_CHECK(w.ok()) << w.status();
  absl::StatusOr<schedules::GeneratedSource> s = GenerateReference(*w, schedules::HostTarget());
  TESSEL_CHECK(s.ok()) << s.status();
  return *s;
}

enum class Plant { kNone, kSegfault, kHang, kWrongAnswer, kCompileError };

// `source` with a fault planted into its host entry (and a comment that makes its text, and so
// its compile-cache key, distinct per `tag`).
inline schedules::GeneratedSource PlantHostFault(schedules::GeneratedSource source, Plant plant,
                                                 const std::string& tag = "") {
  const std::string entry = source.kernels[0].entry;
  const std::string decl = absl::StrCat("extern \"C\" void ", entry, "(void* const* buffers)");
  std::string prologue, epilogue;
  switch (plant) {
    case Plant::kNone:
      break;
    case Plant::kSegfault:
      prologue = "*static_cast<volatile int*>(nullptr) = 1;";
      break;
    case Plant::kHang:
      prologue = "for (volatile int spin = 0;; spin = spin + 1) {}";
      break;
    case Plant::kWrongAnswer:
      epilogue = "static_cast<float*>(buffers[2])[0] += 1.0f;";
      break;
    case Plant::kCompileError:
      source.code += "\nthis is not C++ at all;\n";
      break;
  }
  if (!prologue.empty() || !epilogue.empty()) {
    source.code = absl::StrReplaceAll(
        source.code, {{decl, absl::StrCat("static void planted_body(void* const* buffers)")}});
    absl::StrAppend(&source.code, "\n", decl, " {\n  ", prologue, "\n  planted_body(buffers);\n  ",
                    epilogue, "\n}\n");
  }
  absl::StrAppend(&source.code, "\n// candidate ", tag, "\n");
  return source;
}

// Fast timing for tests: a few repeats, no minimum time.
inline proto::MeasureOptions FastMeasureOptions(double timeout_s = 10) {
  proto::MeasureOptions o;
  proto::TimingOptions* t = o.mutable_timing();
  t->set_warmup_runs(1);
  t->set_min_repeats(3);
  t->set_max_repeats(3);
  t->set_min_total_ms(0);
  t->set_flush_cache(false);
  o.set_verify_seed(7);
  o.set_timeout_s(timeout_s);
  return o;
}

inline proto::ServerMessage MakeBatch(uint64_t batch_id,
                                      const std::vector<schedules::GeneratedSource>& candidates,
                                      const schedules::GeneratedSource& reference,
                                      const proto::MeasureOptions& options) {
  proto::ServerMessage m;
  proto::MeasureBatch* b = m.mutable_batch();
  b->set_batch_id(batch_id);
  for (size_t i = 0; i < candidates.size(); ++i) {
    proto::Candidate* c = b->add_candidates();
    c->set_id(100 + i);
    proto::ToProto(candidates[i], c->mutable_source());
  }
  proto::ToProto(reference, b->mutable_reference());
  *b->mutable_options() = options;
  return m;
}

}  // namespace tessel::testing
