#pragma once

// The learned cost model (DESIGN.md section 5): predicts how fast a candidate will be from its
// features (features.h), so a search strategy measures only the candidates that look best.
//
// What it learns: normalized throughput per workload, best_ms / this_ms in (0, 1] (the fastest
// measured candidate of its workload scores 1), failures as 0. Scores are comparable within one
// workload; across workloads only their order within each workload means anything.
//
// Life cycle: Update() adds measured examples and retrains when the data has grown enough since
// the last training (CostModelOptions). Until the first training (fewer than warmup_examples
// examples) Predict ranks by the roofline prior (roofline_prior.h) with a little seeded jitter
// to break ties, or at random when the prior is off.
// Serialize/Deserialize turn the trained model into bytes and back (the tuning log keeps them as
// a store::CostModelRow); ModelForTarget starts a job from a model trained on every record of
// its target (transfer, training_set.h).
//
// Threads: a CostModel is not thread-safe; its owner serializes the calls. The factories may be
// called from any thread.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "costmodel/features.h"
#include "schedules/target/target.h"

namespace tessel::costmodel {

// One measured candidate.
struct Example {
  std::string workload_key;
  Features features;
  double median_ms = 0;  // <= 0: the candidate failed (compile error, wrong result, timeout)
  // The median is a screening measurement's (measure::TimingKind::kScreened): a few repeats,
  // noisier than a confirmed one. Models weigh it less and never take it as a workload's best.
  bool screened = false;
};

struct CostModelOptions {
  uint64_t seed = 0;
  // Predict returns prior scores until this many examples have been seen.
  int64_t warmup_examples = 64;
  // The prior before the first training: the roofline estimate (true) or random scores.
  bool roofline_prior = true;
  // Retrain when the examples have grown by this factor since the last training...
  double retrain_growth = 1.2;
  // ...and by at least this many.
  int64_t retrain_min_new = 16;
};

// A trained model as bytes: what Serialize returns and Deserialize loads (the tuning log stores
// these fields in a store::CostModelRow).
struct SavedModel {
  std::string kind;         // "xgboost", ...
  int feature_version = 0;  // of the features it was trained on
  std::string bytes;        // the model itself
  std::string meta_json;    // what it was trained on (examples, workloads, training time)
};

class CostModel {
 public:
  virtual ~CostModel() = default;
  virtual std::string kind() const = 0;  // "xgboost", "random"

  // Adds measured examples (an example of a known workload may change that workload's best and
  // so every label of it); retrains when the data has grown enough.
  virtual absl::Status Update(const std::vector<Example>& examples) = 0;
  // One score per feature vector, higher = predicted faster.
  virtual std::vector<double> Predict(const std::vector<Features>& features) = 0;
  // True once a model has been trained (or loaded): Predict is no longer random.
  virtual bool trained() const = 0;
  virtual int64_t num_examples() const = 0;

  // The trained model as bytes, with its kind and feature version.
  virtual absl::StatusOr<SavedModel> Serialize() const = 0;
  // Loads what Serialize wrote; `name` names it in errors ("cost model 3 of host").
  // InvalidArgument when its kind or feature version is not this model's; the model is unchanged
  // then.
  virtual absl::Status Deserialize(const SavedModel& saved, const std::string& name) = 0;
};

// The model kinds MakeCostModel knows: "xgboost" (the default) and "random".
std::vector<std::string> KnownCostModels();
// InvalidArgument naming the kind and the known ones for an unknown kind.
absl::StatusOr<std::unique_ptr<CostModel>> MakeCostModel(const std::string& kind,
                                                         const CostModelOptions& options);

}  // namespace tessel::costmodel
