#include "search/replay.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"

namespace tessel::search {

ReplaySpace MakeReplaySpace(schedules::Workload workload, const schedules::Target& target,
                            const std::vector<measure::MeasuredTrace>& traces) {
  ReplaySpace space{std::move(workload), target, nullptr, {}, 0, 0};
  auto pool = std::make_shared<CandidatePool>();
  for (const measure::MeasuredTrace& t : traces) {
    if (t.trace_json == "null") continue;
    std::string json = NormalizeTraceJson(t.trace_json);
    const uint64_t id = CandidateIdOf(json);
    if (!pool->ids.insert(id).second) continue;  // the first record answers
    pool->trace_jsons.push_back(std::move(json));
    space.answers[id] = t.measurement;
    if (t.measurement.latency_ms() > 0) {
      ++space.ok;
      if (space.best_ms == 0 || t.measurement.latency_ms() < space.best_ms) {
        space.best_ms = t.measurement.latency_ms();
      }
    }
  }
  space.pool = std::move(pool);
  return space;
}

absl::StatusOr<ReplayTrajectory> RunReplay(const ReplaySpace& space, const ReplayOptions& options) {
  using Clock = std::chrono::steady_clock;
  SearchContext context;
  context.workload = space.workload;
  context.target = space.target;
  context.seed = options.seed;
  context.task_id = 1;
  context.cost_model = options.cost_model;
  context.pool = space.pool;
  context.threads = options.threads;
  const int64_t want =
      options.trials > 0 ? options.trials : static_cast<int64_t>(space.pool->trace_jsons.size());
  ReplayTrajectory out;
  const Clock::time_point t0 = Clock::now();
  absl::StatusOr<std::unique_ptr<SearchStrategy>> strategy =
      MakeSearchStrategy(options.strategy, std::move(context));
  if (!strategy.ok()) return strategy.status();
  double search_s = std::chrono::duration<double>(Clock::now() - t0).count();
  double best = 0;
  while (out.trials < want) {
    const int ask = static_cast<int>(std::min<int64_t>(options.batch_size, want - out.trials));
    Clock::time_point a = Clock::now();
    absl::StatusOr<std::vector<Proposal>> proposals = (*strategy)->GenerateCandidates(ask);
    search_s += std::chrono::duration<double>(Clock::now() - a).count();
    if (!proposals.ok()) return proposals.status();
    if (proposals->empty()) {
      out.exhausted = true;
      break;
    }
    std::vector<MeasuredResult> results;
    for (Proposal& p : *proposals) {
      auto it = space.answers.find(p.candidate_id);
      if (it == space.answers.end()) {
        return absl::InternalError(absl::StrCat(
            "strategy ", (*strategy)->name(), " proposed candidate ", p.candidate_id,
            " which is not in the replay pool: a strategy given a pool must draw from it"));
      }
      results.push_back({p.candidate_id, std::move(p.trace_json), it->second});
      const double ms = it->second.latency_ms();
      if (ms > 0 && (best == 0 || ms < best)) best = ms;
      out.best_ms.push_back(best);
      ++out.trials;
    }
    a = Clock::now();
    (*strategy)->NotifyResults(results);
    search_s += std::chrono::duration<double>(Clock::now() - a).count();
    if (options.stop_at_ms > 0 && best > 0 && best <= options.stop_at_ms) break;
  }
  out.search_s = search_s;
  return out;
}

int64_t TrialsToReach(const ReplayTrajectory& t, double target_ms, double fraction) {
  const double limit = target_ms / fraction;
  for (size_t i = 0; i < t.best_ms.size(); ++i) {
    if (t.best_ms[i] > 0 && t.best_ms[i] <= limit) return static_cast<int64_t>(i) + 1;
  }
  return -1;
}

}  // namespace tessel::search
