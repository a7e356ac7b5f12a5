#pragma once

// Evolutionary search (the default strategy, "evolutionary"; DESIGN.md section 5), a
// GuidedSearch (guided_search.h). Each GenerateCandidates(n):
//   1. population: the best measured candidates (up to measured_share of it) and fresh samples
//      up to the population size (EvolutionaryOptions: scaled with n, at most `population`);
//   2. `generations` rounds: parents drawn by predicted score (the cost model), one child each
//      by a mutator the picker draws (mutator_picker.h); a valid, unseen child replaces its
//      parent in the next population, otherwise the parent stays;
//   3. the batch: the best predicted of every unseen candidate met (fresh samples and children),
//      with an epsilon share of fresh random samples.
//
// Threads: as SearchStrategy (not thread-safe).

#include <memory>

#include "absl/status/statusor.h"
#include "search/guided_search.h"

namespace tessel::search {

struct EvolutionaryOptions {
  GuidedOptions guided;
  // The population of a call for n candidates: min(population, max(min_population,
  // population_per_candidate * n)), so that a small batch costs little.
  int population = 256;
  int min_population = 32;
  int population_per_candidate = 8;
  int generations = 3;
  // Replay mode (SearchContext::pool): mutants rarely land in the pool, so the fresh samples do
  // the exploring; the population is then min(pool_population, the pool's size) whatever n is,
  // and the cost model ranks that much of the pool per call.
  int pool_population = 2048;
  // At most this share of the initial population are measured candidates (the best).
  double measured_share = 0.25;
};

class EvolutionarySearch final : public GuidedSearch {
 public:
  static absl::StatusOr<std::unique_ptr<EvolutionarySearch>> Create(
      SearchContext context, const EvolutionaryOptions& options = {});

  std::string name() const override { return "evolutionary"; }

 protected:
  std::vector<Built> Explore(int n) override;

 private:
  EvolutionarySearch(SearchContext context, CandidateSource source,
                     const EvolutionaryOptions& options)
      : GuidedSearch(std::move(context), std::move(source), options.guided), options_(options) {}

  EvolutionaryOptions options_;
};

}  // namespace tessel::search
