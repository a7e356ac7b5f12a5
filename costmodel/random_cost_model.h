#pragma once

// The "random" cost model: seeded random scores, never trained. What a guided search uses when
// asked for random ranking (a baseline), and the warm-up behaviour of every model.
//
// Threads: as CostModel (not thread-safe).

#include <random>

#include "costmodel/cost_model.h"

namespace tessel::costmodel {

class RandomCostModel final : public CostModel {
 public:
  explicit RandomCostModel(uint64_t seed) : rng_(seed) {}

  std::string kind() const override { return "random"; }
  absl::Status Update(const std::vector<Example>& examples) override;
  std::vector<double> Predict(const std::vector<Features>& features) override;
  bool trained() const override { return false; }
  int64_t num_examples() const override { return examples_; }
  absl::StatusOr<SavedModel> Serialize() const override;
  absl::Status Deserialize(const SavedModel& saved, const std::string& name) override;

 private:
  std::mt19937_64 rng_;
  int64_t examples_ = 0;
};

}  // namespace tessel::costmodel
