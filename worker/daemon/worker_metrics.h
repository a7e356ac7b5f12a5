#pragma once

// A worker daemon's own metrics (`tessel worker --http ADDR`, /metrics, Prometheus text format):
// its devices, whether it is connected, the batches it holds, its compile pool (threads,
// compilations, cache hits and the hit ratio), each device's measuring-process restarts, and
// the results it sent by status with the seconds each candidate took. The daemon feeds it
// (WorkerOptions::metrics); Render may be called at any time.
//
// Threads: every method may be called from any thread (one internal mutex).

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "measure/measurement.h"
#include "worker/compile_pool.h"

namespace tessel::worker {

struct WorkerDeviceInfo {
  int ordinal = 0;
  std::string kind;  // "cuda" or "host"
  std::string name;
  std::string arch;  // empty for the host
};

class WorkerMetrics {
 public:
  void SetIdentity(const std::string& worker_id, const std::string& server);
  void SetDevices(std::vector<WorkerDeviceInfo> devices);
  void SetCompileThreads(int threads);
  void SetConnected(bool connected);
  void SetBatchesHeld(int batches);
  // A result sent for a candidate measured on `ordinal`, with the pool's stats after it and the
  // times the device's measuring process has been started (the first start is no restart).
  void OnResult(int ordinal, const measure::Measurement& result, const CompilePoolStats& pool,
                int child_starts);

  std::string Render();

 private:
  absl::Mutex mu_;
  std::string worker_id_ ABSL_GUARDED_BY(mu_);
  std::string server_ ABSL_GUARDED_BY(mu_);
  std::vector<WorkerDeviceInfo> devices_ ABSL_GUARDED_BY(mu_);
  int compile_threads_ ABSL_GUARDED_BY(mu_) = 0;
  bool connected_ ABSL_GUARDED_BY(mu_) = false;
  int64_t connects_ ABSL_GUARDED_BY(mu_) = 0;
  int batches_held_ ABSL_GUARDED_BY(mu_) = 0;
  CompilePoolStats pool_ ABSL_GUARDED_BY(mu_);
  std::map<int, int> child_starts_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, int64_t> results_ ABSL_GUARDED_BY(mu_);
  double measure_s_sum_ ABSL_GUARDED_BY(mu_) = 0;
  double compile_s_sum_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace tessel::worker
