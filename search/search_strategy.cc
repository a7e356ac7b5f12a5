#include "search/search_strategy.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "nlohmann/json.hpp"
#include "schedules/util/fnv1a.h"
#include "schedules/util/short_words.h"
#include "search/annealing_search.h"
#include "search/evolutionary_search.h"
#include "search/random_search.h"

namespace tessel::search {

std::vector<std::string> KnownStrategies() { return {"evolutionary", "annealing", "random"}; }

absl::Status CheckStrategyName(const std::string& name) {
  if (name.empty()) return absl::OkStatus();
  for (const std::string& known : KnownStrategies()) {
    if (name == known) return absl::OkStatus();
  }
  return schedules::WithShortWords(absl::InvalidArgumentError(absl::StrCat(
      "unknown search strategy '", name, "': use one of ", absl::StrJoin(KnownStrategies(), ", "),
      " (or leave it empty for the default, ", kDefaultStrategy, ")")));
}

absl::StatusOr<std::unique_ptr<SearchStrategy>> MakeSearchStrategy(const std::string& name,
                                                                   SearchContext context) {
  if (absl::Status s = CheckStrategyName(name); !s.ok()) return s;
  const std::string& kind = name.empty() ? std::string(kDefaultStrategy) : name;
  auto as_strategy = [](auto made) -> absl::StatusOr<std::unique_ptr<SearchStrategy>> {
    if (!made.ok()) return made.status();
    return std::unique_ptr<SearchStrategy>(std::move(*made));
  };
  if (kind == "evolutionary") return as_strategy(EvolutionarySearch::Create(std::move(context)));
  if (kind == "annealing") return as_strategy(AnnealingSearch::Create(std::move(context)));
  return as_strategy(RandomSearch::Create(std::move(context)));
}

uint64_t CandidateIdOf(const std::string& trace_json) { return schedules::Fnv1a64(trace_json); }

std::string TraceJsonOf(const schedules::Trace& trace) { return trace.ToJsonString(-1); }

std::string NormalizeTraceJson(const std::string& trace_json) {
  nlohmann::json j = nlohmann::json::parse(trace_json, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return trace_json;
  return j.dump();
}

}  // namespace tessel::search
