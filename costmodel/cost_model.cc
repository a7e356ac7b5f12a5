#include "costmodel/cost_model.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "costmodel/random_cost_model.h"
#include "costmodel/xgb_cost_model.h"

namespace tessel::costmodel {

std::vector<std::string> KnownCostModels() { return {"xgboost", "random"}; }

absl::StatusOr<std::unique_ptr<CostModel>> MakeCostModel(const std::string& kind,
                                                         const CostModelOptions& options) {
  if (kind == "random") return std::make_unique<RandomCostModel>(options.seed);
  if (kind == "xgboost") return std::make_unique<XGBoostCostModel>(options);
  return absl::InvalidArgumentError(absl::StrCat("unknown cost model '", kind, "': use one of ",
                                                 absl::StrJoin(KnownCostModels(), ", ")));
}

}  // namespace tessel::costmodel
