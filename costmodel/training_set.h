#pragma once

// Cost-model examples rebuilt from the tuning log, and transfer: a model trained on every record
// of a target (DESIGN.md section 5), which a new job starts from.
//
// A record becomes an example by replaying its trace on its workload ("null" is the reference
// lowering), lowering and verifying it for the target (schedules::BuildCandidate) and extracting
// the features of the program (features.h); its latency is its median when ok, a failure
// otherwise. Workloads are rebuilt from the log once per key (the spec first, as the server
// does, then the canonical text); records whose workload or trace no longer builds are skipped
// and counted, never fatal.
//
// Threads: free functions; callable from any thread (the TuningLog is thread-safe).

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "costmodel/cost_model.h"
#include "schedules/target/target.h"
#include "schedules/workload/workload.h"
#include "store/tuning_log.h"

namespace tessel::costmodel {

// The example of one record of `workload` on `target`. Errors (InvalidArgument) name the record
// and say whether its trace does not parse or its candidate does not build.
absl::StatusOr<Example> ExampleFromRecord(const store::Record& record,
                                          const schedules::Workload& workload,
                                          const schedules::Target& target);

// The workload of `key` as stored in the log: NotFound when the log has no such workload,
// InvalidArgument when neither its spec nor its canonical text parses any more.
absl::StatusOr<schedules::Workload> WorkloadFromLog(store::TuningLog* log, const std::string& key);

// The family of a workload for transfer: its name up to the first '_' ("matmul_bias_gelu" and
// "matmul" are "matmul", "conv2d_bias_relu" is "conv2d", "softmax" is "softmax"; user
// definitions are "custom"). A model transfers within a family: on the H100 log of bench/data,
// a model trained on both matmuls first took softmax's replay from 4 trials to reach 95% of the
// best to 63, while one trained on the matmuls took matmul from 77 trials to 4.
std::string WorkloadFamily(const std::string& workload_name);

struct TrainingSetStats {
  int64_t records = 0;           // records of the target read (the most recent max_records)
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

// Examples of the most recent `max_records` records of `target` (key target.ToString()), every
// workload. Errors only when the log cannot be read.
// With `family` (WorkloadFamily), only the records of workloads of that family.
absl::StatusOr<TrainingSet> LoadTrainingSet(store::TuningLog* log, const schedules::Target& target,
                                            int64_t max_records = 20000,
                                            const std::string& family = "");

// Transfer: a model of `kind` (MakeCostModel) updated with LoadTrainingSet's examples. It is
// trained when there are at least options.warmup_examples of them, and untrained (random scores)
// when the log has fewer or none. `stats`, when given, says what was used and skipped. With
// `family`, only the records of that workload family (the server's choice: see WorkloadFamily).
absl::StatusOr<std::unique_ptr<CostModel>> ModelForTarget(
    store::TuningLog* log, const schedules::Target& target, const std::string& kind,
    const CostModelOptions& options, int64_t max_records = 20000, TrainingSetStats* stats = nullptr,
    const std::string& family = "");

}  // namespace tessel::costmodel
