#include "costmodel/xgb_cost_model.h"

#include <xgboost/c_api.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <numeric>
#include <unordered_set>

#include "absl/strings/str_cat.h"
#include "costmodel/roofline_prior.h"
#include "nlohmann/json.hpp"
#include "schedules/util/status_macros.h"

namespace tessel::costmodel {
namespace {

// Relative jitter on the prior's scores: orders candidates with equal estimates at random.
constexpr double kPriorJitter = 0.02;

// XGBoost's message for a failed call, as a Status.
absl::Status XgbError(int rc, const char* what) {
  if (rc == 0) return absl::OkStatus();
  const char* msg = XGBGetLastError();
  return absl::InternalError(
      absl::StrCat("xgboost ", what, " failed: ", msg != nullptr ? msg : "(no message)"));
}

class DMatrix {
 public:
  DMatrix() = default;
  ~DMatrix() {
    if (h_ != nullptr) XGDMatrixFree(h_);
  }
  DMatrix(const DMatrix&) = delete;
  DMatrix& operator=(const DMatrix&) = delete;
  DMatrixHandle* out() { return &h_; }
  DMatrixHandle get() const { return h_; }

 private:
  DMatrixHandle h_ = nullptr;
};

// A dense matrix of `rows` feature vectors, in the order of `order`.
absl::Status MakeMatrix(const std::vector<const Features*>& rows, DMatrix* m) {
  const size_t cols = FeatureNames().size();
  std::vector<float> data;
  data.reserve(rows.size() * cols);
  for (const Features* f : rows) data.insert(data.end(), f->begin(), f->end());
  return XgbError(XGDMatrixCreateFromMat(data.data(), rows.size(), cols,
                                         std::numeric_limits<float>::quiet_NaN(), m->out()),
                  "XGDMatrixCreateFromMat");
}

absl::Status CheckLength(const Features& f) {
  if (f.size() == FeatureNames().size()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "feature vector of ", f.size(), " values where the features of version ", kFeatureVersion,
      " have ", FeatureNames().size(), "; compute features with costmodel::ExtractFeatures"));
}

double Ms(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - since)
      .count();
}

}  // namespace

struct XGBoostCostModel::Handle {
  BoosterHandle h = nullptr;
  ~Handle() {
    if (h != nullptr) XGBoosterFree(h);
  }
};

XGBoostCostModel::XGBoostCostModel(const CostModelOptions& options, const XGBoostOptions& xgb)
    : options_(options), xgb_(xgb), rng_(options.seed) {}

XGBoostCostModel::~XGBoostCostModel() = default;

absl::Status XGBoostCostModel::Update(const std::vector<Example>& examples) {
  for (const Example& e : examples) TESSEL_RETURN_IF_ERROR(CheckLength(e.features));
  for (const Example& e : examples) {
    examples_.push_back(e);
    if (e.median_ms > 0) {
      auto& best = e.screened ? best_screened_ms_ : best_ms_;
      auto [it, inserted] = best.emplace(e.workload_key, e.median_ms);
      if (!inserted) it->second = std::min(it->second, e.median_ms);
    }
  }
  const int64_t n = num_examples();
  if (n < std::max<int64_t>(1, options_.warmup_examples)) return absl::OkStatus();
  const bool first = trained_on_ == 0;
  const bool grown =
      static_cast<double>(n) >= static_cast<double>(trained_on_) * options_.retrain_growth &&
      n - trained_on_ >= options_.retrain_min_new;
  if (!first && !grown) return absl::OkStatus();
  return Train();
}

absl::Status XGBoostCostModel::Train() {
  if (examples_.empty()) {
    return absl::FailedPreconditionError("the xgboost cost model has no examples to train on");
  }
  const auto start = std::chrono::steady_clock::now();
  // Rows grouped by workload (first appearance order): rank:pairwise needs contiguous groups.
  std::unordered_map<std::string, uint32_t> group_of;
  std::vector<uint32_t> group(examples_.size());
  for (size_t i = 0; i < examples_.size(); ++i) {
    group[i] = group_of.emplace(examples_[i].workload_key, group_of.size()).first->second;
  }
  std::vector<size_t> order(examples_.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return group[a] < group[b]; });
  std::vector<const Features*> rows;
  std::vector<float> labels, weights;
  std::vector<unsigned> group_sizes(group_of.size(), 0);
  rows.reserve(order.size());
  for (size_t i : order) {
    const Example& e = examples_[i];
    double label = 0;
    if (e.median_ms > 0) {
      auto best = best_ms_.find(e.workload_key);
      const double best_ms =
          best != best_ms_.end() ? best->second : best_screened_ms_.at(e.workload_key);
      // A screened median below the confirmed best is noise (screening confirms what comes
      // near the best): it labels 1 like the best.
      label = std::pow(std::min(1.0, best_ms / e.median_ms), xgb_.label_power);
    }
    rows.push_back(&e.features);
    labels.push_back(static_cast<float>(label));
    weights.push_back(static_cast<float>(std::max(label, xgb_.min_weight) *
                                         (e.screened ? xgb_.screened_weight : 1.0)));
    ++group_sizes[group[i]];
  }
  const bool ranking = xgb_.objective.rfind("rank:", 0) == 0;

  DMatrix train;
  TESSEL_RETURN_IF_ERROR(MakeMatrix(rows, &train));
  TESSEL_RETURN_IF_ERROR(XgbError(
      XGDMatrixSetFloatInfo(train.get(), "label", labels.data(), labels.size()), "set labels"));
  if (ranking) {
    TESSEL_RETURN_IF_ERROR(
        XgbError(XGDMatrixSetUIntInfo(train.get(), "group", group_sizes.data(), group_sizes.size()),
                 "set groups"));
  } else {
    TESSEL_RETURN_IF_ERROR(
        XgbError(XGDMatrixSetFloatInfo(train.get(), "weight", weights.data(), weights.size()),
                 "set weights"));
  }
  auto booster = std::make_unique<Handle>();
  DMatrixHandle cache[] = {train.get()};
  TESSEL_RETURN_IF_ERROR(XgbError(XGBoosterCreate(cache, 1, &booster->h), "XGBoosterCreate"));
  if (!base_model_.empty()) {
    TESSEL_RETURN_IF_ERROR(
        XgbError(XGBoosterLoadModelFromBuffer(booster->h, base_model_.data(), base_model_.size()),
                 "loading the base model"));
  }
  const std::pair<const char*, std::string> params[] = {
      {"objective", xgb_.objective},
      {"tree_method", xgb_.tree_method},
      {"max_bin", std::to_string(xgb_.max_bin)},
      {"max_depth", std::to_string(xgb_.max_depth)},
      {"eta", absl::StrCat(xgb_.eta)},
      {"nthread", std::to_string(std::max(1, xgb_.nthread))},
      {"seed", std::to_string(options_.seed % 2147483647)},
      {"verbosity", "0"},
  };
  for (const auto& [name, value] : params) {
    TESSEL_RETURN_IF_ERROR(XgbError(XGBoosterSetParam(booster->h, name, value.c_str()),
                                    absl::StrCat("setting ", name, "=", value).c_str()));
  }
  int base_rounds = 0;
  if (!base_model_.empty()) {
    TESSEL_RETURN_IF_ERROR(
        XgbError(XGBoosterBoostedRounds(booster->h, &base_rounds), "XGBoosterBoostedRounds"));
  }
  for (int i = 0; i < xgb_.rounds; ++i) {
    TESSEL_RETURN_IF_ERROR(
        XgbError(XGBoosterUpdateOneIter(booster->h, base_rounds + i, train.get()),
                 "XGBoosterUpdateOneIter"));
  }
  booster_ = std::move(booster);
  trained_on_ = num_examples();
  last_train_ms_ = Ms(start);
  return absl::OkStatus();
}

absl::StatusOr<std::vector<double>> XGBoostCostModel::PredictOrError(
    const std::vector<Features>& features) {
  std::vector<double> out(features.size());
  if (!booster_) {
    std::uniform_real_distribution<double> u(0.0, 1.0);
    if (!options_.roofline_prior) {
      for (double& x : out) x = u(rng_);
      return out;
    }
    // Candidates with equal estimates (a choice the roofline cannot see) are ordered at random.
    out = RooflineScores(features);
    for (double& x : out) x *= 1.0 + kPriorJitter * u(rng_);
    return out;
  }
  if (features.empty()) return out;
  std::vector<const Features*> rows;
  rows.reserve(features.size());
  for (const Features& f : features) {
    TESSEL_RETURN_IF_ERROR(CheckLength(f));
    rows.push_back(&f);
  }
  DMatrix m;
  TESSEL_RETURN_IF_ERROR(MakeMatrix(rows, &m));
  const char* config = R"({"type": 0, "training": false, "iteration_begin": 0, "iteration_end": 0,)"
                       R"( "strict_shape": false})";
  const bst_ulong* shape = nullptr;
  bst_ulong dim = 0;
  const float* result = nullptr;
  TESSEL_RETURN_IF_ERROR(
      XgbError(XGBoosterPredictFromDMatrix(booster_->h, m.get(), config, &shape, &dim, &result),
               "XGBoosterPredictFromDMatrix"));
  bst_ulong n = 1;
  for (bst_ulong i = 0; i < dim; ++i) n *= shape[i];
  if (n != features.size()) {
    return absl::InternalError(
        absl::StrCat("xgboost predicted ", n, " values for ", features.size(), " feature vectors"));
  }
  for (size_t i = 0; i < out.size(); ++i) out[i] = result[i];
  return out;
}

std::vector<double> XGBoostCostModel::Predict(const std::vector<Features>& features) {
  absl::StatusOr<std::vector<double>> p = PredictOrError(features);
  if (p.ok()) return *std::move(p);
  last_error_ = std::string(p.status().message());
  std::uniform_real_distribution<double> u(0.0, 1.0);
  std::vector<double> out(features.size());
  for (double& x : out) x = u(rng_);
  return out;
}

absl::StatusOr<SavedModel> XGBoostCostModel::Serialize() const {
  if (!booster_) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the xgboost cost model is not trained yet (", num_examples(), " examples of the ",
        options_.warmup_examples, " it warms up with); there is nothing to save"));
  }
  bst_ulong len = 0;
  const char* bytes = nullptr;
  TESSEL_RETURN_IF_ERROR(
      XgbError(XGBoosterSaveModelToBuffer(booster_->h, R"({"format": "ubj"})", &len, &bytes),
               "XGBoosterSaveModelToBuffer"));
  int rounds = 0;
  TESSEL_RETURN_IF_ERROR(
      XgbError(XGBoosterBoostedRounds(booster_->h, &rounds), "XGBoosterBoostedRounds"));
  SavedModel saved;
  saved.kind = kind();
  saved.feature_version = kFeatureVersion;
  saved.bytes.assign(bytes, len);
  std::unordered_set<std::string> workloads;
  for (const Example& e : examples_) workloads.insert(e.workload_key);
  nlohmann::json meta = {{"examples", num_examples()},
                         {"trained_on", trained_on_},
                         {"workloads", workloads.size()},
                         {"train_ms", last_train_ms_},
                         {"objective", xgb_.objective},
                         {"rounds", rounds},
                         {"format", "ubj"},
                         {"continued_from_loaded_model", !base_model_.empty()}};
  saved.meta_json = meta.dump();
  return saved;
}

absl::Status XGBoostCostModel::Deserialize(const SavedModel& saved, const std::string& name) {
  if (saved.kind != kind()) {
    return absl::InvalidArgumentError(
        absl::StrCat("cost model of kind '", saved.kind, "' cannot be loaded into an '", kind(),
                     "' model; load it with MakeCostModel(\"", saved.kind, "\")"));
  }
  if (saved.feature_version != kFeatureVersion) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, " was trained on features of version ", saved.feature_version,
                     " but this build computes version ", kFeatureVersion,
                     "; retrain it from the tuning log (costmodel::ModelForTarget)"));
  }
  if (saved.bytes.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(name, " holds no model bytes"));
  }
  auto booster = std::make_unique<Handle>();
  TESSEL_RETURN_IF_ERROR(XgbError(XGBoosterCreate(nullptr, 0, &booster->h), "XGBoosterCreate"));
  absl::Status loaded = XgbError(
      XGBoosterLoadModelFromBuffer(booster->h, saved.bytes.data(), saved.bytes.size()), "loading");
  if (!loaded.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(name, " does not load: ", loaded.message()));
  }
  TESSEL_RETURN_IF_ERROR(XgbError(
      XGBoosterSetParam(booster->h, "nthread", std::to_string(std::max(1, xgb_.nthread)).c_str()),
      "setting nthread"));
  booster_ = std::move(booster);
  base_model_ = saved.bytes;
  return absl::OkStatus();
}

}  // namespace tessel::costmodel
