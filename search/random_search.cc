#include "search/random_search.h"

#include <numeric>
#include <random>
#include <utility>

namespace tessel::search {

absl::StatusOr<std::unique_ptr<RandomSearch>> RandomSearch::Create(SearchContext context) {
  absl::StatusOr<CandidateSource> source =
      CandidateSource::Create(context.workload, context.target, context.pool);
  if (!source.ok()) return source.status();
  auto s = std::unique_ptr<RandomSearch>(new RandomSearch(std::move(context), std::move(*source)));
  for (const MeasuredResult& m : s->context_.measured) s->seen_.insert(MeasuredId(m));
  if (s->source_.pool_mode()) {
    // Fisher-Yates with our own index draws: the same order on every standard library.
    std::vector<size_t>& order = s->pool_order_;
    order.resize(s->source_.pool_size());
    std::iota(order.begin(), order.end(), size_t{0});
    std::mt19937_64 rng(DrawSeed(s->context_.seed, s->context_.task_id, ~0ull));
    for (size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[rng() % i]);
  }
  return s;
}

absl::StatusOr<std::vector<Proposal>> RandomSearch::GenerateCandidates(int n) {
  if (source_.pool_mode()) return FromPool(n);
  std::vector<Proposal> out;
  int fruitless = 0;
  while (static_cast<int>(out.size()) < n && fruitless < kMaxFruitlessDraws) {
    const uint64_t seed = DrawSeed(context_.seed, context_.task_id, counter_++);
    schedules::Rejection why;
    absl::StatusOr<schedules::Candidate> c = source_.Sample(seed, &why);
    if (!c.ok()) {
      ++rejections_[why.step.empty() ? "sample" : why.step];
      ++fruitless;
      continue;
    }
    if (!c->trace.has_value()) {
      ++rejections_["no_trace"];
      ++fruitless;
      continue;
    }
    std::string json = TraceJsonOf(*c->trace);
    const uint64_t id = CandidateIdOf(json);
    if (!seen_.insert(id).second) {
      ++rejections_["duplicate"];
      ++fruitless;
      continue;
    }
    fruitless = 0;
    out.push_back(Proposal{id, std::move(json), std::move(*c)});
  }
  return out;
}

absl::StatusOr<std::vector<Proposal>> RandomSearch::FromPool(int n) {
  std::vector<Proposal> out;
  while (static_cast<int>(out.size()) < n && pool_next_ < pool_order_.size()) {
    const size_t index = pool_order_[pool_next_++];
    const std::string& json = source_.pool()->trace_jsons[index];
    const uint64_t id = CandidateIdOf(json);
    if (!seen_.insert(id).second) {
      ++rejections_["duplicate"];
      continue;
    }
    schedules::Rejection why;
    absl::StatusOr<schedules::Candidate> c = source_.FromPool(index, &why);
    if (!c.ok()) {
      ++rejections_[why.step.empty() ? "sample" : why.step];
      continue;
    }
    out.push_back(Proposal{id, json, std::move(*c)});
  }
  return out;
}

void RandomSearch::NotifyResults(const std::vector<MeasuredResult>& results) {
  // Random search is not steered by results; it only remembers what was measured.
  for (const MeasuredResult& r : results) seen_.insert(MeasuredId(r));
}

}  // namespace tessel::search
