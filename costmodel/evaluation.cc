#include "costmodel/evaluation.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <unordered_map>

#include "absl/strings/str_cat.h"
#include "schedules/util/fnv1a.h"
#include "schedules/util/status_macros.h"

namespace tessel::costmodel {
namespace {

// Higher is faster; failures below every ok latency.
double Speed(double median_ms) {
  return median_ms > 0 ? -median_ms : -std::numeric_limits<double>::infinity();
}

}  // namespace

double PairwiseAccuracy(const std::vector<double>& scores, const std::vector<double>& median_ms,
                        int64_t* pairs) {
  double correct = 0;
  int64_t n = 0;
  for (size_t i = 0; i < scores.size(); ++i) {
    const double si = Speed(median_ms[i]);
    for (size_t j = i + 1; j < scores.size(); ++j) {
      const double sj = Speed(median_ms[j]);
      if (si == sj) continue;
      ++n;
      if (scores[i] == scores[j]) {
        correct += 0.5;
      } else if ((scores[i] > scores[j]) == (si > sj)) {
        correct += 1;
      }
    }
  }
  if (pairs != nullptr) *pairs = n;
  return n > 0 ? correct / static_cast<double>(n) : 0.0;
}

absl::StatusOr<std::vector<WorkloadEval>> EvaluatePerWorkload(const std::vector<Example>& examples,
                                                              const EvalOptions& options) {
  if (options.train < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--train ", options.train, " is too small; train on at least 1 record"));
  }
  CostModelOptions model_options;
  model_options.seed = options.seed;
  model_options.warmup_examples = 1;  // train at once on the training examples
  TESSEL_RETURN_IF_ERROR(MakeCostModel(options.model, model_options).status());

  std::vector<std::string> keys;
  std::unordered_map<std::string, std::vector<size_t>> of;
  for (size_t i = 0; i < examples.size(); ++i) {
    auto [it, inserted] = of.try_emplace(examples[i].workload_key);
    if (inserted) keys.push_back(examples[i].workload_key);
    it->second.push_back(i);
  }
  std::vector<WorkloadEval> out;
  for (const std::string& key : keys) {
    std::vector<size_t> idx = of[key];
    WorkloadEval ev;
    ev.workload_key = key;
    ev.examples = static_cast<int64_t>(idx.size());
    for (size_t i : idx) ev.ok += examples[i].median_ms > 0 ? 1 : 0;
    if (ev.ok <= options.train + options.min_heldout) {
      out.push_back(ev);
      continue;
    }
    ev.evaluated = true;
    std::mt19937_64 rng(options.seed ^ schedules::Fnv1a64(key));
    std::shuffle(idx.begin(), idx.end(), rng);
    std::vector<Example> train;
    for (int64_t i = 0; i < options.train; ++i) train.push_back(examples[idx[i]]);
    std::vector<Features> held;
    std::vector<double> held_ms;
    for (size_t i = static_cast<size_t>(options.train); i < idx.size(); ++i) {
      held.push_back(examples[idx[i]].features);
      held_ms.push_back(examples[idx[i]].median_ms);
    }
    ev.train = options.train;
    ev.heldout = static_cast<int64_t>(held.size());
    TESSEL_ASSIGN_OR_RETURN(std::unique_ptr<CostModel> model,
                            MakeCostModel(options.model, model_options));
    const auto start = std::chrono::steady_clock::now();
    TESSEL_RETURN_IF_ERROR(model->Update(train));
    ev.train_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    const std::vector<double> scores = model->Predict(held);
    ev.pairwise_accuracy = PairwiseAccuracy(scores, held_ms, &ev.pairs);

    // Top-k of the first top_of held-out examples (a random subset: idx is shuffled).
    const size_t n =
        std::min<size_t>(held.size(), static_cast<size_t>(std::max(1, options.top_of)));
    ev.top_of = static_cast<int64_t>(n);
    std::vector<size_t> by_score(n);
    std::iota(by_score.begin(), by_score.end(), 0);
    std::stable_sort(by_score.begin(), by_score.end(),
                     [&](size_t a, size_t b) { return scores[a] > scores[b]; });
    double best = std::numeric_limits<double>::infinity(), picked = best;
    for (size_t i = 0; i < n; ++i) {
      if (held_ms[i] > 0) best = std::min(best, held_ms[i]);
    }
    for (size_t r = 0; r < n && r < static_cast<size_t>(std::max(1, options.top_k)); ++r) {
      const double ms = held_ms[by_score[r]];
      if (ms > 0) picked = std::min(picked, ms);
    }
    // NaN when the subset holds no ok example (possible only when failures dominate).
    ev.top_ratio = std::isfinite(best) ? picked / best : std::numeric_limits<double>::quiet_NaN();
    ev.top_hit = ev.top_ratio <= options.within;
    out.push_back(ev);
  }
  return out;
}

}  // namespace tessel::costmodel
