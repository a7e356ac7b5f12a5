#include "search/evolutionary_search.h"

#include <algorithm>
#include <cmath>
#include <unordered_set>

#include "absl/strings/str_cat.h"

namespace tessel::search {

namespace {

// `count` indices drawn with probability proportional to max(weight, 0) (uniformly when every
// weight is 0). Deterministic for the engine.
std::vector<size_t> WeightedDraws(const std::vector<double>& weights, int count,
                                  std::mt19937_64& rng) {
  std::vector<double> cum(weights.size());
  double total = 0;
  for (size_t i = 0; i < weights.size(); ++i) {
    total += std::max(0.0, weights[i]);
    cum[i] = total;
  }
  std::vector<size_t> out;
  for (int k = 0; k < count; ++k) {
    const double u01 = static_cast<double>(rng() >> 11) * (1.0 / 9007199254740992.0);
    if (total <= 0) {
      out.push_back(static_cast<size_t>(u01 * static_cast<double>(weights.size())));
      continue;
    }
    const double u = u01 * total;
    out.push_back(std::min<size_t>(std::upper_bound(cum.begin(), cum.end(), u) - cum.begin(),
                                   weights.size() - 1));
  }
  return out;
}

}  // namespace

absl::StatusOr<std::unique_ptr<EvolutionarySearch>> EvolutionarySearch::Create(
    SearchContext context, const EvolutionaryOptions& options) {
  if (options.population < 1 || options.min_population < 1 ||
      options.population_per_candidate < 1 || options.pool_population < 1 ||
      options.generations < 0 || options.guided.epsilon < 0 || options.guided.epsilon > 1 ||
      options.measured_share < 0 || options.measured_share > 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "evolutionary search options: population (", options.population, "), min_population (",
        options.min_population, "), population_per_candidate (", options.population_per_candidate,
        ") and pool_population (", options.pool_population, ") must be at least 1, generations (",
        options.generations, ") at least 0, epsilon (", options.guided.epsilon,
        ") and measured_share (", options.measured_share, ") within [0, 1]"));
  }
  absl::StatusOr<CandidateSource> source =
      CandidateSource::Create(context.workload, context.target, context.pool);
  if (!source.ok()) return source.status();
  auto s = std::unique_ptr<EvolutionarySearch>(
      new EvolutionarySearch(std::move(context), std::move(*source), options));
  if (absl::Status st = s->Init(); !st.ok()) return st;
  return s;
}

std::vector<GuidedSearch::Built> EvolutionarySearch::Explore(int n) {
  // A population member: its trace and features (measured ones are parents only).
  struct Member {
    const schedules::Trace* trace;
    const costmodel::Features* features;
  };
  std::vector<Built> explored;  // unseen, distinct; stable addresses through `reserve` below
  std::unordered_set<uint64_t> explored_ids;
  const int pop = context().pool
                      ? std::min<int>(options_.pool_population,
                                      static_cast<int>(context().pool->trace_jsons.size()))
                      : std::min(options_.population,
                                 std::max(options_.min_population,
                                          options_.population_per_candidate * std::max(n, 1)));
  explored.reserve(static_cast<size_t>(pop) * (options_.generations + 1));
  std::vector<Member> members;
  for (const Measured* m : BestMeasured(static_cast<int>(options_.measured_share * pop))) {
    members.push_back({&m->trace, &m->features});
  }
  std::vector<Built> fresh = FreshSamples(pop - static_cast<int>(members.size()), false);
  for (Built& b : fresh) {
    if (Seen(b.id)) continue;  // a measured sample stays out of the batch and the population
    explored_ids.insert(b.id);
    explored.push_back(std::move(b));
    members.push_back({&*explored.back().candidate.trace, &explored.back().features});
  }
  for (int g = 0; g < options_.generations && !members.empty(); ++g) {
    std::vector<const costmodel::Features*> fs;
    for (const Member& m : members) fs.push_back(m.features);
    const std::vector<double> scores = Predict(fs);
    std::mt19937_64 rng = CallEngine(static_cast<uint64_t>(g));
    const std::vector<size_t> picks = WeightedDraws(scores, pop, rng);
    std::vector<const schedules::Trace*> parents;
    for (size_t p : picks) parents.push_back(members[p].trace);
    std::vector<std::optional<Built>> children =
        MutateAll(parents, static_cast<uint64_t>(g) + 1, explored_ids);
    std::vector<Member> next;
    for (size_t i = 0; i < children.size(); ++i) {
      if (children[i] && explored.size() < explored.capacity() &&
          explored_ids.insert(children[i]->id).second) {
        explored.push_back(std::move(*children[i]));
        next.push_back({&*explored.back().candidate.trace, &explored.back().features});
      } else {
        next.push_back(members[picks[i]]);
      }
    }
    members = std::move(next);
  }
  return explored;
}

}  // namespace tessel::search
