#pragma once

// Helpers for the tuning-log tests: records with realistic contents, raw SQLite access to a
// log's file, and file bytes.

#include <sqlite3.h>

#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "store/tuning_log.h"

namespace tessel::testing {

// Record `i` of a test: every field set from `i`, so a record read back can be checked whole.
inline store::Record MakeTestRecord(int64_t i, const std::string& workload_key = "00000000000000aa",
                                    const std::string& target_key = "host") {
  store::Record r;
  r.workload_key = workload_key;
  r.target_key = target_key;
  r.candidate_id = static_cast<uint64_t>(i);
  r.trace_json = "{\"version\":1,\"insts\":[{\"kind\":\"sample_perfect_tile\",\"decision\":[" +
                 std::to_string(i % 7 + 1) + ",4,8]}]}";
  measure::Measurement& m = r.measurement;
  m.status = i % 5 == 4 ? measure::MeasureStatus::kCompileError : measure::MeasureStatus::kOk;
  if (m.ok()) {
    std::vector<double> repeats;
    for (int k = 0; k < 10; ++k) repeats.push_back(1.0 + 0.001 * i + 0.0001 * k);
    m.timings = measure::MakeTimings(repeats);
    m.timings.median_ms = repeats[5];
    // Every figure a CUDA worker measures (issue 21): CUPTI kernel times, counters (every third
    // record), clocks and temperature, a note, and a screened timing now and then.
    for (double ms : repeats) m.timings.kernel_repeats_ms.push_back(ms - 0.0125);
    m.timings.kernel_median_ms = measure::MedianOf(m.timings.kernel_repeats_ms);
    if (i % 3 == 0) {
      m.timings.counters = measure::HardwareCounters{1.5e9 + i, 0.5e9 + i, 40.0 + i % 50};
    } else {
      m.timings.note = "no hardware counters: not asked for (record " + std::to_string(i) + ")";
    }
    m.timings.device_state = {1755 + static_cast<int>(i % 10), 2619, 40 + static_cast<int>(i % 30)};
    // Record 5, 11, ...: screened (record 1, the one most tests store, stays confirmed, as a
    // best must be).
    if (i % 6 == 5) m.timings.kind = measure::TimingKind::kScreened;
  } else {
    m.error = "error of record " + std::to_string(i);
  }
  m.compile_ms = 100.5 + i;
  m.verify_ms = 3.25;
  m.kernels = measure::KernelsOfPeak({static_cast<int>(i % 255), 1024 * (i % 48), i % 3});
  m.worker_id = "worker-" + std::to_string(i % 4);
  m.device_name = "Test CPU";
  m.device = static_cast<int>(i % 2);
  r.unix_ms = 1700000000000 + i;
  return r;
}

// Whether `got` holds what MakeTestRecord(i) held (ids and uid aside); a message when not.
inline std::string DiffTestRecord(const store::Record& got, int64_t i) {
  store::Record want = MakeTestRecord(i, got.workload_key, got.target_key);
  std::ostringstream d;
  if (got.candidate_id != want.candidate_id) d << "candidate_id ";
  if (got.trace_json != want.trace_json) d << "trace ";
  const measure::Measurement& g = got.measurement;
  const measure::Measurement& w = want.measurement;
  if (g.status != w.status) d << "status ";
  if (g.error != w.error) d << "error ";
  if (g.timings.repeats_ms != w.timings.repeats_ms || g.timings.min_ms != w.timings.min_ms ||
      g.timings.max_ms != w.timings.max_ms) {
    d << "repeats ";
  }
  if (g.timings.median_ms != w.timings.median_ms) d << "median ";
  if (g.timings.kernel_repeats_ms != w.timings.kernel_repeats_ms ||
      g.timings.kernel_median_ms != w.timings.kernel_median_ms) {
    d << "kernel_times ";
  }
  if (g.timings.counters.has_value() != w.timings.counters.has_value() ||
      (g.timings.counters &&
       (g.timings.counters->dram_read_bytes != w.timings.counters->dram_read_bytes ||
        g.timings.counters->dram_write_bytes != w.timings.counters->dram_write_bytes ||
        g.timings.counters->achieved_occupancy != w.timings.counters->achieved_occupancy))) {
    d << "counters ";
  }
  if (g.timings.device_state.sm_clock_mhz != w.timings.device_state.sm_clock_mhz ||
      g.timings.device_state.memory_clock_mhz != w.timings.device_state.memory_clock_mhz ||
      g.timings.device_state.temperature_c != w.timings.device_state.temperature_c) {
    d << "device_state ";
  }
  if (g.timings.note != w.timings.note) d << "timing_note ";
  if (g.timings.kind != w.timings.kind) d << "timing_kind ";
  if (g.compile_ms != w.compile_ms || g.verify_ms != w.verify_ms) d << "times ";
  if (measure::PeakOf(g.kernels) != measure::PeakOf(w.kernels)) d << "resources ";
  if (g.worker_id != w.worker_id || g.device_name != w.device_name || g.device != w.device) {
    d << "device ";
  }
  if (got.unix_ms != want.unix_ms) d << "unix_ms ";
  return d.str();
}

inline std::string ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Runs `sql` on the file directly (no Tessel code) and returns column `col` of the first row as
// text ("" when none), or of every row joined by newlines when `all_rows`; "ERROR: ..." on
// failure.
inline std::string RawQuery(const std::string& path, const std::string& sql, int col = 0,
                            bool all_rows = false) {
  sqlite3* db = nullptr;
  std::string out;
  if (sqlite3_open(path.c_str(), &db) != SQLITE_OK) {
    out = std::string("ERROR: ") + sqlite3_errmsg(db);
    sqlite3_close(db);
    return out;
  }
  sqlite3_stmt* stmt = nullptr;
  if (sqlite3_prepare_v2(db, sql.c_str(), -1, &stmt, nullptr) != SQLITE_OK) {
    out = std::string("ERROR: ") + sqlite3_errmsg(db);
  } else {
    int rc;
    bool first = true;
    while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
      if ((first || all_rows) && sqlite3_column_text(stmt, col) != nullptr) {
        if (!first) out += "\n";
        out += reinterpret_cast<const char*>(sqlite3_column_text(stmt, col));
      }
      first = false;
    }
    if (rc != SQLITE_DONE) out = std::string("ERROR: ") + sqlite3_errmsg(db);
  }
  sqlite3_finalize(stmt);
  sqlite3_close(db);
  return out;
}

// Runs statements on the file directly; "" or the error message.
inline std::string RawExec(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  std::string out;
  if (sqlite3_open(path.c_str(), &db) == SQLITE_OK) {
    char* err = nullptr;
    if (sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
      out = err ? err : "error";
    }
    sqlite3_free(err);
  } else {
    out = sqlite3_errmsg(db);
  }
  sqlite3_close(db);
  return out;
}

}  // namespace tessel::testing
