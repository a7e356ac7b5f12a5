#include "search/random_search.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "schedules/util/fnv1a.h"

namespace tessel::search {

absl::StatusOr<std::unique_ptr<RandomSearch>> RandomSearch::Create(SearchContext context) {
  absl::StatusOr<schedules::SpaceGenerator> space =
      schedules::SpaceGenerator::Create(context.workload, context.target);
  if (!space.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("no design space for ", context.workload.spec,
                                                   " on ", context.target.ToString(), ": ",
                                                   space.status().message()));
  }
  auto s = std::unique_ptr<RandomSearch>(new RandomSearch(std::move(context), std::move(*space)));
  for (const MeasuredResult& m : s->context_.measured) {
    s->seen_.insert(m.candidate_id != 0 ? m.candidate_id
                                        : CandidateIdOf(NormalizeTraceJson(m.trace_json)));
  }
  return s;
}

uint64_t RandomSearch::DrawSeed(uint64_t job_seed, int64_t task_id, uint64_t counter) {
  // FNV-1a over the three numbers' bytes: stable across machines and runs.
  auto mix = [](uint64_t h, uint64_t v) {
    for (int i = 0; i < 8; ++i) {
      h ^= (v >> (8 * i)) & 0xff;
      h *= schedules::kFnv1a64Prime;
    }
    return h;
  };
  uint64_t h = schedules::kFnv1a64Offset;
  h = mix(h, job_seed);
  h = mix(h, static_cast<uint64_t>(task_id));
  h = mix(h, counter);
  return h;
}

absl::StatusOr<std::vector<Proposal>> RandomSearch::GenerateCandidates(int n) {
  std::vector<Proposal> out;
  int fruitless = 0;
  while (static_cast<int>(out.size()) < n && fruitless < kMaxFruitlessDraws) {
    const uint64_t seed = DrawSeed(context_.seed, context_.task_id, counter_++);
    schedules::Rejection why;
    absl::StatusOr<schedules::Candidate> c = space_.Sample(seed, &why);
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

void RandomSearch::NotifyResults(const std::vector<MeasuredResult>& results) {
  // Random search is not steered by results; it only remembers what was measured.
  for (const MeasuredResult& r : results) seen_.insert(r.candidate_id);
}

}  // namespace tessel::search
