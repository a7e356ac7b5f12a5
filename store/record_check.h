#pragma once

// What the tuning log accepts: the one definition of a good measurement and a good record
// (DESIGN.md section 10: nothing a peer sends is trusted). The server checks a worker's result
// with it before the result is stored, the log checks every record it adds or imports, and its
// readers skip (and report) a stored row that fails it instead of failing themselves.
//
// Threads: free functions, callable from any thread.

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "measure/measurement.h"
#include "schedules/space/candidate.h"
#include "schedules/target/target.h"
#include "schedules/workload/workload.h"
#include "store/tuning_log.h"

namespace tessel::store {

// An ok measurement has at least one repeat, every repeat a finite positive time, and a finite
// positive median that lies within its repeats, CUPTI kernel times and their median and the
// counters (when collected) finite and not negative; any other status carries no timings. Clocks
// and temperature are not negative (0: unknown), the timing kind is a known one. Compile and verify
// times are finite and not negative, kernel resources not negative. InvalidArgument saying which
// field and why.
absl::Status CheckMeasurement(const measure::Measurement& m);

// A record has its workload and target keys, a trace that is JSON ("null" for the reference
// lowering) and a measurement CheckMeasurement accepts.
absl::Status CheckRecord(const Record& r);

// The candidate of a record's trace (trace_json; "null" is the reference lowering) read by this
// build and replayed on `workload` for `target`. InvalidArgument naming the problem.
absl::StatusOr<schedules::Candidate> ReplayTrace(const schedules::Workload& workload,
                                                 const schedules::Target& target,
                                                 const std::string& trace_json);

// Whether a record's trace replays and lowers on `workload` for the target of key `target_key`
// (schedules::Target::ToString of a target this build knows). A trace over this build's estimate
// of the target's limits passes: its record was measured, so it ran.
absl::Status CheckReplays(const schedules::Workload& workload, const std::string& target_key,
                          const std::string& trace_json);

}  // namespace tessel::store
