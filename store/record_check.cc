#include "store/record_check.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "schedules/schedule/trace.h"
#include "schedules/util/status_macros.h"

namespace tessel::store {
namespace {

bool FinitePositive(double v) { return std::isfinite(v) && v > 0; }
bool FiniteNotNegative(double v) { return std::isfinite(v) && v >= 0; }

}  // namespace

absl::Status CheckMeasurement(const measure::Measurement& m) {
  const measure::Timings& t = m.timings;
  if (m.ok()) {
    if (t.repeats_ms.empty()) {
      return absl::InvalidArgumentError("an ok result has no timed repeat; it needs at least one");
    }
    for (size_t i = 0; i < t.repeats_ms.size(); ++i) {
      if (!FinitePositive(t.repeats_ms[i])) {
        return absl::InvalidArgumentError(absl::StrCat("repeat ", i, " is ", t.repeats_ms[i],
                                                       " ms; a time must be finite and positive"));
      }
    }
    if (!FinitePositive(t.median_ms)) {
      return absl::InvalidArgumentError(
          absl::StrCat("median_ms is ", t.median_ms,
                       "; the median of an ok result must be finite and positive"));
    }
    const auto [lo, hi] = std::minmax_element(t.repeats_ms.begin(), t.repeats_ms.end());
    if (t.median_ms < *lo || t.median_ms > *hi) {
      return absl::InvalidArgumentError(absl::StrCat(
          "median_ms ", t.median_ms, " lies outside its repeats (", *lo, " to ", *hi, " ms)"));
    }
    for (size_t i = 0; i < t.kernel_repeats_ms.size(); ++i) {
      if (!FiniteNotNegative(t.kernel_repeats_ms[i])) {
        return absl::InvalidArgumentError(
            absl::StrCat("kernel repeat ", i, " is ", t.kernel_repeats_ms[i],
                         " ms; a CUPTI kernel time must be finite and not negative"));
      }
    }
    if (!FiniteNotNegative(t.kernel_median_ms)) {
      return absl::InvalidArgumentError(
          absl::StrCat("kernel_median_ms is ", t.kernel_median_ms,
                       "; the CUPTI kernel median must be finite and not negative"));
    }
    if (t.counters && (!FiniteNotNegative(t.counters->dram_read_bytes) ||
                       !FiniteNotNegative(t.counters->dram_write_bytes) ||
                       !FiniteNotNegative(t.counters->achieved_occupancy))) {
      return absl::InvalidArgumentError(
          absl::StrCat("hardware counters (DRAM bytes read ", t.counters->dram_read_bytes,
                       ", written ", t.counters->dram_write_bytes, ", achieved occupancy ",
                       t.counters->achieved_occupancy, "%) must be finite and not negative"));
    }
  } else if (!t.repeats_ms.empty() || t.median_ms != 0 || !t.kernel_repeats_ms.empty() ||
             t.kernel_median_ms != 0 || t.counters) {
    std::string kernel;
    if (!t.kernel_repeats_ms.empty() || t.kernel_median_ms != 0) {
      kernel = absl::StrCat(", ", t.kernel_repeats_ms.size(), " kernel repeats, kernel_median_ms ",
                            t.kernel_median_ms);
    }
    return absl::InvalidArgumentError(
        absl::StrCat("a ", measure::MeasureStatusName(m.status), " result carries timings (",
                     t.repeats_ms.size(), " repeats, median_ms ", t.median_ms, kernel,
                     t.counters ? ", hardware counters" : "", "); only an ok result is timed"));
  }
  const measure::DeviceState& d = t.device_state;
  if (d.sm_clock_mhz < 0 || d.memory_clock_mhz < 0 || d.temperature_c < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "device state (SM clock ", d.sm_clock_mhz, " MHz, memory clock ", d.memory_clock_mhz,
        " MHz, temperature ", d.temperature_c, " C) must not be negative; 0 means unknown"));
  }
  if (!measure::TimingKindOfNumber(static_cast<int64_t>(t.kind))) {
    return absl::InvalidArgumentError(absl::StrCat("timing kind ", static_cast<int>(t.kind),
                                                   " is neither confirmed (1) nor screened (2)"));
  }
  if (!FiniteNotNegative(m.compile_ms) || !FiniteNotNegative(m.verify_ms)) {
    return absl::InvalidArgumentError(absl::StrCat("compile_ms ", m.compile_ms, " and verify_ms ",
                                                   m.verify_ms,
                                                   ": times must be finite and not negative"));
  }
  for (const measure::KernelResources& k : m.kernels) {
    if (k.registers < 0 || k.static_shared_bytes < 0 || k.dynamic_shared_bytes < 0 ||
        k.local_bytes_per_thread < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("kernel '", k.entry, "' has negative resources (registers ", k.registers,
                       ", shared bytes ", k.static_shared_bytes, " + ", k.dynamic_shared_bytes,
                       ", local bytes ", k.local_bytes_per_thread, ")"));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckRecord(const Record& r) {
  if (r.workload_key.empty() || r.target_key.empty()) {
    return absl::InvalidArgumentError("a record needs its workload_key and target_key");
  }
  if (r.trace_json.empty() || !nlohmann::json::accept(r.trace_json)) {
    return absl::InvalidArgumentError(
        "a record's trace_json must be a trace's JSON, or \"null\" for the reference lowering");
  }
  return CheckMeasurement(r.measurement);
}

namespace {

// The trace of `trace_json` ("null": nullopt, the reference lowering), or why it cannot be read.
absl::StatusOr<std::optional<schedules::Trace>> ParseRecordTrace(const std::string& trace_json) {
  if (trace_json == "null") return std::optional<schedules::Trace>();
  absl::StatusOr<schedules::Trace> t = schedules::Trace::Parse(trace_json);
  if (!t.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("its trace cannot be read: ", t.status().message()));
  }
  return std::optional<schedules::Trace>(*std::move(t));
}

absl::Status DoesNotReplay(const schedules::Target& target, const absl::Status& why) {
  return absl::InvalidArgumentError(absl::StrCat("its trace does not replay on its workload for ",
                                                 target.ToString(), ": ", why.message()));
}

}  // namespace

absl::StatusOr<schedules::Candidate> ReplayTrace(const schedules::Workload& workload,
                                                 const schedules::Target& target,
                                                 const std::string& trace_json) {
  TESSEL_ASSIGN_OR_RETURN(std::optional<schedules::Trace> trace, ParseRecordTrace(trace_json));
  absl::StatusOr<schedules::Candidate> c =
      schedules::BuildCandidate(workload, target, std::move(trace));
  if (!c.ok()) return DoesNotReplay(target, c.status());
  return c;
}

absl::Status CheckReplays(const schedules::Workload& workload, const std::string& target_key,
                          const std::string& trace_json) {
  absl::StatusOr<schedules::Target> target = schedules::TargetOfKey(target_key);
  if (!target.ok()) return target.status();
  TESSEL_ASSIGN_OR_RETURN(std::optional<schedules::Trace> trace, ParseRecordTrace(trace_json));
  if (!trace) return ReplayTrace(workload, *target, trace_json).status();
  absl::StatusOr<schedules::Schedule> sch = schedules::Replay(workload, *trace);
  if (!sch.ok()) return DoesNotReplay(*target, sch.status());
  schedules::BuildStep failed_at = schedules::BuildStep::kLower;
  absl::Status built = schedules::BuildCandidate(*sch, *target, &failed_at).status();
  // A measured record ran: a trace that lowers but is over today's estimate of the target's
  // limits (registers, shared memory; estimates change between versions) is still its record.
  if (built.ok() || failed_at == schedules::BuildStep::kLimits) return absl::OkStatus();
  return DoesNotReplay(*target, built);
}

}  // namespace tessel::store
