#pragma once

// What measuring one candidate produced (DESIGN.md section 3, MeasureResult): a status kept apart
// from the timings, every repeat, compile time, kernel resources, and who measured it. The one
// shape of a measurement inside Tessel: the worker produces it, the server receives it
// (proto/convert.h at the edge), the tuning log stores it with its keys (store::Record), and the
// search strategies and the cost model learn from it.

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "measure/artifact.h"
#include "measure/resources.h"
#include "measure/status.h"
#include "measure/timing.h"

namespace tessel::measure {

// Where the worker's wall time for one candidate went, in milliseconds (the worker's side of the
// live loop's timeline, issue 21; compile_ms and verify_ms are Measurement's own). Durations on
// the worker's steady clock; 0 when unknown (a worker of an older release).
struct WorkerTimes {
  double queue_ms = 0;         // from the batch's arrival until its device started this candidate
  double compile_wait_ms = 0;  // of that device time, waiting for the candidate's compilation
  double timing_ms = 0;        // the timing (screening and, when confirmed, the full measurement)
  double device_ms = 0;        // the device's whole time on it: compile wait, verify, time, IPC

  bool operator==(const WorkerTimes&) const = default;
};

struct Measurement {
  MeasureStatus status = MeasureStatus::kOk;
  std::string error;  // empty when ok; the compiler's log for a compile error
  Timings timings;    // empty unless ok
  double compile_ms = 0;
  bool compile_cache_hit = false;
  double verify_ms = 0;
  std::vector<KernelResources> kernels;  // CUDA: what the loader reported
  std::string worker_id;
  int device = 0;
  std::string device_name;
  // What was run, for ok results of a worker that keeps it (measure/artifact.h); empty otherwise.
  Artifact artifact;
  WorkerTimes worker_times;

  bool ok() const { return status == MeasureStatus::kOk; }
  // The latency when ok (Timings::latency_ms: the CUPTI kernel median where there is one, else
  // the event median), 0 otherwise: what a search, a cost model and a task's best rank by.
  double latency_ms() const { return ok() ? timings.latency_ms() : 0; }
  // An ok result that got the full measurement (a task's best is always one).
  bool confirmed() const { return ok() && timings.kind == TimingKind::kConfirmed; }

  // A measurement with `status`'s status (MeasureStatusOf) and message.
  static Measurement FromStatus(const absl::Status& status);
};

}  // namespace tessel::measure
