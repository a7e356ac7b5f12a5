#include "server/event_log.h"

#include <cstdio>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace tessel::server {

void EventLog::Log(const std::string& line) const {
  if (quiet_) return;
  static absl::Mutex* mu = new absl::Mutex();
  const std::string stamp =
      absl::FormatTime("%Y-%m-%d %H:%M:%E3S", absl::Now(), absl::LocalTimeZone());
  absl::MutexLock lock(mu);
  std::fprintf(stderr, "tessel serve %s: %s\n", stamp.c_str(), line.c_str());
  std::fflush(stderr);
}

}  // namespace tessel::server
