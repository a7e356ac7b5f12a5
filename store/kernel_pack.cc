#include "store/kernel_pack.h"

#include <sqlite3.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "schedules/util/status_macros.h"
#include "schedules/workload/key.h"
#include "store/deploy_lookup.h"
#include "store/sqlite_statement.h"

namespace tessel::store {
namespace {

// A pack is one file: back to a rollback journal (no -wal or -shm beside it), and compact (4 KiB
// pages: a pack is mostly small tables).
absl::Status MakeSelfContained(const std::string& path) {
  sqlite3* db = nullptr;
  int rc = sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE, nullptr);
  absl::Status st = rc == SQLITE_OK
                        ? Exec(db, "PRAGMA journal_mode = DELETE; PRAGMA page_size = 4096; VACUUM")
                        : SqliteError(db, rc, absl::StrCat("cannot open ", path));
  sqlite3_close_v2(db);
  return st;
}

void RemovePackFiles(const std::string& path) {
  for (const char* suffix : {"", "-wal", "-shm", "-journal"}) {
    std::remove((path + suffix).c_str());
  }
}

}  // namespace

absl::StatusOr<std::vector<PackedKernel>> WriteKernelPack(
    TuningLog* log, const std::vector<schedules::Workload>& workloads,
    const std::string& out_path) {
  if (workloads.empty()) {
    return absl::InvalidArgumentError("a kernel pack needs at least one workload (-w SPEC)");
  }
  std::error_code ec;
  if (std::filesystem::equivalent(out_path, log->path(), ec)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--out ", out_path, " is the tuning log itself; pass a new file"));
  }
  // Gather first: nothing is written unless every workload has a kernel.
  std::vector<WorkloadRow> rows;
  std::vector<Record> records;
  std::vector<PackedKernel> packed;
  for (const schedules::Workload& w : workloads) {
    const std::string key = schedules::WorkloadKey(w);
    TESSEL_ASSIGN_OR_RETURN(std::vector<RecordGroup> groups, log->OkRecordGroups(key));
    TESSEL_ASSIGN_OR_RETURN(std::optional<WorkloadRow> row, log->GetWorkload(key));
    if (groups.empty() || !row) {
      return absl::NotFoundError(absl::StrCat("no ok record of ", WorkloadLabel(w), " (key ", key,
                                              ") in ", log->path(),
                                              "; tune it first (tessel tune or tessel submit)"));
    }
    rows.push_back(*std::move(row));
    for (const RecordGroup& g : groups) {
      TESSEL_ASSIGN_OR_RETURN(std::vector<Record> top,
                              log->TopKOnDevice(key, g.target_key, g.device_name, 1));
      if (top.empty()) continue;  // only bad rows: skipped with a warning by the reader
      std::optional<Record> best = std::move(top[0]);
      TESSEL_ASSIGN_OR_RETURN(std::optional<measure::Artifact> artifact,
                              log->GetArtifact(best->id));
      if (artifact) best->measurement.artifact = *std::move(artifact);
      best->id = 0;
      best->job_id = 0;
      best->task_id = 0;
      packed.push_back(PackedKernel{WorkloadLabel(w), g.target_key, g.device_name, best->uid,
                                    best->measurement.timings.median_ms,
                                    best->measurement.artifact.stored()});
      records.push_back(*std::move(best));
    }
  }
  const std::string tmp = out_path + ".tmp";
  RemovePackFiles(tmp);
  absl::Status st = [&]() -> absl::Status {
    {
      TESSEL_ASSIGN_OR_RETURN(std::unique_ptr<TuningLog> pack, OpenTuningLog(tmp));
      for (const WorkloadRow& row : rows) TESSEL_RETURN_IF_ERROR(pack->PutWorkload(row));
      TESSEL_RETURN_IF_ERROR(pack->AddRecords(&records));
    }
    TESSEL_RETURN_IF_ERROR(MakeSelfContained(tmp));
    std::filesystem::rename(tmp, out_path, ec);
    if (ec) {
      return absl::InternalError(
          absl::StrCat("cannot move the pack into place at ", out_path, ": ", ec.message()));
    }
    return absl::OkStatus();
  }();
  if (!st.ok()) {
    RemovePackFiles(tmp);
    return absl::Status(st.code(),
                        absl::StrCat("writing the kernel pack ", out_path, ": ", st.message()));
  }
  for (const char* suffix : {"-wal", "-shm"}) std::remove((out_path + suffix).c_str());
  return packed;
}

}  // namespace tessel::store
