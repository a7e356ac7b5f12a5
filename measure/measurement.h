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

  bool ok() const { return status == MeasureStatus::kOk; }
  // The median latency when ok, 0 otherwise: what a search or a cost model ranks by.
  double latency_ms() const { return ok() ? timings.median_ms : 0; }

  // A measurement with `status`'s status (MeasureStatusOf) and message.
  static Measurement FromStatus(const absl::Status& status);
};

}  // namespace tessel::measure
