#pragma once

// A measurement together with what it measured: the form in which the search strategies and the
// cost model learn from measurements read back (e.g. the tuning log's records, which the caller
// reads: neither the search nor the cost model reads the log itself).

#include <string>

#include "measure/measurement.h"

namespace tessel::measure {

struct MeasuredTrace {
  std::string uid;           // names it in errors (the tuning log's record uid)
  std::string workload_key;  // schedules::WorkloadKey
  std::string trace_json;    // schedules::Trace JSON; "null" for the reference lowering
  Measurement measurement;
};

}  // namespace tessel::measure
