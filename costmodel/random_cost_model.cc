#include "costmodel/random_cost_model.h"

#include "absl/strings/str_cat.h"

namespace tessel::costmodel {

absl::Status RandomCostModel::Update(const std::vector<Example>& examples) {
  examples_ += static_cast<int64_t>(examples.size());
  return absl::OkStatus();
}

std::vector<double> RandomCostModel::Predict(const std::vector<Features>& features) {
  std::uniform_real_distribution<double> u(0.0, 1.0);
  std::vector<double> out(features.size());
  for (double& x : out) x = u(rng_);
  return out;
}

absl::StatusOr<SavedModel> RandomCostModel::Serialize() const {
  SavedModel saved;
  saved.kind = kind();
  saved.feature_version = kFeatureVersion;
  saved.meta_json = absl::StrCat("{\"examples\":", examples_, "}");
  return saved;
}

absl::Status RandomCostModel::Deserialize(const SavedModel& saved, const std::string& /*name*/) {
  if (saved.kind != kind()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cost model of kind '", saved.kind, "' cannot be loaded into a '", kind(), "' model"));
  }
  return absl::OkStatus();
}

}  // namespace tessel::costmodel
