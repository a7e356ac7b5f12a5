#pragma once

// The lock that makes one server the owner of a tuning log (DESIGN.md section 10): an exclusive
// flock(2) on LOG.lock beside the log, held for the owner's life and released by the OS when its
// process ends, even by SIGKILL (the file itself stays; only the lock matters). The file names
// its holder (pid, host, since when) so that a second server can say who has the log. SQLite's
// own locking keeps each transaction whole; this lock keeps a second server from resuming the
// jobs the first one runs.
//
// Threads: Acquire may be called from any thread; the lock is released when the LogLock is
// destroyed. Two LogLocks of one log conflict within one process too.

#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace tessel::store {

class LogLock {
 public:
  // Takes the lock of the log at `log_path`. FailedPrecondition naming the holder when another
  // has it; PermissionDenied naming the folder when the lock file cannot be made.
  static absl::StatusOr<std::unique_ptr<LogLock>> Acquire(const std::string& log_path);
  ~LogLock();
  LogLock(const LogLock&) = delete;
  LogLock& operator=(const LogLock&) = delete;

  // LOG.lock.
  const std::string& path() const { return path_; }

 private:
  LogLock(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}

  const std::string path_;
  const int fd_;
};

}  // namespace tessel::store
