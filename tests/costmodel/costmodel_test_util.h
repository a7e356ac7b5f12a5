#pragma once

// Helpers of the cost-model tests: real candidates of real design spaces, and a SYNTHETIC latency
// (no kernel is run) that is a known function of a candidate's lowered loop structure, so that
// whether a model learns can be checked on a machine without measurements.

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "costmodel/cost_model.h"
#include "schedules/ir/stmt.h"
#include "schedules/space/space_generator.h"
#include "schedules/workload/builtins.h"
#include "schedules/workload/key.h"
#include "store/tuning_log.h"

namespace tessel::testing {

// Up to `n` candidates of `spec` on `target` with distinct traces, drawn with seeds from
// `first_seed` on.
inline std::vector<schedules::Candidate> SampleCandidates(const std::string& spec,
                                                          const schedules::Target& target, int n,
                                                          uint64_t first_seed = 1) {
  std::vector<schedules::Candidate> out;
  auto w = schedules::ParseWorkloadSpec(spec);
  EXPECT_TRUE(w.ok()) << w.status();
  if (!w.ok()) return out;
  auto space = schedules::SpaceGenerator::Create(*w, target);
  EXPECT_TRUE(space.ok()) << space.status();
  if (!space.ok()) return out;
  std::set<std::string> seen;
  for (uint64_t seed = first_seed; static_cast<int>(out.size()) < n && seed < first_seed + 20 * n;
       ++seed) {
    auto c = space->Sample(seed);
    if (!c.ok() || !c->trace) continue;
    if (!seen.insert(c->trace->ToJsonString(0)).second) continue;
    out.push_back(*std::move(c));
  }
  return out;
}

namespace internal {

struct LoopShape {
  double parallel = 1;      // product of the parallel loops around the heaviest store
  double inner = 1;         // extent of the innermost loop around it
  bool vectorized = false;  // that innermost loop is vectorized
  double heaviest = -1;     // its executions
};

inline void WalkShape(const schedules::Stmt& s, std::vector<const schedules::ForNode*>* stack,
                      double mult, LoopShape* shape) {
  using schedules::As;
  if (!s) return;
  if (const auto* f = As<schedules::ForNode>(s)) {
    int64_t e = 1;
    schedules::IsConstInt(f->extent, &e);
    stack->push_back(f);
    WalkShape(f->body, stack, mult * static_cast<double>(e), shape);
    stack->pop_back();
  } else if (const auto* st = As<schedules::StoreNode>(s)) {
    if (mult <= shape->heaviest) return;
    shape->heaviest = mult;
    shape->parallel = 1;
    for (const auto* f : *stack) {
      int64_t e = 1;
      schedules::IsConstInt(f->extent, &e);
      if (f->kind == schedules::ForKind::kParallel) shape->parallel *= static_cast<double>(e);
    }
    shape->inner = 1;
    shape->vectorized = false;
    if (!stack->empty()) {
      int64_t e = 1;
      schedules::IsConstInt(stack->back()->extent, &e);
      shape->inner = static_cast<double>(e);
      shape->vectorized = stack->back()->kind == schedules::ForKind::kVectorized;
    }
    (void)st;
  } else if (const auto* q = As<schedules::SeqNode>(s)) {
    for (const auto& c : q->stmts) WalkShape(c, stack, mult, shape);
  } else if (const auto* a = As<schedules::AllocateNode>(s)) {
    WalkShape(a->body, stack, mult, shape);
  } else if (const auto* i = As<schedules::IfThenElseNode>(s)) {
    WalkShape(i->then_case, stack, mult, shape);
    WalkShape(i->else_case, stack, mult, shape);
  } else if (const auto* l = As<schedules::LetStmtNode>(s)) {
    WalkShape(l->body, stack, mult, shape);
  }
}

}  // namespace internal

// SYNTHETIC latency in ms, not a measurement: the heaviest store's nest runs faster with more
// parallel loop iterations (up to 8 cores), with a longer innermost loop (less loop overhead)
// and when that loop is vectorized.
inline double SyntheticLatencyMs(const schedules::Program& p) {
  internal::LoopShape shape;
  std::vector<const schedules::ForNode*> stack;
  for (const auto& k : p.kernels) internal::WalkShape(k.body, &stack, 1, &shape);
  return 1.0 / std::min(shape.parallel, 8.0) * (1.0 + 8.0 / shape.inner) *
         (shape.vectorized ? 0.7 : 1.0);
}

// A tuning-log record of candidate `c` with the given latency (<= 0: a failed measurement).
inline store::Record RecordOf(const schedules::Candidate& c, uint64_t candidate_id, double ms) {
  store::Record r;
  r.workload_key = schedules::WorkloadKey(c.workload);
  r.target_key = c.target.ToString();
  r.candidate_id = candidate_id;
  r.trace_json = c.trace ? c.trace->ToJson().dump() : "null";
  r.measurement.status =
      ms > 0 ? measure::MeasureStatus::kOk : measure::MeasureStatus::kCompileError;
  if (ms > 0) {
    r.measurement.timings.repeats_ms = {ms};
    r.measurement.timings.median_ms = ms;
  } else {
    r.measurement.error = "synthetic failure";
  }
  r.measurement.worker_id = "test";
  r.measurement.device_name = "synthetic";
  return r;
}

// A saved model as the tuning log's row of `target_key`, and back.
inline store::CostModelRow RowOf(const costmodel::SavedModel& saved,
                                 const std::string& target_key) {
  return {0, target_key, saved.kind, saved.feature_version, saved.bytes, saved.meta_json, 0};
}
inline costmodel::SavedModel SavedOf(const store::CostModelRow& row) {
  return {row.kind, row.feature_version, row.blob, row.meta_json};
}

inline store::WorkloadRow WorkloadRowOf(const schedules::Workload& w) {
  return {schedules::WorkloadKey(w), schedules::CanonicalText(w), w.name, w.spec};
}

}  // namespace tessel::testing
