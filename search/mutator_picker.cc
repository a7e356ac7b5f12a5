#include "search/mutator_picker.h"

namespace tessel::search {

MutatorPicker::MutatorPicker(const CandidateSource* source, const MutatorWeights& weights) {
  auto add = [&](std::unique_ptr<Mutator> m, double w) {
    if (w <= 0) return;
    mutators_.push_back(std::move(m));
    weights_.push_back(w);
  };
  add(MakeTileSizeMutator(source), weights.tile_size);
  add(MakeThreadExtentMutator(source), weights.thread_extent);
  add(MakeUnrollMutator(source), weights.unroll);
  add(MakeCategoricalMutator(source), weights.categorical);
  add(MakeComputeLocationMutator(source), weights.compute_location);
}

const Mutator* MutatorPicker::Pick(const schedules::Trace& trace, std::mt19937_64& rng) const {
  std::vector<size_t> ok;
  double total = 0;
  for (size_t i = 0; i < mutators_.size(); ++i) {
    if (mutators_[i]->Applicable(trace)) {
      ok.push_back(i);
      total += weights_[i];
    }
  }
  if (ok.empty()) return nullptr;
  const double u = static_cast<double>(rng() >> 11) * (1.0 / 9007199254740992.0) * total;
  double acc = 0;
  for (size_t i : ok) {
    acc += weights_[i];
    if (u < acc) return mutators_[i].get();
  }
  return mutators_[ok.back()].get();
}

}  // namespace tessel::search
