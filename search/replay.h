#pragma once

// Replay mode (DESIGN.md section 5, "measuring the search itself"): a search strategy runs
// against the measurements already in a tuning log instead of a GPU (the caller reads them:
// store/measured_traces.h). The log's records of one
// (workload, target) are the whole design space: the strategy gets them as its pool
// (SearchContext::pool), so it draws and keeps only candidates the log can answer, and every
// proposal is answered with the recorded status and median latency. A trial is one answered
// proposal, as on a real worker, so trial counts compare directly with live tuning.
//
// What this measures: how quickly a strategy finds the fast candidates among those recorded.
// It is exact for strategies that only draw from the pool (random search); a strategy that
// mutates can only keep mutants that happen to be recorded, so replay underestimates what
// mutation adds (fresh samples ranked by the cost model do most of the work here).
//
// Threads: free functions; each RunReplay is independent (it builds its own strategy).

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "costmodel/cost_model.h"
#include "measure/measured_trace.h"
#include "schedules/target/target.h"
#include "schedules/workload/workload.h"
#include "search/search_strategy.h"

namespace tessel::search {

// The recorded measurements of one (workload, target): the replay's design space.
struct ReplaySpace {
  schedules::Workload workload;
  schedules::Target target;
  std::shared_ptr<const CandidatePool> pool;
  // The answer for each pool member, by candidate id: its recorded measurement.
  absl::flat_hash_map<uint64_t, measure::Measurement> answers;
  double best_ms = 0;  // the fastest ok record (0 when none)
  int64_t ok = 0;
};

// The replay space of `traces`, the recorded measurements of `workload` on `target` (e.g.
// store::LoadRecordedWorkload's): the reference lowering is excluded, and a trace recorded twice
// counts once, the first record answering.
ReplaySpace MakeReplaySpace(schedules::Workload workload, const schedules::Target& target,
                            const std::vector<measure::MeasuredTrace>& traces);

struct ReplayOptions {
  std::string strategy;  // as MakeSearchStrategy ("" = the default)
  uint64_t seed = 0;
  int64_t trials = 0;   // stop after this many answered proposals (0: the pool's size)
  int batch_size = 64;  // proposals asked per round, as a job's batch
  // The model the strategy consults; null: the strategy's own cold model.
  std::shared_ptr<costmodel::CostModel> cost_model;
  int threads = 0;  // for the strategy's candidate building (SearchContext::threads); 0: all
  // Stop as soon as a trial's latency is at most this (0: run all the trials).
  double stop_at_ms = 0;
};

struct ReplayTrajectory {
  // best_ms[i]: the fastest ok latency among the first i + 1 trials (0 until one is ok).
  std::vector<double> best_ms;
  int64_t trials = 0;
  double search_s = 0;     // wall time spent in the strategy (generate + notify), not answering
  bool exhausted = false;  // the strategy ran dry before `trials`
};

absl::StatusOr<ReplayTrajectory> RunReplay(const ReplaySpace& space, const ReplayOptions& options);

// The number of trials after which the trajectory's best is within `fraction` of `target_ms`
// (best <= target_ms / fraction); -1 when it never is.
int64_t TrialsToReach(const ReplayTrajectory& t, double target_ms, double fraction);

}  // namespace tessel::search
