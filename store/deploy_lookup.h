#pragma once

// Deploy-time lookup (issue 19): the kernel to run for a workload on a device, from a tuning log
// or a kernel pack, with a stated fallback: the fastest ok record measured on the same device
// (by name), else the fastest of the same target (the same architecture: "cuda -arch=sm_90", or
// "host"), else nothing, with an error naming what the log has. Every answer says which match it
// used, and carries what was measured (measure::Artifact): the stored source and binary, or, for a
// record stored without them (a log from before artifacts), a source regenerated from its trace,
// marked as such.
//
// Threads: free functions, callable from any thread (the TuningLog is thread-safe).

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "measure/artifact.h"
#include "schedules/target/target.h"
#include "schedules/workload/workload.h"
#include "store/tuning_log.h"

namespace tessel::store {

enum class DeployMatch : uint8_t { kDevice, kArchitecture };
const char* DeployMatchName(DeployMatch m);  // "same device", "same architecture"

struct DeployQuery {
  schedules::Workload workload;
  schedules::Target target;  // its ToString() is the records' target key
  std::string device_name;   // the device to run on; empty: any device of the target
  // Told of each faster record passed over (stored without its artifact, and its trace does not
  // rebuild here), with a line naming it and why. May be empty.
  std::function<void(const std::string&)> skipped;
};

struct DeployedKernel {
  Record record;  // its measurement.artifact is `artifact` below
  DeployMatch match = DeployMatch::kArchitecture;
  // The stored artifact, or one regenerated here from the record's trace (no binary) when the
  // record has none.
  measure::Artifact artifact;
  bool regenerated = false;
  int64_t ok_records = 0;  // ok records of (workload, target) in the log, every device
  std::string log_path;

  // "same device (NVIDIA H100 80GB HBM3)", or "same architecture (cuda -arch=sm_90), measured on
  // NVIDIA H200; no record of NVIDIA H100 80GB HBM3": the match, in words.
  std::string MatchDescription(const DeployQuery& query) const;
};

// The kernel of `query` in `log` (above): at each level, the fastest of the 64 fastest ok records
// that has its artifact or whose trace rebuilds here (a faster one that has neither is passed
// over and told to `query.skipped`). NotFound when the log has no ok record of the workload on
// the target, naming the workload and key, the target and the device, and listing the targets
// and devices the log has records of for that workload (or saying it has none of it).
// FailedPrecondition when none of them can be used.
absl::StatusOr<DeployedKernel> FindDeployedKernel(TuningLog* log, const DeployQuery& query);

// The kernel for a device that runs the records of several targets (a 9.0 GPU runs those of
// cuda -arch=sm_90 and cuda -arch=sm_90a: schedules::KnownCudaArchsRunnableOn); `queries` (at
// least one) differ in their target only. Each target's answer as above, and the best of them: a
// same-device match before a same-architecture one, then the fastest. When no target has one,
// the first error that is not NotFound, else the first query's NotFound, naming the other
// targets too.
absl::StatusOr<DeployedKernel> FindDeployedKernelOfAny(TuningLog* log,
                                                       const std::vector<DeployQuery>& queries);

// The workload as a user recognizes it: its one-line spec, or its name for a definition.
std::string WorkloadLabel(const schedules::Workload& workload);

}  // namespace tessel::store
