// Sampling: sample_perfect_tile, sample_categorical, sample_compute_location. Each records its
// decision; a decision given by the caller (or a replayed trace) is validated and used instead of
// sampling.

#include <algorithm>
#include <numeric>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "schedules/schedule/instruction_table.h"
#include "schedules/schedule/primitive/common.h"
#include "schedules/schedule/primitive/register.h"
#include "schedules/schedule/schedule.h"
#include "schedules/util/status_macros.h"

namespace tessel::schedules {

namespace {

constexpr char kSamplePerfectTile[] = "sample_perfect_tile";
constexpr char kSampleCategorical[] = "sample_categorical";
constexpr char kSampleComputeLocation[] = "sample_compute_location";

// Portable uniform integer in [0, n): std::mt19937_64 output is standardized, distributions are
// not, so sampling does its own reduction.
int64_t UniformInt(std::mt19937_64& rng, int64_t n) { return static_cast<int64_t>(rng() % n); }

// An index drawn with probability weights[i] / (their sum), from 53 random bits (the weights
// positive, their sum `total`).
int64_t WeightedIndex(std::mt19937_64& rng, const std::vector<double>& weights, double total) {
  // 53 random bits to a double in [0, total).
  const double u = static_cast<double>(rng() >> 11) * (1.0 / 9007199254740992.0) * total;
  double acc = 0;
  for (size_t i = 0; i < weights.size(); ++i) {
    acc += weights[i];
    if (u < acc) return static_cast<int64_t>(i);
  }
  return static_cast<int64_t>(weights.size()) - 1;
}

std::vector<int64_t> Divisors(int64_t n) {
  std::vector<int64_t> d;
  for (int64_t i = 1; i * i <= n; ++i) {
    if (n % i == 0) {
      d.push_back(i);
      if (i != n / i) d.push_back(n / i);
    }
  }
  std::sort(d.begin(), d.end());
  return d;
}

}  // namespace

absl::StatusOr<std::vector<IntRV>> Schedule::SamplePerfectTile(
    LoopRV loop, int n, int64_t max_innermost, std::optional<std::vector<int64_t>> decision,
    std::optional<IntRV> padded_extent, bool innermost_by_size) {
  const char* prim = kSamplePerfectTile;
  auto l = MutableLoop(loop, prim);
  if (!l.ok()) return l.status();
  const auto [s, iter] = *l;
  int64_t extent = s->iters[iter].extent;
  if (padded_extent) {
    const int64_t padded = Value(*padded_extent);
    if (padded < extent) {
      return Invalid(prim, absl::StrCat("padded extent ", padded, " is less than the extent ",
                                        extent, " of ", LoopDesc(*s, iter)));
    }
    extent = padded;
  }
  if (n < 1) return Invalid(prim, absl::StrCat("n must be at least 1, got ", n));
  if (max_innermost < 1) {
    return Invalid(prim, absl::StrCat("max_innermost must be at least 1, got ", max_innermost));
  }
  std::vector<int64_t> factors;
  if (decision) {
    factors = *decision;
    int64_t prod = 1;
    for (int64_t f : factors) prod *= f;
    if (static_cast<int>(factors.size()) != n || prod != extent ||
        std::any_of(factors.begin(), factors.end(), [](int64_t f) { return f < 1; })) {
      return Invalid(prim,
                     absl::StrCat("decision [", absl::StrJoin(factors, ", "), "] is not ", n,
                                  " positive factors of ", LoopDesc(*s, iter),
                                  padded_extent ? " (padded extent " : " (extent ", extent, ")"));
    }
    if (factors.back() > max_innermost) {
      return Invalid(prim, absl::StrCat("decision's innermost factor ", factors.back(),
                                        " exceeds max_innermost ", max_innermost));
    }
  } else {
    if (n == 1 && extent > max_innermost) {
      // The only tile of one factor is the extent itself (a decision would be rejected too).
      return Invalid(prim, absl::StrCat("n is 1, so the only factor is the extent ", extent, " of ",
                                        LoopDesc(*s, iter), ", which exceeds max_innermost ",
                                        max_innermost, "; use n >= 2 or raise max_innermost"));
    }
    // Innermost first: a divisor of the extent within max_innermost (uniformly, or in
    // proportion to its size), then the others uniformly among the divisors of what is left;
    // the outermost takes the rest.
    factors.assign(n, 1);
    int64_t rest = extent;
    for (int i = n - 1; i >= 1; --i) {
      std::vector<int64_t> d = Divisors(rest);
      if (i == n - 1) {
        d.erase(std::remove_if(d.begin(), d.end(), [&](int64_t x) { return x > max_innermost; }),
                d.end());
      }
      if (i == n - 1 && innermost_by_size) {
        const std::vector<double> sizes(d.begin(), d.end());
        factors[i] =
            d[WeightedIndex(rng_, sizes, std::accumulate(sizes.begin(), sizes.end(), 0.0))];
      } else {
        factors[i] = d[UniformInt(rng_, static_cast<int64_t>(d.size()))];
      }
      rest /= factors[i];
    }
    factors[0] = rest;
  }
  Instruction inst{
      prim, {RVName(loop.id)}, {{"n", n}, {"max_innermost", max_innermost}}, {}, factors};
  if (innermost_by_size) inst.attrs["innermost_by_size"] = 1;
  if (padded_extent) inst.inputs.push_back(RVName(padded_extent->id));
  std::vector<IntRV> out;
  for (int64_t f : factors) {
    out.push_back(IntRV{static_cast<int>(rvs_.size())});
    RVEntry e;
    e.value = f;
    inst.outputs.push_back(NewRV('v', e));
  }
  Record(std::move(inst));
  return out;
}

absl::StatusOr<IntRV> Schedule::SampleCategorical(std::vector<int64_t> candidates,
                                                  std::vector<double> probs,
                                                  std::optional<int64_t> decision,
                                                  std::optional<LoopRV> cap) {
  const char* prim = kSampleCategorical;
  int64_t cap_extent = 0;
  if (cap) {
    auto l = MutableLoop(*cap, prim);
    if (!l.ok()) return l.status();
    cap_extent = l->first->iters[l->second].extent;
  }
  if (candidates.empty() || candidates.size() != probs.size()) {
    return Invalid(
        prim, absl::StrCat("needs as many probabilities as candidates (got ", candidates.size(),
                           " candidates and ", probs.size(), " probabilities)"));
  }
  double total = 0;
  for (double p : probs) {
    if (!(p >= 0)) return Invalid(prim, "probabilities must be non-negative");
    total += p;
  }
  if (total <= 0) return Invalid(prim, "probabilities must not all be zero");
  int64_t index = 0;
  if (decision) {
    if (*decision < 0 || *decision >= static_cast<int64_t>(candidates.size())) {
      return Invalid(
          prim, absl::StrCat("decision ", *decision, " is not an index below ", candidates.size()));
    }
    index = *decision;
  } else {
    index = WeightedIndex(rng_, probs, total);
  }
  IntRV out{static_cast<int>(rvs_.size())};
  RVEntry e;
  e.value = candidates[index];
  if (cap) {
    // ceil(E / v) parts of the loop, each of the fewest iterations that keep that many: a split
    // by it leaves fewer than `parts` iterations past the extent.
    const int64_t v = e.value <= 0 ? cap_extent : std::min(e.value, cap_extent);
    const int64_t parts = (cap_extent + v - 1) / v;
    e.value = (cap_extent + parts - 1) / parts;
  }
  Instruction inst{
      prim, {}, {{"candidates", candidates}, {"probs", probs}}, {NewRV('v', e)}, index};
  if (cap) inst.inputs.push_back(RVName(cap->id));
  Record(std::move(inst));
  return out;
}

absl::StatusOr<LoopRV> Schedule::SampleComputeLocation(BlockRV block,
                                                       std::optional<int64_t> decision) {
  const char* prim = kSampleComputeLocation;
  auto s = MutableStage(block, prim);
  if (!s.ok()) return s.status();
  std::vector<int> consumers = Consumers((*s)->buffer.get());
  // Candidates: root; inline where compute_inline accepts it (injective, not an output, read by
  // some stage, nothing attached to its loops); and, where compute_at accepts them, every loop of
  // the single consumer (not for an output, nor for a consumer attached inside the stage).
  std::vector<int64_t> choices = {-2};
  const bool can_inline = !(*s)->reduces() && !(*s)->is_output && !consumers.empty() &&
                          AttachedTo((*s)->name) == nullptr;
  if (can_inline) choices.push_back(-1);
  const Stage* consumer = consumers.size() == 1 ? &stages_[consumers[0]] : nullptr;
  if (consumer && ((*s)->is_output || IsAttachedWithin(*consumer, (*s)->name))) {
    consumer = nullptr;
  }
  if (consumer) {
    for (size_t i = 0; i < consumer->leaves.size(); ++i) choices.push_back(static_cast<int64_t>(i));
  }
  int64_t pick;
  if (decision) {
    if (std::find(choices.begin(), choices.end(), *decision) == choices.end()) {
      return Invalid(
          prim, absl::StrCat("decision ", *decision, " is not a location of stage ", (*s)->name));
    }
    pick = *decision;
  } else {
    pick = choices[UniformInt(rng_, static_cast<int64_t>(choices.size()))];
  }
  LoopRV out;
  std::string out_name;
  if (pick == -2) {
    out.id = kRootLoop;
    out_name = "root";
  } else if (pick == -1) {
    out.id = kInlineLoop;
    out_name = "inline";
  } else {
    out.id = static_cast<int>(rvs_.size());
    out_name = NewLoopRV(*consumer, consumer->leaves[pick]);
  }
  Record(Instruction{prim, {RVName(block.id)}, {}, {out_name}, pick});
  return out;
}

absl::StatusOr<LoopRV> Schedule::SampleComputeLocation(BlockRV block,
                                                       const std::vector<LoopRV>& candidates,
                                                       std::optional<int64_t> decision) {
  const char* prim = kSampleComputeLocation;
  auto st = MutableStage(block, prim);
  if (!st.ok()) return st.status();
  Stage* s = *st;
  if (candidates.empty()) {
    return Invalid(prim, absl::StrCat("needs at least one candidate loop for stage ", s->name));
  }
  // Every candidate must be a loop compute_at accepts now.
  std::vector<std::pair<std::string, int>> where;  // the candidates' stages and iters
  for (size_t i = 0; i < candidates.size(); ++i) {
    auto l = MutableLoop(candidates[i], prim);
    if (!l.ok()) return l.status();
    const auto [t, iter] = *l;
    const absl::Status ok = CheckComputeAtLoop(s, t, iter);
    if (!ok.ok()) {
      return absl::Status(
          ok.code(),
          absl::StrCat("sample_compute_location: candidate ", i, " (", LoopDesc(*t, iter),
                       ") is not a location of stage ", s->name, ": ", ok.message()));
    }
    where.emplace_back(t->name, iter);
  }
  const int64_t n = static_cast<int64_t>(candidates.size());
  int64_t pick = 0;
  if (decision) {
    if (*decision < 0 || *decision >= n) {
      return Invalid(prim, absl::StrCat("decision ", *decision, " is not an index below ", n,
                                        " (the candidate loops of stage ", s->name, ")"));
    }
    pick = *decision;
  } else {
    pick = UniformInt(rng_, n);
  }
  LoopRV out{static_cast<int>(rvs_.size())};
  Instruction inst{prim, {RVName(block.id)}, {}, {}, pick};
  for (LoopRV c : candidates) inst.inputs.push_back(RVName(c.id));
  inst.outputs.push_back(NewLoopRV(stages_[StageIndex(where[pick].first)], where[pick].second));
  Record(std::move(inst));
  return out;
}

// ---------------------------------------------------------------------------------------------
// Instruction table entries.

namespace {

absl::Status ApplySamplePerfectTile(InstructionReader& in) {
  TESSEL_ASSIGN_OR_RETURN(LoopRV loop, in.Loop(0));
  TESSEL_ASSIGN_OR_RETURN(int n, in.AttrInt32("n"));
  TESSEL_ASSIGN_OR_RETURN(int64_t max_innermost, in.AttrInt("max_innermost"));
  TESSEL_ASSIGN_OR_RETURN(std::optional<std::vector<int64_t>> decision, in.IntArrayDecision());
  std::optional<IntRV> padded;
  if (in.num_inputs() > 1) {
    TESSEL_ASSIGN_OR_RETURN(padded, in.Value(1));
  }
  bool by_size = false;
  if (in.attrs().contains("innermost_by_size")) {
    TESSEL_ASSIGN_OR_RETURN(int64_t b, in.AttrInt("innermost_by_size"));
    by_size = b != 0;
  }
  TESSEL_ASSIGN_OR_RETURN(
      std::vector<IntRV> r,
      in.schedule().SamplePerfectTile(loop, n, max_innermost, decision, padded, by_size));
  return in.BindOutputs(r);
}

absl::Status ApplySampleCategorical(InstructionReader& in) {
  if (!in.attrs().contains("candidates") || !in.attrs().contains("probs")) {
    return InstructionReader::Error("needs \"candidates\" and \"probs\"");
  }
  TESSEL_ASSIGN_OR_RETURN(std::vector<int64_t> candidates, in.AttrIntArray("candidates"));
  TESSEL_ASSIGN_OR_RETURN(std::vector<double> probs, in.AttrNumberArray("probs"));
  TESSEL_ASSIGN_OR_RETURN(std::optional<int64_t> decision, in.IntDecision());
  std::optional<LoopRV> cap;
  if (in.num_inputs() > 0) {
    TESSEL_ASSIGN_OR_RETURN(cap, in.Loop(0));
  }
  TESSEL_ASSIGN_OR_RETURN(IntRV r,
                          in.schedule().SampleCategorical(candidates, probs, decision, cap));
  return in.BindOutput(r);
}

absl::Status ApplySampleComputeLocation(InstructionReader& in) {
  TESSEL_ASSIGN_OR_RETURN(BlockRV block, in.Block(0));
  TESSEL_ASSIGN_OR_RETURN(std::optional<int64_t> decision, in.IntDecision());
  Schedule& sch = in.schedule();
  if (in.num_inputs() > 1) {
    // The explicit form: the candidate loops follow the stage.
    TESSEL_ASSIGN_OR_RETURN(std::vector<LoopRV> candidates, in.LoopsFrom(1));
    TESSEL_ASSIGN_OR_RETURN(LoopRV r, sch.SampleComputeLocation(block, candidates, decision));
    return in.BindOutput(r);
  }
  TESSEL_ASSIGN_OR_RETURN(LoopRV r, sch.SampleComputeLocation(block, decision));
  // The root and inline markers are bound like loops (InstructionReader::Loop reads them back).
  if (r.id < 0 && in.inst().outputs.size() != 1)
    return InstructionReader::Error("needs one output");
  return in.BindOutput(r);
}

}  // namespace

void RegisterSamplingInstructions(InstructionTable* table) {
  table->Register(kSamplePerfectTile, ApplySamplePerfectTile);
  table->Register(kSampleCategorical, ApplySampleCategorical);
  table->Register(kSampleComputeLocation, ApplySampleComputeLocation);
}

}  // namespace tessel::schedules
