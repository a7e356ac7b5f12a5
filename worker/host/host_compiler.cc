#include "worker/host/host_compiler.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <system_error>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "measure/measurement.h"
#include "schedules/util/elapsed.h"
#include "schedules/util/fnv1a.h"

extern char** environ;

namespace tessel::worker {
namespace {

using schedules::MsSince;

namespace fs = std::filesystem;

constexpr size_t kMaxLogInMessage = 16 * 1024;

std::string DefaultWorkDir() {
  const char* tmp = std::getenv("TMPDIR");
  std::string base = (tmp != nullptr && tmp[0] != '\0') ? tmp : "/tmp";
  return absl::StrCat(base, "/tessel-host-", static_cast<long>(getuid()));
}

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

absl::Status WriteFile(const std::string& path, const std::string& data) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << data;
  out.close();
  if (!out) {
    return absl::PermissionDeniedError(
        absl::StrCat("cannot write ", path,
                     ": make the host work directory writable or set "
                     "HostCompileOptions::work_dir"));
  }
  return absl::OkStatus();
}

std::string Truncated(const std::string& log) {
  if (log.size() <= kMaxLogInMessage) return log;
  return absl::StrCat(log.substr(0, kMaxLogInMessage), "\n... (", log.size() - kMaxLogInMessage,
                      " more bytes of log)");
}

struct ProcessResult {
  int exit_code = 0;      // valid when !timed_out && !signaled
  bool signaled = false;  // killed by a signal (other than our timeout)
  int signal = 0;
  bool timed_out = false;
};

// Runs argv[0] (looked up on PATH) with stdin from /dev/null and stdout + stderr into
// `log_path`, in its own process group so that a timeout kills the whole compiler pipeline.
absl::StatusOr<ProcessResult> RunProcess(const std::vector<std::string>& argv,
                                         const std::string& log_path, double timeout_s) {
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                   0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attr, 0);

  pid_t pid = 0;
  const int err = posix_spawnp(&pid, args[0], &actions, &attr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (err != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "cannot start '", argv[0], "': ", std::error_code(err, std::generic_category()).message(),
        ": install a C++ compiler or set HostCompileOptions::compiler"));
  }

  const auto start = std::chrono::steady_clock::now();
  ProcessResult result;
  int status = 0;
  auto sleep = std::chrono::milliseconds(1);
  while (true) {
    const pid_t done = waitpid(pid, &status, WNOHANG);
    if (done == pid) break;
    if (done < 0 && errno != EINTR) {
      return absl::InternalError(
          absl::StrCat("waitpid for '", argv[0],
                       "' failed: ", std::error_code(errno, std::generic_category()).message()));
    }
    if (MsSince(start) > timeout_s * 1000.0) {
      kill(-pid, SIGKILL);
      while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
      }
      result.timed_out = true;
      return result;
    }
    std::this_thread::sleep_for(sleep);
    sleep = std::min(sleep * 2, std::chrono::milliseconds(20));
  }
  if (WIFEXITED(status)) {
    result.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    result.signaled = true;
    result.signal = WTERMSIG(status);
  }
  return result;
}

bool IsCIdentifier(const std::string& s) {
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  for (char c : s) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  }
  return true;
}

// Unique temporary names within this process and across processes sharing the work directory.
std::string TempSuffix() {
  static std::atomic<uint64_t> counter{0};
  return absl::StrCat(".tmp", static_cast<long>(getpid()), "_", counter.fetch_add(1));
}

}  // namespace

absl::StatusOr<std::string> HostCompilerVersion(const std::string& compiler) {
  struct Cache {
    absl::Mutex mu;
    std::map<std::string, std::string> versions ABSL_GUARDED_BY(mu);
  };
  static Cache* cache = new Cache();
  {
    absl::MutexLock lock(&cache->mu);
    auto it = cache->versions.find(compiler);
    if (it != cache->versions.end()) return it->second;
  }
  std::error_code ec;
  const fs::path tmp = fs::temp_directory_path(ec);
  const std::string log_path =
      absl::StrCat(ec ? std::string("/tmp") : tmp.string(), "/tessel-cxx-version", TempSuffix());
  absl::StatusOr<ProcessResult> run = RunProcess({compiler, "--version"}, log_path, 60);
  absl::StatusOr<std::string> out = ReadFile(log_path);
  fs::remove(log_path, ec);
  if (!run.ok()) return run.status();
  if (run->timed_out || run->signaled || run->exit_code != 0 || !out.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("'", compiler, " --version' failed", out.ok() ? absl::StrCat(": ", *out) : "",
                     ": install a C++ compiler or set HostCompileOptions::compiler"));
  }
  std::string line = out->substr(0, out->find('\n'));
  absl::MutexLock lock(&cache->mu);
  cache->versions.emplace(compiler, line);
  return line;
}

HostModule::HostModule(HostModule&& other) noexcept { *this = std::move(other); }

HostModule& HostModule::operator=(HostModule&& other) noexcept {
  if (this == &other) return *this;
  if (handle_ != nullptr) dlclose(handle_);
  handle_ = std::exchange(other.handle_, nullptr);
  entry_ = std::exchange(other.entry_, nullptr);
  entry_name_ = std::move(other.entry_name_);
  num_buffers_ = other.num_buffers_;
  library_path_ = std::move(other.library_path_);
  compile_log_ = std::move(other.compile_log_);
  cache_hit_ = other.cache_hit_;
  compile_ms_ = other.compile_ms_;
  return *this;
}

HostModule::~HostModule() {
  if (handle_ != nullptr) dlclose(handle_);
}

absl::StatusOr<HostObject> BuildHostObject(const schedules::GeneratedSource& source,
                                           const HostCompileOptions& options) {
  if (source.target != schedules::TargetKind::kHost) {
    return absl::InvalidArgumentError(
        "CompileHost got a CUDA GeneratedSource: compile it with CompileCuda (NVRTC) instead");
  }
  if (source.kernels.size() != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a host GeneratedSource must have exactly one kernel (its entry function), this one has ",
        source.kernels.size(), ": fix the host code generator"));
  }
  const std::string& entry = source.kernels[0].entry;
  if (!IsCIdentifier(entry)) {
    return absl::InvalidArgumentError(
        absl::StrCat("host entry name '", entry,
                     "' is not a C identifier: name the kernel with letters, "
                     "digits and '_'"));
  }

  const std::string work_dir = options.work_dir.empty() ? DefaultWorkDir() : options.work_dir;
  std::error_code ec;
  fs::create_directories(work_dir, ec);
  if (ec) {
    return absl::PermissionDeniedError(
        absl::StrCat("cannot create the host work directory ", work_dir, ": ", ec.message(),
                     "; set HostCompileOptions::work_dir to a writable directory"));
  }

  absl::StatusOr<std::string> version = HostCompilerVersion(options.compiler);
  if (!version.ok()) return version.status();
  std::vector<std::string> flags = options.flags;
  flags.insert(flags.end(), options.extra_flags.begin(), options.extra_flags.end());

  uint64_t key = schedules::Fnv1a64(source.code);
  for (const std::string& part : {std::string("\0", 1), entry, options.compiler, *version}) {
    key = schedules::Fnv1a64(part, key);
    key = schedules::Fnv1a64(std::string("\0", 1), key);
  }
  for (const std::string& f : flags)
    key = schedules::Fnv1a64(absl::StrCat(f, std::string("\0", 1)), key);
  const std::string base = absl::StrFormat("%s/%s_%016x", work_dir, entry, key);
  const std::string so_path = base + ".so";
  const std::string cc_path = base + ".cc";
  const std::string log_path = base + ".log";

  const auto start = std::chrono::steady_clock::now();
  HostObject module;
  module.library_path = so_path;

  if (options.use_cache && fs::exists(so_path, ec)) {
    module.cache_hit = true;
    absl::StatusOr<std::string> log = ReadFile(log_path);
    if (log.ok()) module.compile_log = *log;
  }
  if (!module.cache_hit) {
    // The source goes to its final name first (written aside, then renamed: a concurrent
    // compile of the same key writes the same text), so that the log names a file that stays.
    const std::string suffix = TempSuffix();
    const std::string tmp_cc = cc_path + suffix;
    const std::string tmp_so = so_path + suffix;
    const std::string tmp_log = log_path + suffix;
    if (absl::Status s = WriteFile(tmp_cc, source.code); !s.ok()) return s;
    fs::rename(tmp_cc, cc_path, ec);
    if (ec) {
      return absl::PermissionDeniedError(
          absl::StrCat("cannot rename ", tmp_cc, " to ", cc_path, ": ", ec.message()));
    }
    std::vector<std::string> argv = {options.compiler};
    argv.insert(argv.end(), flags.begin(), flags.end());
    argv.insert(argv.end(), {cc_path, "-o", tmp_so});
    absl::StatusOr<ProcessResult> run = RunProcess(argv, tmp_log, options.timeout_s);
    if (!run.ok()) {
      fs::remove(tmp_log, ec);
      return run.status();
    }
    absl::StatusOr<std::string> log = ReadFile(tmp_log);
    module.compile_log = log.ok() ? *log : std::string();
    fs::rename(tmp_log, log_path, ec);  // the last compile of this key wins
    const std::string command = absl::StrJoin(argv, " ");
    if (run->timed_out) {
      fs::remove(tmp_so, ec);
      return measure::WithMeasureStatus(
          absl::DeadlineExceededError(absl::StrFormat(
              "host compiler ran past %.0f s and was killed: %s (source kept at %s); raise "
              "HostCompileOptions::timeout_s or simplify the program (less unrolling)",
              options.timeout_s, command, cc_path)),
          measure::MeasureStatus::kTimeout);
    }
    if (run->signaled || run->exit_code != 0) {
      fs::remove(tmp_so, ec);
      const std::string how = run->signaled ? absl::StrCat("was killed by signal ", run->signal)
                                            : absl::StrCat("exited with ", run->exit_code);
      return measure::WithMeasureStatus(
          absl::InvalidArgumentError(
              absl::StrCat("host compilation of '", entry, "' failed: ", options.compiler, " ", how,
                           " (source kept at ", cc_path, ", command: ", command,
                           "); compiler log:\n", Truncated(module.compile_log))),
          measure::MeasureStatus::kCompileError);
    }
    fs::rename(tmp_so, so_path, ec);
    if (ec) {
      return absl::PermissionDeniedError(
          absl::StrCat("cannot move the compiled object to ", so_path, ": ", ec.message()));
    }
  }
  module.compile_ms = MsSince(start);
  return module;
}

absl::StatusOr<HostModule> LoadHostModule(const schedules::GeneratedSource& source,
                                          const HostObject& object) {
  if (source.kernels.size() != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a host GeneratedSource must have exactly one kernel (its entry function), this one has ",
        source.kernels.size(), ": fix the host code generator"));
  }
  const std::string& entry = source.kernels[0].entry;
  const std::string& so_path = object.library_path;
  HostModule module;
  module.entry_name_ = entry;
  module.num_buffers_ = static_cast<int>(source.buffers.size());
  module.library_path_ = so_path;
  module.compile_log_ = object.compile_log;
  module.cache_hit_ = object.cache_hit;
  module.compile_ms_ = object.compile_ms;
  // RTLD_NODELETE: a module that ran OpenMP code must stay mapped; unloading it while the
  // runtime's idle worker threads still hold its addresses crashes the process later.
  module.handle_ = dlopen(so_path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  if (module.handle_ == nullptr) {
    const char* why = dlerror();
    return absl::FailedPreconditionError(
        absl::StrCat("dlopen(", so_path, ") failed: ", why != nullptr ? why : "unknown error",
                     ": the shared object is missing or was built for another machine"));
  }
  dlerror();
  void* sym = dlsym(module.handle_, entry.c_str());
  if (sym == nullptr) {
    return measure::WithMeasureStatus(
        absl::InvalidArgumentError(absl::StrCat("entry '", entry, "' not found in ", so_path,
                                                ": the host code must define extern \"C\" void ",
                                                entry, "(void* const* buffers)")),
        measure::MeasureStatus::kCompileError);
  }
  module.entry_ = reinterpret_cast<HostModule::EntryFn>(sym);
  return module;
}

absl::StatusOr<HostModule> CompileHost(const schedules::GeneratedSource& source,
                                       const HostCompileOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<HostObject> object = BuildHostObject(source, options);
  if (!object.ok()) return object.status();
  absl::StatusOr<HostModule> module = LoadHostModule(source, *object);
  if (module.ok()) module->compile_ms_ = MsSince(start);
  return module;
}

}  // namespace tessel::worker
