// Search quality in replay mode (issue 6): against a log of real host measurements recorded by
// random search, the evolutionary search guided by the XGBoost cost model reaches the best known
// candidate in fewer trials than random search, averaged over seeds. The test asserts the
// direction; tessel_bench_search measures the size (bench/RESULTS.md).
//
// The fixture, tests/data/replay/host_matmul256_random1200.jsonl.gz: 1,200 trials of
// `tessel tune -t host -w "matmul(M=256, N=256, K=256)" -n 1200 --seed 7 --strategy random` on
// the 2-core build VM, exported with `tessel export` and gzipped.

#include <sstream>

#include "gtest/gtest.h"
#include "schedules/workload/builtins.h"
#include "schedules/workload/key.h"
#include "search/replay.h"
#include "store/tuning_log.h"
#include "tests/test_util.h"

namespace tessel::search {
namespace {

TEST(ReplayQuality, GuidedEvolutionarySearchFindsTheBestInFewerTrialsThanRandom) {
  const std::string dir = testing::MakeTempDir("tessel_replay_quality_");
  ASSERT_FALSE(dir.empty());
  auto log = store::OpenTuningLog(dir + "/log.db");
  ASSERT_TRUE(log.ok()) << log.status();
  std::istringstream in(testing::ReplayFixtureJsonl());
  auto imported = (*log)->ImportJsonl(in);
  ASSERT_TRUE(imported.ok()) << imported.status();
  ASSERT_EQ(imported->records_added, 1200);
  auto workload = schedules::ParseWorkloadText(testing::kReplayFixtureWorkload);
  ASSERT_TRUE(workload.ok());
  auto space = LoadReplaySpace(log->get(), schedules::WorkloadKey(*workload),
                               schedules::HostTarget());
  ASSERT_TRUE(space.ok()) << space.status();
  ASSERT_GT(space->ok, 1000);

  auto mean_trials = [&](const std::string& strategy) {
    double sum = 0;
    constexpr int kSeeds = 3;
    for (int s = 0; s < kSeeds; ++s) {
      ReplayOptions o;
      o.strategy = strategy;
      o.seed = 1000 + s;
      o.batch_size = 64;
      o.stop_at_ms = space->best_ms / 0.95;
      if (strategy != "random") {
        costmodel::CostModelOptions mo;
        mo.seed = o.seed;
        auto m = costmodel::MakeCostModel("xgboost", mo);
        EXPECT_TRUE(m.ok()) << m.status();
        if (!m.ok()) return 0.0;
        o.cost_model = std::move(*m);
      }
      auto t = RunReplay(*space, o);
      EXPECT_TRUE(t.ok()) << t.status();
      if (!t.ok()) return 0.0;
      const int64_t reach = TrialsToReach(*t, space->best_ms, 0.95);
      EXPECT_GT(reach, 0) << strategy << " seed " << o.seed << " never reached the goal";
      sum += static_cast<double>(reach > 0 ? reach : t->trials + 1);
    }
    return sum / kSeeds;
  };
  const double guided = mean_trials("evolutionary");
  const double random = mean_trials("random");
  RecordProperty("evolutionary_mean_trials", std::to_string(guided));
  RecordProperty("random_mean_trials", std::to_string(random));
  EXPECT_LT(guided, random) << "evolutionary + xgboost needed " << guided
                            << " trials on average, random search " << random;
}

}  // namespace
}  // namespace tessel::search
