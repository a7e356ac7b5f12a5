#pragma once

// Milliseconds on the steady clock: how the worker and the server time their own stages
// (compilation, verification, queues, the live loop's timeline).

#include <chrono>

namespace tessel::schedules {

inline double MsBetween(std::chrono::steady_clock::time_point from,
                        std::chrono::steady_clock::time_point to) {
  return std::chrono::duration<double, std::milli>(to - from).count();
}

inline double MsSince(std::chrono::steady_clock::time_point start) {
  return MsBetween(start, std::chrono::steady_clock::now());
}

}  // namespace tessel::schedules
