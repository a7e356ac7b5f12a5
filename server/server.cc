#include "server/server.h"

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <memory>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "server/call_auth.h"
#include "server/client_service.h"
#include "server/dispatcher.h"
#include "server/event_log.h"
#include "server/http_server.h"
#include "server/job_manager.h"
#include "server/listen_address.h"
#include "server/server_metrics.h"
#include "server/server_pages.h"
#include "server/tls_credentials.h"
#include "server/token_store.h"
#include "server/worker_registry.h"
#include "server/worker_service.h"
#include "store/log_lock.h"
#include "store/tuning_log.h"

namespace tessel::server {
namespace {

// The largest message a peer may send (a job of kMaxWorkloadsPerJob workloads of
// kMaxWorkloadBytes fits, as does a result with a long compiler log); a larger one is refused
// by gRPC with RESOURCE_EXHAUSTED before it is read.
constexpr int kMaxReceiveBytes = 16 << 20;

class ServerImpl final : public Server {
 public:
  explicit ServerImpl(const ServerOptions& options) : options_(options), events_(options.quiet) {}
  ~ServerImpl() override { Shutdown(); }

  absl::Status Start();

  std::string address() const override { return address_; }
  int port() const override { return port_; }
  std::string http_address() const override {
    return http_ != nullptr ? http_->address() : std::string();
  }
  void Shutdown() override;
  void Wait() override { shut_down_.WaitForNotification(); }

 private:
  void Maintain();

  const ServerOptions options_;
  EventLog events_;
  std::unique_ptr<store::LogLock> lock_;  // held for the server's life
  std::unique_ptr<store::TuningLog> log_;
  std::unique_ptr<TokenStore> tokens_;  // null without --tokens
  std::unique_ptr<CallAuth> auth_;
  std::unique_ptr<WorkerRegistry> registry_;
  std::unique_ptr<Dispatcher> dispatcher_;
  std::unique_ptr<JobManager> jobs_;
  std::unique_ptr<WorkerService> worker_service_;
  std::unique_ptr<ClientService> client_service_;
  std::unique_ptr<grpc::Server> grpc_;
  ServerMetrics metrics_;
  std::unique_ptr<ServerPages> pages_;
  std::unique_ptr<HttpServer> http_;  // null without options.http_listen
  std::string address_;
  int port_ = 0;
  std::thread maintenance_;
  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::atomic<bool> started_{false};
  absl::Notification shut_down_;
};

absl::Status ServerImpl::Start() {
  if (options_.batch_size < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("batch size ", options_.batch_size, ": give at least 1"));
  }
  if (!(options_.heartbeat_timeout_s > 0) || !(options_.batch_deadline_s > 0)) {
    return absl::InvalidArgumentError(
        "the heartbeat timeout and the batch deadline must be positive numbers of seconds");
  }
  if (!(options_.batch_deadline_min_s > 0) ||
      !(options_.batch_deadline_min_s <= options_.batch_deadline_s)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "the least batch deadline (--batch-deadline-min-s %g) must be a positive number of "
        "seconds no greater than the batch deadline (--batch-deadline-s %g)",
        options_.batch_deadline_min_s, options_.batch_deadline_s));
  }
  if (options_.max_worker_streams < 1) {
    return absl::InvalidArgumentError(absl::StrCat("--max-worker-streams ",
                                                   options_.max_worker_streams,
                                                   ": give at least 1 (one per worker daemon)"));
  }
  if (!(options_.registration_timeout_s > 0)) {
    return absl::InvalidArgumentError(
        "the registration timeout must be a positive number of seconds");
  }
  if (absl::Status s = CheckListenAddress(options_.listen); !s.ok()) return s;
  if (const std::string open = InsecureListening(options_); !open.empty() && !options_.insecure) {
    return absl::FailedPreconditionError(absl::StrCat(
        "--listen ", options_.listen, " reaches beyond this machine ", open,
        ": anyone who can reach the port could submit and cancel jobs, pose as a worker and "
        "write results into the log. Pass --tls-cert FILE --tls-key FILE and --tokens FILE "
        "(README, Security), listen on 127.0.0.1, or pass --insecure on a network you trust"));
  }
  absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> credentials =
      MakeServerCredentials(options_.tls);
  if (!credentials.ok()) return credentials.status();
  if (!options_.tokens_path.empty()) {
    absl::StatusOr<std::unique_ptr<TokenStore>> tokens =
        TokenStore::Open(options_.tokens_path, &events_);
    if (!tokens.ok()) return tokens.status();
    tokens_ = std::move(*tokens);
  }
  auth_ = std::make_unique<CallAuth>(tokens_.get());
  absl::StatusOr<std::unique_ptr<store::TuningLog>> log = store::OpenTuningLog(options_.db_path);
  if (!log.ok()) {
    return absl::Status(log.status().code(),
                        absl::StrCat("cannot open the tuning log ", options_.db_path, ": ",
                                     log.status().message()));
  }
  // One server per log: a second one would resume (and run twice) the jobs this one runs.
  absl::StatusOr<std::unique_ptr<store::LogLock>> lock = store::LogLock::Acquire(options_.db_path);
  if (!lock.ok()) return lock.status();
  lock_ = std::move(*lock);
  log_ = std::move(*log);
  registry_ = std::make_unique<WorkerRegistry>();
  DispatcherOptions dopts;
  dopts.batch_deadline_s = options_.batch_deadline_s;
  dopts.batch_deadline_min_s = options_.batch_deadline_min_s;
  dispatcher_ = std::make_unique<Dispatcher>(registry_.get(), dopts, &events_);
  JobManagerOptions jopts;
  jopts.default_batch_size = options_.batch_size;
  jopts.timing = options_.timing;
  jopts.screening = options_.screening;
  if (absl::Status s = CheckScreeningOptions(jopts.screening, jopts.timing);
      !s.ok() &&
      !(jopts.screening.enabled() && jopts.screening.screen_ms >= jopts.timing.min_total_ms)) {
    return s;
  }
  if (jopts.screening.enabled() && jopts.screening.screen_ms >= jopts.timing.min_total_ms) {
    events_.Log(absl::StrFormat(
        "screening is off: its %.3g ms are not below the full measurement's %.3g ms",
        jopts.screening.screen_ms, jopts.timing.min_total_ms));
    jopts.screening.screen_ms = 0;
  } else if (jopts.screening.enabled()) {
    events_.Log(absl::StrFormat(
        "screening: every candidate is timed for %.3g ms first, in full (%.3g ms) only within "
        "the measured margin of its task's best; %.3g%% confirmed regardless",
        jopts.screening.screen_ms, jopts.timing.min_total_ms, 100 * jopts.screening.audit));
  }
  jopts.candidate_timeout_s = options_.candidate_timeout_s;
  jobs_ = std::make_unique<JobManager>(log_.get(), dispatcher_.get(), jopts, &events_);
  if (absl::Status s = jobs_->Resume(); !s.ok()) {
    return absl::Status(
        s.code(), absl::StrCat("cannot resume the jobs of ", options_.db_path, ": ", s.message()));
  }
  worker_service_ =
      std::make_unique<WorkerService>(registry_.get(), dispatcher_.get(), jobs_.get(), auth_.get(),
                                      options_.version, &events_, options_.max_worker_streams);
  worker_service_->set_metrics(&metrics_);
  client_service_ =
      std::make_unique<ClientService>(jobs_.get(), registry_.get(), log_.get(), auth_.get());
  if (!options_.http_listen.empty()) {
    pages_ = std::make_unique<ServerPages>(log_.get(), jobs_.get(), dispatcher_.get(),
                                           registry_.get(), &metrics_);
    HttpOptions hopts;
    hopts.listen = options_.http_listen;
    hopts.tls = options_.tls;
    hopts.insecure = options_.insecure;
    absl::StatusOr<std::unique_ptr<HttpServer>> http =
        StartHttpServer(hopts, tokens_.get(), pages_.get());
    if (!http.ok()) return http.status();
    http_ = std::move(*http);
  }

  grpc::ServerBuilder builder;
  builder.AddListeningPort(options_.listen, *credentials, &port_);
  builder.RegisterService(worker_service_.get());
  builder.RegisterService(client_service_.get());
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);  // one server per port
  builder.SetMaxReceiveMessageSize(kMaxReceiveBytes);
  builder.SetMaxSendMessageSize(-1);
  grpc_ = builder.BuildAndStart();
  if (grpc_ == nullptr || port_ == 0) {
    grpc_.reset();
    return absl::UnavailableError(absl::StrCat(
        "cannot listen on ", options_.listen,
        ": the address is in use or not of this machine; pass another --listen HOST:PORT"));
  }
  const size_t colon = options_.listen.rfind(':');
  address_ = absl::StrCat(options_.listen.substr(0, colon), ":", port_);
  started_ = true;
  maintenance_ = std::thread([this] { Maintain(); });
  events_.Log(absl::StrCat(
      "listening on ", address_, ", log ", options_.db_path,
      options_.tls.enabled() ? " (TLS" : " (plain",
      options_.tls.require_client_cert ? ", client certificates required" : "",
      tokens_ != nullptr ? ", tokens of " + options_.tokens_path : ", no tokens", ")",
      http_ != nullptr
          ? absl::StrCat("; metrics and dashboard on ",
                         options_.tls.enabled() ? "https://" : "http://", http_->address(), "/")
          : ""));
  return absl::OkStatus();
}

void ServerImpl::Maintain() {
  absl::MutexLock lock(&mu_);
  while (!stopping_) {
    mu_.AwaitWithTimeout(absl::Condition(&stopping_), absl::Seconds(options_.tick_s));
    if (stopping_) break;
    mu_.Unlock();
    const int64_t now = absl::ToUnixMillis(absl::Now());
    for (uint64_t session :
         registry_->SilentSince(now - static_cast<int64_t>(options_.heartbeat_timeout_s * 1000))) {
      events_.Log(
          absl::StrFormat("worker %s sent nothing for %.3g s: dropping it, its work goes "
                          "back to the queue",
                          registry_->NameOf(session), options_.heartbeat_timeout_s));
      std::shared_ptr<WorkerConnection> c = registry_->Connection(session);
      dispatcher_->DropWorker(session);
      registry_->Remove(session);
      if (c != nullptr) c->Close();
    }
    worker_service_->DropUnregistered(now -
                                      static_cast<int64_t>(options_.registration_timeout_s * 1000));
    metrics_.Sample(now, registry_->List());
    dispatcher_->Tick(now);
    jobs_->Tick(now);
    jobs_->Pump();
    mu_.Lock();
  }
}

void ServerImpl::Shutdown() {
  if (!started_.exchange(false)) return;
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (maintenance_.joinable()) maintenance_.join();
  if (http_ != nullptr) http_->Shutdown();
  jobs_->Stop();
  client_service_->Stop();
  for (const WorkerEntry& w : registry_->List()) {
    if (std::shared_ptr<WorkerConnection> c = registry_->Connection(w.session)) c->Close();
  }
  grpc_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  grpc_->Wait();
  events_.Log("stopped");
  shut_down_.Notify();
}

}  // namespace

std::string InsecureListening(const ServerOptions& options) {
  if (IsLoopbackListen(options.listen)) return "";
  const bool tls = options.tls.enabled();
  const bool tokens = !options.tokens_path.empty();
  if (tls && tokens) return "";
  if (!tls && !tokens) return "without TLS and tokens";
  return tls ? "without tokens" : "without TLS (tokens would cross the network in the clear)";
}

absl::StatusOr<std::unique_ptr<Server>> StartServer(const ServerOptions& options) {
  auto server = std::make_unique<ServerImpl>(options);
  if (absl::Status s = server->Start(); !s.ok()) return s;
  return std::unique_ptr<Server>(std::move(server));
}

}  // namespace tessel::server
