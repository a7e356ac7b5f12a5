// Examples rebuilt from a real SQLite tuning log, and transfer (ModelForTarget): records of real
// host matmul candidates with SYNTHETIC latencies (costmodel_test_util.h), records of another
// target, and records that no longer build.

#include "costmodel/training_set.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sstream>

#include "costmodel/evaluation.h"
#include "schedules/util/status_macros.h"
#include "server/log_readers.h"
#include "store/measured_traces.h"
#include "tests/costmodel/costmodel_test_util.h"
#include "tests/test_util.h"

namespace tessel::testing {
namespace {

using ::testing::HasSubstr;

constexpr char kSpec[] = "matmul(M=64, N=64, K=64)";

// Transfer as the job manager does it: the log's training set, then a model of `kind`.
absl::StatusOr<std::unique_ptr<costmodel::CostModel>> ModelOfLog(
    store::TuningLog* log, const schedules::Target& target, const std::string& kind,
    const costmodel::CostModelOptions& options, int64_t max_records = 20000,
    costmodel::TrainingSetStats* stats = nullptr) {
  TESSEL_ASSIGN_OR_RETURN(costmodel::TrainingSet set,
                          server::TrainingSetOfLog(log, target, max_records));
  if (stats != nullptr) *stats = set.stats;
  return costmodel::ModelForTarget(set, kind, options);
}

std::unique_ptr<store::TuningLog> OpenLog(const std::string& prefix) {
  auto log = store::OpenTuningLog(MakeTempDir(prefix) + "/log.db");
  EXPECT_TRUE(log.ok()) << log.status();
  return log.ok() ? *std::move(log) : nullptr;
}

TEST(CostModelTrainingSet, ExampleFromTrace) {
  const schedules::Target host = schedules::HostTarget();
  auto cs = SampleCandidates(kSpec, host, 1);
  ASSERT_EQ(cs.size(), 1u);
  store::Record r = RecordOf(cs[0], 1, 0.5);
  r.uid = "u1";
  auto e = costmodel::ExampleFromTrace(store::MeasuredTraceOf(r), cs[0].workload, host);
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->workload_key, r.workload_key);
  EXPECT_EQ(e->median_ms, 0.5);
  EXPECT_EQ(e->features, costmodel::ExtractFeatures(cs[0].program, host));

  EXPECT_FALSE(e->screened);
  // A screened record (issue 21) is marked so.
  store::Record screened = r;
  screened.measurement.timings.kind = measure::TimingKind::kScreened;
  e = costmodel::ExampleFromTrace(store::MeasuredTraceOf(screened), cs[0].workload, host);
  ASSERT_TRUE(e.ok());
  EXPECT_TRUE(e->screened);
  EXPECT_EQ(e->median_ms, 0.5);

  // A failure keeps its features and has no latency.
  store::Record failed = RecordOf(cs[0], 2, 0);
  failed.measurement.timings.median_ms = 3;  // ignored: not ok
  e = costmodel::ExampleFromTrace(store::MeasuredTraceOf(failed), cs[0].workload, host);
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->median_ms, 0);

  // "null": the reference lowering.
  store::Record ref = RecordOf(cs[0], 3, 2.0);
  ref.trace_json = "null";
  e = costmodel::ExampleFromTrace(store::MeasuredTraceOf(ref), cs[0].workload, host);
  ASSERT_TRUE(e.ok()) << e.status();
  auto lowered = schedules::BuildCandidate(cs[0].workload, host, std::nullopt);
  ASSERT_TRUE(lowered.ok());
  EXPECT_EQ(e->features, costmodel::ExtractFeatures(lowered->program, host));

  store::Record broken = r;
  broken.trace_json = "{\"version\": 1, \"insts\": [{\"kind\": \"no_such_inst\"}]}";
  e = costmodel::ExampleFromTrace(store::MeasuredTraceOf(broken), cs[0].workload, host);
  EXPECT_THAT(e.status().message(), HasSubstr("record u1"));
  EXPECT_THAT(e.status().message(), HasSubstr("cannot read"));

  // A trace of another workload does not replay on this one.
  auto other = SampleCandidates("softmax(rows=8, cols=32)", host, 1);
  ASSERT_EQ(other.size(), 1u);
  store::Record mismatch = RecordOf(other[0], 4, 1.0);
  mismatch.uid = "u4";
  e = costmodel::ExampleFromTrace(store::MeasuredTraceOf(mismatch), cs[0].workload, host);
  EXPECT_THAT(e.status().message(), HasSubstr("record u4 no longer builds for host"));
}

TEST(CostModelTrainingSet, ModelForTargetOnAnEmptyLogIsUntrained) {
  auto log = OpenLog("tessel_cm_empty");
  ASSERT_TRUE(log);
  costmodel::TrainingSetStats stats;
  stats.records = -1;
  auto m = ModelOfLog(log.get(), schedules::HostTarget(), "xgboost", {}, 20000, &stats);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ((*m)->kind(), "xgboost");
  EXPECT_FALSE((*m)->trained());
  EXPECT_EQ((*m)->num_examples(), 0);
  EXPECT_EQ(stats.records, 0);
  EXPECT_EQ(stats.examples, 0);
  EXPECT_THAT(ModelOfLog(log.get(), schedules::HostTarget(), "nope", {}).status().message(),
              HasSubstr("unknown cost model 'nope'"));
}

TEST(CostModelTrainingSet, ModelForTargetTrainsOnEveryRecordOfItsTarget) {
  auto log = OpenLog("tessel_cm_transfer");
  ASSERT_TRUE(log);
  const schedules::Target host = schedules::HostTarget();
  auto cs = SampleCandidates(kSpec, host, 160);
  ASSERT_GE(cs.size(), 150u);
  ASSERT_TRUE(log->PutWorkload(WorkloadRowOf(cs[0].workload)).ok());
  std::vector<store::Record> rs;
  for (size_t i = 0; i < cs.size(); ++i)
    rs.push_back(RecordOf(cs[i], i, SyntheticLatencyMs(cs[i].program)));
  // A failure, and the reference lowering: both used.
  rs.push_back(RecordOf(cs[0], 1000, 0));
  store::Record ref = RecordOf(cs[0], 1001, 5.0);
  ref.trace_json = "null";
  rs.push_back(ref);
  // Another target's records: not read.
  for (int i = 0; i < 5; ++i) {
    store::Record r = RecordOf(cs[i], 2000 + i, 1.0);
    r.target_key = "cuda -arch=sm_90";
    rs.push_back(r);
  }
  // Unbuildable: a workload the log does not hold, a trace this build cannot read, a trace that
  // does not replay on its workload.
  store::Record orphan = RecordOf(cs[1], 3000, 1.0);
  orphan.workload_key = "0123456789abcdef";
  rs.push_back(orphan);
  store::Record broken = RecordOf(cs[2], 3001, 1.0);
  broken.trace_json = "{\"version\": 1, \"insts\": [{\"kind\": \"no_such_inst\"}]}";
  rs.push_back(broken);
  store::Record broken2 = RecordOf(cs[3], 3002, 1.0);
  broken2.trace_json =
      "{\"version\": 1, \"insts\": [{\"kind\": \"get_stage\", \"attrs\": "
      "{\"name\": \"NoSuchTensor\"}, \"outputs\": [\"b0\"]}]}";
  rs.push_back(broken2);
  absl::Status added = log->AddRecords(&rs);
  ASSERT_TRUE(added.ok()) << added;

  costmodel::CostModelOptions o;
  o.warmup_examples = 64;
  costmodel::TrainingSetStats stats;
  auto m = ModelOfLog(log.get(), host, "xgboost", o, 20000, &stats);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(stats.records, static_cast<int64_t>(cs.size()) + 2 + 3);
  EXPECT_EQ(stats.examples, static_cast<int64_t>(cs.size()) + 2);
  EXPECT_EQ(stats.skipped_workload, 1);
  EXPECT_EQ(stats.skipped_trace, 2);
  EXPECT_EQ(stats.workloads, 1);
  EXPECT_TRUE((*m)->trained());
  EXPECT_EQ((*m)->num_examples(), stats.examples);

  // It ranks fresh candidates of the space by the synthetic latency.
  auto fresh = SampleCandidates(kSpec, host, 60, 5000);
  std::vector<costmodel::Features> f;
  std::vector<double> ms;
  for (const auto& c : fresh) {
    f.push_back(costmodel::ExtractFeatures(c.program, host));
    ms.push_back(SyntheticLatencyMs(c.program));
  }
  EXPECT_GT(costmodel::PairwiseAccuracy((*m)->Predict(f), ms), 0.75);

  // The model is saved and comes back through the log.
  auto saved = (*m)->Serialize();
  ASSERT_TRUE(saved.ok()) << saved.status();
  store::CostModelRow row = RowOf(*saved, host.ToString());
  ASSERT_TRUE(log->SaveCostModel(&row).ok());
  auto latest = log->LatestCostModel(host.ToString(), "xgboost");
  ASSERT_TRUE(latest.ok() && latest->has_value());
  auto loaded = costmodel::MakeCostModel("xgboost", {});
  ASSERT_TRUE((*loaded)->Deserialize(SavedOf(**latest), "the latest cost model").ok());
  EXPECT_EQ((*loaded)->Predict(f), (*m)->Predict(f));

  // The cuda target sees only its 5 records (its workload is the same matmul).
  costmodel::TrainingSetStats cuda_stats;
  auto cm = ModelOfLog(log.get(), schedules::CudaTarget("sm_90"), "xgboost", o, 20000, &cuda_stats);
  ASSERT_TRUE(cm.ok());
  EXPECT_EQ(cuda_stats.records, 5);
  EXPECT_FALSE((*cm)->trained());

  // max_records keeps the most recent: the host's last 4 records are the reference lowering, the
  // orphan and the two broken traces.
  costmodel::TrainingSetStats last4;
  auto m4 = ModelOfLog(log.get(), host, "xgboost", o, 4, &last4);
  ASSERT_TRUE(m4.ok());
  EXPECT_EQ(last4.records, 4);
  EXPECT_EQ(last4.examples, 1);
  EXPECT_EQ(last4.skipped_workload + last4.skipped_trace, 3);
}

}  // namespace
}  // namespace tessel::testing

namespace tessel {
namespace {

TEST(TrainingSetFamily, WorkloadFamiliesGroupEpiloguesWithTheirContraction) {
  EXPECT_EQ(costmodel::WorkloadFamily("matmul"), "matmul");
  EXPECT_EQ(costmodel::WorkloadFamily("matmul_bias_gelu"), "matmul");
  EXPECT_EQ(costmodel::WorkloadFamily("conv2d_bias_relu"), "conv2d");
  EXPECT_EQ(costmodel::WorkloadFamily("softmax"), "softmax");
  EXPECT_EQ(costmodel::WorkloadFamily("custom"), "custom");
}

TEST(TrainingSetFamily, AFamilyKeepsOnlyItsWorkloadsRecords) {
  const std::string dir = testing::MakeTempDir("tessel_family_");
  auto log = store::OpenTuningLog(dir + "/log.db");
  ASSERT_TRUE(log.ok()) << log.status();
  std::istringstream in(testing::ReplayFixtureJsonl());
  ASSERT_TRUE((*log)->ImportJsonl(in).ok());
  auto none = server::TrainingSetOfLog(log->get(), schedules::HostTarget(), 20000, "softmax");
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_TRUE(none->examples.empty());
  EXPECT_EQ(none->stats.other_family, 1200);
  auto mine = server::TrainingSetOfLog(log->get(), schedules::HostTarget(), 20000, "matmul");
  ASSERT_TRUE(mine.ok()) << mine.status();
  EXPECT_EQ(mine->examples.size(), 1200u);
  EXPECT_EQ(mine->stats.other_family, 0);
}

}  // namespace
}  // namespace tessel
