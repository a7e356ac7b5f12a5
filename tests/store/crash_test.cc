// A writer process killed with SIGKILL while adding records: every record whose AddRecord had
// returned is in the log afterwards, whole, and the file passes SQLite's integrity check.

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <set>

#include "store/sqlite_tuning_log.h"
#include "store/tuning_log.h"
#include "tests/store/store_test_util.h"
#include "tests/test_util.h"

namespace tessel::testing {
namespace {

// The child: opens the log itself (a connection is never carried across fork), adds records
// `first`, `first + 1`, ... one per transaction and writes each returned candidate id to `fd`.
[[noreturn]] void WriterChild(const std::string& path, int64_t first, int fd) {
  auto log = store::OpenTuningLog(path);
  if (!log.ok()) _exit(3);
  for (int64_t i = first;; ++i) {
    store::Record r = MakeTestRecord(i);
    if (!(*log)->AddRecord(&r).ok()) _exit(4);
    if (write(fd, &i, sizeof(i)) != sizeof(i)) _exit(5);
  }
}

TEST(TuningLogCrash, AcknowledgedRecordsSurviveSigkill) {
  const std::string path = MakeTempDir("tessel_crash") + "/log.db";
  { ASSERT_TRUE(store::OpenTuningLog(path).ok()); }
  std::set<int64_t> acknowledged;
  int64_t next = 0;
  for (int round = 0; round < 3; ++round) {
    int fds[2];
    ASSERT_EQ(pipe(fds), 0);
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      close(fds[0]);
      WriterChild(path, next, fds[1]);
    }
    close(fds[1]);
    // Let it write a few hundred records, then kill it mid-stream.
    int64_t id;
    int64_t got = 0;
    while (got < 300 + 100 * round && read(fds[0], &id, sizeof(id)) == sizeof(id)) {
      acknowledged.insert(id);
      ++got;
    }
    ASSERT_EQ(kill(pid, SIGKILL), 0);
    // Whatever it reported before dying was acknowledged too.
    while (read(fds[0], &id, sizeof(id)) == sizeof(id)) acknowledged.insert(id);
    close(fds[0]);
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFSIGNALED(status)) << "the writer exited on its own with " << status;
    next = *acknowledged.rbegin() + 1000;  // the next round's ids cannot collide

    // Reopen: every acknowledged record is there and whole; nothing half-written is.
    EXPECT_EQ(RawQuery(path, "PRAGMA integrity_check"), "ok");
    auto log = store::OpenTuningLog(path);
    ASSERT_TRUE(log.ok()) << log.status();
    std::set<int64_t> stored;
    ASSERT_TRUE((*log)
                    ->ForEachRecordOfTarget("host",
                                            [&](const store::Record& r) {
                                              const std::string diff = DiffTestRecord(
                                                  r, static_cast<int64_t>(r.candidate_id));
                                              EXPECT_EQ(diff, "") << "record " << r.candidate_id;
                                              stored.insert(r.candidate_id);
                                              return true;
                                            })
                    .ok());
    for (int64_t a : acknowledged) EXPECT_TRUE(stored.count(a)) << "record " << a << " was lost";
    // At most the one record being committed when the kill came is stored unacknowledged.
    EXPECT_LE(stored.size(), acknowledged.size() + round + 1);
  }
}

}  // namespace
}  // namespace tessel::testing
