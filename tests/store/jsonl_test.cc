// Export and import of a tuning log as JSON lines: a round trip through a second log, idempotent
// import, and malformed lines that fail the whole import with their line number.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <sstream>

#include "nlohmann/json.hpp"
#include "store/tuning_log.h"
#include "tests/store/store_test_util.h"
#include "tests/test_util.h"

namespace tessel::testing {
namespace {

using store::Record;
using store::TuningLog;
using ::testing::HasSubstr;

std::unique_ptr<TuningLog> NewLog() {
  auto log = store::OpenTuningLog(MakeTempDir("tessel_jsonl") + "/log.db");
  EXPECT_TRUE(log.ok()) << log.status();
  return std::move(*log);
}

// A log with two workloads, a job, and records of every kind (from the job, imported, failed,
// the reference lowering).
std::unique_ptr<TuningLog> FilledLog() {
  auto log = NewLog();
  EXPECT_TRUE(log->PutWorkload({"w1", "t0 = input(f32, [8])\n", "softmax", "softmax(...)"}).ok());
  EXPECT_TRUE(log->PutWorkload({"w2", "canonical 2\n", "custom", "A = ..."}).ok());
  store::JobRow j;
  j.target_kind = "host";
  j.target_key = "host";
  std::vector<store::TaskRow> tasks(1);
  tasks[0].workload_key = "w1";
  EXPECT_TRUE(log->CreateJob(&j, &tasks).ok());
  std::vector<Record> batch;
  for (int i = 0; i < 20; ++i) {
    Record r = MakeTestRecord(i, i % 2 ? "w1" : "w2");
    if (i < 5) {
      r.job_id = j.id;
      r.task_id = tasks[0].id;
    }
    if (i == 6) r.trace_json = "null";
    batch.push_back(r);
  }
  EXPECT_TRUE(log->AddRecords(&batch).ok());
  return log;
}

std::string Export(TuningLog& log) {
  std::ostringstream out;
  EXPECT_TRUE(log.ExportJsonl(out).ok());
  return out.str();
}

// uid -> the record's line as JSON.
std::map<std::string, nlohmann::json> RecordsByUid(const std::string& jsonl) {
  std::map<std::string, nlohmann::json> out;
  std::istringstream in(jsonl);
  std::string line;
  while (std::getline(in, line)) {
    auto j = nlohmann::json::parse(line);
    if (j["type"] == "record") out[j["uid"].get<std::string>()] = j;
  }
  return out;
}

TEST(TuningLogJsonl, ExportWritesWorkloadsThenRecords) {
  auto log = FilledLog();
  const std::string text = Export(*log);
  std::istringstream in(text);
  std::string line;
  std::vector<std::string> types;
  while (std::getline(in, line)) {
    auto j = nlohmann::json::parse(line);
    types.push_back(j["type"]);
    EXPECT_FALSE(j.contains("job_id"));
    EXPECT_FALSE(j.contains("task_id"));
    if (j["type"] == "record" && j["candidate_id"] == 6) {
      EXPECT_TRUE(j["trace"].is_null());
    }
    if (j["type"] == "record" && j["candidate_id"] == 1) {
      EXPECT_TRUE(j["trace"].is_object());  // the trace is JSON, not a string of it
      EXPECT_EQ(j["repeats_ms"].size(), 10u);
    }
  }
  ASSERT_EQ(types.size(), 22u);
  EXPECT_EQ(types[0], "workload");
  EXPECT_EQ(types[1], "workload");
  EXPECT_EQ(types[2], "record");
}

TEST(TuningLogJsonl, ImportIntoASecondLogThenExportGivesTheSameRecords) {
  auto a = FilledLog();
  const std::string first = Export(*a);
  auto b = NewLog();
  std::istringstream in(first);
  auto stats = b->ImportJsonl(in);
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->workloads_added, 2);
  EXPECT_EQ(stats->records_added, 20);
  EXPECT_EQ(stats->records_skipped, 0);
  const std::string second = Export(*b);
  EXPECT_EQ(RecordsByUid(first), RecordsByUid(second));
  EXPECT_EQ(RecordsByUid(first).size(), 20u);
  auto w = b->GetWorkload("w1");
  ASSERT_TRUE(w.ok() && w->has_value());
  EXPECT_EQ((*w)->canonical, "t0 = input(f32, [8])\n");
  // Imported records answer queries like measured ones.
  auto best_a = a->Best("w1", "host");
  auto best_b = b->Best("w1", "host");
  ASSERT_TRUE(best_a.ok() && best_b.ok() && best_a->has_value() && best_b->has_value());
  EXPECT_EQ((*best_a)->uid, (*best_b)->uid);
  EXPECT_EQ((*best_b)->task_id, 0);
}

TEST(TuningLogJsonl, ImportingTheSameFileTwiceAddsNothingTheSecondTime) {
  auto a = FilledLog();
  const std::string text = Export(*a);
  auto b = NewLog();
  std::istringstream in1(text);
  ASSERT_TRUE(b->ImportJsonl(in1).ok());
  std::istringstream in2(text);
  auto stats = b->ImportJsonl(in2);
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->workloads_added, 0);
  EXPECT_EQ(stats->records_added, 0);
  EXPECT_EQ(stats->records_skipped, 20);
  // Importing a log's own export into itself adds nothing either (merging is by uid).
  std::istringstream in3(text);
  auto self = a->ImportJsonl(in3);
  ASSERT_TRUE(self.ok());
  EXPECT_EQ(self->records_added, 0);
}

// Imports `text` into a fresh log; the import must fail and leave the log empty.
absl::Status ImportMustFailCleanly(const std::string& text) {
  auto log = NewLog();
  std::istringstream in(text);
  auto stats = log->ImportJsonl(in);
  EXPECT_FALSE(stats.ok());
  std::ostringstream out;
  EXPECT_TRUE(log->ExportJsonl(out).ok());
  EXPECT_EQ(out.str(), "") << "a failed import added something";
  return stats.status();
}

TEST(TuningLogJsonl, BadJsonFailsWithItsLineNumberAndAddsNothing) {
  auto a = FilledLog();
  std::string text = Export(*a);
  // Third line broken.
  size_t pos = 0;
  for (int i = 0; i < 2; ++i) pos = text.find('\n', pos) + 1;
  text.insert(pos, "{\"type\": \"record\", \"uid\": \n");
  absl::Status s = ImportMustFailCleanly(text);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "line 3: not valid JSON; each line must be one JSON object as tessel export writes it");
}

TEST(TuningLogJsonl, RecordMissingAFieldFailsWithItsLineNumberAndAddsNothing) {
  auto a = FilledLog();
  const std::string text = Export(*a);
  std::istringstream in(text);
  std::string line, out;
  int n = 0;
  while (std::getline(in, line)) {
    if (++n == 5) {
      auto j = nlohmann::json::parse(line);
      j.erase("status");
      line = j.dump();
    }
    out += line + "\n";
  }
  absl::Status s = ImportMustFailCleanly(out);
  EXPECT_EQ(s.message(), "line 5: missing field 'status'");
}

TEST(TuningLogJsonl, OtherMalformedLines) {
  EXPECT_EQ(ImportMustFailCleanly("[1, 2]\n").message(),
            "line 1: expected a JSON object, found array");
  EXPECT_EQ(ImportMustFailCleanly("\n{\"type\": \"job\"}\n").message(),
            "line 2: unknown type 'job'; expected \"workload\" or \"record\"");
  EXPECT_EQ(
      ImportMustFailCleanly("{\"type\": \"workload\", \"key\": 5, \"canonical\": \"c\"}").message(),
      "line 1: field 'key' is number, expected a string");
  auto rec = nlohmann::json::parse(
      R"({"type": "record", "uid": "u", "workload_key": "w", "target_key": "host",
          "trace": null, "status": "ok", "repeats_ms": [1, "x"], "median_ms": 1, "unix_ms": 5})");
  EXPECT_EQ(ImportMustFailCleanly(rec.dump()).message(),
            "line 1: field 'repeats_ms' is array, expected an array of numbers");
  rec["repeats_ms"] = {1};
  rec["status"] = "fast";
  EXPECT_EQ(ImportMustFailCleanly(rec.dump()).message(),
            "line 1: field 'status' is 'fast', expected a measurement status (\"ok\", "
            "\"compile_error\", \"verify_failed\", \"runtime_error\", \"timeout\", "
            "\"device_limit_exceeded\" or \"worker_error\")");
}

TEST(TuningLogJsonl, ExportCarriesEveryMeasuredFigure) {
  auto a = FilledLog();
  const std::map<std::string, nlohmann::json> records = RecordsByUid(Export(*a));
  int seen = 0;
  for (const auto& [uid, j] : records) {
    const int64_t i = j["candidate_id"].get<int64_t>();
    if (i != 3 && i != 5 && i != 4) continue;
    ++seen;
    const measure::Timings want = MakeTestRecord(i).measurement.timings;
    EXPECT_EQ(j["kernel_repeats_ms"].get<std::vector<double>>(), want.kernel_repeats_ms);
    EXPECT_EQ(j["kernel_median_ms"].get<double>(), want.kernel_median_ms);
    EXPECT_EQ(j["sm_clock_mhz"], want.device_state.sm_clock_mhz);
    EXPECT_EQ(j["memory_clock_mhz"], want.device_state.memory_clock_mhz);
    EXPECT_EQ(j["temperature_c"], want.device_state.temperature_c);
    EXPECT_EQ(j["timing_note"], want.note);
    EXPECT_EQ(j["timing_kind"], measure::TimingKindName(want.kind));
    if (want.counters) {
      EXPECT_EQ(j["counters"]["dram_read_bytes"], want.counters->dram_read_bytes);
      EXPECT_EQ(j["counters"]["dram_write_bytes"], want.counters->dram_write_bytes);
      EXPECT_EQ(j["counters"]["achieved_occupancy"], want.counters->achieved_occupancy);
    } else {
      EXPECT_TRUE(j["counters"].is_null());
    }
  }
  EXPECT_EQ(seen, 3);
  // Record 5 is screened, record 3 confirmed with counters: both kinds travel.
  for (const auto& [uid, j] : records) {
    if (j["candidate_id"] == 5) {
      EXPECT_EQ(j["timing_kind"], "screened");
    }
    if (j["candidate_id"] == 3) {
      EXPECT_TRUE(j["counters"].is_object());
    }
  }
}

TEST(TuningLogJsonl, ImportedRecordsKeepEveryMeasuredFigure) {
  auto a = FilledLog();
  auto b = NewLog();
  std::istringstream in(Export(*a));
  ASSERT_TRUE(b->ImportJsonl(in).ok());
  int n = 0;
  ASSERT_TRUE(b->ForEachRecordOfTarget("host", [&](const Record& r) {
                 ++n;
                 // The trace travels as JSON (its text may be respaced); record 6's was
                 // replaced. Everything else is as measured.
                 const int64_t i = static_cast<int64_t>(r.candidate_id);
                 Record measured = r;
                 measured.trace_json = MakeTestRecord(i).trace_json;
                 EXPECT_EQ(DiffTestRecord(measured, i), "") << "record " << i;
                 return true;
               }).ok());
  EXPECT_EQ(n, 20);
}

// What an older Tessel exported: records without the figures of schema 4.
TEST(TuningLogJsonl, AnExportWithoutTheNewFiguresImportsAsConfirmed) {
  auto a = FilledLog();
  const std::string text = Export(*a);
  std::istringstream in(text);
  std::string line, old;
  while (std::getline(in, line)) {
    auto j = nlohmann::json::parse(line);
    for (const char* key : {"kernel_repeats_ms", "kernel_median_ms", "counters", "sm_clock_mhz",
                            "memory_clock_mhz", "temperature_c", "timing_note", "timing_kind"}) {
      j.erase(key);
    }
    old += j.dump() + "\n";
  }
  auto b = NewLog();
  std::istringstream old_in(old);
  auto stats = b->ImportJsonl(old_in);
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->records_added, 20);
  int n = 0;
  ASSERT_TRUE(b->ForEachRecordOfTarget("host", [&](const Record& r) {
                 ++n;
                 const measure::Timings& t = r.measurement.timings;
                 EXPECT_EQ(t.kind, measure::TimingKind::kConfirmed);
                 EXPECT_TRUE(t.kernel_repeats_ms.empty());
                 EXPECT_EQ(t.kernel_median_ms, 0);
                 EXPECT_FALSE(t.counters.has_value());
                 EXPECT_FALSE(t.device_state.known());
                 EXPECT_EQ(t.note, "");
                 return true;
               }).ok());
  EXPECT_EQ(n, 20);
}

TEST(TuningLogJsonl, MalformedFiguresFailWithTheirField) {
  auto rec = nlohmann::json::parse(
      R"({"type": "record", "uid": "u", "workload_key": "w", "target_key": "host",
          "trace": null, "status": "ok", "repeats_ms": [1], "median_ms": 1, "unix_ms": 5,
          "timing_kind": "guessed"})");
  EXPECT_EQ(ImportMustFailCleanly(rec.dump()).message(),
            "line 1: field 'timing_kind' is 'guessed', expected \"confirmed\" or \"screened\"");
  rec["timing_kind"] = "screened";
  rec["counters"] = {{"dram_read_bytes", 1.0}, {"achieved_occupancy", 50.0}};
  EXPECT_EQ(ImportMustFailCleanly(rec.dump()).message(),
            "line 1: counters: missing field 'dram_write_bytes'");
  rec["counters"] = 5;
  EXPECT_EQ(ImportMustFailCleanly(rec.dump()).message(),
            "line 1: field 'counters' is number, expected an object or null");
  rec.erase("counters");
  rec["kernel_repeats_ms"] = {1, -1};
  rec["kernel_median_ms"] = 1;
  EXPECT_EQ(ImportMustFailCleanly(rec.dump()).message(),
            "line 1: record u: kernel repeat 1 is -1 ms; a CUPTI kernel time must be finite and "
            "not negative");
  rec["kernel_repeats_ms"] = {1};
  rec["sm_clock_mhz"] = -5;
  EXPECT_EQ(ImportMustFailCleanly(rec.dump()).message(),
            "line 1: record u: device state (SM clock -5 MHz, memory clock 0 MHz, temperature 0 "
            "C) must not be negative; 0 means unknown");
}

}  // namespace
}  // namespace tessel::testing
