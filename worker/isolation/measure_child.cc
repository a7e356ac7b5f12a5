#include "worker/isolation/measure_child.h"

#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "proto/convert.h"
#include "worker/isolation/frame_io.h"

extern char** environ;

namespace tessel::worker {
namespace {

std::string SelfExecutable() {
  std::vector<char> buf(4096);
  const ssize_t n = readlink("/proc/self/exe", buf.data(), buf.size() - 1);
  if (n <= 0) return "/proc/self/exe";
  return std::string(buf.data(), static_cast<size_t>(n));
}

}  // namespace

MeasureChild::MeasureChild(MeasureChildOptions options) : options_(std::move(options)) {
  if (options_.executable.empty()) options_.executable = SelfExecutable();
}

MeasureChild::~MeasureChild() { Reap(/*kill=*/true); }

std::string MeasureChild::Reap(bool kill) {
  if (fd_ >= 0) {
    close(fd_);
    fd_ = -1;
  }
  if (pid_ <= 0) return "not running";
  if (kill) ::kill(pid_, SIGKILL);
  // A child that is expected to exit by itself gets 5 s, then SIGKILL.
  int status = 0;
  pid_t r = 0;
  const absl::Time grace = absl::Now() + absl::Seconds(5);
  while (true) {
    r = waitpid(pid_, &status, WNOHANG);
    if (r == pid_ || (r < 0 && errno != EINTR)) break;
    if (r == 0) {
      if (absl::Now() > grace) {
        ::kill(pid_, SIGKILL);
        kill = true;
      }
      absl::SleepFor(absl::Milliseconds(kill ? 1 : 5));
    }
  }
  pid_ = -1;
  if (r < 0) return "lost (waitpid failed)";
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    return absl::StrCat("killed by signal ", sig, " (", strsignal(sig), ")");
  }
  if (WIFEXITED(status)) return absl::StrCat("exited with status ", WEXITSTATUS(status));
  return "ended";
}

absl::Status MeasureChild::Start() {
  if (pid_ > 0) return absl::OkStatus();
  int fds[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) {
    return absl::InternalError(absl::StrCat("socketpair failed: ", std::strerror(errno)));
  }
  const std::vector<std::string> argv_s = {options_.executable,
                                           "__measure-child",
                                           "--target",
                                           options_.target,
                                           "--device",
                                           absl::StrCat(options_.device),
                                           "--fd",
                                           "3"};
  std::vector<char*> argv;
  for (const std::string& a : argv_s) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[1], 3);  // clears close-on-exec on fd 3
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  // Its own process group (a terminal's Ctrl-C is the parent's to handle), default signal
  // dispositions and an empty mask (the daemon blocks SIGTERM for its signal thread).
  sigset_t empty, defaults;
  sigemptyset(&empty);
  sigemptyset(&defaults);
  sigaddset(&defaults, SIGTERM);
  sigaddset(&defaults, SIGINT);
  sigaddset(&defaults, SIGPIPE);
  posix_spawnattr_setsigmask(&attr, &empty);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setflags(&attr,
                           POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  pid_t pid = 0;
  const int err =
      posix_spawn(&pid, options_.executable.c_str(), &actions, &attr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  close(fds[1]);
  if (err != 0) {
    close(fds[0]);
    return absl::FailedPreconditionError(absl::StrCat("cannot start the measuring process ",
                                                      options_.executable, ": ", std::strerror(err),
                                                      ": reinstall tessel or pass its path"));
  }
  pid_ = pid;
  fd_ = fds[0];
  ++starts_;

  proto::ChildResponse hello;
  absl::Status s = ReadFrame(fd_, &hello, absl::Now() + absl::Seconds(options_.start_timeout_s));
  if (!s.ok() || !hello.has_hello()) {
    const std::string how = Reap(/*kill=*/true);
    return absl::UnavailableError(absl::StrCat("the measuring process for ", options_.target,
                                               " device ", options_.device, " did not start (", how,
                                               s.ok() ? "" : absl::StrCat("; ", s.message()), ")"));
  }
  if (!hello.hello().error().empty()) {
    Reap(/*kill=*/true);
    return absl::FailedPreconditionError(absl::StrCat(
        "cannot open ", options_.target, " device ", options_.device, ": ", hello.hello().error()));
  }
  device_ = hello.hello().device();
  device_count_ = hello.hello().device_count();
  return absl::OkStatus();
}

measure::Measurement MeasureChild::Measure(const proto::ChildMeasure& request, double timeout_s) {
  if (absl::Status s = Start(); !s.ok()) {
    measure::Measurement r;
    r.status = measure::MeasureStatus::kWorkerError;
    r.error = std::string(s.message());
    return r;
  }
  proto::ChildRequest req;
  *req.mutable_measure() = request;
  const uint64_t token = next_token_++;
  req.mutable_measure()->set_token(token);
  const absl::Time deadline = absl::Now() + absl::Seconds(timeout_s);
  absl::Status s = WriteFrame(fd_, req);
  proto::ChildResponse response;
  while (s.ok()) {
    s = ReadFrame(fd_, &response, deadline);
    if (s.ok() && response.has_result() && response.result().token() == token) break;
  }
  measure::Measurement result;
  result.device = options_.device;
  result.device_name = device_.name();
  result.compile_ms = request.candidate_artifact().compile_ms();
  result.compile_cache_hit = request.candidate_artifact().cache_hit();
  if (s.ok()) {
    result = proto::FromProto(response.result().result());
    if (result.device_name.empty()) result.device_name = device_.name();
    if (response.result().device_poisoned()) Reap(/*kill=*/false);  // it exits by itself
    return result;
  }
  if (absl::IsDeadlineExceeded(s)) {
    Reap(/*kill=*/true);
    result.status = measure::MeasureStatus::kTimeout;
    result.error = absl::StrFormat(
        "the candidate ran past the %.3g s time limit for verification and timing (a hang or an "
        "infinite loop); the measuring process was killed and is restarted; raise "
        "MeasureOptions.timeout_s if the kernel is only slow",
        timeout_s);
    return result;
  }
  const std::string how = Reap(/*kill=*/false);
  result.status = measure::MeasureStatus::kRuntimeError;
  result.error = absl::StrCat("the candidate crashed the measuring process (", how,
                              "); the process is restarted for the next candidate");
  return result;
}

void ToArtifact(const CompileOutput& out, proto::CompiledArtifact* artifact) {
  if (!out.program.cuda.cubin.empty()) {
    artifact->set_cubin(out.program.cuda.cubin);
    artifact->set_cuda_arch(out.program.cuda.arch);
  } else {
    artifact->set_host_library(out.program.host.library_path);
  }
  artifact->set_compile_ms(out.compile_ms);
  artifact->set_cache_hit(out.cache_hit);
}

}  // namespace tessel::worker
