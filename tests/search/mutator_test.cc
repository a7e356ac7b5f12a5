#include "search/mutator.h"

#include <iostream>
#include <numeric>
#include <set>

#include "absl/strings/match.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "search/mutator_picker.h"
#include "tests/e2e/e2e_util.h"
#include "tests/schedules/test_workloads.h"
#include "tests/search/search_test_util.h"

namespace tessel::search {
namespace {

using schedules::Instruction;
using schedules::Trace;
using testing::Context;
using ::testing::HasSubstr;
using testing::SampleTraces;
using testing::Source;

constexpr int kSamples = 50;

int64_t Product(const std::vector<int64_t>& v) {
  return std::accumulate(v.begin(), v.end(), int64_t{1}, std::multiplies<int64_t>());
}

bool SameButDecision(const Instruction& a, const Instruction& b) {
  return a.kind == b.kind && a.inputs == b.inputs && a.attrs == b.attrs && a.outputs == b.outputs;
}

std::vector<int> Differing(const Trace& a, const Trace& b) {
  std::vector<int> d;
  for (size_t i = 0; i < a.insts.size(); ++i) {
    if (!(a.insts[i] == b.insts[i])) d.push_back(static_cast<int>(i));
  }
  return d;
}

// Checks a mutant against its parent for the mutator `name`; false (with a failure) if wrong.
void CheckMutant(const std::string& name, const Mutator& m, const Trace& parent, const Trace& child,
                 const CandidateSource& source) {
  ASSERT_EQ(child.insts.size(), parent.insts.size());
  // It builds.
  EXPECT_TRUE(source.Build(child, nullptr).ok());
  if (name == "compute_location") {
    // Handle names may shift; kinds, attrs and decisions differ in exactly one decision (and the
    // instruction applying it, compute_at or compute_inline); the program changes.
    int diffs = 0;
    for (size_t i = 0; i < parent.insts.size(); ++i) {
      if (parent.insts[i].kind != child.insts[i].kind) {
        const std::set<std::string> apply = {"compute_at", "compute_inline"};
        EXPECT_TRUE(apply.count(parent.insts[i].kind) && apply.count(child.insts[i].kind))
            << parent.insts[i].kind << " became " << child.insts[i].kind;
        continue;
      }
      EXPECT_EQ(parent.insts[i].attrs, child.insts[i].attrs);
      if (parent.insts[i].decision != child.insts[i].decision) {
        ++diffs;
        EXPECT_EQ(child.insts[i].kind, "sample_compute_location");
      }
    }
    EXPECT_EQ(diffs, 1);
    auto a = source.Build(parent, nullptr);
    auto b = source.Build(child, nullptr);
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_NE(a->source.code, b->source.code) << "the location did not change the program";
    return;
  }
  const std::vector<int> diff = Differing(parent, child);
  ASSERT_FALSE(diff.empty()) << name << " returned its parent";
  for (int i : diff) {
    EXPECT_TRUE(SameButDecision(parent.insts[i], child.insts[i]))
        << name << " changed more than a decision at instruction " << i;
  }
  if (name == "tile_size") {
    // Only tile decisions change; the group of the first change keeps its product and every
    // tile its max_innermost bound.
    for (int i : diff) EXPECT_EQ(child.insts[i].kind, "sample_perfect_tile");
    for (const std::vector<int>& g : TileGroups(parent)) {
      if (std::find(g.begin(), g.end(), diff.front()) == g.end()) continue;
      EXPECT_EQ(Product(TileLevels(parent, g)), Product(TileLevels(child, g)));
    }
    for (const Instruction& inst : child.insts) {
      if (inst.kind != "sample_perfect_tile") continue;
      const std::vector<int64_t> d = inst.decision.get<std::vector<int64_t>>();
      EXPECT_LE(d.back(), inst.attrs["max_innermost"].get<int64_t>());
    }
    return;
  }
  // A categorical mutator changes exactly one categorical decision, at one of its sites, to
  // another index; the tiles of a loop whose extent that value sets (a split-K's chunk) are
  // re-sampled with it (Mutator::Mutate's repair).
  std::vector<int> categorical;
  for (int i : diff) {
    if (child.insts[i].kind == "sample_categorical") {
      categorical.push_back(i);
    } else {
      EXPECT_EQ(child.insts[i].kind, "sample_perfect_tile") << name;
    }
  }
  ASSERT_EQ(categorical.size(), 1u) << name;
  const std::vector<int> sites = m.Sites(parent);
  EXPECT_NE(std::find(sites.begin(), sites.end(), categorical[0]), sites.end());
  EXPECT_LT(child.insts[categorical[0]].decision.get<int64_t>(),
            static_cast<int64_t>(child.insts[categorical[0]].attrs["candidates"].size()));
}

struct Case {
  std::string spec;
  std::string target;
  std::set<std::string> applicable;  // mutators that apply to every sample
};

class MutatorValidityTest : public ::testing::TestWithParam<Case> {};

TEST_P(MutatorValidityTest, EveryMutantBuildsAndChangesOnlyItsDecision) {
  const Case& c = GetParam();
  const SearchContext ctx = Context(c.spec, c.target);
  const CandidateSource source = Source(ctx);
  const std::vector<Trace> samples = SampleTraces(source, kSamples);
  ASSERT_EQ(samples.size(), static_cast<size_t>(kSamples));
  MutatorPicker picker(&source);
  for (const auto& m : picker.mutators()) {
    int applicable = 0, valid = 0;
    int64_t first_try = 0, refused = 0;  // per attempt, through Mutate
    for (size_t s = 0; s < samples.size(); ++s) {
      if (m->Applicable(samples[s])) {
        std::mt19937_64 rng(s + 1000);
        std::map<std::string, int64_t> rej;
        auto c = m->Mutate(
            samples[s], rng, [](uint64_t) { return std::string(); }, &rej);
        for (const auto& [why, count] : rej) refused += count;
        if (c.ok()) ++first_try;
      }
      std::mt19937_64 rng(s);
      absl::StatusOr<Trace> child = m->Apply(samples[s], rng);
      if (!m->Applicable(samples[s])) {
        ASSERT_FALSE(child.ok());
        EXPECT_EQ(child.status().code(), absl::StatusCode::kNotFound);
        EXPECT_THAT(child.status().message(),
                    HasSubstr("(the " + m->name() + " mutator does not apply)"));
        continue;
      }
      ++applicable;
      if (!child.ok()) {
        EXPECT_EQ(child.status().code(), absl::StatusCode::kFailedPrecondition) << child.status();
        EXPECT_THAT(child.status().message(), HasSubstr("no " + m->name() + " mutation of trace"));
        continue;
      }
      ++valid;
      CheckMutant(m->name(), *m, samples[s], *child, source);
    }
    if (c.applicable.count(m->name())) {
      EXPECT_EQ(applicable, kSamples) << m->name();
    }
    if (applicable > 0) {
      // Most mutants are valid (the share is reported for tuning the weights).
      EXPECT_GE(valid * 2, applicable) << m->name() << " on " << c.spec << " " << c.target;
      std::cout << "[ share    ] " << c.target << " " << c.spec << " " << m->name() << ": " << valid
                << "/" << applicable << " valid; per attempt " << first_try << "/"
                << first_try + refused << "\n";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Workloads, MutatorValidityTest,
    ::testing::Values(
        Case{"matmul(M=128, N=128, K=64)", "host", {"tile_size", "unroll"}},
        Case{"matmul(M=128, N=128, K=64)",
             "cuda",
             {"tile_size", "unroll", "categorical", "compute_location"}},
        // Split-K: a second sketch whose split factor is a categorical.
        Case{"matmul(M=8, N=1, K=2048)", "host", {"tile_size", "unroll"}},
        Case{"matmul(M=64, N=64, K=8192)",
             "cuda",
             {"tile_size", "unroll", "categorical", "compute_location"}},
        // Skinny contractions (skinny_contraction): threads, vector widths, unrolls and chunks
        // are categoricals.
        Case{"matmul(M=2048, N=1, K=65536)", "cuda", {"unroll", "categorical"}},
        Case{"matmul(M=1, N=4096, K=4096, dtype=f16)", "cuda", {"unroll", "categorical"}},
        // Shapes no tile divides: padded extents are categoricals.
        Case{"matmul(M=131, N=97, K=67)", "host", {"unroll", "categorical"}},
        Case{"matmul(M=131, N=97, K=67)", "cuda", {"unroll", "categorical", "compute_location"}},
        Case{"softmax(rows=8, cols=256)", "host", {"unroll"}},
        Case{"softmax(rows=8, cols=256)", "cuda", {"thread_extent", "unroll"}},
        Case{"layernorm(rows=8, cols=256)", "host", {"unroll"}},
        Case{"layernorm(rows=8, cols=256)", "cuda", {"thread_extent", "unroll"}},
        // Convolution is an implicit GEMM of multi-level tiling: tiles, and on CUDA
        // cache levels.
        Case{"conv2d(N=1, C=8, H=16, W=16, K=16, R=3, S=3, padding=1)",
             "host",
             {"tile_size", "unroll"}},
        Case{"conv2d(N=1, C=8, H=16, W=16, K=16, R=3, S=3, padding=1)",
             "cuda",
             {"tile_size", "unroll", "categorical", "compute_location"}}));

TEST(MutatorTest, NotFoundWhenNothingToMutateWithAMessage) {
  const SearchContext ctx = Context("softmax(rows=8, cols=256)", "host");
  const CandidateSource source = Source(ctx);
  const Trace t = SampleTraces(source, 1).at(0);
  std::mt19937_64 rng(1);
  auto tile = MakeTileSizeMutator(&source)->Apply(t, rng);
  ASSERT_EQ(tile.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(tile.status().message(),
              HasSubstr("no sample_perfect_tile with a factor to move between two levels"));
  auto loc = MakeComputeLocationMutator(&source)->Apply(t, rng);
  ASSERT_EQ(loc.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(loc.status().message(), HasSubstr("the trace has no sample_compute_location"));
  auto threads = MakeThreadExtentMutator(&source)->Apply(t, rng);
  ASSERT_EQ(threads.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(threads.status().message(), HasSubstr("sizes a loop bound to threadIdx"));
}

TEST(MutatorTest, GivesUpWithATypedErrorWhenEveryMutantIsRefused) {
  const SearchContext ctx = Context("matmul(M=128, N=128, K=64)", "host");
  const CandidateSource source = Source(ctx);
  const Trace t = SampleTraces(source, 1).at(0);
  std::mt19937_64 rng(1);
  std::map<std::string, int64_t> rej;
  auto c = MakeTileSizeMutator(&source)->Mutate(
      t, rng, [](uint64_t) { return std::string("duplicate"); }, &rej);
  ASSERT_EQ(c.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(c.status().message(), HasSubstr("no tile_size mutation of trace"));
  EXPECT_THAT(c.status().message(), HasSubstr("is valid after 4 attempts"));
  EXPECT_THAT(c.status().message(), HasSubstr("refused by duplicate"));
  EXPECT_EQ(rej["duplicate"], Mutator::kAttempts);
}

TEST(MutatorTest, CudaTileChainsAreOneGroupWithTheLoopsExtent) {
  const SearchContext ctx = Context("matmul(M=128, N=128, K=64)", "cuda");
  const CandidateSource source = Source(ctx);
  const Trace t = SampleTraces(source, 1).at(0);
  std::vector<int64_t> products;
  size_t longest = 0;
  for (const std::vector<int>& g : TileGroups(t)) {
    products.push_back(Product(TileLevels(t, g)));
    longest = std::max(longest, g.size());
  }
  // m and n: chains of three two-factor tiles (block, vthread, thread, per-thread: 4 levels);
  // k: a chain of two (3 levels); the accumulator's per-thread tiles.
  EXPECT_EQ(longest, 3u);
  EXPECT_EQ(std::count(products.begin(), products.end(), 128), 2);
  EXPECT_EQ(std::count(products.begin(), products.end(), 64), 1);
}

// The split-K factor (multi-level tiling's split sketch) is a categorical decision: the
// categorical mutator moves it, and the mutant builds with the new number of chunks.
TEST(MutatorTest, CategoricalMutatesTheSplitKFactor) {
  const SearchContext ctx = Context("matmul(M=512, N=512, K=262144)", "cuda");
  const CandidateSource source = Source(ctx);
  const std::vector<Trace> samples = SampleTraces(source, 16);
  auto categorical = MakeCategoricalMutator(&source);
  int moved = 0;
  for (const Trace& t : samples) {
    const int64_t before = tessel::testing::SplitKFactor(t);
    if (!absl::StrContains(t.ToJsonString(), "\"rfactor\"")) continue;
    for (uint64_t seed = 0; seed < 32 && moved < 3; ++seed) {
      std::mt19937_64 rng(seed);
      absl::StatusOr<Trace> child = categorical->Apply(t, rng);
      ASSERT_TRUE(child.ok()) << child.status();
      const int64_t after = tessel::testing::SplitKFactor(*child);
      if (after == before) continue;  // another categorical (the fetch width) moved
      ++moved;
      auto built = source.Build(*child, nullptr);
      ASSERT_TRUE(built.ok()) << built.status();
      ASSERT_EQ(built->source.kernels.size(), 2u);
      EXPECT_EQ(built->source.kernels[0].launch.grid[2], after);
    }
  }
  EXPECT_EQ(moved, 3);
}

// The padded extent of a shape no tile divides is a categorical decision: the categorical
// mutator moves it, the tiles of its loop are re-sampled to the new extent, and the mutant
// builds; the tile_size mutator keeps the padded extent.
TEST(MutatorTest, CategoricalMutatesThePaddedExtent) {
  for (const char* target : {"host", "cuda"}) {
    SCOPED_TRACE(target);
    const SearchContext ctx = Context("matmul(M=4099, N=3001, K=1999)", target);
    const CandidateSource source = Source(ctx);
    const std::vector<Trace> samples = SampleTraces(source, 8);
    auto categorical = MakeCategoricalMutator(&source);
    auto tile = MakeTileSizeMutator(&source);
    // The value of each padded extent (by its instruction) and the product of each tile group.
    auto padded = [](const Trace& t) {
      std::map<int, int64_t> out;
      for (size_t i = 0; i < t.insts.size(); ++i) {
        const Instruction& c = t.insts[i];
        if (c.kind != "sample_categorical") continue;
        for (const Instruction& p : t.insts) {
          if (p.kind == "sample_perfect_tile" && p.inputs.size() == 2 &&
              p.inputs[1] == c.outputs[0]) {
            out[static_cast<int>(i)] =
                c.attrs["candidates"][c.decision.get<int64_t>()].get<int64_t>();
          }
        }
      }
      return out;
    };
    int moved = 0, tiled = 0;
    for (const Trace& t : samples) {
      const std::map<int, int64_t> before = padded(t);
      ASSERT_EQ(before.size(), 3u);
      for (uint64_t seed = 0; seed < 16 && moved < 3; ++seed) {
        std::mt19937_64 rng(seed);
        absl::StatusOr<Trace> child = categorical->Apply(t, rng);
        ASSERT_TRUE(child.ok()) << child.status();
        if (padded(*child) == before) continue;  // another categorical moved
        ++moved;
        EXPECT_TRUE(source.Build(*child, nullptr).ok());
        // Every tile group of the child multiplies to its loop's (padded) extent.
        std::set<int64_t> products;
        for (const std::vector<int>& g : TileGroups(*child)) {
          products.insert(Product(TileLevels(*child, g)));
        }
        for (const auto& [at, value] : padded(*child)) EXPECT_TRUE(products.count(value)) << value;
      }
      std::mt19937_64 rng(7);
      absl::StatusOr<Trace> mutant = tile->Apply(t, rng);
      if (mutant.ok()) {
        ++tiled;
        EXPECT_EQ(padded(*mutant), before);
      }
    }
    EXPECT_EQ(moved, 3);
    EXPECT_GT(tiled, 0);
  }
}

TEST(MutatorTest, CategoricalUsesAreTellApart) {
  const SearchContext ctx = Context("softmax(rows=8, cols=256)", "cuda");
  const CandidateSource source = Source(ctx);
  const Trace t = SampleTraces(source, 1).at(0);
  std::set<CategoricalUse> uses;
  for (size_t i = 0; i < t.insts.size(); ++i) {
    if (t.insts[i].kind == "sample_categorical") {
      uses.insert(CategoricalUseOf(t, static_cast<int>(i)));
    }
  }
  EXPECT_TRUE(uses.count(CategoricalUse::kUnroll));
  EXPECT_TRUE(uses.count(CategoricalUse::kThreadExtent));
}

// No default rule samples a compute location; a hand-written trace does: B (producer) at a
// location of C, C's outer loop parallel.
Trace ComputeLocationTrace(const schedules::Workload& w, int64_t decision) {
  absl::StatusOr<schedules::Schedule> s = schedules::Schedule::Create(w);
  EXPECT_TRUE(s.ok());
  auto b = s->GetBlock("B");
  auto at = s->SampleComputeLocation(*b, decision);
  EXPECT_TRUE(at.ok()) << at.status();
  EXPECT_TRUE(s->ComputeAt(*b, *at).ok());
  auto c = s->GetBlock("C");
  auto loops = s->GetLoops(*c);
  EXPECT_TRUE(s->Parallel((*loops)[0]).ok());
  return s->trace();
}

TEST(MutatorTest, ComputeLocationMovesTheStageAmongItsLocations) {
  const schedules::Workload w = schedules::test_workloads::ElementwiseChain(16, 16);
  absl::StatusOr<CandidateSource> source =
      CandidateSource::Create(w, schedules::HostTarget(), nullptr);
  ASSERT_TRUE(source.ok()) << source.status();
  auto m = MakeComputeLocationMutator(&*source);
  for (int64_t start : {-2, -1, 0, 1}) {
    const Trace parent = ComputeLocationTrace(w, start);
    ASSERT_TRUE(m->Applicable(parent));
    std::set<int64_t> seen;
    for (uint64_t seed = 0; seed < 12; ++seed) {
      std::mt19937_64 rng(seed);
      absl::StatusOr<Trace> child = m->Apply(parent, rng);
      ASSERT_TRUE(child.ok()) << child.status();
      CheckMutant("compute_location", *m, parent, *child, *source);
      for (const Instruction& inst : child->insts) {
        if (inst.kind == "sample_compute_location") seen.insert(inst.decision.get<int64_t>());
      }
    }
    std::set<int64_t> others = {-2, -1, 0, 1};
    others.erase(start);
    EXPECT_EQ(seen, others) << "from " << start;
  }
}

// CUDA multi-level tiling samples its caches' levels over explicit candidate loops: the mutator
// moves them (only the decision changes), and every mutant replays, lowers and generates source.
void CheckCacheLevelMutants(const std::string& spec) {
  const SearchContext ctx = Context(spec, "cuda");
  const CandidateSource source = Source(ctx);
  auto m = MakeComputeLocationMutator(&source);
  int fired = 0;
  std::set<std::pair<int, int64_t>> moves;  // (site, new decision)
  for (const Trace& parent : SampleTraces(source, 3)) {
    const std::vector<int> sites = m->Sites(parent);
    // Two operands, each in shared and local memory; a pipelined sample's shared copies are
    // at its pipeline's loop, not a decision.
    ASSERT_TRUE(sites.size() == 4u || sites.size() == 2u) << sites.size();
    for (uint64_t seed = 0; seed < 8; ++seed) {
      std::mt19937_64 rng(seed);
      absl::StatusOr<Trace> child = m->Apply(parent, rng);
      ASSERT_TRUE(child.ok()) << child.status();
      ++fired;
      const std::vector<int> diff = Differing(parent, *child);
      ASSERT_EQ(diff.size(), 1u);
      EXPECT_EQ(child->insts[diff[0]].kind, "sample_compute_location");
      EXPECT_TRUE(SameButDecision(parent.insts[diff[0]], child->insts[diff[0]]));
      moves.emplace(diff[0], child->insts[diff[0]].decision.get<int64_t>());
      schedules::Rejection why;
      auto built = source.Build(*child, &why);
      ASSERT_TRUE(built.ok()) << why.step << ": " << why.message;
      EXPECT_FALSE(built->source.code.empty());
    }
  }
  EXPECT_EQ(fired, 24);
  EXPECT_GE(moves.size(), 4u);
}

TEST(MutatorTest, ComputeLocationMovesCacheLevels) {
  for (const char* spec :
       {"matmul(M=128, N=128, K=64)", "conv2d(N=2, C=8, H=12, W=13, K=16, R=3, S=3, padding=1)"}) {
    SCOPED_TRACE(spec);
    CheckCacheLevelMutants(spec);
  }
}

TEST(MutatorPickerTest, PicksOnlyApplicableMutatorsByWeight) {
  const SearchContext ctx = Context("matmul(M=128, N=128, K=64)", "host");
  const CandidateSource source = Source(ctx);
  const Trace t = SampleTraces(source, 1).at(0);
  MutatorPicker picker(&source);
  std::map<std::string, int> picks;
  std::mt19937_64 rng(3);
  for (int i = 0; i < 400; ++i) ++picks[picker.Pick(t, rng)->name()];
  // Host matmul: tiles and unroll only (weights 0.55 and 0.10).
  EXPECT_EQ(picks.size(), 2u);
  EXPECT_GT(picks["tile_size"], 3 * picks["unroll"]);
  EXPECT_GT(picks["unroll"], 0);
  MutatorWeights only_threads{0, 1, 0, 0, 0};
  MutatorPicker none(&source, only_threads);
  EXPECT_EQ(none.Pick(t, rng), nullptr);
}

}  // namespace
}  // namespace tessel::search
