#include "schedules/space/space_generator.h"

#include <random>

#include "absl/strings/str_cat.h"
#include "schedules/rules/schedule_rule.h"

namespace tessel::schedules {

Trace WithoutDecisions(const Trace& trace) {
  Trace t = trace;
  for (Instruction& inst : t.insts) {
    if (inst.kind.rfind("sample_", 0) == 0) inst.decision = nullptr;
  }
  return t;
}

absl::StatusOr<SpaceGenerator> SpaceGenerator::Create(const Workload& workload,
                                                      const Target& target) {
  auto initial = Schedule::Create(workload);
  if (!initial.ok()) return initial.status();
  std::vector<std::string> names;
  for (const Stage& st : initial->stages()) names.push_back(st.name);
  std::vector<Schedule> states = {std::move(*initial)};
  for (const auto& rule : DefaultRules(target)) {
    for (auto it = names.rbegin(); it != names.rend(); ++it) {  // consumers first
      std::vector<Schedule> next;
      for (Schedule& s : states) {
        auto r = rule->Apply(s, *it);
        if (!r.ok()) {
          return absl::InternalError(absl::StrCat("schedule rule ", rule->name(), " on stage ", *it,
                                                  " of ", workload.spec, ": ",
                                                  r.status().message()));
        }
        if (r->empty()) {
          next.push_back(std::move(s));
        } else {
          for (Schedule& x : *r) next.push_back(std::move(x));
        }
      }
      states = std::move(next);
    }
  }
  std::vector<Trace> sketches;
  for (const Schedule& s : states) sketches.push_back(WithoutDecisions(s.trace()));
  return SpaceGenerator(workload, target, std::move(sketches));
}

absl::StatusOr<Candidate> SpaceGenerator::Sample(uint64_t seed, Rejection* why) const {
  Rejection unused;
  Rejection& r = why ? *why : unused;
  std::mt19937_64 rng(seed);
  const size_t pick = static_cast<size_t>(rng() % sketches_.size());
  auto sch = Replay(workload_, sketches_[pick], rng());
  if (!sch.ok()) {
    r = {"replay", std::string(sch.status().message())};
    return sch.status();
  }
  BuildStep step = BuildStep::kLower;
  auto c = BuildCandidate(*sch, target_, &step);
  if (!c.ok()) {
    r = {BuildStepName(step), std::string(c.status().message())};
    return c.status();
  }
  return c;
}

}  // namespace tessel::schedules
