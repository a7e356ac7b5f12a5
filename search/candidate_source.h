#pragma once

// Where every search strategy gets its candidates from, and how it turns a trace (a sample or a
// mutant) into a candidate:
//   - design-space mode: Sample(seed) draws from schedules::SpaceGenerator;
//   - replay mode (context.pool set, search/replay.h): Sample(seed) draws a member of the pool
//     (index from the seed), FromPool(i) gives member i; InPool(id) says whether a mutant can be
//     answered.
// Build(trace) replays a trace (e.g. a mutant), lowers it, checks it against the target's limits
// and (unless asked not to) generates its source; a refusal comes back as a typed
// schedules::Rejection (step "replay", "lowering", "over_limits" or "codegen", and the message).
// The candidate's trace is the replayed one: its JSON is the canonical form whose hash is the
// candidate id (CandidateIdOf(TraceJsonOf(trace))).
//
// Threads: immutable after Create; every method may be called from any thread at once.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "schedules/space/space_generator.h"
#include "search/search_strategy.h"

namespace tessel::search {

class CandidateSource {
 public:
  // InvalidArgument when the design space cannot be generated for the workload and target.
  static absl::StatusOr<CandidateSource> Create(const schedules::Workload& workload,
                                                const schedules::Target& target,
                                                std::shared_ptr<const CandidatePool> pool);

  const schedules::Workload& workload() const { return space_->workload(); }
  const schedules::Target& target() const { return space_->target(); }
  bool pool_mode() const { return pool_ != nullptr; }
  size_t pool_size() const { return pool_ ? pool_->trace_jsons.size() : 0; }
  const CandidatePool* pool() const { return pool_.get(); }
  // Replay mode: whether the pool holds this candidate id (always true otherwise).
  bool InPool(uint64_t id) const { return !pool_ || pool_->ids.contains(id); }

  // A fresh candidate drawn with `seed`: a design-space sample, or in replay mode the pool
  // member at index seed % pool_size(). Deterministic. On error `why` holds the rejection.
  absl::StatusOr<schedules::Candidate> Sample(uint64_t seed, schedules::Rejection* why,
                                              bool codegen = true) const;
  // Replay mode: pool member `index` (< pool_size()).
  absl::StatusOr<schedules::Candidate> FromPool(size_t index, schedules::Rejection* why,
                                                bool codegen = true) const;

  // Replays `trace` (sampling instructions without a decision drawn with `seed`); on error
  // `why` = {"replay", message}.
  absl::StatusOr<schedules::Schedule> Replay(const schedules::Trace& trace,
                                             schedules::Rejection* why, uint64_t seed = 0) const;
  // Lowers and verifies a replayed schedule and, with `codegen`, generates its source (without,
  // candidate.source is empty: enough for features). On error `why` holds the step.
  absl::StatusOr<schedules::Candidate> Build(const schedules::Schedule& schedule,
                                             schedules::Rejection* why, bool codegen = true) const;
  // Replay + Build.
  absl::StatusOr<schedules::Candidate> Build(const schedules::Trace& trace,
                                             schedules::Rejection* why, bool codegen = true) const;
  // Generates the source of a candidate built without codegen (no-op when it has one).
  absl::Status AddSource(schedules::Candidate* candidate, schedules::Rejection* why) const;

  // CPU time spent building (lowering, limit checks, code generation: Build and AddSource) by
  // every thread and every copy of this source since Create, in milliseconds: the live loop's
  // "build" stage (server/job_timeline.h).
  double build_ms() const;

 private:
  CandidateSource(std::shared_ptr<const schedules::SpaceGenerator> space,
                  std::shared_ptr<const CandidatePool> pool)
      : space_(std::move(space)), pool_(std::move(pool)) {}

  std::shared_ptr<const schedules::SpaceGenerator> space_;
  std::shared_ptr<const CandidatePool> pool_;
  std::shared_ptr<std::atomic<int64_t>> build_ns_ = std::make_shared<std::atomic<int64_t>>(0);
};

// The seed of draw `counter` of a task: FNV-1a over (job seed, task id, counter), stable across
// machines and runs.
uint64_t DrawSeed(uint64_t job_seed, int64_t task_id, uint64_t counter);

// The id of a measured result: its candidate_id, or the hash of its normalized trace JSON.
uint64_t MeasuredId(const MeasuredResult& m);

}  // namespace tessel::search
