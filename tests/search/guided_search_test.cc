// The guided strategies (evolutionary, annealing): invariants every GenerateCandidates keeps,
// determinism, replay mode and the cost model they teach.

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <iostream>
#include <set>

#include "costmodel/cost_model.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "search/annealing_search.h"
#include "search/evolutionary_search.h"
#include "search/random_search.h"
#include "tests/search/search_test_util.h"

namespace tessel::search {
namespace {

using testing::Context;
using ::testing::HasSubstr;
using testing::Ids;
using testing::ResultOf;

constexpr char kMatmul[] = "matmul(M=128, N=128, K=64)";

// Small settings so that each call builds about a hundred candidates.
std::unique_ptr<GuidedSearch> Make(const std::string& kind, SearchContext ctx,
                                   double epsilon = 0.1) {
  if (kind == "evolutionary") {
    EvolutionaryOptions o;
    o.population = 32;
    o.generations = 2;
    o.guided.epsilon = epsilon;
    auto s = EvolutionarySearch::Create(std::move(ctx), o);
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? std::move(*s) : nullptr;
  }
  AnnealingOptions o;
  o.chains = 8;
  o.steps = 6;
  o.guided.epsilon = epsilon;
  auto s = AnnealingSearch::Create(std::move(ctx), o);
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? std::move(*s) : nullptr;
}

// A stand-in measurement: a deterministic time per candidate.
double FakeMs(uint64_t id) { return 1.0 + static_cast<double>(id % 997) / 100.0; }

class GuidedSearchTest : public ::testing::TestWithParam<std::string> {};

TEST_P(GuidedSearchTest, NeverProposesTwiceNorWhatIsMeasured) {
  // A resumed job: 6 candidates already measured.
  auto first = RandomSearch::Create(Context(kMatmul, "host", 99));
  ASSERT_TRUE(first.ok());
  auto done = (*first)->GenerateCandidates(6);
  ASSERT_TRUE(done.ok());
  SearchContext ctx = Context(kMatmul, "host", 5);
  std::set<uint64_t> measured;
  for (const Proposal& p : *done) {
    MeasuredResult m = ResultOf(p, FakeMs(p.candidate_id));
    m.candidate_id = 0;  // as some logs give it: the id comes from the JSON
    ctx.measured.push_back(m);
    measured.insert(p.candidate_id);
  }
  std::unique_ptr<GuidedSearch> s = Make(GetParam(), ctx);
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->name(), GetParam());
  // The measured results taught the model once.
  EXPECT_EQ(s->cost_model().num_examples(), 6);
  std::set<uint64_t> proposed;
  for (int round = 0; round < 3; ++round) {
    auto ps = s->GenerateCandidates(12);
    ASSERT_TRUE(ps.ok()) << ps.status();
    ASSERT_EQ(ps->size(), 12u);
    std::vector<MeasuredResult> results;
    for (const Proposal& p : *ps) {
      EXPECT_EQ(p.candidate_id, CandidateIdOf(p.trace_json));
      ASSERT_TRUE(p.candidate.trace.has_value());
      EXPECT_EQ(TraceJsonOf(*p.candidate.trace), p.trace_json);
      EXPECT_FALSE(p.candidate.source.code.empty());
      EXPECT_EQ(measured.count(p.candidate_id), 0u) << "re-proposed a measured candidate";
      EXPECT_TRUE(proposed.insert(p.candidate_id).second) << "proposed twice";
      results.push_back(ResultOf(p, FakeMs(p.candidate_id)));
    }
    // Half the results come back (one a failure); the rest stay in flight.
    results.resize(6);
    results[0].measurement.status = measure::MeasureStatus::kCompileError;
    results[0].measurement.timings.median_ms = 0;
    s->NotifyResults(results);
    for (const MeasuredResult& r : results) measured.insert(r.candidate_id);
  }
  EXPECT_EQ(s->cost_model().num_examples(), 6 + 3 * 6);
}

TEST_P(GuidedSearchTest, EpsilonShareOfEachBatchIsRandomSamples) {
  for (double eps : {0.0, 0.25, 1.0}) {
    std::unique_ptr<GuidedSearch> s = Make(GetParam(), Context(kMatmul, "host", 3), eps);
    ASSERT_NE(s, nullptr);
    for (int round = 0; round < 2; ++round) {
      auto ps = s->GenerateCandidates(16);
      ASSERT_TRUE(ps.ok());
      ASSERT_EQ(ps->size(), 16u);
      const int random = static_cast<int>(std::lround(eps * 16));
      EXPECT_EQ(s->last_stats().proposed_random, random) << "epsilon " << eps;
      EXPECT_EQ(s->last_stats().proposed_model, 16 - random) << "epsilon " << eps;
      std::vector<MeasuredResult> rs;
      for (const Proposal& p : *ps) rs.push_back(ResultOf(p, FakeMs(p.candidate_id)));
      s->NotifyResults(rs);
    }
  }
}

// Two calls with results between them; the proposals' ids.
std::vector<uint64_t> RunTwoRounds(const std::string& kind, uint64_t seed, int threads) {
  SearchContext ctx = Context(kMatmul, "cuda", seed);
  ctx.threads = threads;
  std::unique_ptr<GuidedSearch> s = Make(kind, ctx);
  std::vector<uint64_t> ids;
  for (int round = 0; round < 2; ++round) {
    auto ps = s->GenerateCandidates(10);
    EXPECT_TRUE(ps.ok());
    EXPECT_EQ(s->last_stats().threads, threads);
    std::vector<MeasuredResult> rs;
    for (const Proposal& p : *ps) {
      ids.push_back(p.candidate_id);
      rs.push_back(ResultOf(p, FakeMs(p.candidate_id)));
    }
    s->NotifyResults(rs);
  }
  return ids;
}

TEST_P(GuidedSearchTest, DeterministicForASeedWhateverTheThreadCount) {
  const std::vector<uint64_t> one = RunTwoRounds(GetParam(), 11, 1);
  EXPECT_EQ(one.size(), 20u);
  EXPECT_EQ(RunTwoRounds(GetParam(), 11, 3), one);
  EXPECT_NE(RunTwoRounds(GetParam(), 12, 2), one);
}

TEST_P(GuidedSearchTest, KeepsExploringAfterResults) {
  std::unique_ptr<GuidedSearch> s = Make(GetParam(), Context(kMatmul, "host", 8));
  for (int round = 0; round < 4; ++round) {
    auto ps = s->GenerateCandidates(16);
    ASSERT_TRUE(ps.ok());
    EXPECT_EQ(ps->size(), 16u) << "round " << round;
    // The population is refilled every call: mutants and samples beyond the batch.
    EXPECT_GT(s->last_stats().explored, 16) << "round " << round;
    int64_t valid = 0;
    for (const auto& [name, n] : s->last_stats().mutants_valid) valid += n;
    EXPECT_GT(valid, 0) << "round " << round;
    std::vector<MeasuredResult> rs;
    for (const Proposal& p : *ps) rs.push_back(ResultOf(p, FakeMs(p.candidate_id)));
    s->NotifyResults(rs);
  }
}

TEST_P(GuidedSearchTest, ReplayModeProposesOnlyPoolMembers) {
  auto r = RandomSearch::Create(Context(kMatmul, "cuda", 21));
  ASSERT_TRUE(r.ok());
  auto members = (*r)->GenerateCandidates(40);
  ASSERT_TRUE(members.ok());
  auto pool = std::make_shared<CandidatePool>();
  for (const Proposal& p : *members) {
    pool->trace_jsons.push_back(p.trace_json);
    pool->ids.insert(p.candidate_id);
  }
  SearchContext ctx = Context(kMatmul, "cuda", 4);
  ctx.pool = pool;
  std::unique_ptr<GuidedSearch> s = Make(GetParam(), ctx);
  std::set<uint64_t> proposed;
  for (int round = 0; round < 3; ++round) {
    auto ps = s->GenerateCandidates(8);
    ASSERT_TRUE(ps.ok());
    EXPECT_EQ(ps->size(), 8u);
    std::vector<MeasuredResult> rs;
    for (const Proposal& p : *ps) {
      EXPECT_TRUE(pool->ids.contains(p.candidate_id));
      EXPECT_TRUE(proposed.insert(p.candidate_id).second);
      rs.push_back(ResultOf(p, FakeMs(p.candidate_id)));
    }
    s->NotifyResults(rs);
  }
  EXPECT_GT(s->rejections()["not_in_pool"], 0);
}

TEST_P(GuidedSearchTest, SmallSpaceRunsDryAndSaysWhy) {
  // A 1x1x1 matmul has few distinct schedules: asking for many gives fewer, every one new.
  std::unique_ptr<GuidedSearch> s = Make(GetParam(), Context("matmul(M=1, N=1, K=1)"));
  ASSERT_NE(s, nullptr);
  auto ps = s->GenerateCandidates(200);
  ASSERT_TRUE(ps.ok());
  EXPECT_LT(ps->size(), 200u);
  EXPECT_GT(ps->size(), 0u);
  std::set<uint64_t> ids;
  for (const Proposal& p : *ps) EXPECT_TRUE(ids.insert(p.candidate_id).second);
  EXPECT_GT(s->rejections()["duplicate"], 0);
  auto more = s->GenerateCandidates(200);
  ASSERT_TRUE(more.ok());
  for (const Proposal& p : *more) EXPECT_TRUE(ids.insert(p.candidate_id).second);
}

INSTANTIATE_TEST_SUITE_P(Strategies, GuidedSearchTest,
                         ::testing::Values("evolutionary", "annealing"));

TEST(EvolutionarySearchTest, IsTheDefaultStrategy) {
  auto s = MakeSearchStrategy("", Context(kMatmul));
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ((*s)->name(), "evolutionary");
  EXPECT_EQ(KnownStrategies(), (std::vector<std::string>{"evolutionary", "annealing", "random"}));
  auto a = MakeSearchStrategy("annealing", Context(kMatmul));
  ASSERT_TRUE(a.ok());
  EXPECT_EQ((*a)->name(), "annealing");
  absl::Status bad = CheckStrategyName("genetic");
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.message(), HasSubstr("unknown search strategy 'genetic'"));
  EXPECT_THAT(bad.message(), HasSubstr("evolutionary, annealing, random"));
  EXPECT_THAT(bad.message(), HasSubstr("leave it empty for the default, evolutionary"));
}

TEST(EvolutionarySearchTest, BadOptionsNameTheRule) {
  EvolutionaryOptions o;
  o.population = 0;
  auto s = EvolutionarySearch::Create(Context(kMatmul), o);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.status().message()),
              HasSubstr("population (0), min_population (32), population_per_candidate (8) and "
                        "pool_population (2048) must be at least 1"));
  AnnealingOptions a;
  a.cooling = 1.5;
  auto t = AnnealingSearch::Create(Context(kMatmul), a);
  ASSERT_FALSE(t.ok());
  EXPECT_THAT(t.status().message(), HasSubstr("cooling (1.5) within (0, 1]"));
}

TEST(EvolutionarySearchTest, AModelThatHasSeenTheRecordsIsNotFedThemAgain) {
  auto first = RandomSearch::Create(Context(kMatmul, "host", 99));
  ASSERT_TRUE(first.ok());
  auto done = (*first)->GenerateCandidates(4);
  ASSERT_TRUE(done.ok());
  SearchContext ctx = Context(kMatmul);
  for (const Proposal& p : *done) ctx.measured.push_back(ResultOf(p, 1.0));
  auto model = costmodel::MakeCostModel("random", {});
  ASSERT_TRUE(model.ok());
  ctx.cost_model = std::move(*model);
  ctx.model_has_measured = true;
  auto s = EvolutionarySearch::Create(ctx);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ((*s)->cost_model().num_examples(), 0);
}

// A synthetic objective the cost model can learn from the features: the distance of a
// candidate's features to those of one fixed candidate.
struct Objective {
  costmodel::Features target;
  double Ms(const Proposal& p) const {
    const costmodel::Features f =
        costmodel::ExtractFeatures(p.candidate.program, p.candidate.target);
    double d = 0;
    for (size_t i = 0; i < f.size() && i < target.size(); ++i) {
      d += (f[i] - target[i]) * (f[i] - target[i]);
    }
    return 1.0 + d;
  }
};

// Mean objective of the proposals of rounds [from, rounds) of `s`, all results notified.
double MeanLateMs(SearchStrategy& s, const Objective& obj, int rounds, int from, int batch) {
  double sum = 0;
  int count = 0;
  for (int round = 0; round < rounds; ++round) {
    auto ps = s.GenerateCandidates(batch);
    EXPECT_TRUE(ps.ok());
    std::vector<MeasuredResult> rs;
    for (const Proposal& p : *ps) {
      const double ms = obj.Ms(p);
      rs.push_back(ResultOf(p, ms));
      if (round >= from) {
        sum += ms;
        ++count;
      }
    }
    s.NotifyResults(rs);
  }
  return count ? sum / count : 0;
}

Objective MakeObjective(const SearchContext& ctx) {
  const CandidateSource source = testing::Source(ctx);
  auto c = source.Sample(DrawSeed(777, 0, 7), nullptr, false);
  EXPECT_TRUE(c.ok());
  return Objective{costmodel::ExtractFeatures(c->program, ctx.target)};
}

TEST(EvolutionarySearchTest, RunsWithTheRandomCostModel) {
  SearchContext ctx = Context(kMatmul, "host", 6);
  auto model = costmodel::MakeCostModel("random", {});
  ASSERT_TRUE(model.ok());
  ctx.cost_model = std::move(*model);
  const Objective obj = MakeObjective(ctx);
  std::unique_ptr<GuidedSearch> s = Make("evolutionary", ctx);
  const double mean = MeanLateMs(*s, obj, 3, 0, 16);
  EXPECT_GE(mean, 1.0);
  EXPECT_EQ(s->cost_model().kind(), "random");
  EXPECT_EQ(s->cost_model().num_examples(), 48);
}

// With a model that learns, the guided search's later batches are better than random search's
// (runs once the xgboost model is part of the build).
TEST(EvolutionarySearchTest, ALearningModelBeatsRandomSearch) {
  costmodel::CostModelOptions mo;
  mo.seed = 1;
  mo.warmup_examples = 32;
  auto model = costmodel::MakeCostModel("xgboost", mo);
  if (!model.ok()) GTEST_SKIP() << "no xgboost cost model in this build: " << model.status();
  SearchContext ctx = Context(kMatmul, "host", 6);
  ctx.cost_model = std::move(*model);
  const Objective obj = MakeObjective(ctx);
  std::unique_ptr<GuidedSearch> guided = Make("evolutionary", ctx);
  const double guided_ms = MeanLateMs(*guided, obj, 6, 3, 16);
  auto random = MakeSearchStrategy("random", Context(kMatmul, "host", 6));
  ASSERT_TRUE(random.ok());
  const double random_ms = MeanLateMs(**random, obj, 6, 3, 16);
  EXPECT_LT(guided_ms, random_ms);
}

}  // namespace
}  // namespace tessel::search

namespace tessel::search {
namespace {

// The cost of one GenerateCandidates(64) on matmul 1024^3 with the random cost model; prints
// the time. Runs only when TESSEL_SEARCH_TIMING is set (timing never decides a unit test).
TEST(SearchTiming, GenerateCandidates64OnMatmul1024) {
  if (std::getenv("TESSEL_SEARCH_TIMING") == nullptr) GTEST_SKIP() << "set TESSEL_SEARCH_TIMING";
  for (const std::string target : {"host", "cuda"}) {
    for (const std::string kind : {"evolutionary", "annealing", "random"}) {
      SearchContext ctx = Context("matmul(M=1024, N=1024, K=1024)", target, 1);
      auto model = costmodel::MakeCostModel("random", {});
      ctx.cost_model = std::move(*model);
      auto s = MakeSearchStrategy(kind, ctx);
      ASSERT_TRUE(s.ok());
      for (int round = 0; round < 2; ++round) {
        const auto t0 = std::chrono::steady_clock::now();
        auto ps = (*s)->GenerateCandidates(64);
        const double ms =
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                .count();
        ASSERT_TRUE(ps.ok());
        std::cout << "[ timing   ] " << target << " " << kind << " round " << round << ": "
                  << ps->size() << " proposals in " << ms << " ms";
        if (auto* g = dynamic_cast<GuidedSearch*>(s->get())) {
          const SearchStats& st = g->last_stats();
          std::cout << " (threads " << st.threads << ", built " << st.built << ", explored "
                    << st.explored << "; valid/tried";
          for (const auto& [name, n] : st.mutants_tried) {
            const auto it = st.mutants_valid.find(name);
            std::cout << " " << name << " " << (it == st.mutants_valid.end() ? 0 : it->second)
                      << "/" << n;
          }
          std::cout << ")";
        }
        std::cout << "\n";
        std::vector<MeasuredResult> rs;
        for (const Proposal& p : *ps) rs.push_back(ResultOf(p, FakeMs(p.candidate_id)));
        (*s)->NotifyResults(rs);
      }
    }
  }
}

}  // namespace
}  // namespace tessel::search
