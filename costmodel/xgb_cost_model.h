#pragma once

// The "xgboost" cost model: gradient-boosted trees (the C API of the system's libxgboost) that
// learn normalized throughput per workload from program features (features.h).
//
// Labels: for each workload key, (best_ms / median_ms)^label_power of each example (the fastest
// example of its workload scores 1; a failure scores 0). Labels are recomputed from all examples
// at every training, so a new best of a workload relabels every example of it. The power 1.5 was
// chosen on the H100 log (bench/data/h100_random2000.jsonl.gz, `tessel costmodel eval`, seeds
// 0-4): top-8 of 512 within 10% of the best in 14 of 15 (workload, seed) cases against 10 of 15
// with power 1, pairwise accuracy 0.86-0.88 against 0.89-0.90 on the matmuls (softmax 0.98
// either way); power 2 hit 14 of 15 too but fell to 0.81-0.85 pairwise.
// Weights: weight = max(label, min_weight) (0.1 by default): an error on a fast candidate costs
// up to ten times more than one on a slow or failed candidate, because the search only acts on
// the candidates predicted best, while failures still pull their region of the space down.
// A screened example (measure::TimingKind::kScreened, issue 21) has its weight scaled by
// screened_weight and never sets its workload's best (its label is relative to the confirmed one).
// Objective: reg:squarederror by default; "rank:pairwise" (one query group per workload, no
// weights) is an option (XGBoostOptions::objective). On real host candidates of four matmul
// spaces with synthetic latencies (15% noise, the slowest failing; 128 trained on per workload,
// 3 seeds) squared error ranked held-out pairs 0.917 right against 0.895 for pairwise ranking,
// with the same top-8 hits (7 of 12), and min_weight 0.1 beat 1 (uniform) and 0.01 (0.917, 0.911,
// 0.905): not measurably better, so the default stays. Re-measure on real logs with
// `tessel costmodel eval`.
//
// Life cycle: Predict returns the prior's scores (roofline_prior.h, or random ones when
// CostModelOptions::roofline_prior is off) until warmup_examples examples have been seen;
// the first Update that reaches that number trains, and later Updates retrain on every example
// seen so far (all are kept in memory) once the examples have grown by retrain_growth and by at
// least retrain_min_new since the last training.
//
// A model loaded with Deserialize predicts with the loaded booster at once (trained() is true),
// without any example. When its own examples later call for a training (same rule: warm-up
// reached, then growth), it continues boosting from the loaded booster: every training starts
// again from the loaded trees and adds `rounds` trees fitted to its own examples, so the transfer
// knowledge is kept, what the new workloads teach is added, and the trees stop growing at
// loaded + rounds however often it retrains. Serialize then saves loaded + new trees.
//
// Threads: not thread-safe (as CostModel); distinct instances may be used from distinct threads.

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "costmodel/cost_model.h"

namespace tessel::costmodel {

struct XGBoostOptions {
  std::string objective = "reg:squarederror";  // or "rank:pairwise"
  int max_depth = 8;
  double eta = 0.25;
  int rounds = 60;  // boosting rounds per training
  // XGBoost's threads while training and predicting. More than 1 only where cores are free:
  // its OpenMP threads spin while waiting, and on a loaded machine a training that takes 40 ms
  // alone can take seconds.
  int nthread = 1;
  std::string tree_method = "hist";
  int max_bin = 256;
  double min_weight = 0.1;  // weight = max(label, min_weight)
  // label = (best_ms / median_ms)^label_power: above 1, the fast end of the range is spread out
  // and the slow end squeezed together, which is where the search needs the model to be right.
  double label_power = 1.5;
  // A screened example's weight is scaled by this (issue 21): its median comes from a few
  // repeats (a few % of noise where a confirmed one has under 2%), far below the model's own
  // error, so it still teaches the model where the slow candidates are, at half the say.
  double screened_weight = 0.5;
};

class XGBoostCostModel final : public CostModel {
 public:
  XGBoostCostModel(const CostModelOptions& options, const XGBoostOptions& xgb = {});
  ~XGBoostCostModel() override;
  XGBoostCostModel(const XGBoostCostModel&) = delete;
  XGBoostCostModel& operator=(const XGBoostCostModel&) = delete;

  std::string kind() const override { return "xgboost"; }
  // Errors: examples whose feature vectors do not have FeatureNames().size() values
  // (InvalidArgument; none of the batch is kept), or a training that XGBoost refused (Internal,
  // with XGBoost's message; the examples are kept and the previous booster still predicts).
  absl::Status Update(const std::vector<Example>& examples) override;
  // Before the first training: the prior (CostModelOptions::roofline_prior); random scores
  // (recorded in last_error()) if XGBoost fails.
  std::vector<double> Predict(const std::vector<Features>& features) override;
  bool trained() const override { return booster_ != nullptr; }
  int64_t num_examples() const override { return static_cast<int64_t>(examples_.size()); }
  // FailedPrecondition while untrained (nothing to save).
  absl::StatusOr<SavedModel> Serialize() const override;
  absl::Status Deserialize(const SavedModel& saved, const std::string& name) override;

  // Predict's scores, or XGBoost's error.
  absl::StatusOr<std::vector<double>> PredictOrError(const std::vector<Features>& features);
  // Trains now on every example seen (no warm-up or growth rule). FailedPrecondition without
  // examples.
  absl::Status Train();

  // Measurements of the last training (0 before one).
  double last_train_ms() const { return last_train_ms_; }
  int64_t trained_on() const { return trained_on_; }
  // The last error Predict swallowed (empty when none).
  const std::string& last_error() const { return last_error_; }

 private:
  struct Handle;  // an owned XGBoost BoosterHandle

  CostModelOptions options_;
  XGBoostOptions xgb_;
  std::mt19937_64 rng_;
  std::vector<Example> examples_;
  std::unordered_map<std::string, double> best_ms_;  // per workload key; ok confirmed examples
  // Per workload key, the best screened median: the labels' reference only for a workload
  // without a confirmed example (screening confirms whatever comes near the best).
  std::unordered_map<std::string, double> best_screened_ms_;
  std::unique_ptr<Handle> booster_;
  std::string base_model_;  // the loaded booster's bytes; empty unless Deserialize
  int64_t trained_on_ = 0;
  double last_train_ms_ = 0;
  std::string last_error_;
};

}  // namespace tessel::costmodel
