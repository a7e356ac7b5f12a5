#pragma once

// TESSEL_CHECK(cond) << "context": aborts with the message when an internal invariant fails.
// For bugs only; user mistakes get an absl::Status with a message that names the fix.

#include <cstdlib>
#include <iostream>
#include <sstream>

namespace tessel::internal {

class CheckFailure {
 public:
  CheckFailure(const char* file, int line, const char* cond) {
    stream_ << file << ":" << line << ": check failed: " << cond << ": ";
  }
  [[noreturn]] ~CheckFailure() {
    std::cerr << stream_.str() << std::endl;
    std::abort();
  }
  std::ostream& stream() { return stream_; }

 private:
  std::ostringstream stream_;
};

}  // namespace tessel::internal

#define TESSEL_CHECK(cond) \
  if (cond) {              \
  } else                   \
    ::tessel::internal::CheckFailure(__FILE__, __LINE__, #cond).stream()
