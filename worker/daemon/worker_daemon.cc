#include "worker/daemon/worker_daemon.h"

#include <grpcpp/grpcpp.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "measure/measurement.h"
#include "proto/convert.h"
#include "proto/measure_child.pb.h"
#include "proto/protocol.h"
#include "proto/tessel.grpc.pb.h"
#include "proto/tessel.pb.h"
#include "schedules/target/target.h"
#include "schedules/util/elapsed.h"
#include "worker/compile_pool.h"
#include "worker/daemon/result_artifact.h"
#include "worker/daemon/worker_metrics.h"
#include "worker/isolation/measure_child.h"

namespace tessel::worker {
namespace {

using schedules::MsBetween;

using Stream = grpc::ClientReaderWriter<proto::WorkerMessage, proto::ServerMessage>;

void WriteLog(const std::string& line) {
  static absl::Mutex* mu = new absl::Mutex();
  const std::string stamp =
      absl::FormatTime("%Y-%m-%d %H:%M:%E3S", absl::Now(), absl::LocalTimeZone());
  absl::MutexLock lock(mu);
  std::fprintf(stderr, "tessel worker %s: %s\n", stamp.c_str(), line.c_str());
  std::fflush(stderr);
}

std::string HostName() {
  char buf[256] = {0};
  if (gethostname(buf, sizeof(buf) - 1) != 0) return "localhost";
  return buf;
}

std::string DefaultCacheDir() {
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg != nullptr && xdg[0] != '\0') {
    return absl::StrCat(xdg, "/tessel");
  }
  if (const char* home = std::getenv("HOME"); home != nullptr && home[0] != '\0') {
    return absl::StrCat(home, "/.cache/tessel");
  }
  return absl::StrCat("/tmp/tessel-cache-", static_cast<long>(getuid()));
}

using Clock = std::chrono::steady_clock;

// The compilations of a batch's reference and candidates, queued on the compile pool.
struct BatchCompiles {
  std::string arch;             // compiled for
  std::string reference_error;  // the reference is malformed: every candidate fails with this
  CompileFuture reference;
  std::vector<std::optional<CompileFuture>> futures;  // per candidate; none when malformed
  std::vector<absl::Status> malformed;
  std::vector<std::optional<schedules::GeneratedSource>> sources;  // for the results' artifacts
};

// A batch as the worker holds it.
struct HeldBatch {
  uint64_t session = 0;  // the connection it came on
  proto::MeasureBatch batch;
  Clock::time_point received;  // for the timeline's worker queue
  // CUDA: compilations queued when the batch arrived; null: queued when its device starts on it.
  std::shared_ptr<BatchCompiles> compiles;
};

struct Device {
  std::unique_ptr<MeasureChild> child;
  proto::Device info;
  std::thread thread;
};

// Whether `device` may measure `batch`: a CUDA batch of an architecture (MeasureBatch.cuda_arch)
// needs a GPU that runs its code (sm_90a: a 9.0 GPU); one without (a host batch, an older server)
// goes to any device.
bool DeviceRuns(const Device& device, const proto::MeasureBatch& batch) {
  return device.info.kind() != proto::TARGET_KIND_CUDA || batch.cuda_arch().empty() ||
         schedules::CudaArchRunsOn(batch.cuda_arch(), device.info.arch());
}

class Daemon {
 public:
  explicit Daemon(WorkerOptions options) : options_(std::move(options)) {}

  absl::Status Run();

 private:
  void Log(const std::string& line) const {
    if (!options_.quiet) WriteLog(line);
  }
  absl::Status StartDevices();
  // One connection: register, then read until the stream ends. Returns a fatal error, or OK when
  // the daemon should reconnect (or stop, when stop_ is set).
  absl::Status Session(bool* registered);
  void OnBatch(uint64_t session, proto::MeasureBatch batch);
  // OK when a device of this worker runs `batch` (DeviceRuns); else why none does.
  absl::Status CheckRunnable(const proto::MeasureBatch& batch) const;
  // The first queued batch `device` runs, or queue_.end().
  std::deque<HeldBatch>::iterator FirstRunnableLocked(const Device& device)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Queues every compilation of `batch` for `arch` at once.
  std::shared_ptr<BatchCompiles> QueueCompiles(const proto::MeasureBatch& batch,
                                               const std::string& arch);
  void DeviceLoop(Device* device);
  void ProcessBatch(Device* device, HeldBatch& held);
  void HeartbeatLoop();
  void SignalLoop();
  void Drain(bool* force);

  // Writes `message` on the stream of `session`; dropped (false) when that connection is gone.
  bool Send(uint64_t session, const proto::WorkerMessage& message);
  uint64_t CurrentSession() {
    absl::MutexLock lock(&mu_);
    return session_;
  }
  void Return(uint64_t session, const proto::MeasureBatch& batch, size_t first,
              const std::string& reason);
  void FinishBatch(uint64_t session, uint64_t batch_id, size_t unfinished);

  const WorkerOptions options_;
  std::string target_;  // host or cuda
  std::vector<std::unique_ptr<Device>> devices_;
  std::unique_ptr<CompilePool> pool_;
  int credits_ = 2;  // batches held at once (WorkerOptions::max_batches, or WorkerCredits)

  absl::Mutex mu_;
  absl::CondVar changed_ ABSL_GUARDED_BY(mu_);
  std::deque<HeldBatch> queue_ ABSL_GUARDED_BY(mu_);
  int batches_held_ ABSL_GUARDED_BY(mu_) = 0;  // queued and in progress
  int candidates_pending_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t session_ ABSL_GUARDED_BY(mu_) = 0;  // 0: not connected
  uint64_t last_session_ ABSL_GUARDED_BY(mu_) = 0;
  bool draining_ ABSL_GUARDED_BY(mu_) = false;
  bool return_rest_ ABSL_GUARDED_BY(mu_) = false;  // the drain ran out of time
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  // Screening: the best latency (Measurement::latency_ms, what screening compares) this worker
  // confirmed per task (ScreenOptions.task_id). Results stream and a batch carries the server's
  // best as of its sending, so a candidate is compared with the better of the two.
  std::map<uint64_t, double> confirmed_best_ ABSL_GUARDED_BY(mu_);

  absl::Mutex write_mu_ ABSL_ACQUIRED_AFTER(mu_);
  Stream* stream_ ABSL_GUARDED_BY(write_mu_) = nullptr;
  grpc::ClientContext* context_ ABSL_GUARDED_BY(write_mu_) = nullptr;
  uint64_t stream_session_ ABSL_GUARDED_BY(write_mu_) = 0;
  bool writes_done_ ABSL_GUARDED_BY(write_mu_) = false;

  std::string worker_id_;
  std::shared_ptr<grpc::ChannelCredentials> credentials_;
  pthread_t main_thread_{};
};

bool Daemon::Send(uint64_t session, const proto::WorkerMessage& message) {
  absl::MutexLock lock(&write_mu_);
  if (stream_ == nullptr || stream_session_ != session || writes_done_) return false;
  return stream_->Write(message);
}

absl::Status Daemon::StartDevices() {
  std::string target = options_.target;
  if (target != "auto" && target != "host" && target != "cuda") {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown --target '", target, "': use host, cuda or auto"));
  }
  std::vector<int> ordinals = options_.devices;
  auto make = [&](const std::string& t, int ordinal) {
    auto d = std::make_unique<Device>();
    MeasureChildOptions co;
    co.executable = options_.executable;
    co.target = t;
    co.device = ordinal;
    d->child = std::make_unique<MeasureChild>(co);
    return d;
  };
  if (target == "auto" || target == "cuda") {
    const int first = ordinals.empty() ? 0 : ordinals[0];
    std::unique_ptr<Device> d = make("cuda", first);
    absl::Status s = d->child->Start();
    if (s.ok()) {
      target = "cuda";
      if (ordinals.empty()) {
        for (int i = 0; i < d->child->device_count(); ++i) ordinals.push_back(i);
      }
      devices_.push_back(std::move(d));
      for (size_t i = 1; i < ordinals.size(); ++i) {
        std::unique_ptr<Device> more = make("cuda", ordinals[i]);
        if (absl::Status e = more->child->Start(); !e.ok()) return e;
        devices_.push_back(std::move(more));
      }
    } else if (target == "cuda") {
      return absl::FailedPreconditionError(
          absl::StrCat(s.message(),
                       ": check the GPU (nvidia-smi) or serve the CPU with "
                       "--target host"));
    } else {
      Log(absl::StrCat("no GPU (", s.message(), "): serving the host target"));
      target = "host";
    }
  }
  if (target == "host") {
    if (ordinals.size() > 1) {
      return absl::InvalidArgumentError(
          "--devices lists GPUs, but the host target has one device: drop --devices or use "
          "--target cuda");
    }
    std::unique_ptr<Device> d = make("host", 0);
    if (absl::Status s = d->child->Start(); !s.ok()) return s;
    devices_.push_back(std::move(d));
  }
  target_ = target;
  for (auto& d : devices_) {
    d->info = d->child->device();
    Log(absl::StrCat("device ", d->info.ordinal(), ": ", d->info.name(), " (", d->info.arch(), ", ",
                     d->info.toolkit_version(), ")"));
  }
  return absl::OkStatus();
}

absl::Status Daemon::Run() {
  if (absl::Status s = proto::CheckServerAddress(options_.server); !s.ok()) return s;
  if (options_.max_batches < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("max batches ", options_.max_batches,
                     ": give the batches the worker holds at once, or 0 to size them to its "
                     "compile threads and devices"));
  }
  worker_id_ =
      options_.worker_id.empty() ? absl::StrCat(HostName(), ":", getpid()) : options_.worker_id;
  // SIGTERM and SIGINT go to the signal thread only: block them before any thread starts.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGUSR1);  // wakes the signal thread at shutdown
  sigaddset(&set, SIGUSR2);  // options_.stop was notified
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  // After the signals are blocked: making credentials starts gRPC's threads, which inherit the
  // mask (a thread without it would take SIGTERM's default action).
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> credentials =
      proto::MakeChannelCredentials(options_.transport);
  if (!credentials.ok()) return credentials.status();
  credentials_ = *credentials;
  signal(SIGPIPE, SIG_IGN);
  main_thread_ = pthread_self();
  std::thread signals([this] { SignalLoop(); });
  std::atomic<bool> finished{false};
  std::thread stopper;
  if (options_.stop != nullptr) {
    stopper = std::thread([this, &finished, &signals] {
      while (!options_.stop->WaitForNotificationWithTimeout(absl::Milliseconds(50))) {
        if (finished.load()) return;
      }
      pthread_kill(signals.native_handle(), SIGUSR2);
    });
  }
  auto stop_signals = [&] {
    finished.store(true);
    if (stopper.joinable()) stopper.join();
    pthread_kill(signals.native_handle(), SIGUSR1);
    signals.join();
  };

  Log(absl::StrCat("worker ", worker_id_, " (tessel ", options_.version, ", protocol ",
                   proto::kWorkerProtocolVersion, ") starting for server ", options_.server));
  if (absl::Status s = StartDevices(); !s.ok()) {
    stop_signals();
    return s;
  }
  CompilePoolOptions po;
  po.threads = options_.compile_threads;
  po.cache_dir = options_.cache_dir.empty() ? DefaultCacheDir() : options_.cache_dir;
  pool_ = std::make_unique<CompilePool>(po);
  Log(absl::StrCat("compile pool: ", pool_->threads(), " threads, cache ", po.cache_dir));
  credits_ = options_.max_batches > 0
                 ? options_.max_batches
                 : WorkerCredits(pool_->threads(), static_cast<int>(devices_.size()));
  if (options_.metrics != nullptr) {
    std::vector<WorkerDeviceInfo> infos;
    for (const auto& d : devices_) {
      infos.push_back({d->info.ordinal(), target_, d->info.name(),
                       target_ == "cuda" ? d->info.arch() : std::string()});
    }
    options_.metrics->SetIdentity(worker_id_, options_.server);
    options_.metrics->SetDevices(std::move(infos));
    options_.metrics->SetCompileThreads(pool_->threads());
  }

  for (auto& d : devices_) {
    Device* dev = d.get();
    d->thread = std::thread([this, dev] { DeviceLoop(dev); });
  }
  std::thread heartbeats([this] { HeartbeatLoop(); });

  absl::Status fatal;
  double backoff = options_.reconnect_initial_s;
  std::mt19937_64 rng(static_cast<uint64_t>(getpid()));
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      if (stop_) break;
    }
    bool registered = false;
    fatal = Session(&registered);
    if (!fatal.ok()) break;
    if (registered) backoff = options_.reconnect_initial_s;
    absl::MutexLock lock(&mu_);
    if (stop_ || draining_) break;  // a drain while disconnected has nothing left to finish
    const double jittered = backoff * std::uniform_real_distribution<double>(0.8, 1.2)(rng);
    Log(absl::StrFormat("reconnecting to %s in %.2f s", options_.server, jittered));
    const absl::Time until = absl::Now() + absl::Seconds(jittered);
    while (!stop_ && !draining_ && absl::Now() < until) {
      changed_.WaitWithDeadline(&mu_, until);
    }
    backoff = std::min(backoff * 2, options_.reconnect_max_s);
  }

  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
    queue_.clear();
    changed_.SignalAll();
  }
  for (auto& d : devices_) d->thread.join();
  heartbeats.join();
  stop_signals();
  pool_.reset();
  devices_.clear();  // kills the children
  if (fatal.ok()) Log("stopped");
  return fatal;
}

absl::Status Daemon::Session(bool* registered) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  args.SetMaxReceiveMessageSize(-1);
  args.SetMaxSendMessageSize(-1);
  std::shared_ptr<grpc::Channel> channel =
      grpc::CreateCustomChannel(options_.server, credentials_, args);
  std::unique_ptr<proto::Worker::Stub> stub = proto::Worker::NewStub(channel);
  grpc::ClientContext context;
  proto::AttachToken(options_.transport, &context);
  std::unique_ptr<Stream> stream = stub->Connect(&context);

  proto::WorkerMessage hello;
  proto::Register* reg = hello.mutable_register_();
  reg->set_protocol_version(proto::kWorkerProtocolVersion);
  reg->set_worker_id(worker_id_);
  reg->set_host(HostName());
  reg->set_version(options_.version);
  reg->set_max_batches(static_cast<uint32_t>(credits_));
  for (const auto& d : devices_) *reg->add_devices() = d->info;
  // A server that does not answer the registration in time (or a SIGTERM meanwhile) cancels it.
  {
    absl::MutexLock lock(&write_mu_);
    context_ = &context;
  }
  absl::Notification answered;
  std::thread watchdog([&] {
    if (!answered.WaitForNotificationWithTimeout(absl::Seconds(options_.register_timeout_s))) {
      Log(absl::StrFormat("the server at %s did not answer the registration in %.3g s",
                          options_.server, options_.register_timeout_s));
      context.TryCancel();
    }
  });
  proto::ServerMessage first;
  const bool got_answer = stream->Write(hello) && stream->Read(&first);
  answered.Notify();
  watchdog.join();
  {
    absl::MutexLock lock(&write_mu_);
    context_ = nullptr;
  }
  if (!got_answer) {
    const grpc::Status st = stream->Finish();
    if (st.error_code() == grpc::StatusCode::UNAUTHENTICATED ||
        st.error_code() == grpc::StatusCode::PERMISSION_DENIED) {
      return absl::Status(static_cast<absl::StatusCode>(st.error_code()),
                          absl::StrCat("the server at ", options_.server,
                                       " refused this worker: ", st.error_message()));
    }
    if (st.error_code() == grpc::StatusCode::FAILED_PRECONDITION ||
        st.error_code() == grpc::StatusCode::UNIMPLEMENTED) {
      return absl::FailedPreconditionError(absl::StrCat(
          "the server at ", options_.server, " refused this worker: ", st.error_message(),
          st.error_code() == grpc::StatusCode::UNIMPLEMENTED
              ? " (it has no Worker service: is this a Tessel server?)"
              : ""));
    }
    if (st.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED) {
      Log(absl::StrCat("the server at ", options_.server,
                       " takes no more workers now: ", st.error_message()));
      return absl::OkStatus();
    }
    const std::string hint = proto::TransportHint(options_.transport, st);
    Log(absl::StrCat("cannot reach the server at ", options_.server, ": ",
                     st.error_message().empty() ? "the stream ended" : st.error_message(),
                     hint.empty() ? "" : absl::StrCat(" (", hint, ")")));
    return absl::OkStatus();
  }
  if (first.has_rejected()) {
    context.TryCancel();
    stream->Finish();
    return absl::FailedPreconditionError(absl::StrCat(
        "the server at ", options_.server, " rejected this worker: ", first.rejected().reason()));
  }
  if (!first.has_registered()) {
    context.TryCancel();
    stream->Finish();
    return absl::FailedPreconditionError(
        absl::StrCat("the server at ", options_.server,
                     " did not answer the registration with Registered: is it a Tessel server of "
                     "the same release?"));
  }
  if (absl::Status s =
          proto::CheckServerProtocol(first.registered().protocol_version(), options_.server);
      !s.ok()) {
    context.TryCancel();
    stream->Finish();
    return s;
  }
  *registered = true;
  uint64_t session = 0;
  bool draining = false;
  {
    absl::MutexLock lock(&mu_);
    if (stop_) {
      // A drain finished while this connection was being made: nothing to serve.
      mu_.Unlock();
      context.TryCancel();
      stream->Finish();
      mu_.Lock();
      return absl::OkStatus();
    }
    session = ++last_session_;
    session_ = session;
    draining = draining_;
    absl::MutexLock wlock(&write_mu_);
    stream_ = stream.get();
    context_ = &context;
    stream_session_ = session;
    writes_done_ = false;
  }
  Log(absl::StrCat(
      "registered with ", options_.server, " (server ", first.registered().server_version(),
      ", protocol ", first.registered().protocol_version(), ") as ",
      first.registered().worker_id().empty() ? worker_id_ : first.registered().worker_id(),
      first.registered().worker_id().empty() || first.registered().worker_id() == worker_id_
          ? ""
          : absl::StrCat(" (", worker_id_, " is connected already)"),
      " with ", devices_.size(), " ", target_, " device(s), ", credits_, " credits"));
  if (options_.metrics != nullptr) options_.metrics->SetConnected(true);
  proto::WorkerMessage credits;
  if (draining) {
    credits.mutable_draining()->set_reason("the worker is shutting down (SIGTERM)");
  } else {
    credits.mutable_credits()->set_batches(static_cast<uint32_t>(credits_));
  }
  Send(session, credits);

  proto::ServerMessage message;
  while (stream->Read(&message)) {
    if (message.has_batch()) {
      OnBatch(session, std::move(*message.mutable_batch()));
    } else if (message.has_rejected()) {
      Log(absl::StrCat("the server rejected this worker: ", message.rejected().reason()));
    }
  }
  if (options_.metrics != nullptr) options_.metrics->SetConnected(false);
  size_t dropped = 0;
  {
    absl::MutexLock lock(&mu_);
    session_ = 0;
    for (auto it = queue_.begin(); it != queue_.end();) {
      if (it->session == session) {
        dropped += static_cast<size_t>(it->batch.candidates_size());
        candidates_pending_ -= it->batch.candidates_size();
        --batches_held_;
        it = queue_.erase(it);
      } else {
        ++it;
      }
    }
    changed_.SignalAll();
    absl::MutexLock wlock(&write_mu_);
    stream_ = nullptr;
    context_ = nullptr;
  }
  const grpc::Status st = stream->Finish();
  Log(absl::StrCat("connection to ", options_.server,
                   " ended: ", st.ok() ? "closed by the server" : st.error_message(),
                   dropped > 0 ? absl::StrCat(" (", dropped, " queued candidates dropped)") : ""));
  return absl::OkStatus();
}

void Daemon::Return(uint64_t session, const proto::MeasureBatch& batch, size_t first,
                    const std::string& reason) {
  if (first >= static_cast<size_t>(batch.candidates_size())) return;
  proto::WorkerMessage m;
  proto::ReturnedCandidates* r = m.mutable_returned();
  r->set_batch_id(batch.batch_id());
  r->set_reason(reason);
  for (size_t i = first; i < static_cast<size_t>(batch.candidates_size()); ++i) {
    r->add_candidate_ids(batch.candidates(static_cast<int>(i)).id());
  }
  Send(session, m);
  Log(absl::StrCat("batch ", batch.batch_id(), ": returned ", r->candidate_ids_size(),
                   " unmeasured candidates (", reason, ")"));
}

std::shared_ptr<BatchCompiles> Daemon::QueueCompiles(const proto::MeasureBatch& batch,
                                                     const std::string& arch) {
  auto c = std::make_shared<BatchCompiles>();
  c->arch = arch;
  absl::StatusOr<schedules::GeneratedSource> reference = proto::FromProto(batch.reference());
  if (!reference.ok()) {
    c->reference_error =
        absl::StrCat("the batch's reference is malformed: ", reference.status().message());
    return c;
  }
  // On the GPU measurement starts as soon as the first candidate is compiled (the rest compile
  // meanwhile). On the host the compiler would compete with the timed program for the cores, so
  // ProcessBatch waits for the whole batch first.
  c->reference = pool_->Compile(*reference, arch);
  const size_t n = static_cast<size_t>(batch.candidates_size());
  c->futures.resize(n);
  c->malformed.resize(n);
  c->sources.resize(n);
  for (size_t i = 0; i < n; ++i) {
    absl::StatusOr<schedules::GeneratedSource> source =
        proto::FromProto(batch.candidates(static_cast<int>(i)).source());
    if (!source.ok()) {
      c->malformed[i] = absl::InvalidArgumentError(
          absl::StrCat("the candidate is malformed: ", source.status().message()));
      continue;
    }
    c->futures[i] = pool_->Compile(*source, arch);
    c->sources[i] = *std::move(source);
  }
  return c;
}

absl::Status Daemon::CheckRunnable(const proto::MeasureBatch& batch) const {
  std::vector<std::string> archs;
  for (const auto& d : devices_) {
    if (DeviceRuns(*d, batch)) return absl::OkStatus();
    archs.push_back(d->info.arch());
  }
  return absl::FailedPreconditionError(absl::StrCat(
      "this worker has no GPU that runs ", batch.cuda_arch(),
      " code (its GPUs: ", absl::StrJoin(archs, ", "), "): ",
      schedules::CheckCudaArchRunsOn(batch.cuda_arch(), archs.empty() ? "" : archs[0]).message(),
      "; the server should not have sent it here"));
}

std::deque<HeldBatch>::iterator Daemon::FirstRunnableLocked(const Device& device) {
  return std::find_if(queue_.begin(), queue_.end(),
                      [&](const HeldBatch& h) { return DeviceRuns(device, h.batch); });
}

void Daemon::OnBatch(uint64_t session, proto::MeasureBatch batch) {
  const int n = batch.candidates_size();
  // A batch no device here runs would wait for one forever: every candidate fails at once, with
  // why (not the candidates' fault: the server may measure them elsewhere).
  if (absl::Status runnable = CheckRunnable(batch); !runnable.ok()) {
    Log(absl::StrCat("batch ", batch.batch_id(), ": refused: ", runnable.message()));
    for (const proto::Candidate& c : batch.candidates()) {
      proto::WorkerMessage m;
      proto::MeasureResult* r = m.mutable_result();
      r->set_batch_id(batch.batch_id());
      r->set_candidate_id(c.id());
      r->set_status(proto::MEASURE_STATUS_WORKER_ERROR);
      r->set_error(std::string(runnable.message()));
      r->set_worker_id(worker_id_);
      Send(session, m);
    }
    {
      absl::MutexLock lock(&mu_);
      ++batches_held_;
    }
    FinishBatch(session, batch.batch_id(), 0);
    return;
  }
  // CUDA: compile the batch now, while the devices measure what they hold (issue 21: the GPU
  // waited for each batch's first compilation). Not on the host, where compiling competes with
  // the timed program for the cores. Devices of one architecture only (the usual case).
  std::shared_ptr<BatchCompiles> compiles;
  bool one_arch = target_ == "cuda";
  for (const auto& d : devices_) one_arch = one_arch && d->info.arch() == devices_[0]->info.arch();
  {
    absl::MutexLock lock(&mu_);
    one_arch = one_arch && !draining_;
  }
  if (one_arch) {
    absl::StatusOr<std::string> arch =
        schedules::CudaBuildArch(batch.cuda_arch(), devices_[0]->info.arch());
    if (arch.ok()) compiles = QueueCompiles(batch, *arch);
  }
  {
    absl::MutexLock lock(&mu_);
    if (!draining_) {
      Log(absl::StrCat("batch ", batch.batch_id(), ": ", n, " candidates received"));
      queue_.push_back(HeldBatch{session, std::move(batch), Clock::now(), std::move(compiles)});
      ++batches_held_;
      candidates_pending_ += n;
      changed_.SignalAll();
      return;
    }
  }
  Return(session, batch, 0, "the worker is draining");
  proto::WorkerMessage done;
  done.mutable_batch_done()->set_batch_id(batch.batch_id());
  Send(session, done);
}

void Daemon::FinishBatch(uint64_t session, uint64_t batch_id, size_t unfinished) {
  proto::WorkerMessage done;
  done.mutable_batch_done()->set_batch_id(batch_id);
  Send(session, done);
  bool draining = false;
  {
    absl::MutexLock lock(&mu_);
    --batches_held_;
    candidates_pending_ -= static_cast<int>(unfinished);
    draining = draining_;
    changed_.SignalAll();
  }
  if (!draining) {
    proto::WorkerMessage credit;
    credit.mutable_credits()->set_batches(1);
    Send(session, credit);
  }
}

void Daemon::DeviceLoop(Device* device) {
  while (true) {
    HeldBatch held;
    {
      absl::MutexLock lock(&mu_);
      while (!stop_ && FirstRunnableLocked(*device) == queue_.end()) changed_.Wait(&mu_);
      if (stop_) return;
      auto it = FirstRunnableLocked(*device);
      held = std::move(*it);
      queue_.erase(it);
    }
    ProcessBatch(device, held);
  }
}

void Daemon::ProcessBatch(Device* device, HeldBatch& held) {
  const proto::MeasureBatch& batch = held.batch;
  const uint64_t session = held.session;
  const size_t n = static_cast<size_t>(batch.candidates_size());
  // What to compile for: the batch's architecture (sm_90a) when it has one, else the device's.
  const absl::StatusOr<std::string> build_arch =
      target_ == "cuda" ? schedules::CudaBuildArch(batch.cuda_arch(), device->info.arch())
                        : absl::StatusOr<std::string>(device->info.arch());
  const std::string arch = build_arch.ok() ? *build_arch : device->info.arch();
  const double timeout_s =
      batch.options().timeout_s() > 0 ? batch.options().timeout_s() : options_.candidate_timeout_s;
  auto send_result = [&](size_t i, measure::Measurement r) {
    r.worker_id = worker_id_;
    r.device = device->info.ordinal();
    r.device_name = device->info.name();
    proto::WorkerMessage m;
    proto::MeasureResult* pr = m.mutable_result();
    proto::ToProto(r, pr);
    pr->set_batch_id(batch.batch_id());
    pr->set_candidate_id(batch.candidates(static_cast<int>(i)).id());
    const bool sent = Send(session, m);
    if (options_.metrics != nullptr) {
      options_.metrics->OnResult(device->info.ordinal(), r, pool_->Stats(),
                                 device->child->starts());
    }
    std::string line = absl::StrCat("batch ", batch.batch_id(), " candidate ", pr->candidate_id(),
                                    ": ", measure::MeasureStatusName(r.status));
    if (r.status == measure::MeasureStatus::kOk) {
      absl::StrAppendFormat(
          &line, " median %.4f ms over %d repeats%s", r.timings.median_ms,
          static_cast<int>(r.timings.repeats_ms.size()),
          r.timings.kind == measure::TimingKind::kScreened ? " (screened)"
          : r.timings.screen_repeats > 0
              ? absl::StrFormat(" (confirmed; screened %.4f ms)", r.timings.screen_median_ms)
              : std::string());
    } else {
      const std::string first_line = r.error.substr(0, r.error.find('\n'));
      absl::StrAppend(&line, ": ", first_line.substr(0, 200));
    }
    absl::StrAppendFormat(&line, " (compile %.0f ms%s)", r.compile_ms,
                          r.compile_cache_hit ? ", cached" : "");
    if (!sent) absl::StrAppend(&line, " [not sent: the connection is gone]");
    Log(line);
    absl::MutexLock lock(&mu_);
    --candidates_pending_;
  };
  auto all_fail = [&](const std::string& error) {
    for (size_t i = 0; i < n; ++i) {
      measure::Measurement r;
      r.status = measure::MeasureStatus::kWorkerError;
      r.error = error;
      send_result(i, std::move(r));
    }
    FinishBatch(session, batch.batch_id(), 0);
  };

  // The device starts on the batch now: what it waits for from here (the host's compilations of
  // the whole batch, below) counts as the first candidate's compile wait in the timeline.
  Clock::time_point next_start = Clock::now();
  // The batch's compilations: queued when it arrived (CUDA, OnBatch) so that it is compiled while
  // the device measures the batch before it, else now.
  if (!build_arch.ok()) {  // DeviceRuns kept it off this device: not reached
    all_fail(std::string(build_arch.status().message()));
    return;
  }
  std::shared_ptr<BatchCompiles> compiles = held.compiles;
  if (compiles == nullptr || compiles->arch != arch) compiles = QueueCompiles(batch, arch);
  if (!compiles->reference_error.empty()) {
    all_fail(compiles->reference_error);
    return;
  }
  CompileFuture& ref_future = compiles->reference;
  std::vector<std::optional<CompileFuture>>& futures = compiles->futures;
  std::vector<absl::Status>& malformed = compiles->malformed;
  std::vector<std::optional<schedules::GeneratedSource>>& sources = compiles->sources;
  if (target_ == "host") {
    for (auto& f : futures) {
      if (f.has_value()) f->wait();
    }
  }
  const absl::StatusOr<CompileOutput>& ref = ref_future.get();
  if (!ref.ok()) {
    all_fail(
        absl::StrCat("the reference program failed to compile (fix the reference, not the "
                     "candidates): ",
                     ref.status().message()));
    return;
  }
  proto::ChildMeasure request;
  *request.mutable_reference() = batch.reference();
  ToArtifact(*ref, request.mutable_reference_artifact());
  *request.mutable_options() = batch.options();
  const bool screened = batch.options().has_screen();
  const uint64_t screen_task = batch.options().screen().task_id();

  for (size_t i = 0; i < n; ++i) {
    bool gone = false, give_back = false;
    {
      absl::MutexLock lock(&mu_);
      gone = session_ != session;
      give_back = return_rest_;
      if (gone) {
        // The connection this batch came on is gone; the server reassigns its candidates.
        candidates_pending_ -= static_cast<int>(n - i);
        --batches_held_;
        changed_.SignalAll();
      }
    }
    if (gone) {
      Log(absl::StrCat("batch ", batch.batch_id(), ": abandoned ", n - i,
                       " candidates (the connection is gone)"));
      return;
    }
    if (give_back) {
      Return(session, batch, i, "the drain timed out before they were measured");
      FinishBatch(session, batch.batch_id(), n - i);
      return;
    }
    const proto::Candidate& candidate = batch.candidates(static_cast<int>(i));
    if (!futures[i].has_value()) {
      measure::Measurement r;
      r.status = measure::MeasureStatus::kWorkerError;
      r.error = std::string(malformed[i].message());
      send_result(i, std::move(r));
      continue;
    }
    const Clock::time_point started = next_start;
    measure::WorkerTimes times;
    times.queue_ms = MsBetween(held.received, started);
    const absl::StatusOr<CompileOutput>& compiled = futures[i]->get();
    times.compile_wait_ms = MsBetween(started, Clock::now());
    if (!compiled.ok()) {
      measure::Measurement r = measure::Measurement::FromStatus(compiled.status());
      times.device_ms = MsBetween(started, Clock::now());
      r.worker_times = times;
      send_result(i, std::move(r));
      next_start = Clock::now();
      continue;
    }
    *request.mutable_candidate() = candidate.source();
    request.set_candidate_id(candidate.id());
    request.set_confirm(candidate.confirm());
    if (screened) {
      absl::MutexLock lock(&mu_);
      auto it = confirmed_best_.find(screen_task);
      const double own = it == confirmed_best_.end() ? 0 : it->second;
      const double sent = batch.options().screen().best_ms();
      request.mutable_options()->mutable_screen()->set_best_ms(
          own > 0 && (sent <= 0 || own < sent) ? own : sent);
    }
    ToArtifact(*compiled, request.mutable_candidate_artifact());
    const int starts = device->child->starts();
    measure::Measurement r = device->child->Measure(request, timeout_s);
    if (r.ok()) {
      r.artifact =
          ResultArtifact(*sources[i], compiled->program, device->info, HostCompileOptions());
    }
    if (screened && r.confirmed()) {
      absl::MutexLock lock(&mu_);
      double& best = confirmed_best_[screen_task];
      if (best <= 0 || r.latency_ms() < best) best = r.latency_ms();
    }
    times.timing_ms = r.worker_times.timing_ms;
    times.device_ms = MsBetween(started, Clock::now());
    r.worker_times = times;
    next_start = Clock::now();
    if (device->child->starts() != starts || !device->child->running()) {
      Log(absl::StrCat("device ", device->info.ordinal(), ": measuring process ",
                       device->child->running() ? "restarted" : "ended", " after batch ",
                       batch.batch_id(), " candidate ", candidate.id()));
    }
    send_result(i, std::move(r));
  }
  FinishBatch(session, batch.batch_id(), 0);
}

void Daemon::HeartbeatLoop() {
  absl::MutexLock lock(&mu_);
  while (!stop_) {
    const absl::Time next = absl::Now() + absl::Seconds(options_.heartbeat_s);
    while (!stop_ && absl::Now() < next) changed_.WaitWithDeadline(&mu_, next);
    if (stop_ || session_ == 0) continue;
    proto::WorkerMessage m;
    proto::Heartbeat* h = m.mutable_heartbeat();
    h->set_unix_ms(absl::ToUnixMillis(absl::Now()));
    h->set_batches_held(static_cast<uint32_t>(batches_held_));
    h->set_candidates_pending(static_cast<uint32_t>(std::max(0, candidates_pending_)));
    h->set_draining(draining_);
    if (options_.metrics != nullptr) options_.metrics->SetBatchesHeld(batches_held_);
    const uint64_t session = session_;
    mu_.Unlock();
    Send(session, m);
    mu_.Lock();
  }
}

void Daemon::SignalLoop() {
  sigset_t set;
  sigemptyset(&set);
  if (options_.handle_signals) {
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
  }
  sigaddset(&set, SIGUSR1);
  sigaddset(&set, SIGUSR2);
  bool force = false;
  std::thread drain;
  while (true) {
    int sig = 0;
    if (sigwait(&set, &sig) != 0) continue;
    if (sig == SIGUSR1) break;
    const char* what = sig == SIGTERM ? "SIGTERM" : sig == SIGINT ? "SIGINT" : "a stop request";
    if (drain.joinable()) {
      Log(absl::StrCat("received ", what, " again: returning the work held and stopping now"));
      absl::MutexLock lock(&mu_);
      force = true;
      changed_.SignalAll();
      continue;
    }
    Log(absl::StrCat("received ", what, ": draining (no new batches; finishing the batches held)"));
    drain = std::thread([this, &force] { Drain(&force); });
  }
  if (drain.joinable()) drain.join();
}

void Daemon::Drain(bool* force) {
  uint64_t session = 0;
  {
    absl::MutexLock lock(&mu_);
    draining_ = true;
    session = session_;
    changed_.SignalAll();
  }
  proto::WorkerMessage m;
  m.mutable_draining()->set_reason("the worker is shutting down (SIGTERM)");
  Send(session, m);
  const absl::Time deadline = absl::Now() + absl::Seconds(options_.drain_timeout_s);
  std::deque<HeldBatch> unstarted;
  {
    absl::MutexLock lock(&mu_);
    while (batches_held_ > 0 && !stop_ && !*force && absl::Now() < deadline) {
      changed_.WaitWithDeadline(&mu_, deadline);
    }
    if (batches_held_ > 0 && !stop_) {
      Log(absl::StrCat("drain: ", batches_held_, " batches still held ",
                       *force ? "at the second signal" : "at the drain timeout",
                       ": returning their unmeasured candidates"));
      return_rest_ = true;
      unstarted.swap(queue_);
    }
  }
  for (HeldBatch& b : unstarted) {
    Return(b.session, b.batch, 0, "the worker stopped before measuring them");
    FinishBatch(b.session, b.batch.batch_id(), static_cast<size_t>(b.batch.candidates_size()));
  }
  {
    absl::MutexLock lock(&mu_);
    // The batch being measured ends after its current candidate.
    while (batches_held_ > 0 && !stop_) changed_.Wait(&mu_);
    stop_ = true;
    changed_.SignalAll();
  }
  // Close our side; the server ends the stream, which ends the session. A server that does not
  // is cut off after 5 s.
  {
    absl::MutexLock lock(&write_mu_);
    if (stream_ != nullptr && !writes_done_) {
      stream_->WritesDone();
      writes_done_ = true;
    } else if (stream_ == nullptr && context_ != nullptr) {
      context_->TryCancel();  // a registration still waiting for its answer
    }
  }
  Log("drained: every batch held was finished or returned");
  const absl::Time cut = absl::Now() + absl::Seconds(5);
  while (absl::Now() < cut) {
    {
      absl::MutexLock lock(&write_mu_);
      if (context_ == nullptr) return;
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
  absl::MutexLock lock(&write_mu_);
  if (context_ != nullptr) context_->TryCancel();
}

}  // namespace

int WorkerCredits(int compile_threads, int devices) {
  return std::max({2, 2 * devices, (compile_threads + 3) / 4});
}

absl::Status RunWorker(const WorkerOptions& options) { return Daemon(options).Run(); }

}  // namespace tessel::worker
