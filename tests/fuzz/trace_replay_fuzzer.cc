// Fuzz target: trace JSON (schedules/schedule/trace.h, as in a trace file, a candidate file or a
// log record), replayed on two small workloads and, when it replays, lowered and generated for
// the host and a CUDA target (schedules/space/candidate.h BuildCandidate). Input: the JSON text.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "schedules/schedule/schedule.h"
#include "schedules/schedule/trace.h"
#include "schedules/space/candidate.h"
#include "schedules/target/target.h"
#include "schedules/workload/builtins.h"
#include "tests/fuzz/fuzz_util.h"

namespace {

using tessel::fuzz::Require;
using namespace tessel::schedules;  // NOLINT: a fuzz target's few names

const std::vector<Workload>& Workloads() {
  static const std::vector<Workload>* workloads = [] {
    auto* v = new std::vector<Workload>;
    for (const char* spec : {"matmul(M=64, N=64, K=32)", "softmax(rows=16, cols=128)"}) {
      absl::StatusOr<Workload> w = ParseWorkloadSpec(spec);
      Require(w.ok(), std::string("built-in workload ") + spec);
      v->push_back(*std::move(w));
    }
    return v;
  }();
  return *workloads;
}

const std::vector<Target>& Targets() {
  static const std::vector<Target>* targets =
      new std::vector<Target>{HostTarget(), CudaTarget("sm_90")};
  return *targets;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<Trace> trace = Trace::Parse(text);
  if (!trace.ok()) return 0;
  // A parsed trace writes JSON that reads back to the same trace.
  absl::StatusOr<Trace> again = Trace::Parse(trace->ToJsonString());
  Require(again.ok() && *again == *trace, "a parsed trace does not read back from its own JSON");
  for (const Workload& w : Workloads()) {
    absl::StatusOr<Schedule> s = Replay(w, *trace);
    if (!s.ok()) continue;
    for (const Target& t : Targets()) (void)BuildCandidate(*s, t);
  }
  return 0;
}
