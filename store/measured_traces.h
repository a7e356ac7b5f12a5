#pragma once

// The tuning log read back in the vocabulary of the layers above it: workloads as
// schedules::Workload, records as measure::MeasuredTrace. What a cost model trains on
// (costmodel/training_set.h) and a replay searches (search/replay.h): neither reads the log.
//
// Threads: free functions; callable from any thread (the TuningLog is thread-safe).

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "measure/measured_trace.h"
#include "schedules/space/candidate.h"
#include "schedules/target/target.h"
#include "schedules/workload/workload.h"
#include "store/tuning_log.h"

namespace tessel::store {

// The workload of `key` as stored in the log (the spec first, as the server does, then the
// canonical text): NotFound when the log has no such workload, InvalidArgument when neither its
// spec nor its canonical text parses any more.
absl::StatusOr<schedules::Workload> WorkloadFromLog(TuningLog* log, const std::string& key);
// The same for a row at hand (InvalidArgument when it does not parse).
absl::StatusOr<schedules::Workload> WorkloadOfRow(const WorkloadRow& row);

// A record as a measured trace (its uid, workload key, trace and measurement).
measure::MeasuredTrace MeasuredTraceOf(const Record& record);

// The most recent `max_records` records of the target of key `target_key` (every workload), in
// id order. Errors only when the log cannot be read.
absl::StatusOr<std::vector<measure::MeasuredTrace>> RecentTracesOfTarget(
    TuningLog* log, const std::string& target_key, int64_t max_records);

// A record and its candidate, rebuilt here from its trace.
struct ReplayedRecord {
  Record record;
  schedules::Candidate candidate;
};

// The fastest ok record of (workload, target) whose trace replays here (ReplayTrace), with its
// candidate: what `best` answers. A faster record that does not replay (a trace this build cannot
// read, or one that no longer builds) is passed over and told to `skipped` (a line naming it and
// why). nullopt when the log has no ok record of them; FailedPrecondition when none of the
// fastest replays.
absl::StatusOr<std::optional<ReplayedRecord>> BestReplayingRecord(
    TuningLog* log, const schedules::Workload& workload, const schedules::Target& target,
    const std::function<void(const std::string&)>& skipped);

// What the log recorded of one workload on one target: the design space of a replay.
struct RecordedWorkload {
  schedules::Workload workload;
  std::vector<measure::MeasuredTrace> traces;  // in id order; the reference lowering excluded
};

// The records of `workload_key` on `target_key`. NotFound naming the workload and target, with
// how to record some, when the log has none; FailedPrecondition when the workload no longer
// parses.
absl::StatusOr<RecordedWorkload> LoadRecordedWorkload(TuningLog* log,
                                                      const std::string& workload_key,
                                                      const std::string& target_key);

}  // namespace tessel::store
