#include "search/guided_search.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <utility>

#include "schedules/util/check.h"
#include "schedules/workload/key.h"
#include "search/parallel.h"

namespace tessel::search {
namespace {

// Whether a result's latency is only a screening measurement's (the cost model weighs it less).
bool Screened(const MeasuredResult& r) {
  return r.measurement.ok() && r.measurement.timings.kind == measure::TimingKind::kScreened;
}

}  // namespace

std::shared_ptr<costmodel::CostModel> DefaultCostModel(uint64_t seed) {
  costmodel::CostModelOptions options;
  options.seed = seed;
  absl::StatusOr<std::unique_ptr<costmodel::CostModel>> m =
      costmodel::MakeCostModel("xgboost", options);
  if (!m.ok()) m = costmodel::MakeCostModel("random", options);
  TESSEL_CHECK(m.ok()) << "the random cost model is always known: " << m.status();
  return std::shared_ptr<costmodel::CostModel>(std::move(*m));
}

GuidedSearch::GuidedSearch(SearchContext context, CandidateSource source, GuidedOptions options)
    : context_(std::move(context)),
      source_(std::move(source)),
      options_(std::move(options)),
      picker_(&source_, options_.mutator_weights) {}

absl::Status GuidedSearch::Init() {
  threads_ = ResolveThreads(context_.threads);
  workload_key_ = schedules::WorkloadKey(context_.workload);
  model_ = context_.cost_model ? context_.cost_model
                               : DefaultCostModel(DrawSeed(context_.seed, context_.task_id, ~0ull));
  const std::vector<MeasuredResult>& measured = context_.measured;
  for (const MeasuredResult& m : measured) seen_.insert(MeasuredId(m));
  // Rebuild the measured candidates once: their features teach the model, their traces seed
  // the populations.
  std::vector<std::optional<Built>> built(measured.size());
  ParallelFor(static_cast<int>(measured.size()), threads_,
              [&](int i) { built[i] = Rebuild(measured[i].trace_json); });
  std::vector<costmodel::Example> examples;
  for (size_t i = 0; i < measured.size(); ++i) {
    if (!built[i]) continue;
    const double ms = measured[i].measurement.latency_ms();
    Remember(MeasuredId(measured[i]), *built[i]->candidate.trace, built[i]->features, ms);
    examples.push_back({workload_key_, built[i]->features, ms, Screened(measured[i])});
  }
  if (!context_.model_has_measured && !examples.empty()) {
    if (absl::Status s = model_->Update(examples); !s.ok()) return s;
  }
  return absl::OkStatus();
}

std::optional<GuidedSearch::Built> GuidedSearch::Rebuild(const std::string& trace_json) {
  absl::StatusOr<schedules::Trace> trace = schedules::Trace::Parse(trace_json);
  if (!trace.ok()) return std::nullopt;
  absl::StatusOr<schedules::Candidate> c = source_.Build(*trace, nullptr, /*codegen=*/false);
  if (!c.ok()) return std::nullopt;
  Built b;
  b.id = CandidateIdOf(TraceJsonOf(*c->trace));
  b.features = costmodel::ExtractFeatures(c->program, source_.target());
  b.candidate = std::move(*c);
  return b;
}

void GuidedSearch::Remember(uint64_t id, const schedules::Trace& trace,
                            const costmodel::Features& f, double median_ms) {
  measured_.push_back(Measured{id, trace, f, median_ms});
}

uint64_t GuidedSearch::ItemSeed(uint64_t round, uint64_t i) const {
  return DrawSeed(DrawSeed(context_.seed, context_.task_id, calls_), static_cast<int64_t>(round),
                  i);
}

std::vector<GuidedSearch::Built> GuidedSearch::FreshSamples(
    int count, bool unseen_only, const std::unordered_set<uint64_t>& exclude) {
  if (count <= 0) return {};
  const uint64_t first = draws_;
  draws_ += static_cast<uint64_t>(count);
  std::vector<std::optional<Built>> built(count);
  std::vector<schedules::Rejection> why(count);
  ParallelFor(count, threads_, [&](int i) {
    const uint64_t seed = DrawSeed(context_.seed, context_.task_id, first + i);
    absl::StatusOr<schedules::Candidate> c = source_.Sample(seed, &why[i], /*codegen=*/false);
    if (!c.ok() || !c->trace) return;
    Built b;
    b.id = CandidateIdOf(TraceJsonOf(*c->trace));
    if (unseen_only && (seen_.count(b.id) || exclude.count(b.id))) return;
    b.features = costmodel::ExtractFeatures(c->program, source_.target());
    b.candidate = std::move(*c);
    built[i] = std::move(b);
  });
  stats_.built += count;
  std::vector<Built> out;
  std::unordered_set<uint64_t> ids;
  for (int i = 0; i < count; ++i) {
    if (!built[i]) {
      Reject(why[i].step.empty() ? "duplicate" : why[i].step);
      continue;
    }
    if (!ids.insert(built[i]->id).second) {
      Reject("duplicate");
      continue;
    }
    out.push_back(std::move(*built[i]));
  }
  return out;
}

std::vector<std::optional<GuidedSearch::Built>> GuidedSearch::MutateAll(
    const std::vector<const schedules::Trace*>& parents, uint64_t round,
    const std::unordered_set<uint64_t>& exclude) {
  const int n = static_cast<int>(parents.size());
  std::vector<std::optional<Built>> out(n);
  std::vector<std::map<std::string, int64_t>> rej(n);
  std::vector<std::string> tried(n);
  auto veto = [&](uint64_t id) -> std::string {
    if (seen_.count(id) || exclude.count(id)) return "duplicate";
    if (!source_.InPool(id)) return "not_in_pool";
    return "";
  };
  ParallelFor(n, threads_, [&](int i) {
    std::mt19937_64 rng(ItemSeed(round, static_cast<uint64_t>(i)));
    const Mutator* m = picker_.Pick(*parents[i], rng);
    if (!m) return;
    tried[i] = m->name();
    absl::StatusOr<schedules::Candidate> c = m->Mutate(*parents[i], rng, veto, &rej[i]);
    if (!c.ok()) return;
    Built b;
    b.id = CandidateIdOf(TraceJsonOf(*c->trace));
    b.features = costmodel::ExtractFeatures(c->program, source_.target());
    b.candidate = std::move(*c);
    out[i] = std::move(b);
  });
  for (int i = 0; i < n; ++i) {
    for (const auto& [why, count] : rej[i]) Reject(why, count);
    if (tried[i].empty()) continue;
    ++stats_.mutants_tried[tried[i]];
    if (out[i]) ++stats_.mutants_valid[tried[i]];
    stats_.built += 1;
  }
  return out;
}

std::vector<double> GuidedSearch::Predict(const std::vector<const costmodel::Features*>& features) {
  if (features.empty()) return {};
  std::vector<costmodel::Features> fs;
  fs.reserve(features.size());
  for (const costmodel::Features* f : features) fs.push_back(*f);
  std::vector<double> s = model_->Predict(fs);
  s.resize(features.size(), 0.0);
  for (double& x : s) {
    if (!std::isfinite(x)) x = 0;
  }
  return s;
}

std::vector<const GuidedSearch::Measured*> GuidedSearch::BestMeasured(int k) const {
  std::vector<const Measured*> ok;
  for (const Measured& m : measured_) {
    if (m.median_ms > 0) ok.push_back(&m);
  }
  std::stable_sort(ok.begin(), ok.end(), [](const Measured* a, const Measured* b) {
    return a->median_ms < b->median_ms;
  });
  if (static_cast<int>(ok.size()) > k) ok.resize(std::max(0, k));
  return ok;
}

absl::StatusOr<std::vector<Proposal>> GuidedSearch::GenerateCandidates(int n) {
  ++calls_;
  stats_ = SearchStats{};
  stats_.threads = threads_;
  std::vector<Proposal> out;
  if (n <= 0) return out;
  std::vector<Built> explored = Explore(n);
  stats_.explored = static_cast<int64_t>(explored.size());
  const int n_random = std::clamp(static_cast<int>(std::lround(options_.epsilon * n)), 0, n);

  // The top predicted, best first (ties: exploration order).
  std::vector<const costmodel::Features*> fs;
  for (const Built& b : explored) fs.push_back(&b.features);
  const std::vector<double> scores = Predict(fs);
  std::vector<size_t> order(explored.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return scores[a] > scores[b]; });
  std::unordered_set<uint64_t> in_batch;
  auto propose = [&](Built& b) -> bool {
    if (seen_.count(b.id) || in_batch.count(b.id)) return false;
    schedules::Rejection why;
    if (!source_.AddSource(&b.candidate, &why).ok()) {
      Reject(why.step);
      return false;
    }
    std::string json = TraceJsonOf(*b.candidate.trace);
    in_batch.insert(b.id);
    seen_.insert(b.id);
    proposed_[b.id] = {*b.candidate.trace, b.features};
    out.push_back(Proposal{b.id, std::move(json), std::move(b.candidate)});
    return true;
  };
  size_t next = 0;
  while (static_cast<int>(out.size()) < n - n_random && next < order.size()) {
    if (propose(explored[order[next++]])) ++stats_.proposed_model;
  }
  // The epsilon share (and any shortfall of the above): fresh samples.
  int fruitless = 0;
  while (static_cast<int>(out.size()) < n && fruitless < 256) {
    const int want = n - static_cast<int>(out.size());
    std::vector<Built> fresh = FreshSamples(want, /*unseen_only=*/true, in_batch);
    if (fresh.empty()) fruitless += want;
    for (Built& b : fresh) {
      if (static_cast<int>(out.size()) >= n) break;
      if (propose(b)) {
        ++stats_.proposed_random;
        fruitless = 0;
      } else {
        ++fruitless;
      }
    }
  }
  // The space ran dry of fresh samples: the rest of the ranking.
  while (static_cast<int>(out.size()) < n && next < order.size()) {
    if (propose(explored[order[next++]])) ++stats_.proposed_model;
  }
  return out;
}

void GuidedSearch::NotifyResults(const std::vector<MeasuredResult>& results) {
  std::vector<costmodel::Example> examples;
  for (const MeasuredResult& r : results) {
    const uint64_t id = MeasuredId(r);
    seen_.insert(id);
    const double ms = r.measurement.latency_ms();
    auto it = proposed_.find(id);
    if (it != proposed_.end()) {
      Remember(id, it->second.first, it->second.second, ms);
      examples.push_back({workload_key_, it->second.second, ms, Screened(r)});
      proposed_.erase(it);
      continue;
    }
    std::optional<Built> b = Rebuild(r.trace_json);
    if (!b) continue;
    Remember(id, *b->candidate.trace, b->features, ms);
    examples.push_back({workload_key_, b->features, ms, Screened(r)});
  }
  if (!examples.empty() && !model_->Update(examples).ok()) Reject("cost_model_update");
}

}  // namespace tessel::search
