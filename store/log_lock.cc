#include "store/log_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace tessel::store {
namespace {

std::string Holder() {
  char host[256] = "";
  gethostname(host, sizeof(host) - 1);
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char since[32];
  std::strftime(since, sizeof(since), "%Y-%m-%d %H:%M:%S UTC", &tm);
  return absl::StrCat("pid ", getpid(), " on host ", host, " since ", since);
}

std::string ReadAll(int fd) {
  std::string out;
  char buf[512];
  ssize_t n;
  while (out.size() < 4096 && (n = pread(fd, buf, sizeof(buf), out.size())) > 0) {
    out.append(buf, n);
  }
  return std::string(absl::StripAsciiWhitespace(out));
}

}  // namespace

absl::StatusOr<std::unique_ptr<LogLock>> LogLock::Acquire(const std::string& log_path) {
  const std::string path = log_path + ".lock";
  const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) {
    const int err = errno;
    const size_t slash = log_path.rfind('/');
    const std::string dir = slash == std::string::npos ? "." : log_path.substr(0, slash + 1);
    return absl::PermissionDeniedError(
        absl::StrCat("cannot make the lock file ", path, " (", std::strerror(err),
                     "): a server needs to write in the folder ", dir,
                     " of its tuning log; make it writable or move the log"));
  }
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    std::string holder = err == EWOULDBLOCK ? ReadAll(fd) : "";
    close(fd);
    if (err != EWOULDBLOCK) {
      return absl::UnavailableError(absl::StrCat("cannot lock ", path, ": ", std::strerror(err)));
    }
    return absl::FailedPreconditionError(
        absl::StrCat("the tuning log ", log_path, " is in use by another tessel server (",
                     holder.empty() ? "its holder did not say who it is" : holder, "; lock file ",
                     path, "): stop that server first, or pass another --db"));
  }
  // For the messages of other servers only: the lock holds even when this write fails.
  const std::string holder = Holder() + "\n";
  if (ftruncate(fd, 0) == 0) {
    const ssize_t written = pwrite(fd, holder.data(), holder.size(), 0);
    (void)written;
  }
  return std::unique_ptr<LogLock>(new LogLock(path, fd));
}

LogLock::~LogLock() {
  flock(fd_, LOCK_UN);
  close(fd_);
}

}  // namespace tessel::store
