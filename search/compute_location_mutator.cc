// compute_location: another location of a sample_compute_location that the stage accepts
// (mutator.h). Two forms: the implicit one (one input, the stage: root, inline or a loop of the
// consumer, the trace rewritten to match) and the explicit one (the stage, then its candidate
// loops: the decision is an index into them, and only the decision changes).

#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "search/mutator.h"

namespace tessel::search {
namespace {

using schedules::Trace;

bool IsMarker(const std::string& name) { return name == "root" || name == "inline"; }

// The index of a canonical handle name of `kind` ("b3": block handle 3), or -1.
int HandleIndex(const std::string& name, char kind) {
  int id = -1;
  if (name.size() < 2 || name[0] != kind || !absl::SimpleAtoi(name.substr(1), &id)) return -1;
  return id;
}

// A loop name no instruction of `trace` uses: "l" and one more than the largest number there.
std::string FreshLoopName(const Trace& trace) {
  int64_t top = 0;
  auto see = [&](const std::string& n) {
    int64_t v = 0;
    if (n.size() > 1 && absl::SimpleAtoi(n.substr(1), &v)) top = std::max(top, v);
  };
  for (const schedules::Instruction& inst : trace.insts) {
    for (const std::string& n : inst.inputs) see(n);
    for (const std::string& n : inst.outputs) see(n);
  }
  return absl::StrCat("l", top + 1);
}

class ComputeLocationMutator final : public Mutator {
 public:
  using Mutator::Mutator;
  std::string name() const override { return "compute_location"; }

  std::vector<int> Sites(const Trace& trace) const override {
    std::vector<int> sites;
    for (size_t i = 0; i < trace.insts.size(); ++i) {
      const schedules::Instruction& inst = trace.insts[i];
      if (inst.kind == "sample_compute_location" && inst.decision.is_number_integer() &&
          !inst.inputs.empty() && inst.outputs.size() == 1) {
        sites.push_back(static_cast<int>(i));
      }
    }
    return sites;
  }

 protected:
  absl::StatusOr<Trace> Propose(const Trace& trace, std::mt19937_64& rng) const override {
    const std::vector<int> sites = Sites(trace);
    if (sites.empty()) {
      return absl::NotFoundError(
          "the trace has no sample_compute_location (the compute_location mutator does not "
          "apply)");
    }
    const int site = sites[rng() % sites.size()];
    const schedules::Instruction& inst = trace.insts[site];
    const int64_t current = inst.decision.get<int64_t>();
    // The locations the stage accepts at that point: replay the instructions before it and try
    // each. A canonical trace names a handle by its kind and index ("b3": handle 3).
    Trace prefix;
    prefix.insts.assign(trace.insts.begin(), trace.insts.begin() + site);
    absl::StatusOr<schedules::Schedule> before = source_->Replay(prefix, nullptr);
    const int block = HandleIndex(inst.inputs[0], 'b');
    if (!before.ok() || block < 0) {
      return absl::FailedPreconditionError(absl::StrCat(
          "the trace before instruction ", site, " (sample_compute_location of ", inst.inputs[0],
          ") does not replay: ",
          before.ok() ? "the stage handle is not canonical" : before.status().message()));
    }
    std::vector<int64_t> choices;
    if (inst.inputs.size() > 1) {
      // The explicit form: the other indices into the candidate loops. The primitive checks
      // every candidate whatever the decision, so one call tells whether they all hold.
      std::vector<schedules::LoopRV> cands;
      for (size_t i = 1; i < inst.inputs.size(); ++i) {
        const int id = HandleIndex(inst.inputs[i], 'l');
        if (id < 0) {
          return absl::FailedPreconditionError(
              absl::StrCat("sample_compute_location at instruction ", site, ": candidate ",
                           inst.inputs[i], " is not a canonical loop handle"));
        }
        cands.push_back(schedules::LoopRV{id});
      }
      schedules::Schedule s = *before;
      if (s.SampleComputeLocation(schedules::BlockRV{block}, cands, current).ok()) {
        for (int64_t d = 0; d < static_cast<int64_t>(cands.size()); ++d) {
          if (d != current) choices.push_back(d);
        }
      }
      if (choices.empty()) {
        return absl::FailedPreconditionError(absl::StrCat(
            "stage handle ", inst.inputs[0], " has no candidate location other than ", current));
      }
      Trace out = trace;
      out.insts[site].decision = choices[rng() % choices.size()];
      return out;
    }
    // Decisions: -2 root, -1 inline, then the consumer's loops 0, 1, ... up to the first refused.
    for (int64_t d = -2; d < 1024; ++d) {
      schedules::Schedule s = *before;
      const bool ok = s.SampleComputeLocation(schedules::BlockRV{block}, d).ok();
      if (!ok && d >= 0) break;
      if (ok && d != current) choices.push_back(d);
    }
    if (choices.empty()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "stage handle ", inst.inputs[0], " has no compute location other than ", current));
    }
    const int64_t pick = choices[rng() % choices.size()];
    Trace out = trace;
    out.insts[site].decision = pick;
    // The output: the markers "root" / "inline", or a loop handle.
    const std::string& old_name = inst.outputs[0];
    std::string new_name = pick == -2 ? "root" : pick == -1 ? "inline" : old_name;
    if (pick >= 0 && IsMarker(old_name)) new_name = FreshLoopName(trace);
    out.insts[site].outputs[0] = new_name;
    // The instruction that applies the location: compute_at(stage, location), or
    // compute_inline(stage) for "inline". It becomes compute_at(stage, new location), which
    // replays as compute_inline for "inline" (the replayed trace is the canonical one).
    const std::string& stage = inst.inputs[0];
    for (size_t j = site + 1; j < out.insts.size(); ++j) {
      const schedules::Instruction& u = out.insts[j];
      const bool applies =
          old_name == "inline"
              ? u.kind == "compute_inline" && !u.inputs.empty() && u.inputs[0] == stage
              : u.kind == "compute_at" && u.inputs.size() == 2 && u.inputs[1] == old_name &&
                    (!IsMarker(old_name) || u.inputs[0] == stage);
      if (applies) {
        out.insts[j] = schedules::Instruction{
            "compute_at", {stage, new_name}, nlohmann::json::object(), {}, nullptr};
        break;
      }
    }
    // Any other use of a loop handle follows it.
    if (new_name != old_name && !IsMarker(old_name)) {
      for (size_t j = site + 1; j < out.insts.size(); ++j) {
        for (std::string& in : out.insts[j].inputs) {
          if (in == old_name) in = new_name;
        }
      }
    }
    return out;
  }
};

}  // namespace

std::unique_ptr<Mutator> MakeComputeLocationMutator(const CandidateSource* source) {
  return std::make_unique<ComputeLocationMutator>(source);
}

}  // namespace tessel::search
