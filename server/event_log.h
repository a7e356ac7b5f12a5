#pragma once

// One line per server event on stderr ("tessel serve 2024-05-01 12:00:00.123: ..."), unless
// quiet. Threads: Log may be called from any thread (lines never interleave).

#include <string>

namespace tessel::server {

class EventLog {
 public:
  explicit EventLog(bool quiet) : quiet_(quiet) {}
  void Log(const std::string& line) const;

 private:
  bool quiet_;
};

}  // namespace tessel::server
