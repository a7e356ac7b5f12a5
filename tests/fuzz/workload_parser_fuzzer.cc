// Fuzz target: the workload text parser (schedules/workload/parser.h) and the one-line spec of
// the built-in families (builtins.h), as a server reads a client's workload text. Input: the text.

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "schedules/workload/builtins.h"
#include "schedules/workload/key.h"
#include "schedules/workload/parser.h"
#include "tests/fuzz/fuzz_util.h"

using tessel::fuzz::Require;
using tessel::schedules::Workload;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<Workload> w = tessel::schedules::ParseWorkload(text);
  if (w.ok()) {
    // An accepted definition parses again to the same workload (its key is of the canonical text).
    absl::StatusOr<Workload> again = tessel::schedules::ParseWorkload(w->spec);
    Require(again.ok(),
            "an accepted workload does not parse again: " + std::string(again.status().message()));
    Require(tessel::schedules::WorkloadKey(*again) == tessel::schedules::WorkloadKey(*w),
            "an accepted workload's key changes when parsed again");
  } else {
    Require(!w.status().message().empty(), "a parse error without a message");
  }
  // What a server accepts from a client: a definition or a one-line spec.
  (void)tessel::schedules::ParseWorkloadText(text);
  return 0;
}
