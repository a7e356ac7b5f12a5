#include "search/candidate_source.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/search/search_test_util.h"

namespace tessel::search {
namespace {

using testing::Context;
using ::testing::HasSubstr;
using testing::Source;

TEST(CandidateSourceTest, SamplesAreTheSpaceGeneratorsWithOrWithoutSource) {
  const SearchContext ctx = Context("matmul(M=64, N=64, K=64)");
  const CandidateSource source = Source(ctx);
  EXPECT_FALSE(source.pool_mode());
  auto space = schedules::SpaceGenerator::Create(ctx.workload, ctx.target);
  ASSERT_TRUE(space.ok());
  for (uint64_t seed : {1u, 2u, 3u}) {
    auto full = source.Sample(seed, nullptr);
    auto lean = source.Sample(seed, nullptr, /*codegen=*/false);
    auto ref = space->Sample(seed);
    ASSERT_TRUE(full.ok() && lean.ok() && ref.ok());
    EXPECT_EQ(TraceJsonOf(*full->trace), TraceJsonOf(*ref->trace));
    EXPECT_EQ(TraceJsonOf(*lean->trace), TraceJsonOf(*ref->trace));
    EXPECT_EQ(full->source.code, ref->source.code);
    EXPECT_TRUE(lean->source.code.empty());
    // The source can be added afterwards, and is the same.
    schedules::Candidate c = *lean;
    ASSERT_TRUE(source.AddSource(&c, nullptr).ok());
    EXPECT_EQ(c.source.code, ref->source.code);
  }
}

TEST(CandidateSourceTest, ABrokenTraceIsATypedRejection) {
  const CandidateSource source = Source(Context("matmul(M=64, N=64, K=64)"));
  auto t = source.Sample(1, nullptr);
  ASSERT_TRUE(t.ok());
  schedules::Trace broken = *t->trace;
  for (schedules::Instruction& inst : broken.insts) {
    if (inst.kind == "sample_perfect_tile") {
      inst.decision = std::vector<int64_t>(inst.decision.size(), 3);  // product is not 64
      break;
    }
  }
  schedules::Rejection why;
  auto c = source.Build(broken, &why);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(why.step, "replay");
  EXPECT_THAT(why.message, HasSubstr("sample_perfect_tile"));
}

TEST(CandidateSourceTest, ReplayModeDrawsPoolMembersWithTheirStoredTrace) {
  const SearchContext ctx = Context("matmul(M=64, N=64, K=64)");
  const CandidateSource space = Source(ctx);
  auto pool = std::make_shared<CandidatePool>();
  for (uint64_t seed = 0; seed < 5; ++seed) {
    auto c = space.Sample(seed, nullptr);
    ASSERT_TRUE(c.ok());
    pool->trace_jsons.push_back(TraceJsonOf(*c->trace));
    pool->ids.insert(CandidateIdOf(pool->trace_jsons.back()));
  }
  pool->trace_jsons.push_back("{not json");
  auto source = CandidateSource::Create(ctx.workload, ctx.target, pool);
  ASSERT_TRUE(source.ok());
  EXPECT_TRUE(source->pool_mode());
  EXPECT_EQ(source->pool_size(), 6u);
  for (size_t i = 0; i < 5; ++i) {
    auto c = source->FromPool(i, nullptr);
    ASSERT_TRUE(c.ok()) << c.status();
    EXPECT_EQ(TraceJsonOf(*c->trace), pool->trace_jsons[i]);
    EXPECT_TRUE(source->InPool(CandidateIdOf(TraceJsonOf(*c->trace))));
    // Sample(seed) is member seed % size.
    auto s = source->Sample(i + 6, nullptr);
    ASSERT_TRUE(s.ok());
    EXPECT_EQ(TraceJsonOf(*s->trace), pool->trace_jsons[i]);
  }
  schedules::Rejection why;
  EXPECT_FALSE(source->FromPool(5, &why).ok());
  EXPECT_EQ(why.step, "replay");
  EXPECT_THAT(why.message, HasSubstr("pool trace 5"));
  EXPECT_FALSE(source->InPool(12345));
}

}  // namespace
}  // namespace tessel::search
