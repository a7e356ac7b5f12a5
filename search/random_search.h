#pragma once

// Random search: independent samples of the candidate source (candidate_source.h). Design-space
// mode: each draw seeded by (job seed, task id, counter). Replay mode (context.pool): the pool's
// members without replacement, in an order shuffled by (job seed, task id). Rejected samples are
// skipped and counted by the step that refused them; traces already measured or proposed are
// skipped (by the hash of their JSON). Results do not steer it.
//
// Threads: as SearchStrategy (not thread-safe).

#include <cstdint>
#include <map>
#include <string>
#include <unordered_set>
#include <vector>

#include "absl/status/statusor.h"
#include "search/candidate_source.h"
#include "search/search_strategy.h"

namespace tessel::search {

class RandomSearch final : public SearchStrategy {
 public:
  // Consecutive draws without a new candidate after which GenerateCandidates stops early.
  static constexpr int kMaxFruitlessDraws = 256;

  static absl::StatusOr<std::unique_ptr<RandomSearch>> Create(SearchContext context);

  std::string name() const override { return "random"; }
  absl::StatusOr<std::vector<Proposal>> GenerateCandidates(int n) override;
  void NotifyResults(const std::vector<MeasuredResult>& results) override;
  std::map<std::string, int64_t> rejections() const override { return rejections_; }
  double build_ms() const override { return source_.build_ms(); }

  // The seed of draw `counter` (public for tests; = search::DrawSeed).
  static uint64_t DrawSeed(uint64_t job_seed, int64_t task_id, uint64_t counter) {
    return search::DrawSeed(job_seed, task_id, counter);
  }

 private:
  RandomSearch(SearchContext context, CandidateSource source)
      : context_(std::move(context)), source_(std::move(source)) {}
  absl::StatusOr<std::vector<Proposal>> FromPool(int n);

  SearchContext context_;
  CandidateSource source_;
  uint64_t counter_ = 0;
  std::vector<size_t> pool_order_;  // replay mode: the members' order
  size_t pool_next_ = 0;
  std::unordered_set<uint64_t> seen_;  // candidate ids measured or proposed
  std::map<std::string, int64_t> rejections_;
};

}  // namespace tessel::search
