#pragma once

// Kernel packs (issue 19): what an application ships instead of its tuning log. A pack is a
// tuning log (the same schema, so every reader opens packs and logs alike) that holds, for each
// workload asked for, only the fastest ok record per (target, device) with its artifact, and
// those workloads; no jobs, tasks or cost models. It is written in rollback-journal mode (one
// self-contained file, no -wal beside it), vacuumed, and renamed into place whole.
//
// Threads: free functions, callable from any thread.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "schedules/workload/workload.h"
#include "store/tuning_log.h"

namespace tessel::store {

struct PackedKernel {
  std::string workload_label;  // store::WorkloadLabel
  std::string target_key;
  std::string device_name;
  std::string uid;
  double median_ms = 0;
  bool has_artifact = false;  // false: a record stored without its source and binary
};

// Writes the pack of `workloads` from `log` to `out_path` (replacing a file there). NotFound,
// writing nothing, when a workload has no ok record in the log; InvalidArgument when `workloads`
// is empty or `out_path` is the log itself.
absl::StatusOr<std::vector<PackedKernel>> WriteKernelPack(
    TuningLog* log, const std::vector<schedules::Workload>& workloads, const std::string& out_path);

}  // namespace tessel::store
