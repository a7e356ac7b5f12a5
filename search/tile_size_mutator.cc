// tile_size: moves a factor between two levels of one loop's tile (mutator.h).

#include <numeric>

#include "absl/strings/str_cat.h"
#include "search/mutator.h"

namespace tessel::search {
namespace {

using schedules::Trace;

struct Move {
  int from = 0, to = 0;
  int64_t factor = 1;
};

// Where each tile of a group keeps its levels: tile group[k] owns levels [begin, end) of
// TileLevels, and its decision's first factor is the product of the levels before `begin`
// (except for the outermost tile, which owns its whole decision).
struct Owned {
  int begin = 0, end = 0;
  int64_t max_innermost = 0;
};

std::vector<Owned> Ownership(const Trace& trace, const std::vector<int>& group) {
  std::vector<Owned> out(group.size());
  int pos = 0;
  for (int k = static_cast<int>(group.size()) - 1; k >= 0; --k) {
    const schedules::Instruction& inst = trace.insts[group[k]];
    const int n = static_cast<int>(inst.decision.size());
    const int own = k == static_cast<int>(group.size()) - 1 ? n : n - 1;
    out[k] = {pos, pos + own, inst.attrs.value("max_innermost", int64_t{0})};
    pos += own;
  }
  return out;
}

// The divisors of x, ascending.
std::vector<int64_t> Divisors(int64_t x) {
  std::vector<int64_t> low, high;
  for (int64_t d = 1; d * d <= x; ++d) {
    if (x % d != 0) continue;
    low.push_back(d);
    if (d != x / d) high.push_back(x / d);
  }
  low.insert(low.end(), high.rbegin(), high.rend());
  return low;
}

std::vector<Move> ValidMoves(const std::vector<int64_t>& levels, const std::vector<Owned>& own) {
  std::vector<Move> moves;
  const int n = static_cast<int>(levels.size());
  for (int from = 0; from < n; ++from) {
    for (int64_t d : Divisors(levels[from])) {
      if (d < 2) continue;
      for (int to = 0; to < n; ++to) {
        if (to == from) continue;
        bool ok = true;
        for (const Owned& o : own) {
          // The innermost level of every tile stays within its bound.
          if (o.end - 1 == to && o.max_innermost > 0 && levels[to] * d > o.max_innermost)
            ok = false;
        }
        if (ok) moves.push_back({from, to, d});
      }
    }
  }
  return moves;
}

class TileSizeMutator final : public Mutator {
 public:
  using Mutator::Mutator;
  std::string name() const override { return "tile_size"; }

  std::vector<int> Sites(const Trace& trace) const override {
    std::vector<int> sites;
    for (const std::vector<int>& g : TileGroups(trace)) {
      const std::vector<int64_t> levels = TileLevels(trace, g);
      if (levels.size() < 2) continue;
      if (!ValidMoves(levels, Ownership(trace, g)).empty()) sites.push_back(g.front());
    }
    return sites;
  }

 protected:
  absl::StatusOr<Trace> Propose(const Trace& trace, std::mt19937_64& rng) const override {
    std::vector<std::vector<int>> groups;
    for (const std::vector<int>& g : TileGroups(trace)) {
      const std::vector<int64_t> levels = TileLevels(trace, g);
      if (levels.size() >= 2 && !ValidMoves(levels, Ownership(trace, g)).empty()) {
        groups.push_back(g);
      }
    }
    if (groups.empty()) {
      return absl::NotFoundError(
          "the trace has no sample_perfect_tile with a factor to move between two levels (the "
          "tile_size mutator does not apply)");
    }
    const std::vector<int>& g = groups[rng() % groups.size()];
    std::vector<int64_t> levels = TileLevels(trace, g);
    const std::vector<Owned> own = Ownership(trace, g);
    const std::vector<Move> moves = ValidMoves(levels, own);
    const Move m = moves[rng() % moves.size()];
    levels[m.from] /= m.factor;
    levels[m.to] *= m.factor;
    Trace out = trace;
    for (size_t k = 0; k < g.size(); ++k) {
      std::vector<int64_t> d;
      if (k + 1 < g.size()) {
        d.push_back(std::accumulate(levels.begin(), levels.begin() + own[k].begin, int64_t{1},
                                    std::multiplies<int64_t>()));
      }
      d.insert(d.end(), levels.begin() + own[k].begin, levels.begin() + own[k].end);
      out.insts[g[k]].decision = d;
    }
    return out;
  }
};

}  // namespace

std::unique_ptr<Mutator> MakeTileSizeMutator(const CandidateSource* source) {
  return std::make_unique<TileSizeMutator>(source);
}

}  // namespace tessel::search
