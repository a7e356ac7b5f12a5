#pragma once

// Helpers shared by the search tests: real workloads, targets and design spaces.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "schedules/target/target.h"
#include "schedules/workload/builtins.h"
#include "search/candidate_source.h"
#include "search/search_strategy.h"

namespace tessel::search::testing {

inline schedules::Target TargetNamed(const std::string& kind) {
  return kind == "cuda" ? schedules::CudaTarget("sm_80") : schedules::HostTarget();
}

inline SearchContext Context(const std::string& spec, const std::string& target = "host",
                             uint64_t seed = 1, int64_t task_id = 1) {
  absl::StatusOr<schedules::Workload> w = schedules::ParseWorkloadSpec(spec);
  EXPECT_TRUE(w.ok()) << w.status();
  SearchContext c;
  if (w.ok()) c.workload = *w;
  c.target = TargetNamed(target);
  c.seed = seed;
  c.task_id = task_id;
  return c;
}

inline CandidateSource Source(const SearchContext& c) {
  absl::StatusOr<CandidateSource> s = CandidateSource::Create(c.workload, c.target, c.pool);
  EXPECT_TRUE(s.ok()) << s.status();
  return std::move(*s);
}

inline std::vector<uint64_t> Ids(const std::vector<Proposal>& ps) {
  std::vector<uint64_t> ids;
  for (const Proposal& p : ps) ids.push_back(p.candidate_id);
  return ids;
}

// The traces of up to `count` valid samples (draws 0, 1, ... of seed 1).
inline std::vector<schedules::Trace> SampleTraces(const CandidateSource& source, int count) {
  std::vector<schedules::Trace> out;
  for (uint64_t i = 0; static_cast<int>(out.size()) < count && i < 4u * count; ++i) {
    absl::StatusOr<schedules::Candidate> c = source.Sample(DrawSeed(1, 1, i), nullptr, false);
    if (c.ok()) out.push_back(*c->trace);
  }
  return out;
}

// A measured result for a proposal, as the job manager reports it.
inline MeasuredResult ResultOf(const Proposal& p, double ms) {
  MeasuredResult m;
  m.candidate_id = p.candidate_id;
  m.trace_json = p.trace_json;
  m.measurement.status =
      ms > 0 ? measure::MeasureStatus::kOk : measure::MeasureStatus::kRuntimeError;
  m.measurement.timings.median_ms = ms > 0 ? ms : 0;
  return m;
}

}  // namespace tessel::search::testing
