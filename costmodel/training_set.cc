#include "costmodel/training_set.h"

#include <chrono>
#include <optional>
#include <unordered_map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "schedules/space/candidate.h"
#include "schedules/util/fnv1a.h"
#include "schedules/util/status_macros.h"

namespace tessel::costmodel {

absl::StatusOr<Example> ExampleFromTrace(const measure::MeasuredTrace& measured,
                                         const schedules::Workload& workload,
                                         const schedules::Target& target) {
  std::optional<schedules::Trace> trace;
  if (measured.trace_json != "null") {
    absl::StatusOr<schedules::Trace> t = schedules::Trace::Parse(measured.trace_json);
    if (!t.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "record ", measured.uid, " has a trace this build cannot read: ", t.status().message()));
    }
    trace = std::move(*t);
  }
  absl::StatusOr<schedules::Candidate> c = schedules::BuildCandidate(workload, target, trace);
  if (!c.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("record ", measured.uid,
                                                   " no longer builds for ", target.ToString(),
                                                   ": ", c.status().message()));
  }
  Example e;
  e.workload_key = measured.workload_key;
  e.features = ExtractFeatures(c->program, target);
  e.median_ms = measured.measurement.latency_ms();
  e.screened = measured.measurement.ok() &&
               measured.measurement.timings.kind == measure::TimingKind::kScreened;
  return e;
}

std::string WorkloadFamily(const std::string& workload_name) {
  return workload_name.substr(0, workload_name.find('_'));
}

absl::StatusOr<TrainingSet> BuildTrainingSet(const std::vector<measure::MeasuredTrace>& records,
                                             const WorkloadLookup& workload_of,
                                             const schedules::Target& target,
                                             const std::string& family) {
  const auto start = std::chrono::steady_clock::now();
  TrainingSet set;
  set.stats.records = static_cast<int64_t>(records.size());
  // Each workload is rebuilt once (nullopt: it does not rebuild); each (workload, trace) is
  // lowered once.
  std::unordered_map<std::string, std::optional<schedules::Workload>> workloads;
  std::unordered_map<uint64_t, Features> features;
  std::unordered_map<std::string, bool> used;
  for (const measure::MeasuredTrace& r : records) {
    auto it = workloads.find(r.workload_key);
    if (it == workloads.end()) {
      absl::StatusOr<schedules::Workload> w = workload_of(r.workload_key);
      if (!w.ok() && !absl::IsNotFound(w.status()) && !absl::IsInvalidArgument(w.status())) {
        return w.status();
      }
      it = workloads.emplace(r.workload_key, w.ok() ? std::optional(*std::move(w)) : std::nullopt)
               .first;
    }
    if (!it->second) {
      ++set.stats.skipped_workload;
      continue;
    }
    if (!family.empty() && WorkloadFamily(it->second->name) != family) {
      ++set.stats.other_family;
      continue;
    }
    const uint64_t h = schedules::Fnv1a64(r.trace_json, schedules::Fnv1a64(r.workload_key + "\n"));
    Example e;
    if (auto f = features.find(h); f != features.end()) {
      e.workload_key = r.workload_key;
      e.features = f->second;
      e.median_ms = r.measurement.latency_ms();
      e.screened =
          r.measurement.ok() && r.measurement.timings.kind == measure::TimingKind::kScreened;
    } else {
      absl::StatusOr<Example> built = ExampleFromTrace(r, *it->second, target);
      if (!built.ok()) {
        ++set.stats.skipped_trace;
        continue;
      }
      e = *std::move(built);
      features.emplace(h, e.features);
    }
    used[r.workload_key] = true;
    set.examples.push_back(std::move(e));
  }
  set.stats.examples = static_cast<int64_t>(set.examples.size());
  set.stats.workloads = static_cast<int64_t>(used.size());
  set.stats.features_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return set;
}

absl::StatusOr<std::unique_ptr<CostModel>> ModelForTarget(const TrainingSet& set,
                                                          const std::string& kind,
                                                          const CostModelOptions& options) {
  TESSEL_ASSIGN_OR_RETURN(std::unique_ptr<CostModel> model, MakeCostModel(kind, options));
  TESSEL_RETURN_IF_ERROR(model->Update(set.examples));
  return model;
}

}  // namespace tessel::costmodel
