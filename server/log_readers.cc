#include "server/log_readers.h"

#include <utility>
#include <vector>

#include "measure/measured_trace.h"
#include "schedules/util/status_macros.h"
#include "store/measured_traces.h"

namespace tessel::server {

absl::StatusOr<costmodel::TrainingSet> TrainingSetOfLog(store::TuningLog* log,
                                                        const schedules::Target& target,
                                                        int64_t max_records,
                                                        const std::string& family) {
  TESSEL_ASSIGN_OR_RETURN(std::vector<measure::MeasuredTrace> traces,
                          store::RecentTracesOfTarget(log, target.ToString(), max_records));
  return costmodel::BuildTrainingSet(
      traces, [log](const std::string& key) { return store::WorkloadFromLog(log, key); }, target,
      family);
}

absl::StatusOr<search::ReplaySpace> ReplaySpaceOfLog(store::TuningLog* log,
                                                     const std::string& workload_key,
                                                     const schedules::Target& target) {
  TESSEL_ASSIGN_OR_RETURN(store::RecordedWorkload recorded,
                          store::LoadRecordedWorkload(log, workload_key, target.ToString()));
  return search::MakeReplaySpace(std::move(recorded.workload), target, recorded.traces);
}

}  // namespace tessel::server
