#pragma once

// Random search: independent samples of the design space (schedules/space), each drawn with a
// seed derived from (job seed, task id, counter). Rejected samples are skipped and counted by
// the step that refused them; traces already measured or proposed are skipped (by the hash of
// their JSON). Results do not steer it.
//
// Threads: as SearchStrategy (not thread-safe).

#include <cstdint>
#include <map>
#include <string>
#include <unordered_set>
#include <vector>

#include "absl/status/statusor.h"
#include "schedules/space/space_generator.h"
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

  // The seed of draw `counter` (public for tests).
  static uint64_t DrawSeed(uint64_t job_seed, int64_t task_id, uint64_t counter);

 private:
  RandomSearch(SearchContext context, schedules::SpaceGenerator space)
      : context_(std::move(context)), space_(std::move(space)) {}

  SearchContext context_;
  schedules::SpaceGenerator space_;
  uint64_t counter_ = 0;
  std::unordered_set<uint64_t> seen_;  // candidate ids measured or proposed
  std::map<std::string, int64_t> rejections_;
};

}  // namespace tessel::search
