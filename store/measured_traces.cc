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
#include "store/record_check.h"

namespace tessel::store {

absl::StatusOr<schedules::Workload> WorkloadFromLog(TuningLog* log, const std::string& key) {
  TESSEL_ASSIGN_OR_RETURN(std::optional<WorkloadRow> row, log->GetWorkload(key));
  if (!row) {
    return absl::NotFoundError(absl::StrCat("workload ", key, " is not in the log ", log->path()));
  }
  return WorkloadOfRow(*row);
}

absl::StatusOr<schedules::Workload> WorkloadOfRow(const WorkloadRow& row) {
  absl::StatusOr<schedules::Workload> w = schedules::ParseWorkloadText(row.spec);
  if (w.ok() && schedules::WorkloadKey(*w) == row.key) return w;
  w = schedules::ParseWorkload(row.canonical);
  if (!w.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("workload ", row.key, " (", row.name,
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

absl::StatusOr<std::optional<ReplayedRecord>> BestReplayingRecord(
    TuningLog* log, const schedules::Workload& workload, const schedules::Target& target,
    const std::function<void(const std::string&)>& skipped) {
  constexpr int kFastest = 64;  // how far down the ranking a replaying record is looked for
  TESSEL_ASSIGN_OR_RETURN(std::vector<Record> top,
                          log->TopK(schedules::WorkloadKey(workload), target.ToString(), kFastest));
  if (top.empty()) return std::optional<ReplayedRecord>();
  absl::Status first;
  for (Record& r : top) {
    absl::StatusOr<schedules::Candidate> c = ReplayTrace(workload, target, r.trace_json);
    if (c.ok()) return std::optional<ReplayedRecord>(ReplayedRecord{std::move(r), *std::move(c)});
    if (first.ok()) first = c.status();
    skipped(absl::StrCat("record ", r.uid, " of ", log->path(),
                         " is passed over: ", c.status().message()));
  }
  return absl::FailedPreconditionError(absl::StrCat(
      "none of the ", top.size(), " fastest ok records of ", workload.spec, " on ",
      target.ToString(), " in ", log->path(), " replays here; the fastest: ", first.message(),
      "; tune it again with this release"));
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
