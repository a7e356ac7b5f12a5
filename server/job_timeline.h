#pragma once

// The timeline of a job's live loop (issue 21): where each candidate's wall time went, stage by
// stage, from the search proposing it to the strategy hearing its result. Server stages are
// measured on the server's steady clock, worker stages on the worker's (measure::WorkerTimes,
// compile_ms, verify_ms): only durations are compared, never time points of two machines.
//
// Per candidate (milliseconds):
//   sample        the search strategy's GenerateCandidates call (sampling, mutation, lowering,
//                 code generation and the cost model), divided among the candidates it proposed
//     build       of that call, the CPU time lowering, checking and generating code (summed over
//                 the strategy's threads, so it can exceed sample), divided likewise
//   server queue  enqueued at the dispatcher until its batch was sent to a worker
//   in flight     batch sent until the result arrived at the server; it holds:
//     worker queue  the batch's arrival at the worker until its device started on the candidate
//     device        the device's time on it: compile wait + verify + time + the child's overhead
//     transit       in flight - worker queue - device (the stream, (de)serialization)
//   compile       the compilation itself (on the worker's pool, overlapped with measurement)
//   compile wait  of device, waiting for the compilation
//   verify, time  of device, verification and timing (screening and the full measurement)
//   store         the result's transaction in the tuning log
//   learn         the strategy's NotifyResults (the cost model's training included)
//   total         sample + from enqueueing until learn ended
//
// Threads: one thread at a time (the job manager holds its lock).

#include <cstdint>
#include <string>
#include <vector>

#include "measure/measurement.h"

namespace tessel::server {

// One candidate's stages (see the top of the file); negative: unknown.
struct CandidateStages {
  double sample_ms = -1;
  double build_ms = -1;
  double server_queue_ms = -1;
  double in_flight_ms = -1;
  double store_ms = -1;
  double learn_ms = -1;
  double total_ms = -1;
  measure::Measurement const* result = nullptr;  // the worker's figures; not owned
};

struct TimelineStage {
  std::string name;
  int64_t count = 0;  // candidates with a value
  double sum_ms = 0;
  double median_ms = 0;
  std::string what;  // one line
};

class JobTimeline {
 public:
  void Add(const CandidateStages& stages);
  // Every stage, in the order of the top of the file, with the candidates that had a value.
  std::vector<TimelineStage> Stages() const;
  int64_t candidates() const { return candidates_; }

 private:
  static constexpr size_t kMaxValues = 1 << 16;  // per stage, for the medians
  void Put(int stage, double ms);
  int64_t candidates_ = 0;
  struct Values {
    int64_t count = 0;
    double sum_ms = 0;
    std::vector<float> kept;  // the first kMaxValues values
  };
  std::vector<Values> values_;
};

}  // namespace tessel::server
