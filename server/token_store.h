#pragma once

// The tokens a server accepts (server/tokens_file.h), read from the tokens file at start and read
// again whenever the file changes: every lookup compares the file's modification time, size and
// inode with those last read (one stat), so adding a token with `tessel token create` or deleting
// a line to revoke one takes effect at the next call, without a restart. A file that has become
// unreadable or malformed is reported on the event log and the tokens read last stay in force.
//
// Threads: Find may be called from any thread (one internal mutex).

#include <sys/types.h>

#include <ctime>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "server/event_log.h"
#include "server/tokens_file.h"

namespace tessel::server {

class TokenStore {
 public:
  // Reads the file; fails naming it when it cannot be read or is malformed. `events` (may be
  // null) hears of reloads and of files that could not be reloaded.
  static absl::StatusOr<std::unique_ptr<TokenStore>> Open(const std::string& path,
                                                          const EventLog* events);

  // Who `token` belongs to, or nullopt for a token not in the file.
  std::optional<Principal> Find(absl::string_view token);

  const std::string& path() const { return path_; }

 private:
  struct Stamp {
    timespec mtime{};
    off_t size = 0;
    ino_t inode = 0;
    bool operator==(const Stamp& o) const {
      return mtime.tv_sec == o.mtime.tv_sec && mtime.tv_nsec == o.mtime.tv_nsec && size == o.size &&
             inode == o.inode;
    }
  };
  TokenStore(std::string path, const EventLog* events) : path_(std::move(path)), events_(events) {}
  static std::optional<Stamp> StampOf(const std::string& path);
  void ReloadIfChanged() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string path_;
  const EventLog* const events_;
  absl::Mutex mu_;
  std::map<std::string, Principal> by_hash_ ABSL_GUARDED_BY(mu_);
  std::optional<Stamp> stamp_ ABSL_GUARDED_BY(mu_);  // of the file last read (or tried)
};

}  // namespace tessel::server
