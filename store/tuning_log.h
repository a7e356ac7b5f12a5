#pragma once

// The tuning log: every measurement Tessel makes, in one SQLite file (WAL mode), with the jobs
// and tasks that asked for them, the workloads they measured and the cost models trained on them
// (DESIGN.md sections 1 and 3). Every record is committed in its own transaction (or a batch of
// them in one) before AddRecord(s) returns: a crash never leaves a half-written record, and a
// record the caller was told is stored survives a crash of the process.
//
// Schema versions: the file carries its schema version (PRAGMA user_version) and an
// application id; Open migrates an older Tessel log forward in one transaction, and refuses a
// newer one or a file that is not a Tessel log, saying so.
//
// Threads: a TuningLog may be used from any number of threads at once (it serializes its
// statements internally). Several processes may open one file; SQLite's locking applies.

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "measure/measurement.h"

namespace tessel::store {

enum class JobState : uint8_t { kQueued, kRunning, kDone, kCancelled, kFailed };
const char* JobStateName(JobState s);  // "queued", "running", "done", "cancelled", "failed"
bool IsFinished(JobState s);           // done, cancelled or failed

struct WorkloadRow {
  std::string key;        // schedules::WorkloadKey
  std::string canonical;  // schedules::CanonicalText: enough to rebuild the workload
  std::string name;       // family ("matmul") or "custom"
  std::string spec;       // the spec or definition it was first submitted as
};

struct JobRow {
  int64_t id = 0;  // assigned by CreateJob
  std::string name;
  std::string target_kind;  // "cuda" or "host"
  std::string target_arch;  // "sm_90"; empty for the host
  std::string target_key;   // schedules::Target::ToString(): "cuda -arch=sm_90", "host"
  std::string strategy;     // "random", ...
  int priority = 0;
  int64_t trials_budget = 0;  // over all tasks
  double time_budget_s = 0;   // 0: none
  uint64_t seed = 0;
  int batch_size = 0;
  JobState state = JobState::kQueued;
  std::string error;
  int64_t created_unix_ms = 0;
  int64_t finished_unix_ms = 0;  // 0 while unfinished
  std::string submitted_by;      // the name of the token that submitted it; empty without tokens
};

struct TaskRow {
  int64_t id = 0;  // assigned by CreateJob
  int64_t job_id = 0;
  std::string workload_key;
  int64_t trials_budget = 0;
  JobState state = JobState::kQueued;
  // What the job was told this workload takes elsewhere (PyTorch eager, cuBLAS), to compare its
  // best against: 0 when the job was given no baseline for it. `baseline_label` names it.
  double baseline_ms = 0;
  std::string baseline_label;
};

struct Record {
  int64_t id = 0;   // assigned by AddRecord(s)
  std::string uid;  // globally unique; assigned when empty; import skips a uid it has
  std::string workload_key;
  std::string target_key;
  int64_t job_id = 0;         // 0: not from a job of this log (imported)
  int64_t task_id = 0;        // 0 likewise
  uint64_t candidate_id = 0;  // unique within its task: (task_id, candidate_id) is stored once
  std::string trace_json;     // schedules::Trace JSON; "null" for the reference lowering
  int64_t unix_ms = 0;        // when measured; set to now when 0
  // What was measured. AddRecord(s) and import also store measurement.artifact (in the
  // artifacts table) of an ok record that is the fastest of its workload, target and device when
  // it is added (the only records a deploy-time lookup answers with); readers leave it empty
  // (GetArtifact reads it). The log keeps its
  // status, error, every repeat and the median (empty and 0 unless ok), every CUPTI kernel time
  // and their median, the hardware counters when collected, the clocks and temperature, the
  // timing's note and kind (screened or confirmed), compile and verify times, worker and device,
  // and of the kernels' resources the peak (measure::PeakOf); read back, the timings' min and
  // max are the repeats' and the kernels are one unnamed kernel with the peak
  // (measure::KernelsOfPeak).
  measure::Measurement measurement;
};

// How many ok records of a workload one (target, device) has: what a lookup that found nothing
// names (OkRecordGroups).
struct RecordGroup {
  std::string workload_key;
  std::string target_key;
  std::string device_name;
  int64_t ok_records = 0;
};

struct TaskCounts {
  int64_t trials = 0;  // records of every status
  int64_t ok = 0;
  double best_ms = 0;  // 0 when none is ok
};

struct CostModelRow {
  int64_t id = 0;
  std::string target_key;
  std::string kind;         // "xgboost", ...
  int feature_version = 0;  // of the features it was trained on
  std::string blob;         // the model's bytes
  std::string meta_json;    // whatever its owner records (records trained on, metrics)
  int64_t unix_ms = 0;
};

// A stored record that readers skip: it cannot be read back, or CheckRecord (store/record_check.h)
// refuses it (a log written before those checks, or changed by hand).
struct BadRecord {
  int64_t id = 0;
  std::string uid;
  std::string workload_key;
  std::string target_key;
  std::string problem;  // why it is skipped
};

struct ImportStats {
  int64_t workloads_added = 0;
  int64_t records_added = 0;
  int64_t records_skipped = 0;  // uid already present
};

struct JsonlImportOptions {
  // Also parse every workload and replay every record's trace (the cost of lowering each record
  // once): what `tessel import` does with a file from elsewhere.
  bool replay = false;
};

class TuningLog {
 public:
  virtual ~TuningLog() = default;

  // Workloads: idempotent by key (the first spec is kept).
  virtual absl::Status PutWorkload(const WorkloadRow& w) = 0;
  virtual absl::StatusOr<std::optional<WorkloadRow>> GetWorkload(const std::string& key) = 0;

  // Jobs and tasks. CreateJob stores the job and its tasks in one transaction and fills in
  // their ids (the workloads must have been put).
  virtual absl::Status CreateJob(JobRow* job, std::vector<TaskRow>* tasks) = 0;
  // NotFound naming the job when there is none.
  virtual absl::Status SetJobState(int64_t job_id, JobState state,
                                   const std::string& error = "") = 0;
  virtual absl::Status SetTaskState(int64_t task_id, JobState state) = 0;
  virtual absl::StatusOr<JobRow> GetJob(int64_t job_id) = 0;  // NotFound naming the id
  virtual absl::StatusOr<std::vector<TaskRow>> TasksOf(int64_t job_id) = 0;
  // Newest first.
  virtual absl::StatusOr<std::vector<JobRow>> ListJobs(bool unfinished_only) = 0;

  // Records. AddRecord commits one record in one transaction and returns its id;
  // AlreadyExists when its (task_id, candidate_id) is stored (task_id 0 is never a duplicate).
  // AddRecords commits all in one transaction (all or none; duplicates are skipped and their id
  // left 0) and fills in the ids.
  virtual absl::StatusOr<int64_t> AddRecord(Record* r) = 0;
  virtual absl::Status AddRecords(std::vector<Record>* rs) = 0;
  virtual absl::StatusOr<TaskCounts> CountsOf(int64_t task_id) = 0;
  virtual absl::StatusOr<std::vector<Record>> RecordsOf(int64_t task_id) = 0;
  // Screening (issue 21): TopK, Best, TopKOnDevice, CountsOf's best_ms and the artifact kept for
  // deploy-time lookups read confirmed records only (measure::TimingKind::kConfirmed), so that
  // every best, of a task, a device or across jobs, is a full measurement. CountsOf's ok counts
  // screened records too. "Fastest" is by measure::Measurement::latency_ms (the CUPTI kernel
  // median where a record has one, else the event median; the log's latency_ms column).
  // The k fastest ok records of (workload, target), fastest first.
  virtual absl::StatusOr<std::vector<Record>> TopK(const std::string& workload_key,
                                                   const std::string& target_key, int k) = 0;
  // The fastest ok record, or nullopt.
  virtual absl::StatusOr<std::optional<Record>> Best(const std::string& workload_key,
                                                     const std::string& target_key) = 0;
  // The k fastest ok records of (workload, target) measured on the device named `device_name`,
  // fastest first.
  virtual absl::StatusOr<std::vector<Record>> TopKOnDevice(const std::string& workload_key,
                                                           const std::string& target_key,
                                                           const std::string& device_name,
                                                           int k) = 0;
  // What was run for record `record_id` (measure::Artifact), or nullopt when it has none (a
  // record of a log from before artifacts, a failed measurement, an old worker's result).
  // Records read back by the other readers carry no artifact: ask for it here.
  virtual absl::StatusOr<std::optional<measure::Artifact>> GetArtifact(int64_t record_id) = 0;
  // The ok records of `workload_key` (every workload when empty) counted per (target, device),
  // in order of workload, target and device.
  virtual absl::StatusOr<std::vector<RecordGroup>> OkRecordGroups(
      const std::string& workload_key) = 0;
  // The ok records of (workload, target) that the readers read: a bad row is not counted.
  virtual absl::StatusOr<int64_t> CountOk(const std::string& workload_key,
                                          const std::string& target_key) = 0;
  // Every record of a target (any workload), in id order, streamed to `fn` (stop by returning
  // false): what a cost model trains on.
  //
  // Every reader of records (RecordsOf, TopK, Best, CountOk, CountsOf' ok and best,
  // ForEachRecordOfTarget, ExportJsonl) skips a
  // bad row (BadRecord) and reports it once per open log through TuningLogOptions::on_bad_row:
  // one bad row never stops a reader.
  virtual absl::Status ForEachRecordOfTarget(const std::string& target_key,
                                             const std::function<bool(const Record&)>& fn) = 0;

  // The bad rows (see BadRecord) of the whole log, in id order.
  virtual absl::StatusOr<std::vector<BadRecord>> BadRecords() = 0;
  // Moves the records `bad` names (by id) out of the records table into quarantined_records, in
  // one transaction: nothing is lost, and no reader sees them any more. quarantined_records is
  // made by the first quarantine: the columns of records plus `reason` (BadRecord::problem) and
  // `quarantined_unix_ms`. Returns how many moved (ids no longer stored are passed over).
  virtual absl::StatusOr<int64_t> QuarantineRecords(const std::vector<BadRecord>& bad) = 0;

  // Cost models: the newest of (target, kind) is what LatestCostModel returns.
  virtual absl::StatusOr<int64_t> SaveCostModel(CostModelRow* m) = 0;
  virtual absl::StatusOr<std::optional<CostModelRow>> LatestCostModel(const std::string& target_key,
                                                                      const std::string& kind) = 0;

  // JSON lines: one {"type": "workload", ...} line per workload, then one {"type": "record", ...}
  // per record (job and task ids are not exported; the uid is; a record's artifact is its
  // "artifact" object, with the binary in base64). Import adds what it does not
  // have, in one transaction; a malformed line fails the import with its line number and
  // nothing is added. A record must pass CheckRecord (store/record_check.h); with
  // `options.replay`, every workload must parse and every record's trace replay on its workload
  // (given earlier in the file or already stored; CheckReplays).
  virtual absl::Status ExportJsonl(std::ostream& out) = 0;
  virtual absl::StatusOr<ImportStats> ImportJsonl(std::istream& in,
                                                  const JsonlImportOptions& options = {}) = 0;

  virtual std::string path() const = 0;
};

struct TuningLogOptions {
  bool read_only = false;  // deploy-time queries: no writes, no migration (a stale log is an error)
  int busy_timeout_ms = 5000;
  // Told of each bad row a reader skips, once per row and open log, with a line naming the row,
  // the problem and the fix. Unset: the line goes to stderr. Called with the log's lock held:
  // it must not call into the log.
  std::function<void(const std::string&)> on_bad_row;
};

// Opens the log at `path`, creating it (and its schema) when missing unless read_only. A writer
// is refused at once, saying which, when the file or its folder is not writable for this user
// (SQLite writes -wal and -shm files beside the log). A reader also reads a log it cannot write
// beside (a read-only folder, another user's log), as the file stands, unless writes are still
// waiting in its -wal file.
absl::StatusOr<std::unique_ptr<TuningLog>> OpenTuningLog(const std::string& path,
                                                         const TuningLogOptions& options = {});

}  // namespace tessel::store
