#pragma once

// Simulated annealing over decisions ("annealing"), a GuidedSearch (guided_search.h). Each
// GenerateCandidates(n) runs `chains` chains for `steps` steps: a chain starts from one of the
// best measured candidates (up to half of the chains) or a fresh sample; each step mutates its
// state (a mutator the picker draws) and accepts the mutant when its predicted score is higher,
// or else with probability exp((new - old) / T); T starts at `initial_temperature` and is
// multiplied by `cooling` after every step. The batch: the best predicted of every unseen state
// visited (accepted or not), with an epsilon share of fresh random samples.
//
// Threads: as SearchStrategy (not thread-safe).

#include <memory>

#include "absl/status/statusor.h"
#include "search/guided_search.h"

namespace tessel::search {

struct AnnealingOptions {
  GuidedOptions guided;
  // Chains of a call for n candidates: min(chains, max(4, n)).
  int chains = 16;
  int steps = 16;
  double initial_temperature = 0.1;
  double cooling = 0.85;
};

class AnnealingSearch final : public GuidedSearch {
 public:
  static absl::StatusOr<std::unique_ptr<AnnealingSearch>> Create(
      SearchContext context, const AnnealingOptions& options = {});

  std::string name() const override { return "annealing"; }
  // Moves accepted in the last call (for tests and logs).
  int64_t last_accepted() const { return accepted_; }

 protected:
  std::vector<Built> Explore(int n) override;

 private:
  AnnealingSearch(SearchContext context, CandidateSource source, const AnnealingOptions& options)
      : GuidedSearch(std::move(context), std::move(source), options.guided), options_(options) {}

  AnnealingOptions options_;
  int64_t accepted_ = 0;
};

}  // namespace tessel::search
