#pragma once

// GuidedSearch: what the cost-model-guided strategies (evolutionary, annealing) share.
//   - Candidates come from a CandidateSource (design space or replay pool) and from mutators.
//   - The cost model (context.cost_model, or a cold one of its own: "xgboost", falling back to
//     "random" where that kind is unknown) ranks candidates by the features of their lowered
//     programs; NotifyResults teaches it (costmodel::Example: workload key, features, median_ms,
//     <= 0 for a failure). Results of context.measured are rebuilt once at creation and given to
//     it (unless context.model_has_measured).
//   - GenerateCandidates(n): the strategy's Explore() returns built, unseen candidates; the batch
//     is the top predicted ones, with an epsilon-greedy share of fresh random samples
//     (round(epsilon * n) of the n); only those are code-generated.
//   - Never proposes a candidate already measured (context.measured or notified) or proposed:
//     ids are CandidateIdOf(TraceJsonOf(trace)). In replay mode a mutant not in the pool is
//     discarded (rejection "not_in_pool").
//   - Building (replay, lowering, limits) is the cost: done on context.threads std::threads
//     (0: hardware concurrency), every item seeded by its index so the result does not depend on
//     the thread count.
//
// Threads: as SearchStrategy (not thread-safe; the owner serializes the calls). Internally the
// builds run on worker threads that only read the strategy's state.

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "absl/status/statusor.h"
#include "costmodel/cost_model.h"
#include "search/candidate_source.h"
#include "search/mutator_picker.h"
#include "search/search_strategy.h"

namespace tessel::search {

struct GuidedOptions {
  // Share of each batch taken by fresh random samples instead of the top predicted ones.
  double epsilon = 0.1;
  MutatorWeights mutator_weights;
};

// Statistics of the last GenerateCandidates call (for tests, logs and benchmarks).
struct SearchStats {
  int threads = 0;
  int64_t built = 0;                             // candidates lowered (samples and mutants)
  int64_t explored = 0;                          // distinct unseen candidates ranked for the batch
  int64_t proposed_model = 0;                    // batch members picked by predicted score
  int64_t proposed_random = 0;                   // batch members that are fresh random samples
  std::map<std::string, int64_t> mutants_tried;  // per mutator: Mutate calls
  std::map<std::string, int64_t> mutants_valid;  // per mutator: mutants returned
};

class GuidedSearch : public SearchStrategy {
 public:
  absl::StatusOr<std::vector<Proposal>> GenerateCandidates(int n) final;
  void NotifyResults(const std::vector<MeasuredResult>& results) final;
  std::map<std::string, int64_t> rejections() const final { return rejections_; }
  double build_ms() const final { return source_.build_ms(); }

  const SearchStats& last_stats() const { return stats_; }
  costmodel::CostModel& cost_model() { return *model_; }

 protected:
  // A candidate built without its source, with its features.
  struct Built {
    uint64_t id = 0;
    schedules::Candidate candidate;
    costmodel::Features features;
  };
  // A measured candidate a search may start from.
  struct Measured {
    uint64_t id = 0;
    schedules::Trace trace;
    costmodel::Features features;
    double median_ms = 0;  // <= 0: failed
  };

  GuidedSearch(SearchContext context, CandidateSource source, GuidedOptions options);
  // Makes the cost model and feeds it context.measured; call once from Create.
  absl::Status Init();

  // Unseen candidates for the batch of `n` (the strategy's exploration).
  virtual std::vector<Built> Explore(int n) = 0;

  // ---- For Explore.
  // `count` fresh samples (design space or pool), built in parallel; rejected draws are
  // counted and skipped (so fewer may come back). With `unseen_only`, samples already measured
  // or proposed (or in `exclude`) are skipped too.
  std::vector<Built> FreshSamples(int count, bool unseen_only,
                                  const std::unordered_set<uint64_t>& exclude = {});
  // One mutant of each parent (nullopt where none was found), in parallel: child i uses an
  // engine seeded by (call, `round`, i) and a mutator the picker draws for its parent. Mutants
  // already seen or in `exclude`, or outside the pool, are refused before lowering.
  std::vector<std::optional<Built>> MutateAll(const std::vector<const schedules::Trace*>& parents,
                                              uint64_t round,
                                              const std::unordered_set<uint64_t>& exclude);
  std::vector<double> Predict(const std::vector<const costmodel::Features*>& features);
  // The best measured ok candidates, fastest first, at most `k`.
  std::vector<const Measured*> BestMeasured(int k) const;
  bool Seen(uint64_t id) const { return seen_.count(id) > 0; }
  // A seed for item `i` of purpose `round` of this call.
  uint64_t ItemSeed(uint64_t round, uint64_t i) const;
  std::mt19937_64 CallEngine(uint64_t round) const {
    return std::mt19937_64(ItemSeed(round, ~0ull));
  }

  const SearchContext& context() const { return context_; }
  int threads() const { return threads_; }
  SearchStats& stats() { return stats_; }
  void Reject(const std::string& why, int64_t count = 1) { rejections_[why] += count; }

 private:
  // Features and trace of a measured result, rebuilt from its JSON; nullopt when it does not
  // build (e.g. the reference, "null").
  std::optional<Built> Rebuild(const std::string& trace_json);
  void Remember(uint64_t id, const schedules::Trace& trace, const costmodel::Features& f,
                double median_ms);

  SearchContext context_;
  CandidateSource source_;
  GuidedOptions options_;
  MutatorPicker picker_;
  std::shared_ptr<costmodel::CostModel> model_;
  std::string workload_key_;
  int threads_ = 1;
  uint64_t calls_ = 0;
  uint64_t draws_ = 0;                 // fresh-sample counter, across calls
  std::unordered_set<uint64_t> seen_;  // measured or proposed
  std::unordered_map<uint64_t, std::pair<schedules::Trace, costmodel::Features>> proposed_;
  std::vector<Measured> measured_;
  std::map<std::string, int64_t> rejections_;
  SearchStats stats_;
};

// The cost model a guided strategy uses when the context has none: "xgboost", or "random"
// where MakeCostModel does not know "xgboost".
std::shared_ptr<costmodel::CostModel> DefaultCostModel(uint64_t seed);

}  // namespace tessel::search
