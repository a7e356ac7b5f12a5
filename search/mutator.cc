#include "search/mutator.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace tessel::search {

using schedules::Instruction;
using schedules::Trace;

namespace {

// Replay's errors start "replaying instruction N (kind): "; N, or -1.
int FailingInstruction(absl::string_view message) {
  constexpr absl::string_view kPrefix = "replaying instruction ";
  const size_t at = message.find(kPrefix);
  if (at == absl::string_view::npos) return -1;
  absl::string_view rest = message.substr(at + kPrefix.size());
  const size_t end = rest.find(' ');
  int n = -1;
  if (end == absl::string_view::npos || !absl::SimpleAtoi(rest.substr(0, end), &n)) return -1;
  return n;
}

// The null entries of a split's "factors" attr name its inputs 1, 2, ...: the factor index of
// input `input_pos`, or -1.
int FactorIndexOfInput(const Instruction& split, size_t input_pos) {
  if (!split.attrs.contains("factors") || !split.attrs["factors"].is_array()) return -1;
  size_t next = 1;
  const nlohmann::json& fs = split.attrs["factors"];
  for (size_t i = 0; i < fs.size(); ++i) {
    if (!fs[i].is_null()) continue;
    if (next == input_pos) return static_cast<int>(i);
    ++next;
  }
  return -1;
}

}  // namespace

// ---- Analysis.

CategoricalUse CategoricalUseOf(const Trace& trace, int index) {
  const Instruction& s = trace.insts[index];
  if (s.kind != "sample_categorical" || s.outputs.size() != 1) return CategoricalUse::kOther;
  const std::string& v = s.outputs[0];
  std::set<std::string> thread_loops;  // loops its value splits off, bound to threadIdx.*
  for (size_t j = index + 1; j < trace.insts.size(); ++j) {
    const Instruction& u = trace.insts[j];
    if (absl::StartsWith(u.kind, "annotate") && u.inputs.size() > 1 && u.inputs[1] == v &&
        u.attrs.value("key", "") == "auto_unroll_max_step") {
      return CategoricalUse::kUnroll;
    }
    if (u.kind == "split") {
      for (size_t k = 1; k < u.inputs.size(); ++k) {
        if (u.inputs[k] != v) continue;
        const int fi = FactorIndexOfInput(u, k);
        if (fi >= 0 && fi < static_cast<int>(u.outputs.size())) thread_loops.insert(u.outputs[fi]);
      }
    }
    if (u.kind == "bind" && !u.inputs.empty() && thread_loops.count(u.inputs[0]) &&
        absl::StartsWith(u.attrs.value("thread", ""), "threadIdx")) {
      return CategoricalUse::kThreadExtent;
    }
  }
  return CategoricalUse::kOther;
}

std::vector<std::vector<int>> TileGroups(const Trace& trace) {
  const auto& insts = trace.insts;
  std::vector<int> tiles;
  std::map<std::string, int> tile_of_loop;  // loop -> the first tile sampled on it
  for (size_t i = 0; i < insts.size(); ++i) {
    if (insts[i].kind != "sample_perfect_tile" || insts[i].inputs.empty()) continue;
    tiles.push_back(static_cast<int>(i));
    tile_of_loop.emplace(insts[i].inputs[0], static_cast<int>(i));
  }
  std::map<int, int> next;  // tile -> the tile of its split's outermost loop
  std::set<int> has_prev;
  for (int t : tiles) {
    const Instruction& tile = insts[t];
    for (size_t j = t + 1; j < insts.size(); ++j) {
      const Instruction& s = insts[j];
      if (s.kind != "split" || s.inputs.size() != tile.outputs.size() + 1 ||
          s.inputs[0] != tile.inputs[0] || s.outputs.empty()) {
        continue;
      }
      if (!std::equal(tile.outputs.begin(), tile.outputs.end(), s.inputs.begin() + 1)) continue;
      auto it = tile_of_loop.find(s.outputs[0]);
      if (it != tile_of_loop.end() && it->second > t && !has_prev.count(it->second)) {
        next[t] = it->second;
        has_prev.insert(it->second);
      }
      break;
    }
  }
  std::vector<std::vector<int>> groups;
  for (int t : tiles) {
    if (has_prev.count(t)) continue;
    std::vector<int> g = {t};
    for (auto it = next.find(t); it != next.end(); it = next.find(it->second)) {
      g.push_back(it->second);
    }
    groups.push_back(std::move(g));
  }
  return groups;
}

std::vector<int64_t> TileLevels(const Trace& trace, const std::vector<int>& group) {
  std::vector<int64_t> levels;
  for (auto it = group.rbegin(); it != group.rend(); ++it) {
    const nlohmann::json& d = trace.insts[*it].decision;
    if (!d.is_array()) return {};
    std::vector<int64_t> f = d.get<std::vector<int64_t>>();
    levels.insert(levels.end(), it == group.rbegin() ? f.begin() : f.begin() + 1, f.end());
  }
  return levels;
}

// ---- Apply / Mutate.

absl::StatusOr<Trace> Mutator::Apply(const Trace& trace, std::mt19937_64& rng) const {
  absl::StatusOr<schedules::Candidate> c = Mutate(
      trace, rng, [](uint64_t) { return std::string(); }, nullptr);
  if (!c.ok()) return c.status();
  return std::move(*c->trace);
}

absl::StatusOr<schedules::Candidate> Mutator::Mutate(
    const Trace& parent, std::mt19937_64& rng, const std::function<std::string(uint64_t)>& veto,
    std::map<std::string, int64_t>* rejections, int attempts) const {
  const uint64_t parent_id = CandidateIdOf(TraceJsonOf(parent));
  std::string last = "no attempt";
  auto refuse = [&](const std::string& reason, absl::string_view message) {
    if (rejections) ++(*rejections)[reason];
    last = message.empty() ? reason : absl::StrCat(reason, ": ", message);
  };
  for (int attempt = 0; attempt < attempts; ++attempt) {
    absl::StatusOr<Trace> proposed = Propose(parent, rng);
    if (!proposed.ok()) {
      if (proposed.status().code() == absl::StatusCode::kNotFound) return proposed.status();
      refuse("no_alternative", proposed.status().message());
      continue;
    }
    Trace t = std::move(*proposed);
    // A tile whose loop's extent depends on the changed decisions no longer fits its decision:
    // re-sample it (only decisions the mutator left alone are re-sampled).
    absl::StatusOr<schedules::Schedule> sch = absl::UnknownError("not replayed");
    schedules::Rejection why;
    for (int repair = 0; repair <= 4; ++repair) {
      sch = source_->Replay(t, &why, rng());
      if (sch.ok()) break;
      const int at = FailingInstruction(sch.status().message());
      if (at < 0 || at >= static_cast<int>(t.insts.size()) ||
          at >= static_cast<int>(parent.insts.size()) ||
          t.insts[at].kind != "sample_perfect_tile" || t.insts[at].decision.is_null() ||
          t.insts[at].decision != parent.insts[at].decision) {
        break;
      }
      t.insts[at].decision = nullptr;
    }
    if (!sch.ok()) {
      refuse("replay", why.message);
      continue;
    }
    const uint64_t id = CandidateIdOf(TraceJsonOf(sch->trace()));
    if (id == parent_id) {
      refuse("unchanged", "");
      continue;
    }
    if (std::string v = veto(id); !v.empty()) {
      refuse(v, "");
      continue;
    }
    absl::StatusOr<schedules::Candidate> c = source_->Build(*sch, &why, /*codegen=*/false);
    if (!c.ok()) {
      refuse(why.step, why.message);
      continue;
    }
    return c;
  }
  return absl::FailedPreconditionError(absl::StrFormat(
      "no %s mutation of trace %016x (%d instructions) is valid after %d attempts; the last was "
      "refused by %s",
      name(), parent_id, static_cast<int>(parent.insts.size()), attempts, last));
}

}  // namespace tessel::search
