#pragma once

// The design space of a workload on a target: the schedule rules (schedules/rules) applied to
// every stage, consumers first, give one or more sketches: traces whose sampling instructions
// carry no decision. Sample(seed) picks a sketch, replays it with decisions drawn from the seed,
// lowers it, checks it against the target's limits and generates its source: a candidate, or a
// typed rejection that says which step refused it and why.
//
// Threads: a SpaceGenerator is immutable after Create; Sample may be called from any thread.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "schedules/space/candidate.h"

namespace tessel::schedules {

// Why a sample is not a candidate: the step that refused it ("replay", "lowering",
// "over_limits", "codegen") and its message.
struct Rejection {
  std::string step;
  std::string message;
};

class SpaceGenerator {
 public:
  static absl::StatusOr<SpaceGenerator> Create(const Workload& workload, const Target& target);

  const Workload& workload() const { return workload_; }
  const Target& target() const { return target_; }
  // The sketches, each with its sampling instructions undecided.
  const std::vector<Trace>& sketches() const { return sketches_; }

  // A candidate drawn with `seed` (deterministic: the same seed gives the same candidate), or
  // an error; on error `why` (when given) holds the typed rejection.
  absl::StatusOr<Candidate> Sample(uint64_t seed, Rejection* why = nullptr) const;

 private:
  SpaceGenerator(Workload w, Target t, std::vector<Trace> sketches)
      : workload_(std::move(w)), target_(std::move(t)), sketches_(std::move(sketches)) {}
  Workload workload_;
  Target target_;
  std::vector<Trace> sketches_;
};

// The trace with every sampling instruction's decision removed.
Trace WithoutDecisions(const Trace& trace);

}  // namespace tessel::schedules
