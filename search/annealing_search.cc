#include "search/annealing_search.h"

#include <algorithm>
#include <cmath>
#include <unordered_set>

#include "absl/strings/str_cat.h"

namespace tessel::search {

absl::StatusOr<std::unique_ptr<AnnealingSearch>> AnnealingSearch::Create(
    SearchContext context, const AnnealingOptions& options) {
  if (options.chains < 1 || options.steps < 0 || !(options.initial_temperature > 0) ||
      !(options.cooling > 0 && options.cooling <= 1) || options.guided.epsilon < 0 ||
      options.guided.epsilon > 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "annealing search options: chains (", options.chains, ") must be at least 1, steps (",
        options.steps, ") at least 0, initial_temperature (", options.initial_temperature,
        ") positive, cooling (", options.cooling, ") within (0, 1], epsilon (",
        options.guided.epsilon, ") within [0, 1]"));
  }
  absl::StatusOr<CandidateSource> source =
      CandidateSource::Create(context.workload, context.target, context.pool);
  if (!source.ok()) return source.status();
  auto s = std::unique_ptr<AnnealingSearch>(
      new AnnealingSearch(std::move(context), std::move(*source), options));
  if (absl::Status st = s->Init(); !st.ok()) return st;
  return s;
}

std::vector<GuidedSearch::Built> AnnealingSearch::Explore(int n) {
  struct State {
    const schedules::Trace* trace;
    double score;
  };
  accepted_ = 0;
  const int k = std::min(options_.chains, std::max(4, n));
  std::vector<Built> explored;  // unseen, distinct; `reserve` keeps the addresses stable
  explored.reserve(static_cast<size_t>(k) * (options_.steps + 1));
  std::unordered_set<uint64_t> explored_ids;
  std::vector<const schedules::Trace*> starts;
  std::vector<const costmodel::Features*> start_features;
  for (const Measured* m : BestMeasured(k / 2)) {
    starts.push_back(&m->trace);
    start_features.push_back(&m->features);
  }
  std::vector<Built> fresh = FreshSamples(k - static_cast<int>(starts.size()), false);
  for (Built& b : fresh) {
    if (Seen(b.id) || !explored_ids.insert(b.id).second) continue;
    explored.push_back(std::move(b));
    starts.push_back(&*explored.back().candidate.trace);
    start_features.push_back(&explored.back().features);
  }
  const std::vector<double> start_scores = Predict(start_features);
  std::vector<State> chains;
  for (size_t i = 0; i < starts.size(); ++i) chains.push_back({starts[i], start_scores[i]});
  double temperature = options_.initial_temperature;
  for (int step = 0; step < options_.steps && !chains.empty(); ++step) {
    std::vector<const schedules::Trace*> parents;
    for (const State& c : chains) parents.push_back(c.trace);
    std::vector<std::optional<Built>> children =
        MutateAll(parents, static_cast<uint64_t>(step) + 1, explored_ids);
    std::vector<const costmodel::Features*> fs;
    std::vector<size_t> which;
    for (size_t i = 0; i < children.size(); ++i) {
      if (!children[i] || explored.size() >= explored.capacity() ||
          !explored_ids.insert(children[i]->id).second) {
        continue;
      }
      explored.push_back(std::move(*children[i]));
      fs.push_back(&explored.back().features);
      which.push_back(i);
    }
    const std::vector<double> scores = Predict(fs);
    std::mt19937_64 rng = CallEngine(static_cast<uint64_t>(step) + 1);
    for (size_t j = 0; j < which.size(); ++j) {
      State& c = chains[which[j]];
      const double u = static_cast<double>(rng() >> 11) * (1.0 / 9007199254740992.0);
      if (scores[j] >= c.score || u < std::exp((scores[j] - c.score) / temperature)) {
        c = {&*explored[explored.size() - which.size() + j].candidate.trace, scores[j]};
        ++accepted_;
      }
    }
    temperature *= options_.cooling;
  }
  return explored;
}

}  // namespace tessel::search
