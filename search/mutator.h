#pragma once

// Mutators: small changes to the DECISIONS of a trace's sampling instructions (never to its other
// instructions), the moves of the guided searches (DESIGN.md section 5). Each mutator knows one
// kind of decision:
//   tile_size         sample_perfect_tile: moves a factor between two levels of one loop's tile
//                     (a tile sampled as a chain of two-factor tiles, as CUDA multi-level tiling
//                     does, is one tile of several levels), keeping the product and every
//                     instruction's max_innermost bound. A tile whose loop depends on the moved
//                     levels (e.g. the accumulator's tile inside the thread tile) is re-sampled.
//   unroll            sample_categorical whose value is an auto_unroll_max_step annotation.
//   thread_extent     sample_categorical whose value is the extent of a loop bound to threadIdx
//                     (cross-thread reductions, auto-bind).
//   categorical       any other sample_categorical (vector widths, reduction chunk sizes, the
//                     number of chunks of a split-K, the padded extent a loop no tile divides
//                     is tiled as; the tiles of that loop are re-sampled with it).
//   compute_location  sample_compute_location: another location (root, inline or a loop of the
//                     consumer) that the stage accepts; for the form with a candidate list (the
//                     shared and register cache levels of multi-level tiling), another candidate.
// Apply returns a trace that replays, lowers and passes the target's limits; NotFound when the
// trace has no instruction the mutator changes; FailedPrecondition when a few attempts gave no
// valid mutant. The trace returned is the replayed (canonical) one: its JSON hashes to the
// candidate id.
//
// Threads: a Mutator is immutable; Apply and Mutate may be called from any thread at once (each
// call with its own engine). The CandidateSource must outlive the mutator.

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "schedules/schedule/trace.h"
#include "search/candidate_source.h"

namespace tessel::search {

class Mutator {
 public:
  // Attempts of Apply / Mutate before giving up.
  static constexpr int kAttempts = 4;

  explicit Mutator(const CandidateSource* source) : source_(source) {}
  virtual ~Mutator() = default;

  virtual std::string name() const = 0;
  // The indices of the instructions this mutator may change; empty: not applicable.
  virtual std::vector<int> Sites(const schedules::Trace& trace) const = 0;
  bool Applicable(const schedules::Trace& trace) const { return !Sites(trace).empty(); }

  // A mutant that builds (without source), or NotFound / FailedPrecondition (above).
  absl::StatusOr<schedules::Trace> Apply(const schedules::Trace& trace, std::mt19937_64& rng) const;

  // What a search uses: up to `attempts` mutants of `parent`, each replayed, then offered to
  // `veto` (its id; a non-empty answer such as "duplicate" or "not_in_pool" refuses it before
  // lowering), then lowered and verified; the first that passes is returned, built without its
  // source. Every refused attempt is counted in `rejections` (when given) by its reason or step.
  absl::StatusOr<schedules::Candidate> Mutate(const schedules::Trace& parent, std::mt19937_64& rng,
                                              const std::function<std::string(uint64_t)>& veto,
                                              std::map<std::string, int64_t>* rejections,
                                              int attempts = kAttempts) const;

 protected:
  // `trace` with one site's decision changed (no replay). NotFound when there is no site;
  // FailedPrecondition when the chosen site has no other decision.
  virtual absl::StatusOr<schedules::Trace> Propose(const schedules::Trace& trace,
                                                   std::mt19937_64& rng) const = 0;

  const CandidateSource* source_;
};

// The mutators, one of each kind (above).
std::unique_ptr<Mutator> MakeTileSizeMutator(const CandidateSource* source);
std::unique_ptr<Mutator> MakeUnrollMutator(const CandidateSource* source);
std::unique_ptr<Mutator> MakeThreadExtentMutator(const CandidateSource* source);
std::unique_ptr<Mutator> MakeCategoricalMutator(const CandidateSource* source);
std::unique_ptr<Mutator> MakeComputeLocationMutator(const CandidateSource* source);

// ---- Trace analysis shared by the mutators (and their tests).

// What a sample_categorical's value is used for.
enum class CategoricalUse : uint8_t { kUnroll, kThreadExtent, kOther };
CategoricalUse CategoricalUseOf(const schedules::Trace& trace, int index);

// The tiles of one loop: sample_perfect_tile instructions chained by their outermost level (a
// tile whose split's outermost loop is sampled again by the next), innermost tile first. Every
// sample_perfect_tile is in exactly one group.
std::vector<std::vector<int>> TileGroups(const schedules::Trace& trace);
// A group's levels, outermost first (the last tile's decision, then each inner tile's decision
// without its first factor); their product is the extent of the group's loop.
std::vector<int64_t> TileLevels(const schedules::Trace& trace, const std::vector<int>& group);

}  // namespace tessel::search
