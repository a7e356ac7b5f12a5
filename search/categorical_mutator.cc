// unroll, thread_extent and categorical: another candidate of a sample_categorical, by what its
// value is used for (mutator.h).

#include "absl/strings/str_cat.h"
#include "search/mutator.h"

namespace tessel::search {
namespace {

using schedules::Trace;

class CategoricalMutator final : public Mutator {
 public:
  CategoricalMutator(const CandidateSource* source, CategoricalUse use, std::string name,
                     std::string what)
      : Mutator(source), use_(use), name_(std::move(name)), what_(std::move(what)) {}
  std::string name() const override { return name_; }

  std::vector<int> Sites(const Trace& trace) const override {
    std::vector<int> sites;
    for (size_t i = 0; i < trace.insts.size(); ++i) {
      const schedules::Instruction& inst = trace.insts[i];
      if (inst.kind != "sample_categorical" || !inst.decision.is_number_integer()) continue;
      if (Alternatives(inst).empty()) continue;
      if (CategoricalUseOf(trace, static_cast<int>(i)) == use_) {
        sites.push_back(static_cast<int>(i));
      }
    }
    return sites;
  }

 protected:
  absl::StatusOr<Trace> Propose(const Trace& trace, std::mt19937_64& rng) const override {
    const std::vector<int> sites = Sites(trace);
    if (sites.empty()) {
      return absl::NotFoundError(absl::StrCat("the trace has no sample_categorical that ", what_,
                                              " with another candidate (the ", name_,
                                              " mutator does not apply)"));
    }
    const int site = sites[rng() % sites.size()];
    const std::vector<std::pair<int64_t, double>> alt = Alternatives(trace.insts[site]);
    // Another candidate, by the instruction's own probabilities.
    double total = 0;
    for (const auto& [i, p] : alt) total += p;
    const double u = static_cast<double>(rng() >> 11) * (1.0 / 9007199254740992.0) * total;
    double acc = 0;
    int64_t pick = alt.back().first;
    for (const auto& [i, p] : alt) {
      acc += p;
      if (u < acc) {
        pick = i;
        break;
      }
    }
    Trace out = trace;
    out.insts[site].decision = pick;
    return out;
  }

 private:
  // The other indices with a positive probability, and their probabilities.
  static std::vector<std::pair<int64_t, double>> Alternatives(const schedules::Instruction& inst) {
    std::vector<std::pair<int64_t, double>> out;
    const nlohmann::json& probs = inst.attrs.value("probs", nlohmann::json::array());
    if (!probs.is_array() || !inst.decision.is_number_integer()) return out;
    const int64_t current = inst.decision.get<int64_t>();
    for (size_t i = 0; i < probs.size(); ++i) {
      if (!probs[i].is_number()) continue;
      const double p = probs[i].get<double>();
      if (static_cast<int64_t>(i) != current && p > 0) out.emplace_back(i, p);
    }
    return out;
  }

  CategoricalUse use_;
  std::string name_;
  std::string what_;
};

}  // namespace

std::unique_ptr<Mutator> MakeUnrollMutator(const CandidateSource* source) {
  return std::make_unique<CategoricalMutator>(source, CategoricalUse::kUnroll, "unroll",
                                              "sets auto_unroll_max_step");
}

std::unique_ptr<Mutator> MakeThreadExtentMutator(const CandidateSource* source) {
  return std::make_unique<CategoricalMutator>(source, CategoricalUse::kThreadExtent,
                                              "thread_extent", "sizes a loop bound to threadIdx");
}

std::unique_ptr<Mutator> MakeCategoricalMutator(const CandidateSource* source) {
  return std::make_unique<CategoricalMutator>(source, CategoricalUse::kOther, "categorical",
                                              "is neither an unroll step nor a thread extent");
}

}  // namespace tessel::search
