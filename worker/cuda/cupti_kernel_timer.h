#pragma once

// Kernel durations from CUPTI activity records (DESIGN.md section 6): the GPU's own start and end
// time stamps of every kernel (CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL), without the launch overhead
// and the gaps that CUDA events around a launch include.
//
// CUPTI's activity API is per process: one CuptiKernelTimer serves the whole process (the worker
// measures in a child process per device, so it is that child's). Activity buffers are handed to
// CUPTI from a request callback and read back in a completion callback (any thread); Begin()
// discards what was recorded before it, End() forces a flush and returns the kernels that ran on
// the given stream since Begin().
//
// Builds without CUPTI (no TESSEL_HAVE_CUPTI) compile this file too: Get() then says so.
// Threads: Get() from any thread; Begin/End from one thread at a time, in pairs.

#include <cuda.h>

#include <cstdint>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace tessel::worker {

// One kernel execution as CUPTI recorded it.
struct CuptiKernelRecord {
  uint32_t stream_id = 0;
  uint32_t correlation_id = 0;
  uint64_t start_ns = 0;
  uint64_t end_ns = 0;
  double duration_ms() const { return static_cast<double>(end_ns - start_ns) * 1e-6; }
};

class CuptiKernelTimer {
 public:
  // The process's timer, or why kernel times cannot be had (built without CUPTI; libcupti failed
  // to register its callbacks or to enable kernel activity, e.g. another profiler holds it).
  static absl::StatusOr<CuptiKernelTimer*> Get();

  // Starts collecting the kernels that run on `stream` of `context` (current on this thread).
  absl::Status Begin(CUcontext context, CUstream stream);
  // Waits for CUPTI to deliver every record (the caller has synchronized the stream), and returns
  // the kernels of the stream given to Begin, in order of their start.
  absl::StatusOr<std::vector<CuptiKernelRecord>> End();

  // Called from CUPTI's completion callback (any thread).
  void Add(const CuptiKernelRecord& record, uint64_t dropped);

 private:
  CuptiKernelTimer() = default;

  absl::Mutex mu_;
  bool collecting_ ABSL_GUARDED_BY(mu_) = false;
  uint32_t stream_id_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<CuptiKernelRecord> records_ ABSL_GUARDED_BY(mu_);
  uint64_t dropped_ ABSL_GUARDED_BY(mu_) = 0;
};

// Each timed repeat's kernel time: `kernels` (in order, every kernel of every repeat) split into
// `repeats` equal groups, each group's durations summed. Fails, saying why, when the count of
// kernels is not a multiple of `repeats` (records lost, or a region whose kernel count varies).
absl::StatusOr<std::vector<double>> KernelTimesPerRepeat(
    const std::vector<CuptiKernelRecord>& kernels, size_t repeats);

}  // namespace tessel::worker
