#pragma once

// Error messages that name an offending token of an input without echoing a huge one in full
// (issue 20, point 9: a 100 KB name came back in the error, and through the server's reply):
// every word longer than kMaxWordBytes is cut to its first kMaxWordBytes - 3 bytes and "...".
//
// Threads: pure functions, callable from any thread.

#include <algorithm>
#include <cstddef>
#include <string>
#include <string_view>

#include "absl/status/status.h"

namespace tessel::schedules {

inline constexpr size_t kMaxWordBytes = 80;

// `message` with its long words cut; a word is a run of bytes other than space and newline.
inline std::string ShortenLongWords(std::string_view message) {
  std::string out;
  out.reserve(std::min(message.size(), size_t{4096}));
  size_t i = 0;
  while (i < message.size()) {
    const size_t end = std::min(message.find_first_of(" \n", i), message.size());
    const std::string_view word = message.substr(i, end - i);
    if (word.size() > kMaxWordBytes) {
      out.append(word.substr(0, kMaxWordBytes - 3));
      out.append("...");
    } else {
      out.append(word);
    }
    if (end < message.size()) out.push_back(message[end]);
    i = end + 1;
  }
  return out;
}

// The same status with its message's long words cut.
inline absl::Status WithShortWords(const absl::Status& status) {
  if (status.ok()) return status;
  const std::string_view m(status.message().data(), status.message().size());
  for (size_t i = 0, run = 0; i < m.size(); ++i) {
    run = (m[i] == ' ' || m[i] == '\n') ? 0 : run + 1;
    if (run > kMaxWordBytes) return absl::Status(status.code(), ShortenLongWords(m));
  }
  return status;
}

}  // namespace tessel::schedules
