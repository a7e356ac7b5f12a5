// tessel best, export and import as a user runs them, against tuning logs filled through the
// store API with records whose traces are real samples of a small host workload's design space.

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <string>

#include "nlohmann/json.hpp"
#include "schedules/space/space_generator.h"
#include "schedules/workload/builtins.h"
#include "schedules/workload/key.h"
#include "store/tuning_log.h"
#include "tests/cli/cli_test_util.h"
#include "tests/store/store_test_util.h"
#include "tests/test_util.h"

namespace tessel::testing {
namespace {

using ::testing::HasSubstr;

constexpr char kSpec[] = "matmul(M=16, N=16, K=16)";

// A log with records of kSpec on the host: three sampled schedules (the second fastest), the
// reference lowering (slowest), and a failed one; plus one record of softmax whose only record
// is the reference. Returns the expected best source in `best_code`.
struct Filled {
  std::string dir;
  std::string db;
  std::string best_code;       // source of the fastest matmul record
  std::string reference_code;  // softmax's reference lowering
  std::string best_uid;
};

Filled FillLog() {
  Filled f;
  f.dir = MakeTempDir("tessel_store_cli");
  f.db = f.dir + "/log.db";
  auto log = store::OpenTuningLog(f.db);
  EXPECT_TRUE(log.ok()) << log.status();
  auto w = schedules::ParseWorkloadSpec(kSpec);
  auto target = schedules::MakeTarget("host");
  EXPECT_TRUE(w.ok() && target.ok());
  EXPECT_TRUE((*log)
                  ->PutWorkload(
                      {schedules::WorkloadKey(*w), schedules::CanonicalText(*w), w->name, w->spec})
                  .ok());
  auto space = schedules::SpaceGenerator::Create(*w, *target);
  EXPECT_TRUE(space.ok()) << space.status();
  std::vector<schedules::Candidate> samples;
  for (uint64_t seed = 1; samples.size() < 3 && seed < 200; ++seed) {
    auto c = space->Sample(seed);
    if (c.ok() && c->trace) samples.push_back(std::move(*c));
  }
  EXPECT_EQ(samples.size(), 3u);
  const double medians[] = {0.030, 0.010, 0.020};
  std::vector<store::Record> rs;
  for (size_t i = 0; i < samples.size(); ++i) {
    store::Record r;
    r.workload_key = schedules::WorkloadKey(*w);
    r.target_key = target->ToString();
    r.candidate_id = i;
    r.trace_json = samples[i].trace->ToJson().dump();
    r.measurement.status = measure::MeasureStatus::kOk;
    r.measurement.timings.repeats_ms = {medians[i] * 0.9, medians[i], medians[i] * 1.2};
    r.measurement.timings.median_ms = medians[i];
    r.measurement.worker_id = "worker-" + std::to_string(i);
    r.measurement.device_name = "Test CPU";
    r.unix_ms = 1700000000000;
    rs.push_back(r);
  }
  f.best_code = samples[1].source.code;
  store::Record ref = rs[0];
  ref.trace_json = "null";
  ref.measurement.timings.median_ms = 0.5;
  ref.measurement.timings.repeats_ms = {0.5};
  rs.push_back(ref);
  store::Record failed = rs[0];
  failed.measurement.status = measure::MeasureStatus::kCompileError;
  failed.measurement.timings.median_ms = 0;
  failed.measurement.timings.repeats_ms.clear();
  rs.push_back(failed);

  auto sm = schedules::ParseWorkloadSpec("softmax(rows=4, cols=32)");
  EXPECT_TRUE(sm.ok());
  EXPECT_TRUE((*log)
                  ->PutWorkload({schedules::WorkloadKey(*sm), schedules::CanonicalText(*sm),
                                 sm->name, sm->spec})
                  .ok());
  store::Record s = ref;
  s.workload_key = schedules::WorkloadKey(*sm);
  rs.push_back(s);
  auto c = schedules::BuildCandidate(*sm, *target, std::nullopt);
  EXPECT_TRUE(c.ok());
  f.reference_code = c->source.code;

  EXPECT_TRUE((*log)->AddRecords(&rs).ok());
  f.best_uid = rs[1].uid;
  return f;
}

TEST(StoreCli, BestPrintsTheFastestRecordsSourceRebuiltFromItsTrace) {
  Filled f = FillLog();
  CliResult r = RunTessel("best --db " + f.db + " -w '" + kSpec + "' -t host", false);
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(r.output, f.best_code);
  CliResult cpp = RunTessel("best --db " + f.db + " -w '" + kSpec + "' -t host --emit cpp", false);
  EXPECT_EQ(cpp.output, f.best_code);
}

TEST(StoreCli, BestOfAReferenceRecordIsTheReferenceLowering) {
  Filled f = FillLog();
  CliResult r = RunTessel("best --db " + f.db + " -w 'softmax(rows=4, cols=32)' -t host", false);
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(r.output, f.reference_code);
}

TEST(StoreCli, BestEmitsTheCandidateJsonAndASummary) {
  Filled f = FillLog();
  CliResult js = RunTessel("best --db " + f.db + " -w '" + kSpec + "' -t host --emit json", false);
  ASSERT_EQ(js.status, 0) << js.output;
  auto j = nlohmann::json::parse(js.output);
  EXPECT_EQ(j["format"], "tessel-candidate");
  EXPECT_EQ(j["code"], f.best_code);
  EXPECT_TRUE(j["trace"].is_object());

  CliResult s = RunTessel("best --db " + f.db + " -w '" + kSpec + "' -t host --emit summary");
  ASSERT_EQ(s.status, 0) << s.output;
  EXPECT_THAT(s.output, HasSubstr("The best of 4 ok records of matmul(M=16, N=16, K=16"));
  EXPECT_THAT(s.output, HasSubstr("is a tuned schedule: median 0.0100 ms over 3 repeats "
                                  "(0.0090 to 0.0120 ms), measured on Test CPU (device 0) by "
                                  "worker worker-1 at 2023-11-14 22:13:20 UTC; uid " +
                                  f.best_uid));
}

TEST(StoreCli, BestShowsTheCuptiMedianOfARecordThatHasOne) {
  Filled f = FillLog();
  ASSERT_EQ(RawExec(f.db,
                    "UPDATE records SET kernel_repeats_ms = '[0.0084,0.0085,0.0086]', "
                    "kernel_median_ms = 0.0085 WHERE uid = '" +
                        f.best_uid + "'"),
            "");
  CliResult s = RunTessel("best --db " + f.db + " -w '" + kSpec + "' -t host --emit summary");
  ASSERT_EQ(s.status, 0) << s.output;
  EXPECT_THAT(s.output, HasSubstr("(0.0090 to 0.0120 ms), kernel median 0.0085 ms (CUPTI), "
                                  "measured on Test CPU"));
  CliResult js = RunTessel("best --db " + f.db + " -w '" + kSpec + "' -t host --emit json", false);
  ASSERT_EQ(js.status, 0) << js.output;
  EXPECT_EQ(nlohmann::json::parse(js.output)["record"]["kernel_median_ms"], 0.0085);
}

TEST(StoreCli, BestWithNoRecordForTheTarget) {
  Filled f = FillLog();
  CliResult r = RunTessel("best --db " + f.db + " -w '" + kSpec + "' -t cuda --arch sm_90");
  EXPECT_EQ(r.status, 1);
  auto w = schedules::ParseWorkloadSpec(kSpec);
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(r.output, "tessel best: no ok record of " + w->spec + " (key " +
                          schedules::WorkloadKey(*w) + ") for cuda -arch=sm_90 in " + f.db +
                          ": neither on the same device nor on the same architecture; it has ok "
                          "records of this workload for host on Test CPU (4 ok records). Tune it "
                          "on this target first (tessel tune or tessel submit)\n");
}

TEST(StoreCli, BestWithAMissingDb) {
  const std::string db = MakeTempDir("tessel_store_cli") + "/none.db";
  CliResult r = RunTessel("best --db " + db + " -w '" + kSpec + "' -t host");
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.output, "tessel best: tuning log " + db +
                          " does not exist; check the path (a read-only open never creates a "
                          "log)\n");
  EXPECT_FALSE(std::ifstream(db).good());  // and it was not created
}

TEST(StoreCli, BestWithAnUnknownOrMismatchedEmit) {
  Filled f = FillLog();
  CliResult r = RunTessel("best --db " + f.db + " -w '" + kSpec + "' -t host --emit ptx");
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.output,
            "tessel best: unknown --emit 'ptx'; use cuda, cpp, json, summary or binary\n");
  CliResult m = RunTessel("best --db " + f.db + " -w '" + kSpec + "' -t host --emit cuda");
  EXPECT_EQ(m.status, 1);
  EXPECT_EQ(m.output, "tessel best: --emit cuda does not match --target host; use --emit cpp\n");
}

TEST(StoreCli, ExportImportRoundTripAndIdempotentImport) {
  Filled f = FillLog();
  CliResult out = RunTessel("export --db " + f.db, false);
  ASSERT_EQ(out.status, 0) << out.output;
  EXPECT_EQ(std::count(out.output.begin(), out.output.end(), '\n'), 8);  // 2 workloads, 6 records

  const std::string file = f.dir + "/log.jsonl";
  CliResult to_file = RunTessel("export --db " + f.db + " --out " + file);
  ASSERT_EQ(to_file.status, 0) << to_file.output;
  EXPECT_EQ(to_file.output, "tessel export: wrote " + file + "\n");

  const std::string db2 = f.dir + "/merged.db";
  CliResult imp = RunTessel("import --db " + db2 + " " + file);
  ASSERT_EQ(imp.status, 0) << imp.output;
  EXPECT_EQ(imp.output,
            file + ": added 2 workloads and 6 records, skipped 0 records already in " + db2 + "\n");
  CliResult again = RunTessel("import --db " + db2 + " " + file);
  ASSERT_EQ(again.status, 0) << again.output;
  EXPECT_EQ(again.output,
            file + ": added 0 workloads and 0 records, skipped 6 records already in " + db2 + "\n");
  // The merged log answers like the original.
  CliResult best = RunTessel("best --db " + db2 + " -w '" + kSpec + "' -t host", false);
  EXPECT_EQ(best.status, 0) << best.output;
  EXPECT_EQ(best.output, f.best_code);
  CliResult out2 = RunTessel("export --db " + db2, false);
  EXPECT_EQ(out2.output, out.output);  // same records, same order
}

TEST(StoreCli, ImportOfAMalformedFileAddsNothing) {
  Filled f = FillLog();
  const std::string file = f.dir + "/bad.jsonl";
  CliResult exported = RunTessel("export --db " + f.db, false);
  ASSERT_EQ(exported.status, 0) << exported.output;
  std::ofstream(file) << exported.output.substr(0, exported.output.find('\n') + 1)  // a workload
                      << "{\"type\": \"record\", \"uid\": \"u\"\n";
  const std::string db2 = f.dir + "/other.db";
  CliResult r = RunTessel("import --db " + db2 + " " + file);
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.output, "tessel import: " + file +
                          ": line 2: not valid JSON; each line must be one JSON object as tessel "
                          "export writes it; nothing from this file was added\n");
  CliResult out = RunTessel("export --db " + db2, false);
  EXPECT_EQ(out.status, 0);
  EXPECT_EQ(out.output, "");
  CliResult missing = RunTessel("import --db " + db2 + " " + f.dir + "/nope.jsonl");
  EXPECT_EQ(missing.status, 1);
  EXPECT_EQ(missing.output, "tessel import: cannot read " + f.dir +
                                "/nope.jsonl; check the path (files before it were imported)\n");
}

TEST(StoreCli, ExportOfAFileThatIsNotALog) {
  const std::string dir = MakeTempDir("tessel_store_cli");
  std::ofstream(dir + "/notes.txt") << "not a database at all, just some text here\n";
  CliResult r = RunTessel("export --db " + dir + "/notes.txt");
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.output, "tessel export: " + dir +
                          "/notes.txt is not a Tessel tuning log (not an SQLite database); pass a "
                          "new file or a log written by tessel serve\n");
}

}  // namespace
}  // namespace tessel::testing
