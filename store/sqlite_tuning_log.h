#pragma once

// The SQLite implementation of the tuning log (tuning_log.h): its schema, the migrations that
// bring an older file forward, and the opening checks.
//
// A Tessel log is an SQLite file whose PRAGMA application_id is kTuningLogApplicationId and whose
// PRAGMA user_version is its schema version. It is kept in WAL mode with synchronous=NORMAL: a
// committed transaction survives a crash of the process (not necessarily a power loss), and
// readers do not block the writer. Foreign keys are enforced.
//
// Tables: workloads(key PK, canonical, name, spec); jobs; tasks (job_id -> jobs, workload_key
// -> workloads, the job's baseline for the workload: baseline_ms, 0 when none, baseline_label);
// records (uid UNIQUE, job_id -> jobs and task_id -> tasks, NULL when 0, UNIQUE(task_id,
// candidate_id) where task_id is set, event and CUPTI kernel repeats as JSON text, counters NULL
// when not collected, timing_kind 1 confirmed or 2 screened); artifacts (record_id PK);
// cost_models. Indexes: records(workload_key, target_key, status, median_ms) for top-k and
// best-of, records(task_id, candidate_id) for the records of a task, records(target_key, id) for
// a target's records, cost_models(target_key, kind, id).
//
// Threads: free functions, callable from any thread.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "store/tuning_log.h"

namespace tessel::store {

// PRAGMA application_id of a Tessel log: "TSLG".
inline constexpr int32_t kTuningLogApplicationId = 0x54534C47;

// One step of the schema: the SQL that takes a log from version - 1 to `version`. Open runs every
// step above the file's version, in order, in one transaction, then sets user_version.
struct Migration {
  int version = 0;  // 1, 2, ... in order
  std::string description;
  std::string sql;
};

// The schema of this build: version 1 creates every table. A later schema appends a step.
const std::vector<Migration>& TuningLogMigrations();
// The version the last step produces.
int LatestSchemaVersion(const std::vector<Migration>& migrations = TuningLogMigrations());

// OpenTuningLog with an explicit migration list (tests add a step to check the mechanism).
absl::StatusOr<std::unique_ptr<TuningLog>> OpenSqliteTuningLog(
    const std::string& path, const TuningLogOptions& options,
    const std::vector<Migration>& migrations);

}  // namespace tessel::store
