#include "store/sqlite_tuning_log.h"

#include <sqlite3.h>
#include <sys/stat.h>

#include <unistd.h>

#include <chrono>
#include <cstring>
#include <iostream>
#include <istream>
#include <limits>
#include <map>
#include <ostream>
#include <random>
#include <set>

#include "absl/base/thread_annotations.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "measure/measurement.h"
#include "nlohmann/json.hpp"
#include "schedules/codegen/source_json.h"
#include "schedules/util/check.h"
#include "schedules/util/status_macros.h"
#include "store/measured_traces.h"
#include "store/record_check.h"
#include "store/sqlite_statement.h"

namespace tessel::store {
namespace {

using nlohmann::json;

int64_t NowUnixMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// `text` as an error quotes it: whole when short, else its start and its size (a field of an
// import or a row can be megabytes).
std::string Quoted(const std::string& text) {
  constexpr size_t kMax = 80;
  if (text.size() <= kMax) return text;
  return absl::StrCat(text.substr(0, kMax - 3), "... (", text.size(), " bytes)");
}

absl::StatusOr<JobState> ParseJobState(const std::string& s) {
  for (JobState st : {JobState::kQueued, JobState::kRunning, JobState::kDone, JobState::kCancelled,
                      JobState::kFailed}) {
    if (s == JobStateName(st)) return st;
  }
  return absl::DataLossError(absl::StrCat("unknown job state '", Quoted(s), "' in the tuning log"));
}

const char* const kSchemaV1 = R"sql(
CREATE TABLE workloads (
  key TEXT PRIMARY KEY NOT NULL,
  canonical TEXT NOT NULL,
  name TEXT NOT NULL DEFAULT '',
  spec TEXT NOT NULL DEFAULT ''
) WITHOUT ROWID;
CREATE TABLE jobs (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  name TEXT NOT NULL DEFAULT '',
  target_kind TEXT NOT NULL,
  target_arch TEXT NOT NULL DEFAULT '',
  target_key TEXT NOT NULL,
  strategy TEXT NOT NULL DEFAULT '',
  priority INTEGER NOT NULL DEFAULT 0,
  trials_budget INTEGER NOT NULL DEFAULT 0,
  time_budget_s REAL NOT NULL DEFAULT 0,
  seed INTEGER NOT NULL DEFAULT 0,
  batch_size INTEGER NOT NULL DEFAULT 0,
  state TEXT NOT NULL,
  error TEXT NOT NULL DEFAULT '',
  created_unix_ms INTEGER NOT NULL,
  finished_unix_ms INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX jobs_state ON jobs(state);
CREATE TABLE tasks (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  job_id INTEGER NOT NULL REFERENCES jobs(id),
  workload_key TEXT NOT NULL REFERENCES workloads(key),
  trials_budget INTEGER NOT NULL DEFAULT 0,
  state TEXT NOT NULL
);
CREATE INDEX tasks_job ON tasks(job_id);
CREATE TABLE records (
  id INTEGER PRIMARY KEY,
  uid TEXT NOT NULL UNIQUE,
  workload_key TEXT NOT NULL,
  target_key TEXT NOT NULL,
  job_id INTEGER REFERENCES jobs(id),
  task_id INTEGER REFERENCES tasks(id),
  candidate_id INTEGER NOT NULL DEFAULT 0,
  trace TEXT NOT NULL,
  status TEXT NOT NULL,
  error TEXT NOT NULL DEFAULT '',
  repeats_ms TEXT NOT NULL DEFAULT '[]',
  median_ms REAL NOT NULL DEFAULT 0,
  compile_ms REAL NOT NULL DEFAULT 0,
  verify_ms REAL NOT NULL DEFAULT 0,
  registers INTEGER NOT NULL DEFAULT 0,
  shared_bytes INTEGER NOT NULL DEFAULT 0,
  local_bytes INTEGER NOT NULL DEFAULT 0,
  worker_id TEXT NOT NULL DEFAULT '',
  device_name TEXT NOT NULL DEFAULT '',
  device INTEGER NOT NULL DEFAULT 0,
  unix_ms INTEGER NOT NULL
);
CREATE UNIQUE INDEX records_task_candidate ON records(task_id, candidate_id)
  WHERE task_id IS NOT NULL;
CREATE INDEX records_best ON records(workload_key, target_key, status, median_ms);
CREATE INDEX records_target ON records(target_key, id);
CREATE TABLE cost_models (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  target_key TEXT NOT NULL,
  kind TEXT NOT NULL,
  feature_version INTEGER NOT NULL DEFAULT 0,
  blob BLOB NOT NULL,
  meta_json TEXT NOT NULL DEFAULT '',
  unix_ms INTEGER NOT NULL
);
CREATE INDEX cost_models_latest ON cost_models(target_key, kind, id);
)sql";

// Version 2: a job records the name of the token that submitted it (tessel serve --tokens); empty
// for jobs submitted without tokens and for every job of a version-1 log.
const char* const kSchemaV2 = R"sql(
ALTER TABLE jobs ADD COLUMN submitted_by TEXT NOT NULL DEFAULT '';
)sql";

// Version 3 (issue 19): what was measured, so that a record reproduces its measurement: the
// source exactly as compiled, its launch configuration, the binary, the code generator's version,
// the toolchain, driver and device (measure::Artifact). One row per record that has one (ok
// records of workers that send it); kept apart from records so that readers of records (the cost
// model's training scans) do not page through sources and binaries. No foreign key: a quarantined
// record keeps its artifact.
const char* const kSchemaV3 = R"sql(
CREATE TABLE artifacts (
  record_id INTEGER PRIMARY KEY NOT NULL,
  codegen_version INTEGER NOT NULL,
  source TEXT NOT NULL,
  launch_json TEXT NOT NULL,
  binary_format TEXT NOT NULL DEFAULT '',
  binary_arch TEXT NOT NULL DEFAULT '',
  binary BLOB NOT NULL DEFAULT x'',
  compile_options TEXT NOT NULL DEFAULT '',
  compiler_version TEXT NOT NULL DEFAULT '',
  driver_version TEXT NOT NULL DEFAULT '',
  device_arch TEXT NOT NULL DEFAULT '',
  multiprocessor_count INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX records_device ON records(workload_key, target_key, device_name, status, median_ms);
)sql";

// Version 4 (issue 22): a task keeps the baseline the job was given for its workload (the
// latency of PyTorch eager or cuBLAS on it, and that name), which the dashboard draws as a line
// on the task's tuning curve. 0 and '' (no baseline) for every task of an older log. Self-contained
// (two columns with defaults) so that its place in the list of steps may move.
const char* const kSchemaV4 = R"sql(
ALTER TABLE tasks ADD COLUMN baseline_ms REAL NOT NULL DEFAULT 0;
ALTER TABLE tasks ADD COLUMN baseline_label TEXT NOT NULL DEFAULT '';
)sql";

// Version 5 (issue 21): every figure the worker measured stays with its record. The CUPTI kernel
// times (each repeat's, as JSON like repeats_ms, and their median); the hardware counters, NULL
// when they were not collected (all three or none); the SM and memory clocks (MHz) and the GPU
// temperature (degrees C) right after the timed repeats, 0 when unknown; the timing's note (why
// a figure is missing); and how the timing was made (measure::TimingKind: 1 confirmed, the full
// measurement every older record got; 2 screened). Self-contained: only columns of records.
const char* const kSchemaV5 = R"sql(
ALTER TABLE records ADD COLUMN kernel_repeats_ms TEXT NOT NULL DEFAULT '[]';
ALTER TABLE records ADD COLUMN kernel_median_ms REAL NOT NULL DEFAULT 0;
ALTER TABLE records ADD COLUMN dram_read_bytes REAL;
ALTER TABLE records ADD COLUMN dram_write_bytes REAL;
ALTER TABLE records ADD COLUMN achieved_occupancy REAL;
ALTER TABLE records ADD COLUMN sm_clock_mhz INTEGER NOT NULL DEFAULT 0;
ALTER TABLE records ADD COLUMN memory_clock_mhz INTEGER NOT NULL DEFAULT 0;
ALTER TABLE records ADD COLUMN temperature_c INTEGER NOT NULL DEFAULT 0;
ALTER TABLE records ADD COLUMN timing_note TEXT NOT NULL DEFAULT '';
ALTER TABLE records ADD COLUMN timing_kind INTEGER NOT NULL DEFAULT 1;
)sql";

// Version 6 (issue 21): what a record ranks by, measure::Timings::latency_ms: the CUPTI kernel
// median where the record has one, else the event median. A virtual column (computed when read,
// so that it can never disagree with the two it comes from, and every older record has it) with
// the indexes of the best and of a device's best on it instead of on median_ms.
const char* const kSchemaV6 = R"sql(
ALTER TABLE records ADD COLUMN latency_ms REAL GENERATED ALWAYS AS
  (CASE WHEN kernel_median_ms > 0 THEN kernel_median_ms ELSE median_ms END) VIRTUAL;
DROP INDEX records_best;
CREATE INDEX records_best ON records(workload_key, target_key, status, latency_ms);
DROP INDEX records_device;
CREATE INDEX records_device ON records(workload_key, target_key, device_name, status, latency_ms);
)sql";

constexpr char kArtifactColumns[] =
    "codegen_version, source, launch_json, binary_format, binary_arch, binary, compile_options, "
    "compiler_version, driver_version, device_arch, multiprocessor_count";

measure::Artifact ReadArtifact(const Statement& s) {
  measure::Artifact a;
  a.codegen_version = static_cast<int>(s.Int(0));
  a.source = s.Text(1);
  a.launch_json = s.Text(2);
  a.binary_format = s.Text(3);
  a.binary_arch = s.Text(4);
  a.binary = s.Text(5);
  a.compile_options = s.Text(6);
  a.compiler_version = s.Text(7);
  a.driver_version = s.Text(8);
  a.device_arch = s.Text(9);
  a.multiprocessor_count = static_cast<int>(s.Int(10));
  return a;
}

json ArtifactToJson(const measure::Artifact& a) {
  json launch = json::parse(a.launch_json, nullptr, /*allow_exceptions=*/false);
  return json{{"codegen_version", a.codegen_version},
              {"source", a.source},
              {"launch", launch.is_discarded() ? json(a.launch_json) : launch},
              {"binary_format", a.binary_format},
              {"binary_arch", a.binary_arch},
              {"binary_base64", absl::Base64Escape(a.binary)},
              {"compile_options", a.compile_options},
              {"compiler_version", a.compiler_version},
              {"driver_version", a.driver_version},
              {"device_arch", a.device_arch},
              {"multiprocessor_count", a.multiprocessor_count}};
}

constexpr char kRecordColumns[] =
    "id, uid, workload_key, target_key, job_id, task_id, candidate_id, trace, status, error, "
    "repeats_ms, median_ms, compile_ms, verify_ms, registers, shared_bytes, local_bytes, "
    "worker_id, device_name, device, unix_ms, kernel_repeats_ms, kernel_median_ms, "
    "dram_read_bytes, dram_write_bytes, achieved_occupancy, sm_clock_mhz, memory_clock_mhz, "
    "temperature_c, timing_note, timing_kind";

constexpr char kInsertRecord[] =
    "INSERT INTO records (uid, workload_key, target_key, job_id, task_id, candidate_id, trace, "
    "status, error, repeats_ms, median_ms, compile_ms, verify_ms, registers, shared_bytes, "
    "local_bytes, worker_id, device_name, device, unix_ms, kernel_repeats_ms, kernel_median_ms, "
    "dram_read_bytes, dram_write_bytes, achieved_occupancy, sm_clock_mhz, memory_clock_mhz, "
    "temperature_c, timing_note, timing_kind) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, "
    "?, ?) ON CONFLICT DO NOTHING";

constexpr char kJobColumns[] =
    "id, name, target_kind, target_arch, target_key, strategy, priority, trials_budget, "
    "time_budget_s, seed, batch_size, state, error, created_unix_ms, finished_unix_ms, "
    "submitted_by";

std::string RepeatsToJson(const std::vector<double>& repeats) { return json(repeats).dump(); }

// The repeats of column `column` (repeats_ms, kernel_repeats_ms) as RepeatsToJson wrote them.
absl::StatusOr<std::vector<double>> RepeatsFromJson(const std::string& text,
                                                    const char* column = "repeats_ms") {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_array()) {
    return absl::DataLossError(
        absl::StrCat("malformed ", column, " in the tuning log: ", Quoted(text)));
  }
  std::vector<double> out;
  out.reserve(j.size());
  for (const json& v : j) {
    if (!v.is_number()) {
      return absl::DataLossError(absl::StrCat("malformed ", column, ": ", Quoted(text)));
    }
    out.push_back(v.get<double>());
  }
  return out;
}

absl::StatusOr<Record> ReadRecord(const Statement& s) {
  Record r;
  r.id = s.Int(0);
  r.uid = s.Text(1);
  r.workload_key = s.Text(2);
  r.target_key = s.Text(3);
  r.job_id = s.Int(4);
  r.task_id = s.Int(5);
  r.candidate_id = static_cast<uint64_t>(s.Int(6));
  r.trace_json = s.Text(7);
  measure::Measurement& m = r.measurement;
  const std::optional<measure::MeasureStatus> status = measure::ParseMeasureStatus(s.Text(8));
  if (!status) return absl::DataLossError("unknown status in the tuning log: " + Quoted(s.Text(8)));
  m.status = *status;
  m.error = s.Text(9);
  TESSEL_ASSIGN_OR_RETURN(std::vector<double> repeats, RepeatsFromJson(s.Text(10)));
  m.timings = measure::MakeTimings(std::move(repeats));
  m.timings.median_ms = s.Double(11);
  m.compile_ms = s.Double(12);
  m.verify_ms = s.Double(13);
  m.kernels = measure::KernelsOfPeak({static_cast<int>(s.Int(14)), s.Int(15), s.Int(16)});
  m.worker_id = s.Text(17);
  m.device_name = s.Text(18);
  m.device = static_cast<int>(s.Int(19));
  r.unix_ms = s.Int(20);
  TESSEL_ASSIGN_OR_RETURN(m.timings.kernel_repeats_ms,
                          RepeatsFromJson(s.Text(21), "kernel_repeats_ms"));
  m.timings.kernel_median_ms = s.Double(22);
  // The counters were collected when their columns are set (all three are written together).
  if (!s.IsNull(23) || !s.IsNull(24) || !s.IsNull(25)) {
    if (s.IsNull(23) || s.IsNull(24) || s.IsNull(25)) {
      return absl::DataLossError(
          "hardware counters in the tuning log are partly NULL (dram_read_bytes, "
          "dram_write_bytes and achieved_occupancy are written together)");
    }
    m.timings.counters = measure::HardwareCounters{s.Double(23), s.Double(24), s.Double(25)};
  }
  m.timings.device_state = measure::DeviceState{
      static_cast<int>(s.Int(26)), static_cast<int>(s.Int(27)), static_cast<int>(s.Int(28))};
  m.timings.note = s.Text(29);
  const std::optional<measure::TimingKind> kind = measure::TimingKindOfNumber(s.Int(30));
  if (!kind) {
    return absl::DataLossError(absl::StrCat("unknown timing_kind ", s.Int(30),
                                            " in the tuning log (1 confirmed, 2 screened)"));
  }
  m.timings.kind = *kind;
  return r;
}

absl::StatusOr<JobRow> ReadJob(const Statement& s) {
  JobRow j;
  j.id = s.Int(0);
  j.name = s.Text(1);
  j.target_kind = s.Text(2);
  j.target_arch = s.Text(3);
  j.target_key = s.Text(4);
  j.strategy = s.Text(5);
  j.priority = static_cast<int>(s.Int(6));
  j.trials_budget = s.Int(7);
  j.time_budget_s = s.Double(8);
  j.seed = static_cast<uint64_t>(s.Int(9));
  j.batch_size = static_cast<int>(s.Int(10));
  TESSEL_ASSIGN_OR_RETURN(j.state, ParseJobState(s.Text(11)));
  j.error = s.Text(12);
  j.created_unix_ms = s.Int(13);
  j.finished_unix_ms = s.Int(14);
  j.submitted_by = s.Text(15);
  return j;
}

// The "counters" of a record's JSON line: an object when they were collected, else null.
json CountersToJson(const std::optional<measure::HardwareCounters>& c) {
  if (!c) return json(nullptr);
  return json{{"dram_read_bytes", c->dram_read_bytes},
              {"dram_write_bytes", c->dram_write_bytes},
              {"achieved_occupancy", c->achieved_occupancy}};
}

// The JSON-lines form of a record (tuning_log.h): job and task ids are left out.
json RecordToJson(const Record& r) {
  const measure::Measurement& m = r.measurement;
  const measure::PeakResources peak = measure::PeakOf(m.kernels);
  json trace = json::parse(r.trace_json, nullptr, /*allow_exceptions=*/false);
  return json{{"type", "record"},
              {"uid", r.uid},
              {"workload_key", r.workload_key},
              {"target_key", r.target_key},
              {"candidate_id", r.candidate_id},
              {"trace", trace.is_discarded() ? json(r.trace_json) : trace},
              {"status", measure::MeasureStatusName(m.status)},
              {"error", m.error},
              {"repeats_ms", m.timings.repeats_ms},
              {"median_ms", m.timings.median_ms},
              {"compile_ms", m.compile_ms},
              {"verify_ms", m.verify_ms},
              {"registers", peak.registers},
              {"shared_bytes", peak.shared_bytes},
              {"local_bytes", peak.local_bytes},
              {"worker_id", m.worker_id},
              {"device_name", m.device_name},
              {"device", m.device},
              {"unix_ms", r.unix_ms},
              {"kernel_repeats_ms", m.timings.kernel_repeats_ms},
              {"kernel_median_ms", m.timings.kernel_median_ms},
              {"counters", CountersToJson(m.timings.counters)},
              {"sm_clock_mhz", m.timings.device_state.sm_clock_mhz},
              {"memory_clock_mhz", m.timings.device_state.memory_clock_mhz},
              {"temperature_c", m.timings.device_state.temperature_c},
              {"timing_note", m.timings.note},
              {"timing_kind", measure::TimingKindName(m.timings.kind)}};
}

// Reads the fields of one JSON-lines object, naming the field and what was expected.
class FieldReader {
 public:
  explicit FieldReader(const json& j) : j_(j) {}

  absl::Status String(const char* name, bool required, std::string* out) {
    auto it = j_.find(name);
    if (it == j_.end()) return Missing(name, required);
    if (!it->is_string()) return WrongType(name, *it, "a string");
    *out = it->get<std::string>();
    return absl::OkStatus();
  }
  template <typename T>
  absl::Status Number(const char* name, bool required, T* out) {
    auto it = j_.find(name);
    if (it == j_.end()) return Missing(name, required);
    if (!it->is_number()) return WrongType(name, *it, "a number");
    if constexpr (std::is_integral_v<T>) {
      if (!it->is_number_integer()) return WrongType(name, *it, "an integer");
    }
    *out = it->get<T>();
    return absl::OkStatus();
  }
  absl::Status Repeats(const char* name, bool required, std::vector<double>* out) {
    auto it = j_.find(name);
    if (it == j_.end()) return Missing(name, required);
    if (!it->is_array()) return WrongType(name, *it, "an array of numbers");
    out->clear();
    for (const json& v : *it) {
      if (!v.is_number()) return WrongType(name, *it, "an array of numbers");
      out->push_back(v.get<double>());
    }
    return absl::OkStatus();
  }
  // A JSON value kept as its compact text ("null" included); required.
  absl::Status Json(const char* name, std::string* out) {
    auto it = j_.find(name);
    if (it == j_.end()) return Missing(name, true);
    *out = it->dump();
    return absl::OkStatus();
  }

 private:
  absl::Status Missing(const char* name, bool required) {
    if (!required) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrCat("missing field '", name, "'"));
  }
  absl::Status WrongType(const char* name, const json& v, const char* expected) {
    return absl::InvalidArgumentError(
        absl::StrCat("field '", name, "' is ", v.type_name(), ", expected ", expected));
  }
  const json& j_;
};

// The "artifact" object of a JSON-lines record (ArtifactToJson), checked: a positive code
// generator version, a source, a launch configuration that reads back, a binary in base64.
absl::StatusOr<measure::Artifact> ArtifactFromJson(const json& j) {
  FieldReader f(j);
  measure::Artifact a;
  auto bad = [](const absl::Status& st) {
    return absl::InvalidArgumentError(absl::StrCat("artifact: ", st.message()));
  };
  absl::Status st = f.Number("codegen_version", true, &a.codegen_version);
  if (st.ok()) st = f.String("source", true, &a.source);
  if (st.ok()) st = f.Json("launch", &a.launch_json);
  std::string binary_base64;
  if (st.ok()) st = f.String("binary_format", false, &a.binary_format);
  if (st.ok()) st = f.String("binary_arch", false, &a.binary_arch);
  if (st.ok()) st = f.String("binary_base64", false, &binary_base64);
  if (st.ok()) st = f.String("compile_options", false, &a.compile_options);
  if (st.ok()) st = f.String("compiler_version", false, &a.compiler_version);
  if (st.ok()) st = f.String("driver_version", false, &a.driver_version);
  if (st.ok()) st = f.String("device_arch", false, &a.device_arch);
  if (st.ok()) st = f.Number("multiprocessor_count", false, &a.multiprocessor_count);
  if (!st.ok()) return bad(st);
  if (a.codegen_version <= 0 || a.source.empty()) {
    return absl::InvalidArgumentError(
        "artifact: needs a positive 'codegen_version' and a non-empty 'source'");
  }
  if (!absl::Base64Unescape(binary_base64, &a.binary)) {
    return absl::InvalidArgumentError("artifact: field 'binary_base64' is not base64");
  }
  if (absl::StatusOr<schedules::GeneratedSource> launch =
          schedules::SourceFromLaunchJson(a.launch_json, a.source);
      !launch.ok()) {
    return bad(launch.status());
  }
  return a;
}

absl::Status RecordFromJson(const json& j, Record* r) {
  FieldReader f(j);
  TESSEL_RETURN_IF_ERROR(f.String("uid", true, &r->uid));
  if (r->uid.empty()) return absl::InvalidArgumentError("field 'uid' is empty");
  TESSEL_RETURN_IF_ERROR(f.String("workload_key", true, &r->workload_key));
  TESSEL_RETURN_IF_ERROR(f.String("target_key", true, &r->target_key));
  TESSEL_RETURN_IF_ERROR(f.Number("candidate_id", false, &r->candidate_id));
  TESSEL_RETURN_IF_ERROR(f.Json("trace", &r->trace_json));
  measure::Measurement& m = r->measurement;
  std::string status;
  TESSEL_RETURN_IF_ERROR(f.String("status", true, &status));
  const std::optional<measure::MeasureStatus> parsed = measure::ParseMeasureStatus(status);
  if (!parsed) {
    return absl::InvalidArgumentError(absl::StrCat(
        "field 'status' is '", Quoted(status), "', expected a measurement status (\"ok\", ",
        "\"compile_error\", \"verify_failed\", \"runtime_error\", \"timeout\", ",
        "\"device_limit_exceeded\" or \"worker_error\")"));
  }
  m.status = *parsed;
  TESSEL_RETURN_IF_ERROR(f.String("error", false, &m.error));
  std::vector<double> repeats;
  TESSEL_RETURN_IF_ERROR(f.Repeats("repeats_ms", true, &repeats));
  m.timings = measure::MakeTimings(std::move(repeats));
  TESSEL_RETURN_IF_ERROR(f.Number("median_ms", true, &m.timings.median_ms));
  TESSEL_RETURN_IF_ERROR(f.Number("compile_ms", false, &m.compile_ms));
  TESSEL_RETURN_IF_ERROR(f.Number("verify_ms", false, &m.verify_ms));
  measure::PeakResources peak;
  TESSEL_RETURN_IF_ERROR(f.Number("registers", false, &peak.registers));
  TESSEL_RETURN_IF_ERROR(f.Number("shared_bytes", false, &peak.shared_bytes));
  TESSEL_RETURN_IF_ERROR(f.Number("local_bytes", false, &peak.local_bytes));
  m.kernels = measure::KernelsOfPeak(peak);
  TESSEL_RETURN_IF_ERROR(f.String("worker_id", false, &m.worker_id));
  TESSEL_RETURN_IF_ERROR(f.String("device_name", false, &m.device_name));
  TESSEL_RETURN_IF_ERROR(f.Number("device", false, &m.device));
  TESSEL_RETURN_IF_ERROR(f.Number("unix_ms", true, &r->unix_ms));
  // The figures of issue 21, absent from the exports of older builds: defaults then.
  TESSEL_RETURN_IF_ERROR(f.Repeats("kernel_repeats_ms", false, &m.timings.kernel_repeats_ms));
  TESSEL_RETURN_IF_ERROR(f.Number("kernel_median_ms", false, &m.timings.kernel_median_ms));
  if (auto it = j.find("counters"); it != j.end() && !it->is_null()) {
    if (!it->is_object()) {
      return absl::InvalidArgumentError(
          absl::StrCat("field 'counters' is ", it->type_name(), ", expected an object or null"));
    }
    FieldReader c(*it);
    measure::HardwareCounters counters;
    absl::Status st = c.Number("dram_read_bytes", true, &counters.dram_read_bytes);
    if (st.ok()) st = c.Number("dram_write_bytes", true, &counters.dram_write_bytes);
    if (st.ok()) st = c.Number("achieved_occupancy", true, &counters.achieved_occupancy);
    if (!st.ok()) return absl::InvalidArgumentError(absl::StrCat("counters: ", st.message()));
    m.timings.counters = counters;
  }
  TESSEL_RETURN_IF_ERROR(f.Number("sm_clock_mhz", false, &m.timings.device_state.sm_clock_mhz));
  TESSEL_RETURN_IF_ERROR(
      f.Number("memory_clock_mhz", false, &m.timings.device_state.memory_clock_mhz));
  TESSEL_RETURN_IF_ERROR(f.Number("temperature_c", false, &m.timings.device_state.temperature_c));
  TESSEL_RETURN_IF_ERROR(f.String("timing_note", false, &m.timings.note));
  std::string kind = measure::TimingKindName(measure::TimingKind::kConfirmed);
  TESSEL_RETURN_IF_ERROR(f.String("timing_kind", false, &kind));
  const std::optional<measure::TimingKind> parsed_kind = measure::ParseTimingKind(kind);
  if (!parsed_kind) {
    return absl::InvalidArgumentError(absl::StrCat("field 'timing_kind' is '", Quoted(kind),
                                                   "', expected \"confirmed\" or \"screened\""));
  }
  m.timings.kind = *parsed_kind;
  if (auto it = j.find("artifact"); it != j.end() && !it->is_null()) {
    if (!it->is_object()) {
      return absl::InvalidArgumentError(
          absl::StrCat("field 'artifact' is ", it->type_name(), ", expected an object"));
    }
    TESSEL_ASSIGN_OR_RETURN(m.artifact, ArtifactFromJson(*it));
  }
  return absl::OkStatus();
}

class SqliteTuningLog final : public TuningLog {
 public:
  SqliteTuningLog(std::string path, sqlite3* db, const TuningLogOptions& options)
      : path_(std::move(path)),
        db_(db),
        read_only_(options.read_only),
        on_bad_row_(options.on_bad_row),
        stmts_(db) {
    std::random_device rd;
    std::seed_seq seq{rd(), rd(), rd(), rd(), rd(), rd(), rd(), rd()};
    rng_.seed(seq);
  }
  ~SqliteTuningLog() override {
    {
      absl::MutexLock lock(&mu_);
      stmts_.Clear();
    }
    sqlite3_close_v2(db_);
  }

  std::string path() const override { return path_; }

  absl::Status PutWorkload(const WorkloadRow& w) override {
    if (w.key.empty()) return absl::InvalidArgumentError("a workload needs its key");
    absl::MutexLock lock(&mu_);
    TESSEL_RETURN_IF_ERROR(Writable());
    TESSEL_ASSIGN_OR_RETURN(Statement s,
                            stmts_.Get("INSERT INTO workloads (key, canonical, name, spec) "
                                       "VALUES (?, ?, ?, ?) ON CONFLICT(key) DO NOTHING"));
    return s.Bind(w.key).Bind(w.canonical).Bind(w.name).Bind(w.spec).Run();
  }

  absl::StatusOr<std::optional<WorkloadRow>> GetWorkload(const std::string& key) override {
    absl::MutexLock lock(&mu_);
    return WorkloadLocked(key);
  }

  absl::StatusOr<std::optional<WorkloadRow>> WorkloadLocked(const std::string& key)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    TESSEL_ASSIGN_OR_RETURN(
        Statement s, stmts_.Get("SELECT key, canonical, name, spec FROM workloads WHERE key = ?"));
    s.Bind(key);
    TESSEL_ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) return std::optional<WorkloadRow>();
    return std::optional<WorkloadRow>(WorkloadRow{s.Text(0), s.Text(1), s.Text(2), s.Text(3)});
  }

  absl::Status CreateJob(JobRow* job, std::vector<TaskRow>* tasks) override {
    absl::MutexLock lock(&mu_);
    TESSEL_RETURN_IF_ERROR(Writable());
    if (job->created_unix_ms == 0) job->created_unix_ms = NowUnixMs();
    return InTransaction([&]() -> absl::Status {
      TESSEL_ASSIGN_OR_RETURN(
          Statement s,
          stmts_.Get("INSERT INTO jobs (name, target_kind, target_arch, target_key, strategy, "
                     "priority, trials_budget, time_budget_s, seed, batch_size, state, error, "
                     "created_unix_ms, finished_unix_ms, submitted_by) "
                     "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"));
      s.Bind(job->name)
          .Bind(job->target_kind)
          .Bind(job->target_arch)
          .Bind(job->target_key)
          .Bind(job->strategy)
          .Bind(job->priority)
          .Bind(job->trials_budget)
          .Bind(job->time_budget_s)
          .Bind(static_cast<int64_t>(job->seed))
          .Bind(job->batch_size)
          .Bind(JobStateName(job->state))
          .Bind(job->error)
          .Bind(job->created_unix_ms)
          .Bind(job->finished_unix_ms)
          .Bind(job->submitted_by);
      TESSEL_RETURN_IF_ERROR(s.Run());
      const int64_t job_id = sqlite3_last_insert_rowid(db_);
      for (TaskRow& t : *tasks) {
        TESSEL_ASSIGN_OR_RETURN(Statement ts,
                                stmts_.Get("INSERT INTO tasks (job_id, workload_key, "
                                           "trials_budget, state, baseline_ms, baseline_label) "
                                           "VALUES (?, ?, ?, ?, ?, ?)"));
        ts.Bind(job_id)
            .Bind(t.workload_key)
            .Bind(t.trials_budget)
            .Bind(JobStateName(t.state))
            .Bind(t.baseline_ms)
            .Bind(t.baseline_label);
        absl::Status st = ts.Run();
        if (!st.ok()) {
          if ((ts.last_error() & 0xff) == SQLITE_CONSTRAINT) {
            return absl::FailedPreconditionError(
                absl::StrCat("a task names workload ", t.workload_key,
                             ", which is not in the tuning log; PutWorkload it first"));
          }
          return st;
        }
        t.id = sqlite3_last_insert_rowid(db_);
        t.job_id = job_id;
      }
      job->id = job_id;
      return absl::OkStatus();
    });
  }

  absl::Status SetJobState(int64_t job_id, JobState state, const std::string& error) override {
    absl::MutexLock lock(&mu_);
    TESSEL_RETURN_IF_ERROR(Writable());
    TESSEL_ASSIGN_OR_RETURN(
        Statement s,
        stmts_.Get("UPDATE jobs SET state = ?, error = ?, finished_unix_ms = ? WHERE id = ?"));
    s.Bind(JobStateName(state)).Bind(error).Bind(IsFinished(state) ? NowUnixMs() : 0).Bind(job_id);
    TESSEL_RETURN_IF_ERROR(s.Run());
    if (sqlite3_changes(db_) == 0) return JobNotFound(job_id);
    return absl::OkStatus();
  }

  absl::Status SetTaskState(int64_t task_id, JobState state) override {
    absl::MutexLock lock(&mu_);
    TESSEL_RETURN_IF_ERROR(Writable());
    TESSEL_ASSIGN_OR_RETURN(Statement s, stmts_.Get("UPDATE tasks SET state = ? WHERE id = ?"));
    s.Bind(JobStateName(state)).Bind(task_id);
    TESSEL_RETURN_IF_ERROR(s.Run());
    if (sqlite3_changes(db_) == 0) {
      return absl::NotFoundError(absl::StrCat("no task ", task_id, " in ", path_));
    }
    return absl::OkStatus();
  }

  absl::StatusOr<JobRow> GetJob(int64_t job_id) override {
    absl::MutexLock lock(&mu_);
    TESSEL_ASSIGN_OR_RETURN(
        Statement s, stmts_.Get(absl::StrCat("SELECT ", kJobColumns, " FROM jobs WHERE id = ?")));
    s.Bind(job_id);
    TESSEL_ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) return JobNotFound(job_id);
    return ReadJob(s);
  }

  absl::StatusOr<std::vector<TaskRow>> TasksOf(int64_t job_id) override {
    absl::MutexLock lock(&mu_);
    TESSEL_ASSIGN_OR_RETURN(
        Statement s,
        stmts_.Get("SELECT id, job_id, workload_key, trials_budget, state, "
                   "baseline_ms, baseline_label FROM tasks WHERE job_id = ? ORDER BY id"));
    s.Bind(job_id);
    std::vector<TaskRow> out;
    while (true) {
      TESSEL_ASSIGN_OR_RETURN(bool row, s.Step());
      if (!row) break;
      TaskRow t;
      t.id = s.Int(0);
      t.job_id = s.Int(1);
      t.workload_key = s.Text(2);
      t.trials_budget = s.Int(3);
      TESSEL_ASSIGN_OR_RETURN(t.state, ParseJobState(s.Text(4)));
      t.baseline_ms = s.Double(5);
      t.baseline_label = s.Text(6);
      out.push_back(std::move(t));
    }
    return out;
  }

  absl::StatusOr<std::vector<JobRow>> ListJobs(bool unfinished_only) override {
    absl::MutexLock lock(&mu_);
    TESSEL_ASSIGN_OR_RETURN(
        Statement s,
        stmts_.Get(absl::StrCat("SELECT ", kJobColumns, " FROM jobs",
                                unfinished_only ? " WHERE state IN ('queued', 'running')" : "",
                                " ORDER BY id DESC")));
    std::vector<JobRow> out;
    while (true) {
      TESSEL_ASSIGN_OR_RETURN(bool row, s.Step());
      if (!row) break;
      TESSEL_ASSIGN_OR_RETURN(JobRow j, ReadJob(s));
      out.push_back(std::move(j));
    }
    return out;
  }

  absl::StatusOr<int64_t> AddRecord(Record* r) override {
    absl::MutexLock lock(&mu_);
    TESSEL_RETURN_IF_ERROR(Writable());
    TESSEL_RETURN_IF_ERROR(PrepareRecord(r));
    bool inserted = false;
    TESSEL_RETURN_IF_ERROR(InTransaction([&]() -> absl::Status {
      TESSEL_ASSIGN_OR_RETURN(inserted, InsertRecord(r));
      return absl::OkStatus();
    }));
    if (!inserted) {
      return absl::AlreadyExistsError(
          r->task_id != 0
              ? absl::StrCat("candidate ", r->candidate_id, " of task ", r->task_id,
                             " is already in the tuning log (or its uid ", r->uid, " is)")
              : absl::StrCat("a record with uid ", r->uid, " is already in the tuning log"));
    }
    return r->id;
  }

  absl::Status AddRecords(std::vector<Record>* rs) override {
    absl::MutexLock lock(&mu_);
    TESSEL_RETURN_IF_ERROR(Writable());
    for (Record& r : *rs) TESSEL_RETURN_IF_ERROR(PrepareRecord(&r));
    absl::Status st = InTransaction([&]() -> absl::Status {
      for (Record& r : *rs) {
        TESSEL_ASSIGN_OR_RETURN(bool inserted, InsertRecord(&r));
        (void)inserted;
      }
      return absl::OkStatus();
    });
    if (!st.ok()) {
      for (Record& r : *rs) r.id = 0;  // none was stored
    }
    return st;
  }

  absl::StatusOr<TaskCounts> CountsOf(int64_t task_id) override {
    absl::MutexLock lock(&mu_);
    TaskCounts c;
    {
      TESSEL_ASSIGN_OR_RETURN(Statement s,
                              stmts_.Get("SELECT count(*) FROM records WHERE task_id = ?"));
      s.Bind(task_id);
      TESSEL_ASSIGN_OR_RETURN(bool row, s.Step());
      if (row) c.trials = s.Int(0);
    }
    // Every row is a trial; only the ok rows a reader accepts count as ok and as the best.
    TESSEL_ASSIGN_OR_RETURN(
        Statement s, stmts_.Get(absl::StrCat("SELECT ", kRecordColumns,
                                             " FROM records WHERE task_id = ? AND status = 'ok'")));
    s.Bind(task_id);
    while (true) {
      TESSEL_ASSIGN_OR_RETURN(bool row, s.Step());
      if (!row) break;
      std::optional<Record> r = ReadGoodRecord(s);
      if (!r.has_value()) continue;
      ++c.ok;
      // The best is a confirmed timing (a screened one is too short to rank on).
      if (r->measurement.timings.kind != measure::TimingKind::kConfirmed) continue;
      const double ms = r->measurement.latency_ms();
      if (c.best_ms == 0 || ms < c.best_ms) c.best_ms = ms;
    }
    return c;
  }

  absl::StatusOr<std::vector<Record>> RecordsOf(int64_t task_id) override {
    absl::MutexLock lock(&mu_);
    TESSEL_ASSIGN_OR_RETURN(
        Statement s, stmts_.Get(absl::StrCat("SELECT ", kRecordColumns,
                                             " FROM records WHERE task_id = ? ORDER BY id")));
    s.Bind(task_id);
    return ReadRecords(s);
  }

  absl::StatusOr<std::vector<Record>> TopK(const std::string& workload_key,
                                           const std::string& target_key, int k) override {
    if (k <= 0) return std::vector<Record>();
    absl::MutexLock lock(&mu_);
    TESSEL_ASSIGN_OR_RETURN(
        Statement s,
        stmts_.Get(absl::StrCat("SELECT ", kRecordColumns,
                                " FROM records WHERE workload_key = ? AND target_key = ? AND "
                                "status = 'ok' AND timing_kind = 1 ORDER BY latency_ms, id")));
    s.Bind(workload_key).Bind(target_key);
    return ReadRecords(s, static_cast<size_t>(k));
  }

  absl::StatusOr<std::optional<Record>> Best(const std::string& workload_key,
                                             const std::string& target_key) override {
    TESSEL_ASSIGN_OR_RETURN(std::vector<Record> top, TopK(workload_key, target_key, 1));
    if (top.empty()) return std::optional<Record>();
    return std::optional<Record>(std::move(top[0]));
  }

  absl::StatusOr<std::vector<Record>> TopKOnDevice(const std::string& workload_key,
                                                   const std::string& target_key,
                                                   const std::string& device_name, int k) override {
    if (k <= 0) return std::vector<Record>();
    absl::MutexLock lock(&mu_);
    TESSEL_ASSIGN_OR_RETURN(
        Statement s,
        stmts_.Get(absl::StrCat(
            "SELECT ", kRecordColumns,
            " FROM records WHERE workload_key = ? AND target_key = ? AND "
            "device_name = ? AND status = 'ok' AND timing_kind = 1 ORDER BY latency_ms, id")));
    s.Bind(workload_key).Bind(target_key).Bind(device_name);
    return ReadRecords(s, static_cast<size_t>(k));
  }

  absl::StatusOr<std::optional<measure::Artifact>> GetArtifact(int64_t record_id) override {
    absl::MutexLock lock(&mu_);
    return ArtifactLocked(record_id);
  }

  absl::StatusOr<std::vector<RecordGroup>> OkRecordGroups(
      const std::string& workload_key) override {
    absl::MutexLock lock(&mu_);
    TESSEL_ASSIGN_OR_RETURN(
        Statement s,
        stmts_.Get(workload_key.empty()
                       ? "SELECT workload_key, target_key, device_name, count(*) FROM records "
                         "WHERE status = 'ok' GROUP BY workload_key, target_key, device_name "
                         "ORDER BY workload_key, target_key, device_name"
                       : "SELECT workload_key, target_key, device_name, count(*) FROM records "
                         "WHERE workload_key = ? AND status = 'ok' GROUP BY target_key, "
                         "device_name ORDER BY target_key, device_name"));
    if (!workload_key.empty()) s.Bind(workload_key);
    std::vector<RecordGroup> out;
    while (true) {
      TESSEL_ASSIGN_OR_RETURN(bool row, s.Step());
      if (!row) break;
      out.push_back(RecordGroup{s.Text(0), s.Text(1), s.Text(2), s.Int(3)});
    }
    return out;
  }

  absl::StatusOr<int64_t> CountOk(const std::string& workload_key,
                                  const std::string& target_key) override {
    absl::MutexLock lock(&mu_);
    // Counted as the readers read them: a bad row (BadRecord) that says ok is skipped, not
    // counted.
    TESSEL_ASSIGN_OR_RETURN(
        Statement s,
        stmts_.Get(absl::StrCat("SELECT ", kRecordColumns,
                                " FROM records WHERE workload_key = ? AND target_key = ? AND "
                                "status = 'ok' ORDER BY id")));
    s.Bind(workload_key).Bind(target_key);
    int64_t n = 0;
    while (true) {
      TESSEL_ASSIGN_OR_RETURN(bool row, s.Step());
      if (!row) break;
      if (ReadGoodRecord(s).has_value()) ++n;
    }
    return n;
  }

  absl::Status ForEachRecordOfTarget(const std::string& target_key,
                                     const std::function<bool(const Record&)>& fn) override {
    // In pages, so that `fn` runs without the lock (it may call into the log) and no read
    // transaction stays open across calls.
    constexpr int kPage = 512;
    int64_t after = 0;
    while (true) {
      std::vector<Record> page;
      int64_t rows = 0;
      {
        absl::MutexLock lock(&mu_);
        TESSEL_ASSIGN_OR_RETURN(
            Statement s, stmts_.Get(absl::StrCat("SELECT ", kRecordColumns,
                                                 " FROM records WHERE target_key = ? AND id > ? "
                                                 "ORDER BY id LIMIT ?")));
        s.Bind(target_key).Bind(after).Bind(kPage);
        TESSEL_ASSIGN_OR_RETURN(page,
                                ReadRecords(s, std::numeric_limits<size_t>::max(), &after, &rows));
      }
      for (const Record& r : page) {
        if (!fn(r)) return absl::OkStatus();
      }
      if (rows < kPage) return absl::OkStatus();
    }
  }

  absl::StatusOr<std::vector<BadRecord>> BadRecords() override {
    absl::MutexLock lock(&mu_);
    TESSEL_ASSIGN_OR_RETURN(Statement s, stmts_.Get(absl::StrCat("SELECT ", kRecordColumns,
                                                                 " FROM records ORDER BY id")));
    std::vector<BadRecord> out;
    while (true) {
      TESSEL_ASSIGN_OR_RETURN(bool row, s.Step());
      if (!row) break;
      Record r;
      absl::Status bad = ReadCheckedRecord(s, &r);
      if (!bad.ok()) {
        out.push_back({s.Int(0), s.Text(1), s.Text(2), s.Text(3), std::string(bad.message())});
      }
    }
    return out;
  }

  absl::StatusOr<int64_t> QuarantineRecords(const std::vector<BadRecord>& bad) override {
    absl::MutexLock lock(&mu_);
    TESSEL_RETURN_IF_ERROR(Writable());
    int64_t moved = 0;
    const int64_t now = NowUnixMs();
    TESSEL_RETURN_IF_ERROR(InTransaction([&]() -> absl::Status {
      TESSEL_RETURN_IF_ERROR(Exec(
          db_,
          absl::StrCat("CREATE TABLE IF NOT EXISTS quarantined_records AS SELECT ", kRecordColumns,
                       ", '' AS reason, 0 AS quarantined_unix_ms FROM records WHERE 0")));
      TESSEL_RETURN_IF_ERROR(AddMissingQuarantineColumns());
      for (const BadRecord& b : bad) {
        TESSEL_ASSIGN_OR_RETURN(
            Statement copy,
            stmts_.Get(absl::StrCat("INSERT INTO quarantined_records (", kRecordColumns,
                                    ", reason, quarantined_unix_ms) SELECT ", kRecordColumns,
                                    ", ?, ? FROM records WHERE id = ?")));
        TESSEL_RETURN_IF_ERROR(copy.Bind(b.problem).Bind(now).Bind(b.id).Run());
        TESSEL_ASSIGN_OR_RETURN(Statement del, stmts_.Get("DELETE FROM records WHERE id = ?"));
        TESSEL_RETURN_IF_ERROR(del.Bind(b.id).Run());
        moved += sqlite3_changes(db_);
      }
      return absl::OkStatus();
    }));
    return moved;
  }

  absl::StatusOr<int64_t> SaveCostModel(CostModelRow* m) override {
    absl::MutexLock lock(&mu_);
    TESSEL_RETURN_IF_ERROR(Writable());
    if (m->unix_ms == 0) m->unix_ms = NowUnixMs();
    TESSEL_ASSIGN_OR_RETURN(
        Statement s, stmts_.Get("INSERT INTO cost_models (target_key, kind, feature_version, blob, "
                                "meta_json, unix_ms) VALUES (?, ?, ?, ?, ?, ?)"));
    s.Bind(m->target_key)
        .Bind(m->kind)
        .Bind(m->feature_version)
        .BindBlob(m->blob)
        .Bind(m->meta_json)
        .Bind(m->unix_ms);
    TESSEL_RETURN_IF_ERROR(s.Run());
    m->id = sqlite3_last_insert_rowid(db_);
    return m->id;
  }

  absl::StatusOr<std::optional<CostModelRow>> LatestCostModel(const std::string& target_key,
                                                              const std::string& kind) override {
    absl::MutexLock lock(&mu_);
    TESSEL_ASSIGN_OR_RETURN(
        Statement s,
        stmts_.Get("SELECT id, target_key, kind, feature_version, blob, meta_json, unix_ms "
                   "FROM cost_models WHERE target_key = ? AND kind = ? ORDER BY id DESC LIMIT 1"));
    s.Bind(target_key).Bind(kind);
    TESSEL_ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) return std::optional<CostModelRow>();
    CostModelRow m;
    m.id = s.Int(0);
    m.target_key = s.Text(1);
    m.kind = s.Text(2);
    m.feature_version = static_cast<int>(s.Int(3));
    m.blob = s.Text(4);
    m.meta_json = s.Text(5);
    m.unix_ms = s.Int(6);
    return std::optional<CostModelRow>(std::move(m));
  }

  absl::Status ExportJsonl(std::ostream& out) override {
    absl::MutexLock lock(&mu_);
    // One read transaction: a consistent snapshot while writers go on in WAL mode.
    TESSEL_RETURN_IF_ERROR(Exec(db_, "BEGIN"));
    absl::Status st = [&]() -> absl::Status {
      TESSEL_ASSIGN_OR_RETURN(
          Statement w, stmts_.Get("SELECT key, canonical, name, spec FROM workloads ORDER BY key"));
      while (true) {
        TESSEL_ASSIGN_OR_RETURN(bool row, w.Step());
        if (!row) break;
        out << json{{"type", "workload"},
                    {"key", w.Text(0)},
                    {"canonical", w.Text(1)},
                    {"name", w.Text(2)},
                    {"spec", w.Text(3)}}
                   .dump()
            << "\n";
      }
      TESSEL_ASSIGN_OR_RETURN(Statement s, stmts_.Get(absl::StrCat("SELECT ", kRecordColumns,
                                                                   " FROM records ORDER BY id")));
      while (true) {
        TESSEL_ASSIGN_OR_RETURN(bool row, s.Step());
        if (!row) break;
        std::optional<Record> r = ReadGoodRecord(s);
        if (!r) continue;
        json line = RecordToJson(*r);
        TESSEL_ASSIGN_OR_RETURN(std::optional<measure::Artifact> artifact, ArtifactLocked(r->id));
        if (artifact) line["artifact"] = ArtifactToJson(*artifact);
        out << line.dump() << "\n";
      }
      if (!out) return absl::DataLossError("writing the export failed");
      return absl::OkStatus();
    }();
    absl::Status end = Exec(db_, "COMMIT");
    return st.ok() ? end : st;
  }

  absl::StatusOr<ImportStats> ImportJsonl(std::istream& in,
                                          const JsonlImportOptions& options) override {
    absl::MutexLock lock(&mu_);
    TESSEL_RETURN_IF_ERROR(Writable());
    ImportStats stats;
    // With options.replay: the workloads parsed so far, by key.
    std::map<std::string, schedules::Workload> workloads;
    TESSEL_RETURN_IF_ERROR(InTransaction([&]() -> absl::Status {
      std::string line;
      int64_t line_no = 0;
      while (std::getline(in, line)) {
        ++line_no;
        absl::Status st = ImportLine(line, options.replay ? &workloads : nullptr, &stats);
        if (!st.ok()) {
          return absl::Status(st.code(), absl::StrCat("line ", line_no, ": ", st.message()));
        }
      }
      if (in.bad()) return absl::DataLossError("reading the import failed");
      return absl::OkStatus();
    }));
    return stats;
  }

 private:
  absl::Status Writable() const {
    if (!read_only_) return absl::OkStatus();
    return absl::FailedPreconditionError(
        absl::StrCat("the tuning log ", path_,
                     " was opened read-only; open it without read_only "
                     "to write"));
  }

  absl::Status JobNotFound(int64_t job_id) const {
    return absl::NotFoundError(absl::StrCat("no job ", job_id, " in ", path_));
  }

  // BEGIN IMMEDIATE ... COMMIT around `body`, rolled back when it fails.
  absl::Status InTransaction(const std::function<absl::Status()>& body)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    TESSEL_ASSIGN_OR_RETURN(Statement begin, stmts_.Get("BEGIN IMMEDIATE"));
    TESSEL_RETURN_IF_ERROR(begin.Run());
    absl::Status st = body();
    if (st.ok()) {
      TESSEL_ASSIGN_OR_RETURN(Statement commit, stmts_.Get("COMMIT"));
      st = commit.Run();
      if (st.ok()) return st;
    }
    if (!sqlite3_get_autocommit(db_)) Exec(db_, "ROLLBACK").IgnoreError();
    return st;
  }

  // quarantined_records is made by the first quarantine with the record columns of its day: a
  // log quarantined before a later schema added columns to records gets them here (NULL for the
  // rows already there), so that every record column can be moved aside.
  absl::Status AddMissingQuarantineColumns() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    std::set<std::string> present;
    {
      TESSEL_ASSIGN_OR_RETURN(
          Statement s, stmts_.Get("SELECT name FROM pragma_table_info('quarantined_records')"));
      while (true) {
        TESSEL_ASSIGN_OR_RETURN(bool row, s.Step());
        if (!row) break;
        present.insert(s.Text(0));
      }
    }
    for (absl::string_view column : absl::StrSplit(kRecordColumns, ", ")) {
      if (present.count(std::string(column)) > 0) continue;
      TESSEL_RETURN_IF_ERROR(
          Exec(db_, absl::StrCat("ALTER TABLE quarantined_records ADD COLUMN ", column)));
    }
    return absl::OkStatus();
  }

  std::string NewUid() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return absl::StrFormat("%016x%016x", rng_(), rng_());
  }

  // Fills in uid and time, checks what the schema cannot.
  absl::Status PrepareRecord(Record* r) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    TESSEL_RETURN_IF_ERROR(CheckRecord(*r));
    if (r->uid.empty()) r->uid = NewUid();
    if (r->unix_ms == 0) r->unix_ms = NowUnixMs();
    return absl::OkStatus();
  }

  // Inserts one record inside the current transaction: false when a uniqueness constraint
  // (uid, or task and candidate) already holds it; its id is then 0.
  absl::StatusOr<bool> InsertRecord(Record* r) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const measure::Measurement& m = r->measurement;
    const measure::PeakResources peak = measure::PeakOf(m.kernels);
    TESSEL_ASSIGN_OR_RETURN(Statement s, stmts_.Get(kInsertRecord));
    s.Bind(r->uid)
        .Bind(r->workload_key)
        .Bind(r->target_key)
        .BindId(r->job_id)
        .BindId(r->task_id)
        .Bind(static_cast<int64_t>(r->candidate_id))
        .Bind(r->trace_json)
        .Bind(measure::MeasureStatusName(m.status))
        .Bind(m.error)
        .Bind(RepeatsToJson(m.timings.repeats_ms))
        .Bind(m.timings.median_ms)
        .Bind(m.compile_ms)
        .Bind(m.verify_ms)
        .Bind(peak.registers)
        .Bind(peak.shared_bytes)
        .Bind(peak.local_bytes)
        .Bind(m.worker_id)
        .Bind(m.device_name)
        .Bind(m.device)
        .Bind(r->unix_ms)
        .Bind(RepeatsToJson(m.timings.kernel_repeats_ms))
        .Bind(m.timings.kernel_median_ms);
    if (m.timings.counters) {
      s.Bind(m.timings.counters->dram_read_bytes)
          .Bind(m.timings.counters->dram_write_bytes)
          .Bind(m.timings.counters->achieved_occupancy);
    } else {
      s.BindNull().BindNull().BindNull();
    }
    s.Bind(m.timings.device_state.sm_clock_mhz)
        .Bind(m.timings.device_state.memory_clock_mhz)
        .Bind(m.timings.device_state.temperature_c)
        .Bind(m.timings.note)
        .Bind(static_cast<int>(m.timings.kind));
    absl::Status st = s.Run();
    if (!st.ok()) {
      if (s.last_error() == SQLITE_CONSTRAINT_FOREIGNKEY) {
        return absl::FailedPreconditionError(
            absl::StrCat("record ", r->uid, " names job ", r->job_id, " and task ", r->task_id,
                         ", which are not in the tuning log; create the job first (or leave "
                         "both 0)"));
      }
      return st;
    }
    if (sqlite3_changes(db_) == 0) {
      r->id = 0;
      return false;
    }
    r->id = sqlite3_last_insert_rowid(db_);
    TESSEL_ASSIGN_OR_RETURN(bool keep, KeepsArtifact(*r));
    if (keep) {
      TESSEL_RETURN_IF_ERROR(InsertArtifact(r->id, m.artifact));
    } else {
      // Record ids are reused after the largest is quarantined: drop what that one left.
      TESSEL_ASSIGN_OR_RETURN(Statement del,
                              stmts_.Get("DELETE FROM artifacts WHERE record_id = ?"));
      TESSEL_RETURN_IF_ERROR(del.Bind(r->id).Run());
    }
    return true;
  }

  // Whether the artifact of `r`, just inserted, is kept: it has one, it is ok, and no other ok
  // record of its workload, target and device is faster. Deploy-time lookups only ever answer
  // with the fastest record of a device, which was the fastest of its device when it was added,
  // so this keeps every artifact a lookup can need, and not the megabytes of sources and cubins
  // of the slower candidates a search measures.
  absl::StatusOr<bool> KeepsArtifact(const Record& r) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (!r.measurement.artifact.stored() || !r.measurement.ok() ||
        r.measurement.timings.kind != measure::TimingKind::kConfirmed) {
      return false;
    }
    TESSEL_ASSIGN_OR_RETURN(
        Statement s,
        stmts_.Get("SELECT count(*) FROM records WHERE workload_key = ? AND target_key = ? AND "
                   "device_name = ? AND status = 'ok' AND timing_kind = 1 AND latency_ms < ? AND "
                   "id != ?"));
    s.Bind(r.workload_key)
        .Bind(r.target_key)
        .Bind(r.measurement.device_name)
        .Bind(r.measurement.latency_ms())
        .Bind(r.id);
    TESSEL_ASSIGN_OR_RETURN(bool row, s.Step());
    return !row || s.Int(0) == 0;
  }

  absl::Status InsertArtifact(int64_t record_id, const measure::Artifact& a)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    TESSEL_ASSIGN_OR_RETURN(
        Statement s,
        stmts_.Get(absl::StrCat("INSERT OR REPLACE INTO artifacts (record_id, ", kArtifactColumns,
                                ") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")));
    return s.Bind(record_id)
        .Bind(a.codegen_version)
        .Bind(a.source)
        .Bind(a.launch_json)
        .Bind(a.binary_format)
        .Bind(a.binary_arch)
        .BindBlob(a.binary)
        .Bind(a.compile_options)
        .Bind(a.compiler_version)
        .Bind(a.driver_version)
        .Bind(a.device_arch)
        .Bind(a.multiprocessor_count)
        .Run();
  }

  absl::StatusOr<std::optional<measure::Artifact>> ArtifactLocked(int64_t record_id)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    TESSEL_ASSIGN_OR_RETURN(Statement s, stmts_.Get(absl::StrCat("SELECT ", kArtifactColumns,
                                                                 " FROM artifacts WHERE "
                                                                 "record_id = ?")));
    s.Bind(record_id);
    TESSEL_ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) return std::optional<measure::Artifact>();
    return std::optional<measure::Artifact>(ReadArtifact(s));
  }

  // Why the record row `s` is on is bad (BadRecord), or OK with the record in `out`.
  absl::Status ReadCheckedRecord(const Statement& s, Record* out) {
    absl::StatusOr<Record> r = ReadRecord(s);
    if (!r.ok()) return r.status();
    TESSEL_RETURN_IF_ERROR(CheckRecord(*r));
    *out = *std::move(r);
    return absl::OkStatus();
  }

  // The record row `s` is on, or nullopt for a bad row, which is reported once.
  std::optional<Record> ReadGoodRecord(const Statement& s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    Record r;
    absl::Status bad = ReadCheckedRecord(s, &r);
    if (bad.ok()) return r;
    const int64_t id = s.Int(0);
    if (reported_.insert(id).second) {
      const std::string line = absl::StrCat("skipping record ", id, " (uid ", s.Text(1), ") of ",
                                            path_, ": ", bad.message(), "; `tessel check --db ",
                                            path_, " --quarantine` moves such records aside");
      if (on_bad_row_) {
        on_bad_row_(line);
      } else {
        std::cerr << "tessel: warning: " << line << "\n";
      }
    }
    return std::nullopt;
  }

  // The good records among the rows of `s`, at most `limit`. `last_id`, when given, is set to
  // the id of the last row read, good or bad (0 for none), and `rows` to the number of rows read.
  absl::StatusOr<std::vector<Record>> ReadRecords(Statement& s,
                                                  size_t limit = std::numeric_limits<size_t>::max(),
                                                  int64_t* last_id = nullptr,
                                                  int64_t* rows = nullptr)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    std::vector<Record> out;
    if (last_id != nullptr) *last_id = 0;
    if (rows != nullptr) *rows = 0;
    while (out.size() < limit) {
      TESSEL_ASSIGN_OR_RETURN(bool row, s.Step());
      if (!row) break;
      if (last_id != nullptr) *last_id = s.Int(0);
      if (rows != nullptr) ++*rows;
      if (std::optional<Record> r = ReadGoodRecord(s)) out.push_back(*std::move(r));
    }
    return out;
  }

  // One line of ImportJsonl. With `workloads` (options.replay), workloads are parsed into it and
  // records replayed on theirs.
  absl::Status ImportLine(const std::string& line,
                          std::map<std::string, schedules::Workload>* workloads, ImportStats* stats)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) return absl::OkStatus();
    json j = json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) {
      return absl::InvalidArgumentError(
          "not valid JSON; each line must be one JSON object as tessel export writes it");
    }
    if (!j.is_object()) {
      return absl::InvalidArgumentError(
          absl::StrCat("expected a JSON object, found ", j.type_name()));
    }
    std::string type;
    TESSEL_RETURN_IF_ERROR(FieldReader(j).String("type", true, &type));
    if (type == "workload") {
      WorkloadRow w;
      FieldReader f(j);
      TESSEL_RETURN_IF_ERROR(f.String("key", true, &w.key));
      TESSEL_RETURN_IF_ERROR(f.String("canonical", true, &w.canonical));
      TESSEL_RETURN_IF_ERROR(f.String("name", false, &w.name));
      TESSEL_RETURN_IF_ERROR(f.String("spec", false, &w.spec));
      if (w.key.empty()) return absl::InvalidArgumentError("field 'key' is empty");
      if (workloads != nullptr) {
        TESSEL_ASSIGN_OR_RETURN(schedules::Workload parsed, WorkloadOfRow(w));
        workloads->insert_or_assign(w.key, std::move(parsed));
      }
      TESSEL_ASSIGN_OR_RETURN(Statement s,
                              stmts_.Get("INSERT INTO workloads (key, canonical, name, spec) "
                                         "VALUES (?, ?, ?, ?) ON CONFLICT(key) DO NOTHING"));
      TESSEL_RETURN_IF_ERROR(s.Bind(w.key).Bind(w.canonical).Bind(w.name).Bind(w.spec).Run());
      stats->workloads_added += sqlite3_changes(db_);
      return absl::OkStatus();
    }
    if (type == "record") {
      Record r;
      TESSEL_RETURN_IF_ERROR(RecordFromJson(j, &r));
      if (absl::Status bad = CheckRecord(r); !bad.ok()) {
        return absl::InvalidArgumentError(absl::StrCat("record ", r.uid, ": ", bad.message()));
      }
      if (workloads != nullptr) TESSEL_RETURN_IF_ERROR(CheckImportedReplays(r, workloads));
      TESSEL_ASSIGN_OR_RETURN(bool inserted, InsertRecord(&r));
      (inserted ? stats->records_added : stats->records_skipped) += 1;
      return absl::OkStatus();
    }
    return absl::InvalidArgumentError(
        absl::StrCat("unknown type '", Quoted(type), "'; expected \"workload\" or \"record\""));
  }

  // CheckReplays for an imported record, on its workload: parsed earlier in the import, or
  // stored (and then parsed into `workloads`).
  absl::Status CheckImportedReplays(const Record& r,
                                    std::map<std::string, schedules::Workload>* workloads)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    auto it = workloads->find(r.workload_key);
    if (it == workloads->end()) {
      TESSEL_ASSIGN_OR_RETURN(std::optional<WorkloadRow> row, WorkloadLocked(r.workload_key));
      if (!row) {
        return absl::InvalidArgumentError(absl::StrCat(
            "record ", r.uid, " names workload ", r.workload_key,
            ", which is neither earlier in the file nor in the log; tessel export writes each "
            "workload before its records"));
      }
      absl::StatusOr<schedules::Workload> parsed = WorkloadOfRow(*row);
      if (!parsed.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat("record ", r.uid, ": ", parsed.status().message()));
      }
      it = workloads->emplace(r.workload_key, *std::move(parsed)).first;
    }
    if (absl::Status bad = CheckReplays(it->second, r.target_key, r.trace_json); !bad.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("record ", r.uid, ": ", bad.message()));
    }
    return absl::OkStatus();
  }

  const std::string path_;
  sqlite3* const db_;
  const bool read_only_;
  const std::function<void(const std::string&)> on_bad_row_;
  absl::Mutex mu_;
  StatementCache stmts_ ABSL_GUARDED_BY(mu_);
  std::set<int64_t> reported_ ABSL_GUARDED_BY(mu_);  // bad rows already reported
  std::mt19937_64 rng_ ABSL_GUARDED_BY(mu_);
};

// ---- Opening ----

struct FileHeader {
  int64_t application_id = 0;
  int64_t user_version = 0;
  int64_t objects = 0;  // entries of sqlite_master
};

absl::StatusOr<int64_t> PragmaInt(sqlite3* db, const char* sql) {
  sqlite3_stmt* stmt = nullptr;
  int rc = sqlite3_prepare_v2(db, sql, -1, &stmt, nullptr);
  if (rc != SQLITE_OK) return SqliteError(db, sqlite3_extended_errcode(db), sql);
  rc = sqlite3_step(stmt);
  int64_t v = rc == SQLITE_ROW ? sqlite3_column_int64(stmt, 0) : 0;
  sqlite3_finalize(stmt);
  if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
    return SqliteError(db, sqlite3_extended_errcode(db), sql);
  }
  return v;
}

absl::StatusOr<std::string> PragmaText(sqlite3* db, const char* sql) {
  sqlite3_stmt* stmt = nullptr;
  int rc = sqlite3_prepare_v2(db, sql, -1, &stmt, nullptr);
  if (rc != SQLITE_OK) return SqliteError(db, sqlite3_extended_errcode(db), sql);
  rc = sqlite3_step(stmt);
  std::string v;
  if (rc == SQLITE_ROW) {
    const unsigned char* t = sqlite3_column_text(stmt, 0);
    if (t != nullptr) v = reinterpret_cast<const char*>(t);
  }
  sqlite3_finalize(stmt);
  if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
    return SqliteError(db, sqlite3_extended_errcode(db), sql);
  }
  return v;
}

absl::StatusOr<FileHeader> ReadHeader(sqlite3* db) {
  FileHeader h;
  TESSEL_ASSIGN_OR_RETURN(h.application_id, PragmaInt(db, "PRAGMA application_id"));
  TESSEL_ASSIGN_OR_RETURN(h.user_version, PragmaInt(db, "PRAGMA user_version"));
  TESSEL_ASSIGN_OR_RETURN(h.objects, PragmaInt(db, "SELECT count(*) FROM sqlite_master"));
  return h;
}

std::string NotATesselLog(const std::string& path, const std::string& why) {
  return absl::StrCat(path, " is not a Tessel tuning log (", why,
                      "); pass a new file or a log written by tessel serve");
}

// Checks the file as it is, before anything is written to it.
absl::Status CheckHeader(const std::string& path, const FileHeader& h, bool read_only, int latest) {
  const bool empty = h.application_id == 0 && h.user_version == 0 && h.objects == 0;
  if (empty) {
    if (read_only) {
      return absl::FailedPreconditionError(NotATesselLog(path, "an empty database"));
    }
    return absl::OkStatus();
  }
  if (h.application_id != kTuningLogApplicationId) {
    return absl::FailedPreconditionError(
        NotATesselLog(path, absl::StrFormat("application id %d, expected %d", h.application_id,
                                            kTuningLogApplicationId)));
  }
  if (h.user_version > latest) {
    return absl::FailedPreconditionError(
        absl::StrCat(path, " was written by a newer Tessel (schema ", h.user_version,
                     ", this build reads up to ", latest, "); upgrade Tessel"));
  }
  if (read_only && h.user_version < latest) {
    return absl::FailedPreconditionError(
        absl::StrCat(path, " has schema ", h.user_version, " and this build reads schema ", latest,
                     "; open it once for writing (tessel serve or tessel import) to "
                     "migrate it"));
  }
  return absl::OkStatus();
}

absl::Status Migrate(sqlite3* db, const std::string& path, bool empty,
                     const std::vector<Migration>& migrations) {
  const int latest = LatestSchemaVersion(migrations);
  TESSEL_RETURN_IF_ERROR(Exec(db, "BEGIN IMMEDIATE"));
  auto fail = [&](absl::Status st) {
    Exec(db, "ROLLBACK").IgnoreError();
    return st;
  };
  // Read again inside the transaction: another process may have migrated it meanwhile.
  absl::StatusOr<FileHeader> h = ReadHeader(db);
  if (!h.ok()) return fail(h.status());
  absl::Status st = CheckHeader(path, *h, /*read_only=*/false, latest);
  if (!st.ok()) return fail(st);
  if (h->user_version == latest) return Exec(db, "COMMIT");
  for (const Migration& m : migrations) {
    if (m.version <= h->user_version) continue;
    st = Exec(db, m.sql);
    if (!st.ok()) {
      return fail(absl::Status(
          st.code(), absl::StrCat("migrating ", path, " from schema ", h->user_version, " to ",
                                  latest, " failed at step ", m.version, " (", m.description,
                                  "): ", st.message(), "; the file is unchanged")));
    }
  }
  st = Exec(db, absl::StrCat("PRAGMA user_version = ", latest));
  if (st.ok() && empty) {
    st = Exec(db, absl::StrCat("PRAGMA application_id = ", kTuningLogApplicationId));
  }
  if (!st.ok()) return fail(st);
  return Exec(db, "COMMIT");
}

// The folder a log's path names ("." for a bare name).
std::string FolderOf(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
}

absl::Status OpenChecks(const std::string& path, const TuningLogOptions& options) {
  if (path.empty()) {
    return absl::InvalidArgumentError("no tuning log path given; pass a file such as tessel.db");
  }
  const std::string dir = FolderOf(path);
  struct stat st;
  if (stat(path.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) {
      return absl::InvalidArgumentError(absl::StrCat(
          path, " is a directory; pass the tuning log's file, e.g. ", path, "/tessel.db"));
    }
    if (options.read_only) return absl::OkStatus();
    // A writer needs the file and, for SQLite's -wal and -shm files, its folder.
    if (access(path.c_str(), W_OK) != 0) {
      return absl::PermissionDeniedError(absl::StrCat(
          "the tuning log ", path,
          " is read-only for this user, and this command writes to it; make it writable (chmod "
          "u+w ",
          path, ") or only read it (tessel best, tessel export)"));
    }
    if (access(dir.c_str(), W_OK) != 0) {
      return absl::PermissionDeniedError(absl::StrCat(
          "the folder ", dir, " of the tuning log ", path,
          " is not writable for this user, and SQLite writes the log's -wal and -shm files "
          "there; make the folder writable or move the log to one that is"));
    }
    return absl::OkStatus();
  }
  if (options.read_only) {
    return absl::NotFoundError(
        absl::StrCat("tuning log ", path,
                     " does not exist; check the path (a read-only open never creates a log)"));
  }
  if (stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return absl::NotFoundError(absl::StrCat("cannot create tuning log ", path, ": directory ", dir,
                                            " does not exist; create it first (mkdir -p ", dir,
                                            ")"));
  }
  if (access(dir.c_str(), W_OK) != 0) {
    return absl::PermissionDeniedError(
        absl::StrCat("cannot create tuning log ", path, ": the folder ", dir,
                     " is not writable for this user; pass a path in a folder that is"));
  }
  return absl::OkStatus();
}

// An SQLite URI of `path` that opens it immutable: read-only, without the -shm file (which a
// reader that cannot write beside the log cannot make). Only for a log no one writes.
std::string ImmutableUri(const std::string& path) {
  std::string uri = "file:";
  for (char c : path) {
    if (c == '%' || c == '?' || c == '#') {
      uri += absl::StrFormat("%%%02x", static_cast<unsigned char>(c));
    } else {
      uri += c;
    }
  }
  return uri + "?immutable=1";
}

}  // namespace

const std::vector<Migration>& TuningLogMigrations() {
  static const auto* migrations = new std::vector<Migration>{
      {1, "workloads, jobs, tasks, records and cost models", kSchemaV1},
      {2, "jobs record the token that submitted them", kSchemaV2},
      {3, "records keep what was measured: source, binary, launch, toolchain", kSchemaV3},
      {4, "tasks keep the baseline their job was given", kSchemaV4},
      {5,
       "records keep every measured figure: CUPTI kernel times, counters, clocks, temperature, "
       "timing note and kind",
       kSchemaV5},
      {6, "records rank by latency_ms: the CUPTI kernel median where there is one", kSchemaV6},
  };
  return *migrations;
}

int LatestSchemaVersion(const std::vector<Migration>& migrations) {
  TESSEL_CHECK(!migrations.empty()) << "a schema needs at least one migration";
  for (size_t i = 0; i < migrations.size(); ++i) {
    TESSEL_CHECK(migrations[i].version == static_cast<int>(i) + 1)
        << "migration " << i << " has version " << migrations[i].version;
  }
  return migrations.back().version;
}

absl::StatusOr<std::unique_ptr<TuningLog>> OpenSqliteTuningLog(
    const std::string& path, const TuningLogOptions& options,
    const std::vector<Migration>& migrations) {
  TESSEL_RETURN_IF_ERROR(OpenChecks(path, options));
  const int latest = LatestSchemaVersion(migrations);
  sqlite3* db = nullptr;
  const int flags =
      (options.read_only ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE) |
      SQLITE_OPEN_NOMUTEX;
  int rc = sqlite3_open_v2(path.c_str(), &db, flags, nullptr);
  auto fail = [&](absl::Status st) {
    sqlite3_close_v2(db);
    return st;
  };
  if (rc != SQLITE_OK) {
    return fail(SqliteError(db, rc, absl::StrCat("cannot open tuning log ", path)));
  }
  sqlite3_extended_result_codes(db, 1);
  sqlite3_busy_timeout(db, options.busy_timeout_ms);

  absl::StatusOr<FileHeader> h = ReadHeader(db);
  const int read_error = sqlite3_extended_errcode(db) & 0xff;
  if (!h.ok() && options.read_only &&
      (read_error == SQLITE_READONLY || read_error == SQLITE_CANTOPEN)) {
    // A reader that cannot write beside the log (a read-only folder, a log of another user) cannot
    // make the -shm file of WAL mode. With no -wal file left by a writer, nothing is being
    // written: read the file as it stands.
    struct stat wal;
    if (stat((path + "-wal").c_str(), &wal) == 0 && wal.st_size > 0) {
      return fail(absl::FailedPreconditionError(absl::StrCat(
          "cannot read the tuning log ", path, ": its latest writes are still in ", path,
          "-wal, and this user cannot write beside the log to read them; read it as its owner, "
          "or after its server stops (which folds them into the log)")));
    }
    sqlite3_close_v2(db);
    db = nullptr;
    rc = sqlite3_open_v2(ImmutableUri(path).c_str(), &db, flags | SQLITE_OPEN_URI, nullptr);
    if (rc != SQLITE_OK) {
      return fail(SqliteError(db, rc, absl::StrCat("cannot open tuning log ", path)));
    }
    sqlite3_extended_result_codes(db, 1);
    h = ReadHeader(db);
  }
  if (!h.ok()) {
    if ((sqlite3_extended_errcode(db) & 0xff) == SQLITE_NOTADB) {
      return fail(absl::FailedPreconditionError(NotATesselLog(path, "not an SQLite database")));
    }
    return fail(absl::Status(h.status().code(), absl::StrCat("reading the tuning log ", path, ": ",
                                                             h.status().message())));
  }
  absl::Status st = CheckHeader(path, *h, options.read_only, latest);
  if (!st.ok()) return fail(st);

  if (options.read_only) {
    st = Exec(db, "PRAGMA query_only = ON");
  } else {
    const bool fresh = h->application_id == 0 && h->user_version == 0 && h->objects == 0;
    // A new file gets 16 KiB pages: a record (a trace of a few KB) then fits in one page instead
    // of a chain of overflow pages. Only possible before the first table exists.
    if (fresh) st = Exec(db, "PRAGMA page_size = 16384");
    // WAL mode persists in the file; synchronous and foreign keys are per connection.
    absl::StatusOr<std::string> mode =
        st.ok() ? PragmaText(db, "PRAGMA journal_mode = WAL") : absl::StatusOr<std::string>(st);
    st = mode.status();
    if (st.ok() && *mode != "wal") {
      st = absl::FailedPreconditionError(absl::StrCat("cannot put the tuning log ", path,
                                                      " in WAL mode (journal mode stays '", *mode,
                                                      "'); put it on a local file system"));
    }
    if (st.ok()) st = Exec(db, "PRAGMA synchronous = NORMAL; PRAGMA foreign_keys = ON");
    if (st.ok()) st = Migrate(db, path, fresh, migrations);
  }
  if (!st.ok()) return fail(st);
  return std::unique_ptr<TuningLog>(new SqliteTuningLog(path, db, options));
}

absl::StatusOr<std::unique_ptr<TuningLog>> OpenTuningLog(const std::string& path,
                                                         const TuningLogOptions& options) {
  return OpenSqliteTuningLog(path, options, TuningLogMigrations());
}

}  // namespace tessel::store
