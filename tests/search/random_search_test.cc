#include "search/random_search.h"

#include <set>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "schedules/target/target.h"
#include "schedules/workload/builtins.h"
#include "search/search_strategy.h"

namespace tessel::search {
namespace {

using ::testing::HasSubstr;

SearchContext Context(const std::string& spec, uint64_t seed = 1, int64_t task_id = 1) {
  absl::StatusOr<schedules::Workload> w = schedules::ParseWorkloadSpec(spec);
  EXPECT_TRUE(w.ok()) << w.status();
  SearchContext c;
  c.workload = *w;
  c.target = schedules::HostTarget();
  c.seed = seed;
  c.task_id = task_id;
  return c;
}

std::vector<uint64_t> Ids(const std::vector<Proposal>& ps) {
  std::vector<uint64_t> ids;
  for (const Proposal& p : ps) ids.push_back(p.candidate_id);
  return ids;
}

TEST(RandomSearchTest, ProposesDistinctBuiltCandidatesKeyedByTheirTrace) {
  auto s = MakeSearchStrategy("random", Context("matmul(M=64, N=64, K=64)"));
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ((*s)->name(), "random");
  auto ps = (*s)->GenerateCandidates(8);
  ASSERT_TRUE(ps.ok()) << ps.status();
  ASSERT_EQ(ps->size(), 8u);
  std::set<uint64_t> ids;
  for (const Proposal& p : *ps) {
    EXPECT_EQ(p.candidate_id, CandidateIdOf(p.trace_json));
    ASSERT_TRUE(p.candidate.trace.has_value());
    EXPECT_EQ(TraceJsonOf(*p.candidate.trace), p.trace_json);
    EXPECT_FALSE(p.candidate.source.code.empty());
    ids.insert(p.candidate_id);
  }
  EXPECT_EQ(ids.size(), 8u);
  // The next call does not repeat any of them.
  auto more = (*s)->GenerateCandidates(8);
  ASSERT_TRUE(more.ok());
  for (uint64_t id : Ids(*more)) EXPECT_EQ(ids.count(id), 0u);
}

TEST(RandomSearchTest, SameSeedSameProposalsOtherTaskOtherProposals) {
  auto a = MakeSearchStrategy("random", Context("matmul(M=64, N=64, K=64)", 7, 1));
  auto b = MakeSearchStrategy("random", Context("matmul(M=64, N=64, K=64)", 7, 1));
  auto c = MakeSearchStrategy("random", Context("matmul(M=64, N=64, K=64)", 7, 2));
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  auto pa = (*a)->GenerateCandidates(6);
  auto pb = (*b)->GenerateCandidates(6);
  auto pc = (*c)->GenerateCandidates(6);
  ASSERT_TRUE(pa.ok() && pb.ok() && pc.ok());
  EXPECT_EQ(Ids(*pa), Ids(*pb));
  EXPECT_NE(Ids(*pa), Ids(*pc));
  EXPECT_NE(RandomSearch::DrawSeed(7, 1, 0), RandomSearch::DrawSeed(7, 2, 0));
  EXPECT_NE(RandomSearch::DrawSeed(7, 1, 0), RandomSearch::DrawSeed(7, 1, 1));
}

TEST(RandomSearchTest, ResumedStrategyNeverProposesWhatIsMeasured) {
  auto first = MakeSearchStrategy("random", Context("matmul(M=64, N=64, K=64)", 3));
  ASSERT_TRUE(first.ok());
  auto ps = (*first)->GenerateCandidates(6);
  ASSERT_TRUE(ps.ok());
  SearchContext resumed = Context("matmul(M=64, N=64, K=64)", 3);
  std::set<uint64_t> measured;
  for (const Proposal& p : *ps) {
    // As read back from the log: the trace JSON (possibly formatted otherwise), no id.
    MeasuredResult m;
    m.trace_json = nlohmann::json::parse(p.trace_json).dump(2);
    m.measurement.status = measure::MeasureStatus::kOk;
    m.measurement.timings.median_ms = 1;
    resumed.measured.push_back(m);
    measured.insert(p.candidate_id);
  }
  auto second = MakeSearchStrategy("random", resumed);
  ASSERT_TRUE(second.ok());
  auto again = (*second)->GenerateCandidates(6);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->size(), 6u);
  for (uint64_t id : Ids(*again)) EXPECT_EQ(measured.count(id), 0u) << id;
  EXPECT_GE((*second)->rejections()["duplicate"], 6);
}

TEST(RandomSearchTest, SmallSpaceRunsDryAndSaysWhy) {
  // A 1x1x1 matmul has few distinct schedules: asking for many returns fewer, and the skipped
  // draws are counted as duplicates.
  auto s = MakeSearchStrategy("random", Context("matmul(M=1, N=1, K=1)"));
  ASSERT_TRUE(s.ok()) << s.status();
  auto ps = (*s)->GenerateCandidates(500);
  ASSERT_TRUE(ps.ok());
  EXPECT_LT(ps->size(), 500u);
  EXPECT_GE((*s)->rejections()["duplicate"], RandomSearch::kMaxFruitlessDraws / 2);
}

TEST(RandomSearchTest, UnknownStrategyNamesTheKnownOnes) {
  auto s = MakeSearchStrategy("genetic", Context("matmul(M=64, N=64, K=64)"));
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.status().message(), HasSubstr("unknown search strategy 'genetic'"));
  EXPECT_THAT(s.status().message(), HasSubstr("random"));
  EXPECT_THAT(s.status().message(), HasSubstr("the default, evolutionary"));
  EXPECT_TRUE(CheckStrategyName("").ok());
  EXPECT_TRUE(CheckStrategyName("random").ok());
}

TEST(RandomSearchTest, ReplayModeDrawsEveryPoolMemberOnceInASeededOrder) {
  auto src = MakeSearchStrategy("random", Context("matmul(M=64, N=64, K=64)", 5));
  ASSERT_TRUE(src.ok());
  auto members = (*src)->GenerateCandidates(20);
  ASSERT_TRUE(members.ok());
  auto pool = std::make_shared<CandidatePool>();
  for (const Proposal& p : *members) {
    pool->trace_jsons.push_back(p.trace_json);
    pool->ids.insert(p.candidate_id);
  }
  auto run = [&](uint64_t seed) {
    SearchContext c = Context("matmul(M=64, N=64, K=64)", seed);
    c.pool = pool;
    auto s = MakeSearchStrategy("random", c);
    EXPECT_TRUE(s.ok());
    std::vector<uint64_t> ids;
    for (int round = 0; round < 3; ++round) {
      auto ps = (*s)->GenerateCandidates(8);
      EXPECT_TRUE(ps.ok());
      for (const Proposal& p : *ps) {
        EXPECT_EQ(p.candidate_id, CandidateIdOf(p.trace_json));
        EXPECT_FALSE(p.candidate.source.code.empty());
        ids.push_back(p.candidate_id);
      }
    }
    return ids;
  };
  const std::vector<uint64_t> a = run(1);
  // 20 members, each once, then nothing more.
  ASSERT_EQ(a.size(), 20u);
  EXPECT_EQ(std::set<uint64_t>(a.begin(), a.end()),
            std::set<uint64_t>(pool->ids.begin(), pool->ids.end()));
  EXPECT_EQ(run(1), a);
  EXPECT_NE(run(2), a);
}

}  // namespace
}  // namespace tessel::search
