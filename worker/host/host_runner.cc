#include "worker/host/host_runner.h"
#include "schedules/util/elapsed.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"

namespace tessel::worker {
namespace {

using schedules::MsSince;

namespace fs = std::filesystem;

constexpr int64_t kDefaultLlcBytes = int64_t{64} << 20;
constexpr int64_t kMinFlushBytes = int64_t{32} << 20;

std::string ReadTrimmed(const fs::path& path) {
  std::ifstream in(path);
  std::string s;
  std::getline(in, s);
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

// "32768K" / "8M" / "1G" -> bytes; 0 when unreadable.
int64_t ParseCacheSize(std::string s) {
  if (s.empty()) return 0;
  int64_t mult = 1;
  const char unit = s.back();
  if (unit == 'K') mult = int64_t{1} << 10;
  if (unit == 'M') mult = int64_t{1} << 20;
  if (unit == 'G') mult = int64_t{1} << 30;
  if (mult != 1) s.pop_back();
  int64_t v = 0;
  if (!absl::SimpleAtoi(s, &v)) return 0;
  return v * mult;
}

int64_t ComputeLlcBytes() {
  std::error_code ec;
  const fs::path cpus("/sys/devices/system/cpu");
  int best_level = 0;
  int64_t total = 0;
  std::set<std::string> seen;  // (level, shared_cpu_list) of each counted instance
  for (const fs::directory_entry& cpu : fs::directory_iterator(cpus, ec)) {
    const std::string name = cpu.path().filename().string();
    if (name.rfind("cpu", 0) != 0 || name.size() < 4 || !std::isdigit(name[3])) continue;
    for (const fs::directory_entry& index : fs::directory_iterator(cpu.path() / "cache", ec)) {
      if (index.path().filename().string().rfind("index", 0) != 0) continue;
      const std::string type = ReadTrimmed(index.path() / "type");
      if (type == "Instruction") continue;
      int level = 0;
      if (!absl::SimpleAtoi(ReadTrimmed(index.path() / "level"), &level)) continue;
      const int64_t size = ParseCacheSize(ReadTrimmed(index.path() / "size"));
      if (size <= 0 || level < best_level) continue;
      if (level > best_level) {
        best_level = level;
        total = 0;
        seen.clear();
      }
      const std::string shared = ReadTrimmed(index.path() / "shared_cpu_list");
      if (seen.insert(shared).second) total += size;
    }
  }
  return total > 0 ? total : kDefaultLlcBytes;
}

struct Flusher {
  absl::Mutex mu;
  std::vector<uint8_t> buffer ABSL_GUARDED_BY(mu);
};

volatile uint64_t g_flush_sink = 0;

}  // namespace

int64_t HostLastLevelCacheBytes() {
  static const int64_t bytes = ComputeLlcBytes();
  return bytes;
}

void FlushHostCaches() {
  static Flusher* flusher = new Flusher();
  absl::MutexLock lock(&flusher->mu);
  std::vector<uint8_t>& buf = flusher->buffer;
  if (buf.empty()) {
    buf.resize(static_cast<size_t>(std::max(kMinFlushBytes, 2 * HostLastLevelCacheBytes())), 1);
  }
  uint8_t* p = buf.data();
  const int64_t n = static_cast<int64_t>(buf.size());
  uint64_t sum = 0;
#pragma omp parallel for schedule(static) reduction(+ : sum)
  for (int64_t i = 0; i < n; i += 64) {
    p[i] = static_cast<uint8_t>(p[i] + 1);
    sum += p[i];
  }
  g_flush_sink = g_flush_sink + sum;
}

absl::Status RunHostModule(const HostModule& module, HostBuffers* buffers) {
  if (static_cast<int>(buffers->size()) != module.num_buffers()) {
    return absl::InvalidArgumentError(
        absl::StrCat("host program '", module.entry_name(), "' takes ", module.num_buffers(),
                     " buffers but got ", buffers->size(),
                     ": allocate them with AllocateHostBuffers from the same GeneratedSource"));
  }
  std::vector<void*> ptrs = buffers->Pointers();
  module.Call(ptrs.data());
  return absl::OkStatus();
}

absl::StatusOr<measure::Timings> TimeHostModule(const HostModule& module, HostBuffers* buffers,
                                                const measure::TimingOptions& options) {
  if (options.max_repeats < 1 || options.min_repeats > options.max_repeats) {
    return absl::InvalidArgumentError(
        absl::StrCat("timing repeats: min ", options.min_repeats, ", max ", options.max_repeats,
                     ": max_repeats must be at least 1 and at least min_repeats"));
  }
  if (static_cast<int>(buffers->size()) != module.num_buffers()) {
    return RunHostModule(module, buffers);  // the error message
  }
  std::vector<void*> ptrs = buffers->Pointers();
  for (int i = 0; i < options.warmup_runs; ++i) module.Call(ptrs.data());
  std::vector<double> repeats;
  double total = 0;
  const auto wall_start = std::chrono::steady_clock::now();
  while (!measure::EnoughRepeats(options, repeats, total)) {
    if (static_cast<int>(repeats.size()) >= options.min_repeats &&
        MsSince(wall_start) >= options.max_wall_ms) {
      break;
    }
    if (options.flush_cache) FlushHostCaches();
    const auto start = std::chrono::steady_clock::now();
    module.Call(ptrs.data());
    const double ms = MsSince(start);
    repeats.push_back(ms);
    total += ms;
  }
  return measure::MakeTimings(std::move(repeats));
}

}  // namespace tessel::worker
