#pragma once

// MutatorPicker: the mutators of a search with their weights (Meta-Schedule-like: mostly tile
// sizes), and a draw of one that applies to a given trace, by weight among the applicable ones.
//
// Threads: immutable after construction; Pick may be called from any thread at once (each call
// with its own engine).

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "search/mutator.h"

namespace tessel::search {

struct MutatorWeights {
  double tile_size = 0.55;
  double thread_extent = 0.15;
  double unroll = 0.10;
  double categorical = 0.10;
  double compute_location = 0.10;
};

class MutatorPicker {
 public:
  // The five mutators of mutator.h with their weights (a weight <= 0 leaves one out).
  MutatorPicker(const CandidateSource* source, const MutatorWeights& weights = {});

  // A mutator that applies to `trace`, drawn by weight among those that do; nullptr when none.
  const Mutator* Pick(const schedules::Trace& trace, std::mt19937_64& rng) const;
  // The mutators and their weights, in a fixed order.
  const std::vector<std::unique_ptr<Mutator>>& mutators() const { return mutators_; }
  const std::vector<double>& weights() const { return weights_; }

 private:
  std::vector<std::unique_ptr<Mutator>> mutators_;
  std::vector<double> weights_;
};

}  // namespace tessel::search
