#pragma once

// Cost-model examples rebuilt from measured traces (the tuning log's records, which the caller
// reads: store/measured_traces.h), and transfer: a model trained on every record of a target
// (DESIGN.md section 5), which a new job starts from.
//
// A measured trace becomes an example by replaying its trace on its workload ("null" is the
// reference lowering), lowering and verifying it for the target (schedules::BuildCandidate) and
// extracting the features of the program (features.h); its latency is its median when ok, a failure
// otherwise. Workloads are looked up once per key (the caller's WorkloadLookup); records whose
// workload or trace no longer builds are skipped and counted, never fatal.
//
// Threads: free functions; callable from any thread.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "costmodel/cost_model.h"
#include "measure/measured_trace.h"
#include "schedules/target/target.h"
#include "schedules/workload/workload.h"

namespace tessel::costmodel {

// The example of one measured trace of `workload` on `target`. Errors (InvalidArgument) name the
// record and say whether its trace does not parse or its candidate does not build.
absl::StatusOr<Example> ExampleFromTrace(const measure::MeasuredTrace& measured,
                                         const schedules::Workload& workload,
                                         const schedules::Target& target);

// The workload of a key (e.g. store::WorkloadFromLog): NotFound or InvalidArgument when there is
// none or it no longer parses (its records are skipped); any other error is fatal.
using WorkloadLookup = std::function<absl::StatusOr<schedules::Workload>(const std::string& key)>;

// The family of a workload for transfer: its name up to the first '_' ("matmul_bias_gelu" and
// "matmul" are "matmul", "conv2d_bias_relu" is "conv2d", "softmax" is "softmax"; user
// definitions are "custom"). A model transfers within a family: on the H100 log of bench/data,
// a model trained on both matmuls first took softmax's replay from 4 trials to reach 95% of the
// best to 63, while one trained on the matmuls took matmul from 77 trials to 4.
std::string WorkloadFamily(const std::string& workload_name);

struct TrainingSetStats {
  int64_t records = 0;           // measured traces given
  int64_t examples = 0;          // of them, turned into examples
  int64_t skipped_workload = 0;  // their workload is missing from the log or no longer parses
  int64_t skipped_trace = 0;     // their trace does not parse or no longer builds
  int64_t other_family = 0;      // their workload is of another family than the one asked for
  int64_t workloads = 0;         // distinct workloads among the examples
  double features_ms = 0;        // spent rebuilding candidates and extracting features
};

struct TrainingSet {
  std::vector<Example> examples;  // in record id order
  TrainingSetStats stats;
};

// Examples of `traces` (every workload; e.g. store::RecentTracesOfTarget's), on `target`.
// Errors only when `workload_of` fails otherwise than WorkloadLookup allows.
// With `family` (WorkloadFamily), only the records of workloads of that family.
absl::StatusOr<TrainingSet> BuildTrainingSet(const std::vector<measure::MeasuredTrace>& traces,
                                             const WorkloadLookup& workload_of,
                                             const schedules::Target& target,
                                             const std::string& family = "");

// Transfer: a model of `kind` (MakeCostModel) updated with the examples of `set`. It is trained
// when there are at least options.warmup_examples of them, and untrained (random scores) when
// there are fewer or none.
absl::StatusOr<std::unique_ptr<CostModel>> ModelForTarget(const TrainingSet& set,
                                                          const std::string& kind,
                                                          const CostModelOptions& options);

}  // namespace tessel::costmodel
