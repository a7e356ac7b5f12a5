// tessel costmodel eval as a user runs it, on tuning logs filled through the store API with real
// host matmul candidates and SYNTHETIC latencies (costmodel_test_util.h).

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/cli/cli_test_util.h"
#include "tests/costmodel/costmodel_test_util.h"
#include "tests/test_util.h"

namespace tessel::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kSpec[] = "matmul(M=64, N=64, K=64)";

// A log at <dir>/log.db with `n` records of kSpec on the host (and one workload of softmax with
// a few records, too few to evaluate).
std::string FillLog(const std::string& prefix, int n) {
  const std::string db = MakeTempDir(prefix) + "/log.db";
  auto log = store::OpenTuningLog(db);
  EXPECT_TRUE(log.ok()) << log.status();
  if (n == 0) return db;
  const schedules::Target host = schedules::HostTarget();
  auto cs = SampleCandidates(kSpec, host, n);
  EXPECT_EQ(static_cast<int>(cs.size()), n);
  auto soft = SampleCandidates("softmax(rows=8, cols=64)", host, 3);
  EXPECT_TRUE((*log)->PutWorkload(WorkloadRowOf(cs[0].workload)).ok());
  EXPECT_TRUE((*log)->PutWorkload(WorkloadRowOf(soft[0].workload)).ok());
  std::vector<store::Record> rs;
  for (size_t i = 0; i < cs.size(); ++i) {
    // Every tenth "fails".
    rs.push_back(RecordOf(cs[i], i, i % 10 == 9 ? 0 : SyntheticLatencyMs(cs[i].program)));
  }
  for (size_t i = 0; i < soft.size(); ++i) rs.push_back(RecordOf(soft[i], 1000 + i, 1.0 + i));
  EXPECT_TRUE((*log)->AddRecords(&rs).ok());
  return db;
}

TEST(CostModelCli, EvalPrintsATablePerWorkload) {
  const std::string db = FillLog("tessel_cm_cli", 130);
  CliResult r = RunTessel("costmodel eval --db " + db + " --train 48 --seed 3");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("cost model xgboost on host"));
  EXPECT_THAT(r.output, HasSubstr("pairwise"));
  EXPECT_THAT(r.output, HasSubstr("matmul(M=64, N=64, K=64"));
  EXPECT_THAT(r.output, HasSubstr("softmax(rows=8, cols=64"));
  EXPECT_THAT(r.output, HasSubstr("(skipped: needs more than 80 ok records)"));
  EXPECT_THAT(r.output, HasSubstr("1 workload evaluated: mean pairwise accuracy"));
  // 130 records, 117 ok, 48 trained on, 82 held out.
  EXPECT_THAT(r.output, HasSubstr("     130    117     48       82"));
  // The same with random scores, for comparison.
  CliResult rnd = RunTessel("costmodel eval --db " + db + " --train 48 --model random");
  ASSERT_EQ(rnd.status, 0) << rnd.output;
  EXPECT_THAT(rnd.output, HasSubstr("cost model random on host"));
}

TEST(CostModelCli, EvalMissingDatabase) {
  CliResult r = RunTessel("costmodel eval --db /nonexistent/dir/log.db");
  EXPECT_EQ(r.status, 1);
  EXPECT_THAT(r.output, HasSubstr("tessel costmodel eval: tuning log /nonexistent/dir/log.db "
                                  "does not exist"));
}

TEST(CostModelCli, EvalNoRecordsOfTheTarget) {
  const std::string empty = FillLog("tessel_cm_cli_empty", 0);
  CliResult r = RunTessel("costmodel eval --db " + empty);
  EXPECT_EQ(r.status, 1);
  EXPECT_THAT(r.output, HasSubstr("no records for host in " + empty));
  EXPECT_THAT(r.output, HasSubstr("tessel tune --db " + empty + " --target host"));

  const std::string db = FillLog("tessel_cm_cli_host", 20);
  r = RunTessel("costmodel eval --db " + db + " --target cuda --arch sm_90");
  EXPECT_EQ(r.status, 1);
  EXPECT_THAT(r.output, HasSubstr("no records for cuda -arch=sm_90 in " + db));
}

TEST(CostModelCli, EvalTooFewRecords) {
  const std::string db = FillLog("tessel_cm_cli_few", 20);
  CliResult r = RunTessel("costmodel eval --db " + db + " --train 256");
  EXPECT_EQ(r.status, 1);
  EXPECT_THAT(r.output, HasSubstr("has more than 288 ok records (the most any has: 18)"));
  EXPECT_THAT(r.output, HasSubstr("lower --train or tune longer"));
}

TEST(CostModelCli, EvalBadFlags) {
  const std::string db = FillLog("tessel_cm_cli_flags", 0);
  CliResult r = RunTessel("costmodel eval --db " + db + " --model forest");
  EXPECT_EQ(r.status, 1);
  EXPECT_THAT(r.output, HasSubstr("unknown cost model 'forest': use one of xgboost, random"));
  r = RunTessel("costmodel eval --db " + db + " --train 0");
  EXPECT_EQ(r.status, 1);
  EXPECT_THAT(r.output, HasSubstr("--train 0 is too small"));
  r = RunTessel("costmodel eval --db " + db + " --target tpu");
  EXPECT_EQ(r.status, 1);
  EXPECT_THAT(r.output, Not(HasSubstr("evaluated")));
  r = RunTessel("costmodel");
  EXPECT_NE(r.status, 0);
  EXPECT_THAT(r.output, HasSubstr("A subcommand is required"));
}

}  // namespace
}  // namespace tessel::testing
