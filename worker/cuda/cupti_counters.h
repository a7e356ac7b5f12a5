#pragma once

// Hardware counters of a region of kernel launches (DESIGN.md section 3, MeasureResult's optional
// hardware counters): DRAM bytes read and written and the achieved occupancy, from CUPTI's Range
// Profiler API (cupti_range_profiler.h, CUDA 12.6+) with the metrics evaluated by CUPTI's profiler
// host API (cupti_profiler_host.h; libcupti loads libnvperf_host.so from the library path at run
// time, so nothing more is linked).
//
// One CuptiCounters profiles one CUDA context, in one user range (every kernel launched between
// Begin() and End() counts) with user replay: when the metrics need more hardware passes than
// one, the caller runs the same region again, Begin/End around each run, until done(). Then
// Values() evaluates every metric over the whole region, and the object can collect again.
// The region's kernels must be deterministic in the work they do (the same launches each pass);
// metrics that fit in one pass (the three of measure::HardwareCounters on Hopper and Ampere) need
// no replay.
//
// Profiling needs privileges: as a non-root user the driver must allow it
// (NVreg_RestrictProfilingToAdminUsers=0); otherwise Create() returns PermissionDenied saying so.
// No other profiler (ncu, nsys with GPU metrics) may hold the device. Every failure is a Status,
// never a crash. Builds without CUPTI (no TESSEL_HAVE_CUPTI) compile this file too: Create() then
// says so. $TESSEL_NO_CUPTI=1 turns CUPTI off here as it does for the kernel timer.
//
// Threads: one thread at a time per object, with `ctx` current on it for every call; the region's
// launches go to `ctx`. Lifetime: destroy the CuptiCounters before the context.

#include <cuda.h>

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "measure/measurement.h"

namespace tessel::worker {

// The metrics of measure::HardwareCounters (names as Nsight Compute and CUPTI spell them).
inline constexpr char kDramReadBytesMetric[] = "dram__bytes_read.sum";
inline constexpr char kDramWriteBytesMetric[] = "dram__bytes_write.sum";
// Achieved occupancy: active warps per active cycle over the SM's maximum, in percent.
inline constexpr char kAchievedOccupancyMetric[] =
    "sm__warps_active.avg.pct_of_peak_sustained_active";

// The metric names measure::HardwareCounters is made of, in the order above.
std::vector<std::string> HardwareCounterMetrics();

// measure::HardwareCounters from CuptiCounters::Values() of (at least) HardwareCounterMetrics();
// fails, naming the metric, when one is missing or not a finite number.
absl::StatusOr<measure::HardwareCounters> HardwareCountersFromValues(
    const std::map<std::string, double>& values);

class CuptiCounters {
 public:
  // Prepares collecting `metrics` on `ctx` (current on this thread): checks that the device
  // supports profiling, that every metric exists on its chip (an unknown name fails with
  // InvalidArgument listing the chip's metrics of the same unit), builds the configuration and
  // enables the range profiler on the context. PermissionDenied without the privilege to profile,
  // FailedPrecondition on a device or setup that cannot be profiled (vGPU without profiling,
  // confidential compute, CMP, WSL, an architecture CUPTI cannot profile), Unimplemented without
  // CUPTI.
  static absl::StatusOr<std::unique_ptr<CuptiCounters>> Create(
      CUcontext ctx, const std::vector<std::string>& metrics);

  CuptiCounters(const CuptiCounters&) = delete;
  CuptiCounters& operator=(const CuptiCounters&) = delete;
  // Disables the range profiler on the context.
  ~CuptiCounters();

  const std::vector<std::string>& metrics() const { return metrics_; }
  const std::string& chip() const { return chip_; }
  // How many times the region must run (Begin/End pairs) for one collection.
  int passes() const { return passes_; }
  // True once every pass has run: Values() may be called.
  bool done() const { return done_; }

  // Starts a pass: every kernel launched on the context from now until End() counts.
  absl::Status Begin();
  // Ends the pass. The caller has waited for the region's kernels (synchronized its streams).
  absl::Status End();
  // Each metric's value over the region (after done()); the object is then ready to collect again.
  absl::StatusOr<std::map<std::string, double>> Values();

  // Runs `region` (which launches the kernels and waits for them) once per pass, between Begin
  // and End, and returns Values(). `before_pass` (when given) runs before each Begin, outside
  // the profiled range (e.g. an L2 flush). A failure of either is returned as it is.
  absl::StatusOr<std::map<std::string, double>> Collect(
      const std::function<absl::Status()>& region,
      const std::function<absl::Status()>& before_pass = nullptr);

 private:
  struct Cupti;  // CUPTI's objects and images (defined only with TESSEL_HAVE_CUPTI)
  CuptiCounters();

  std::unique_ptr<Cupti> cupti_;
  CUcontext ctx_ = nullptr;
  std::vector<std::string> metrics_;
  std::string chip_;
  int passes_ = 1;
  int pass_ = 0;  // passes run in the current collection
  bool in_pass_ = false;
  bool done_ = false;
};

// The three measure::HardwareCounters of `region` on `ctx` (current on this thread): Create,
// Collect, HardwareCountersFromValues. `region` launches the kernels and waits for them; it runs
// once per pass needed (once on Hopper and Ampere), each after `before_pass` when given.
absl::StatusOr<measure::HardwareCounters> CollectHardwareCounters(
    CUcontext ctx, const std::function<absl::Status()>& region,
    const std::function<absl::Status()>& before_pass = nullptr);

}  // namespace tessel::worker
