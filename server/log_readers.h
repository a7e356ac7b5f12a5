#pragma once

// What the cost model and the search need from the tuning log, read from it: the one place where
// the log's records (store/measured_traces.h) meet the cost model (costmodel/training_set.h) and
// replay (search/replay.h), neither of which reads the log itself. Used by the job manager
// (transfer), `tessel costmodel eval` and the benchmarks.
//
// Threads: callable from any thread (the TuningLog is thread-safe).

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "costmodel/training_set.h"
#include "schedules/target/target.h"
#include "search/replay.h"
#include "store/tuning_log.h"

namespace tessel::server {

// Examples of the most recent `max_records` records of `target` (key target.ToString()), every
// workload, their workloads rebuilt from the log (store::WorkloadFromLog). Errors only when the
// log cannot be read. With `family` (costmodel::WorkloadFamily), only the records of workloads of
// that family.
absl::StatusOr<costmodel::TrainingSet> TrainingSetOfLog(store::TuningLog* log,
                                                        const schedules::Target& target,
                                                        int64_t max_records = 20000,
                                                        const std::string& family = "");

// The replay space of `workload_key` on `target` (store::LoadRecordedWorkload, then
// search::MakeReplaySpace): NotFound naming the workload and target, with how to record some,
// when the log has none of its records.
absl::StatusOr<search::ReplaySpace> ReplaySpaceOfLog(store::TuningLog* log,
                                                     const std::string& workload_key,
                                                     const schedules::Target& target);

}  // namespace tessel::server
