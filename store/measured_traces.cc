#include "store/measured_traces.h"

#include <algorithm>
#include <deque>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "schedules/util/status_macros.h"
#include "schedules/workload/builtins.h"
#include "schedules/workload/key.h"
#include "schedules/workload/parser.h"

namespace tessel::store {

absl::StatusOr<schedules::Workload> WorkloadFromLog(TuningLog* log, const std::string& key) {
  TESSEL_ASSIGN_OR_RETURN(std::optional<WorkloadRow> row, log->GetWorkload(key));
  if (!row) {
    return absl::NotFoundError(absl::StrCat("workload ", key, " is not in the log ", log->path()));
  }
  absl::StatusOr<schedules::Workload> w = schedules::ParseWorkloadText(row->spec);
  if (w.ok() && schedules::WorkloadKey(*w) == key) return w;
  w = schedules::ParseWorkload(row->canonical);
  if (!w.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("workload ", key, " (", row->name,
                                                   ") no longer parses: ", w.status().message()));
  }
  return w;
}

measure::MeasuredTrace MeasuredTraceOf(const Record& record) {
  return {record.uid, record.workload_key, record.trace_json, record.measurement};
}

absl::StatusOr<std::vector<measure::MeasuredTrace>> RecentTracesOfTarget(
    TuningLog* log, const std::string& target_key, int64_t max_records) {
  std::deque<measure::MeasuredTrace> traces;
  TESSEL_RETURN_IF_ERROR(log->ForEachRecordOfTarget(target_key, [&](const Record& r) {
    traces.push_back(MeasuredTraceOf(r));
    if (static_cast<int64_t>(traces.size()) > std::max<int64_t>(0, max_records)) {
      traces.pop_front();
    }
    return true;
  }));
  return std::vector<measure::MeasuredTrace>(std::make_move_iterator(traces.begin()),
                                             std::make_move_iterator(traces.end()));
}

absl::StatusOr<RecordedWorkload> LoadRecordedWorkload(TuningLog* log,
                                                      const std::string& workload_key,
                                                      const std::string& target_key) {
  TESSEL_ASSIGN_OR_RETURN(std::optional<WorkloadRow> row, log->GetWorkload(workload_key));
  if (!row) {
    return absl::NotFoundError(
        absl::StrCat("the tuning log ", log->path(), " has no workload with key ", workload_key,
                     ": record some with `tessel tune --db ", log->path(), "` first"));
  }
  absl::StatusOr<schedules::Workload> workload = WorkloadFromLog(log, workload_key);
  if (!workload.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat(log->path(), ": ", workload.status().message()));
  }
  RecordedWorkload out{*std::move(workload), {}};
  TESSEL_RETURN_IF_ERROR(log->ForEachRecordOfTarget(target_key, [&](const Record& r) {
    if (r.workload_key == workload_key && r.trace_json != "null") {
      out.traces.push_back(MeasuredTraceOf(r));
    }
    return true;
  }));
  if (out.traces.empty()) {
    return absl::NotFoundError(
        absl::StrCat("the tuning log ", log->path(), " has no records of ", row->spec, " on ",
                     target_key, ": record some with `tessel tune --db ", log->path(), "` first"));
  }
  return out;
}

}  // namespace tessel::store
