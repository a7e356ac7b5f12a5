#pragma once

// Offline evaluation of a cost model on measured examples, one workload at a time (what
// `tessel costmodel eval` prints): train on a random subset of a workload's examples, predict the
// rest, and score the ranking.
//
// Scores, on the held-out examples of one workload:
//   - pairwise accuracy: of the pairs whose latencies differ (a failure is slower than every ok
//     example; two failures are not a pair), the fraction the predictions order the same way
//     (a tie in prediction counts one half);
//   - top-k of n: among up to n held-out examples, the fastest of the k best-predicted, divided by
//     the fastest of the n (1 is perfect; infinity when none of the k is ok); a hit when it is
//     within `within` (1.10: 10%).
//
// Threads: a free function; callable from any thread.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "costmodel/cost_model.h"

namespace tessel::costmodel {

struct EvalOptions {
  int64_t train = 256;  // examples trained on, per workload
  uint64_t seed = 0;
  std::string model = "xgboost";
  int64_t min_heldout = 32;  // a workload needs more than train + min_heldout ok examples
  int top_k = 8;
  int top_of = 512;
  double within = 1.10;
};

struct WorkloadEval {
  std::string workload_key;
  int64_t examples = 0;  // of the workload
  int64_t ok = 0;
  bool evaluated = false;  // false: too few ok examples (the counts below are 0)
  int64_t train = 0;
  int64_t heldout = 0;
  int64_t pairs = 0;
  double pairwise_accuracy = 0;
  int64_t top_of = 0;    // held-out examples the top-k was picked from
  double top_ratio = 0;  // fastest of the top-k / fastest of top_of (>= 1)
  bool top_hit = false;
  double train_ms = 0;  // the model's Update on the training examples
};

// One entry per workload of `examples`, in order of first appearance. InvalidArgument for an
// unknown model kind or train < 1.
absl::StatusOr<std::vector<WorkloadEval>> EvaluatePerWorkload(const std::vector<Example>& examples,
                                                              const EvalOptions& options);

// The pairwise accuracy of `scores` (higher = predicted faster) against `median_ms` (<= 0: failed)
// and the number of pairs it was computed over (0 pairs: accuracy 0).
double PairwiseAccuracy(const std::vector<double>& scores, const std::vector<double>& median_ms,
                        int64_t* pairs = nullptr);

}  // namespace tessel::costmodel
