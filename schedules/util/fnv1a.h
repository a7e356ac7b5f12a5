#pragma once

// 64-bit FNV-1a (offset basis 0xcbf29ce484222325, prime 0x100000001b3: for each byte,
// hash ^= byte; hash *= prime, modulo 2^64). Stable across machines and versions: workload keys,
// structural hashes and the host compile cache are pinned to it.
//
// Threads: pure functions, callable from any thread.

#include <cstdint>
#include <string_view>

namespace tessel::schedules {

inline constexpr uint64_t kFnv1a64Offset = 0xcbf29ce484222325ULL;
inline constexpr uint64_t kFnv1a64Prime = 0x100000001b3ULL;

// The hash of `bytes`, continuing from `hash` (the offset basis starts a new hash; passing a
// previous result hashes the concatenation).
inline uint64_t Fnv1a64(std::string_view bytes, uint64_t hash = kFnv1a64Offset) {
  for (const char c : bytes) {
    hash ^= static_cast<unsigned char>(c);
    hash *= kFnv1a64Prime;
  }
  return hash;
}

}  // namespace tessel::schedules
