// The tuning-log commands on a log that holds poisoned rows (written straight into the file with
// SQL, as an older Tessel let a worker's inf or a negative median in) and on untrusted imports:
// readers skip the bad rows with a warning, `tessel check` reports and quarantines them, `tessel
// import` refuses bad lines naming them, `tessel best` passes over a record that does not replay.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "tests/cli/cli_test_util.h"
#include "tests/costmodel/costmodel_test_util.h"
#include "tests/store/store_test_util.h"
#include "tests/test_util.h"

namespace tessel::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kSpec[] = "matmul(M=64, N=64, K=64)";

// A log at <dir>/log.db with `n` records of kSpec on the host (synthetic latencies, every tenth
// failed).
std::string FillLog(const std::string& dir, int n) {
  const std::string db = dir + "/log.db";
  auto log = store::OpenTuningLog(db);
  EXPECT_TRUE(log.ok()) << log.status();
  auto cs = SampleCandidates(kSpec, schedules::HostTarget(), n);
  EXPECT_EQ(static_cast<int>(cs.size()), n);
  EXPECT_TRUE((*log)->PutWorkload(WorkloadRowOf(cs[0].workload)).ok());
  std::vector<store::Record> rs;
  for (size_t i = 0; i < cs.size(); ++i) {
    rs.push_back(RecordOf(cs[i], i, i % 10 == 9 ? 0 : SyntheticLatencyMs(cs[i].program)));
  }
  EXPECT_TRUE((*log)->AddRecords(&rs).ok());
  return db;
}

std::string KeyOf(const std::string& spec) {
  auto w = schedules::ParseWorkloadSpec(spec);
  EXPECT_TRUE(w.ok());
  return schedules::WorkloadKey(*w);
}

// Issue 20's poisoned rows: a worker's median inf stored as ok (repeats [null]) and a negative
// median, both of kSpec on the host.
void Poison(const std::string& db) {
  const std::string key = KeyOf(kSpec);
  ASSERT_EQ(RawExec(db,
                    "INSERT INTO records (uid, workload_key, target_key, candidate_id, trace, "
                    "status, repeats_ms, median_ms, unix_ms) VALUES "
                    "('poison-inf', '" +
                        key +
                        "', 'host', 9001, 'null', 'ok', '[null]', "
                        "9e999, 1), ('poison-negative', '" +
                        key +
                        "', 'host', 9002, 'null', "
                        "'ok', '[-5.0]', -5.0, 2)"),
            "");
}

TEST(TrustCli, ExportAndCostModelEvalSkipPoisonedRowsWithAWarning) {
  const std::string dir = MakeTempDir("tessel_trust_cli");
  const std::string db = FillLog(dir, 130);
  Poison(db);
  CliResult out = RunTessel("export --db " + db + " --out " + dir + "/backup.jsonl");
  ASSERT_EQ(out.status, 0) << out.output;
  EXPECT_THAT(out.output, HasSubstr("tessel: warning: skipping record 131 (uid poison-inf) of " +
                                    db + ": malformed repeats_ms: [null]; `tessel check --db " +
                                    db + " --quarantine` moves such records aside\n"));
  EXPECT_THAT(out.output, HasSubstr("skipping record 132 (uid poison-negative) of " + db +
                                    ": repeat 0 is -5 ms; a time must be finite and positive"));
  EXPECT_THAT(ReadBytes(dir + "/backup.jsonl"), Not(HasSubstr("poison")));
  CliResult eval = RunTessel("costmodel eval --db " + db + " --train 48 --seed 3");
  ASSERT_EQ(eval.status, 0) << eval.output;
  EXPECT_THAT(eval.output, HasSubstr("130 records"));
  EXPECT_THAT(eval.output, HasSubstr("uid poison-inf"));
  // The backup imports into a fresh log.
  CliResult imp = RunTessel("import --db " + dir + "/copy.db " + dir + "/backup.jsonl");
  ASSERT_EQ(imp.status, 0) << imp.output;
  EXPECT_THAT(imp.output, HasSubstr("added 1 workload and 130 records"));
}

TEST(TrustCli, BestNeverAnswersWithAPoisonedRecord) {
  const std::string dir = MakeTempDir("tessel_trust_cli");
  const std::string db = FillLog(dir, 20);
  Poison(db);
  CliResult best =
      RunTessel("best --db " + db + " -w '" + std::string(kSpec) + "' -t host --emit summary");
  ASSERT_EQ(best.status, 0) << best.output;
  EXPECT_THAT(best.output, Not(HasSubstr("median -5")));
  EXPECT_THAT(best.output, HasSubstr("skipping record 22 (uid poison-negative)"));
  EXPECT_THAT(best.output, HasSubstr("by worker test"));
  // 18 of the 20 are ok; the two poisoned rows that say ok are not counted among them.
  EXPECT_THAT(best.output, HasSubstr("The best of 18 ok records of "));
}

TEST(TrustCli, CheckReportsBadRecordsAndQuarantineMovesThemAside) {
  const std::string dir = MakeTempDir("tessel_trust_cli");
  const std::string db = FillLog(dir, 12);
  CliResult clean = RunTessel("check --db " + db);
  EXPECT_EQ(clean.status, 0) << clean.output;
  EXPECT_EQ(clean.output, db + ": no bad records\n");
  Poison(db);
  const std::string key = KeyOf(kSpec);
  CliResult report = RunTessel("check --db " + db);
  EXPECT_EQ(report.status, 1);
  EXPECT_EQ(report.output, "record 13 (uid poison-inf, workload " + key +
                               ", host): malformed repeats_ms: [null]\n"
                               "record 14 (uid poison-negative, workload " +
                               key +
                               ", host): repeat 0 is -5 ms; a time must be finite and positive\n" +
                               db + ": 2 bad records; readers skip them; `tessel check --db " + db +
                               " --quarantine` moves them into its quarantined_records table\n");
  CliResult moved = RunTessel("check --db " + db + " --quarantine");
  EXPECT_EQ(moved.status, 0) << moved.output;
  EXPECT_THAT(moved.output, HasSubstr(db + ": moved 2 bad records into its quarantined_records "
                                           "table\n"));
  EXPECT_EQ(RawQuery(db, "SELECT uid FROM quarantined_records ORDER BY id", 0, true),
            "poison-inf\npoison-negative");
  EXPECT_EQ(RawQuery(db, "SELECT count(*) FROM records"), "12");
  CliResult after = RunTessel("check --db " + db);
  EXPECT_EQ(after.status, 0) << after.output;
  EXPECT_EQ(after.output, db + ": no bad records\n");
  CliResult export_after = RunTessel("export --db " + db + " --out " + dir + "/x.jsonl");
  EXPECT_EQ(export_after.output, "tessel export: wrote " + dir + "/x.jsonl\n");
}

TEST(TrustCli, CheckOfAMissingLog) {
  const std::string dir = MakeTempDir("tessel_trust_cli");
  CliResult r = RunTessel("check --db " + dir + "/nope.db");
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.output, "tessel check: tuning log " + dir +
                          "/nope.db does not exist; check the path (a read-only open never "
                          "creates a log)\n");
}

// `tessel export` of `db`, one line per element.
std::vector<std::string> ExportLines(const std::string& db) {
  CliResult out = RunTessel("export --db " + db, false);
  EXPECT_EQ(out.status, 0);
  std::vector<std::string> lines;
  std::istringstream in(out.output);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// `tessel import` of `lines` (as <dir>/in.jsonl) into <dir>/target.db.
CliResult ImportLines(const std::string& dir, const std::vector<std::string>& lines) {
  std::ofstream f(dir + "/in.jsonl");
  for (const std::string& l : lines) f << l << "\n";
  f.close();
  return RunTessel("import --db " + dir + "/target.db " + dir + "/in.jsonl");
}

TEST(TrustCli, ImportRefusesBadTimingsNamingTheLineAndKeepsWhatIsStored) {
  const std::string dir = MakeTempDir("tessel_trust_cli");
  const std::string db = FillLog(dir, 3);
  std::vector<std::string> lines = ExportLines(db);
  ASSERT_EQ(lines.size(), 4u);
  // One good import first: what it stored must stay as it is.
  ASSERT_EQ(ImportLines(dir, {lines[0], lines[1]}).status, 0);
  const std::string before = RunTessel("export --db " + dir + "/target.db", false).output;
  auto with = [&](const std::string& field, const nlohmann::json& value) {
    nlohmann::json j = nlohmann::json::parse(lines[2]);
    j[field] = value;
    return std::vector<std::string>{lines[0], lines[1], j.dump(), lines[3]};
  };
  const std::string uid = nlohmann::json::parse(lines[2])["uid"];
  const std::string prefix = "tessel import: " + dir + "/in.jsonl: line 3: record " + uid + ": ";
  const std::string suffix = "; nothing from this file was added\n";
  CliResult negative = ImportLines(dir, with("median_ms", -5.0));
  EXPECT_EQ(negative.status, 1);
  EXPECT_EQ(negative.output, prefix +
                                 "median_ms is -5; the median of an ok result must be finite and "
                                 "positive" +
                                 suffix);
  CliResult zero = ImportLines(dir, with("repeats_ms", nlohmann::json::array({0.0})));
  EXPECT_EQ(zero.output, prefix + "repeat 0 is 0 ms; a time must be finite and positive" + suffix);
  CliResult outside = ImportLines(dir, with("median_ms", 0.0001));
  EXPECT_THAT(outside.output, HasSubstr("line 3: record " + uid +
                                        ": median_ms 0.0001 lies "
                                        "outside its repeats"));
  EXPECT_EQ(RunTessel("export --db " + dir + "/target.db", false).output, before);
  nlohmann::json huge = nlohmann::json::parse(lines[2]);
  huge["repeats_ms"] = {1e308, 1e308};
  huge["median_ms"] = 1e308;
  CliResult large = ImportLines(dir, {lines[0], huge.dump()});
  EXPECT_EQ(large.status, 0) << large.output;  // large, but finite and positive: kept
  // A 100 KB field is quoted short.
  CliResult status = ImportLines(dir, with("status", std::string(100000, 's')));
  EXPECT_EQ(status.output, "tessel import: " + dir + "/in.jsonl: line 3: field 'status' is '" +
                               std::string(77, 's') +
                               "... (100000 bytes)', expected a measurement status (\"ok\", "
                               "\"compile_error\", \"verify_failed\", \"runtime_error\", "
                               "\"timeout\", \"device_limit_exceeded\" or \"worker_error\")" +
                               suffix);
}

TEST(TrustCli, ImportRefusesAWorkloadOrTraceThatDoesNotParseOrReplay) {
  const std::string dir = MakeTempDir("tessel_trust_cli");
  const std::string db = FillLog(dir, 3);
  std::vector<std::string> lines = ExportLines(db);
  ASSERT_EQ(lines.size(), 4u);
  nlohmann::json record = nlohmann::json::parse(lines[2]);
  const std::string uid = record["uid"];
  const std::string file = dir + "/in.jsonl";

  nlohmann::json unreadable = record;
  unreadable["trace"] = nlohmann::json::parse(R"({"version": 1, "insts": [{"kind": "nope"}]})");
  CliResult r = ImportLines(dir, {lines[0], unreadable.dump()});
  EXPECT_EQ(r.status, 1);
  EXPECT_THAT(r.output, HasSubstr("tessel import: " + file + ": line 2: record " + uid +
                                  ": its trace cannot be read: "));

  // The trace of a softmax candidate on the matmul workload.
  auto soft = SampleCandidates("softmax(rows=8, cols=64)", schedules::HostTarget(), 1);
  ASSERT_EQ(soft.size(), 1u);
  nlohmann::json foreign = record;
  foreign["trace"] = soft[0].trace->ToJson();
  r = ImportLines(dir, {lines[0], foreign.dump()});
  EXPECT_THAT(r.output, HasSubstr("line 2: record " + uid +
                                  ": its trace does not replay on its workload for host: "));

  nlohmann::json target = record;
  target["target_key"] = "cuda -arch=sm_75";
  r = ImportLines(dir, {lines[0], target.dump()});
  EXPECT_THAT(r.output, HasSubstr("line 2: record " + uid +
                                  ": target 'cuda -arch=sm_75' is not one this build knows"));

  r = ImportLines(dir, {lines[2]});  // its workload is missing
  EXPECT_EQ(r.output, "tessel import: " + file + ": line 1: record " + uid + " names workload " +
                          KeyOf(kSpec) +
                          ", which is neither earlier in the file nor in the log; tessel export "
                          "writes each workload before its records; nothing from this file was "
                          "added\n");

  nlohmann::json workload = nlohmann::json::parse(lines[0]);
  workload["canonical"] = "C[i] = A[i";
  workload["spec"] = "";
  r = ImportLines(dir, {workload.dump()});
  EXPECT_EQ(r.status, 1);
  EXPECT_THAT(r.output, HasSubstr("line 1: workload " + workload["key"].get<std::string>() +
                                  " (matmul) no longer parses: "));
  // Nothing of any of these was stored.
  CliResult out = RunTessel("export --db " + dir + "/target.db", false);
  EXPECT_EQ(out.output, "");
}

TEST(TrustCli, BestPassesOverARecordWhoseTraceDoesNotReplay) {
  const std::string dir = MakeTempDir("tessel_trust_cli");
  const std::string db = FillLog(dir, 10);
  CliResult good = RunTessel("best --db " + db + " -w '" + std::string(kSpec) + "' -t host", false);
  ASSERT_EQ(good.status, 0);
  // The fastest record gets a trace this build cannot read (as an old import could store).
  const std::string fastest =
      RawQuery(db, "SELECT uid FROM records WHERE status = 'ok' ORDER BY median_ms LIMIT 1");
  ASSERT_EQ(RawExec(db,
                    "UPDATE records SET trace = '{\"version\": 1, \"insts\": [{\"kind\": "
                    "\"nope\"}]}' WHERE uid = '" +
                        fastest + "'"),
            "");
  CliResult r = RunTessel("best --db " + db + " -w '" + std::string(kSpec) + "' -t host");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("tessel best: warning: record " + fastest + " of " + db +
                                  " is passed over: its trace cannot be read: "));
  // Every record broken: the error says so and what to do.
  ASSERT_EQ(RawExec(db,
                    "UPDATE records SET trace = '{\"version\": 1, \"insts\": [{\"kind\": "
                    "\"nope\"}]}'"),
            "");
  CliResult none = RunTessel("best --db " + db + " -w '" + std::string(kSpec) + "' -t host");
  EXPECT_EQ(none.status, 1);
  EXPECT_THAT(none.output, HasSubstr("tessel best: none of the 9 fastest ok records of "
                                     "matmul(M=64, N=64, K=64"));
  EXPECT_THAT(none.output, HasSubstr(") on host in " + db +
                                     " replays here; the fastest: its trace cannot be read: "));
  EXPECT_THAT(none.output, HasSubstr("; tune it again with this release\n"));
}

// Whether chmod stops this user from writing in `dir` (it does not stop root, as in some CI
// containers): the read-only tests need it.
bool ChmodStopsWrites(const std::string& dir) {
  chmod(dir.c_str(), 0555);
  const std::string probe = dir + "/probe";
  FILE* f = std::fopen(probe.c_str(), "w");
  if (f != nullptr) {
    std::fclose(f);
    std::remove(probe.c_str());
  }
  chmod(dir.c_str(), 0755);
  return f == nullptr;
}

constexpr char kRootSkip[] =
    "chmod does not stop this user (root?) from writing, so a read-only log cannot be made here";

TEST(TrustCli, BestExportAndCheckReadALogInAReadOnlyFolderAndServeRefusesIt) {
  const std::string dir = MakeTempDir("tessel_trust_ro") + "/logs";
  ASSERT_EQ(mkdir(dir.c_str(), 0755), 0);
  const std::string db = FillLog(dir, 5);
  if (!ChmodStopsWrites(dir)) GTEST_SKIP() << kRootSkip;
  const std::string best_args = "best --db " + db + " -w '" + std::string(kSpec) + "' -t host";
  const std::string expected = RunTessel(best_args, false).output;
  ASSERT_FALSE(expected.empty());
  ASSERT_EQ(chmod(dir.c_str(), 0555), 0);
  CliResult best = RunTessel(best_args);
  EXPECT_EQ(best.status, 0) << best.output;
  EXPECT_EQ(best.output, expected);
  CliResult out = RunTessel("export --db " + db, false);
  EXPECT_EQ(out.status, 0);
  EXPECT_EQ(std::count(out.output.begin(), out.output.end(), '\n'), 6);
  CliResult check = RunTessel("check --db " + db);
  EXPECT_EQ(check.output, db + ": no bad records\n");
  // A server needs to write: it refuses at start, naming the folder.
  CliResult serve = RunTessel("serve --db " + db + " --listen 127.0.0.1:0");
  EXPECT_EQ(serve.status, 1);
  EXPECT_EQ(serve.output, "tessel serve: cannot open the tuning log " + db + ": the folder " + dir +
                              " of the tuning log " + db +
                              " is not writable for this user, and SQLite writes the log's -wal "
                              "and -shm files there; make the folder writable or move the log "
                              "to one that is\n");
  // A new log cannot be made there either.
  CliResult import = RunTessel("import --db " + dir + "/new.db " + dir + "/nothing.jsonl");
  EXPECT_EQ(import.status, 1);
  EXPECT_EQ(import.output, "tessel import: cannot create tuning log " + dir +
                               "/new.db: the folder " + dir +
                               " is not writable for this user; pass a path in a folder that "
                               "is\n");
  chmod(dir.c_str(), 0755);
}

TEST(TrustCli, ServeRefusesAReadOnlyLogAtStartWhichBestStillReads) {
  const std::string dir = MakeTempDir("tessel_trust_ro");
  const std::string db = FillLog(dir, 5);
  if (!ChmodStopsWrites(dir)) GTEST_SKIP() << kRootSkip;
  ASSERT_EQ(chmod(db.c_str(), 0444), 0);
  CliResult serve = RunTessel("serve --db " + db + " --listen 127.0.0.1:0");
  EXPECT_EQ(serve.status, 1);
  EXPECT_EQ(serve.output, "tessel serve: cannot open the tuning log " + db + ": the tuning log " +
                              db +
                              " is read-only for this user, and this command writes to it; make "
                              "it writable (chmod u+w " +
                              db + ") or only read it (tessel best, tessel export)\n");
  CliResult best = RunTessel("best --db " + db + " -w '" + std::string(kSpec) + "' -t host");
  EXPECT_EQ(best.status, 0) << best.output;
}

TEST(TrustCli, AReadOnlyCopyWithUnfoldedWritesSaysSo) {
  const std::string dir = MakeTempDir("tessel_trust_ro");
  const std::string copy = dir + "/copy";
  ASSERT_EQ(mkdir(copy.c_str(), 0755), 0);
  if (!ChmodStopsWrites(copy)) GTEST_SKIP() << kRootSkip;
  // A log whose writer is still open: its last records are in log.db-wal. Copied with that
  // file (and without -shm) into a folder the reader cannot write.
  auto log = store::OpenTuningLog(dir + "/log.db");
  ASSERT_TRUE(log.ok()) << log.status();
  std::vector<store::Record> rs = {MakeTestRecord(1)};
  ASSERT_TRUE((*log)->AddRecords(&rs).ok());
  for (const char* suffix : {"", "-wal"}) {
    std::filesystem::copy_file(dir + "/log.db" + suffix, copy + "/log.db" + suffix);
  }
  ASSERT_EQ(chmod(copy.c_str(), 0555), 0);
  CliResult r = RunTessel("export --db " + copy + "/log.db");
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.output, "tessel export: cannot read the tuning log " + copy +
                          "/log.db: its latest writes are still in " + copy +
                          "/log.db-wal, and this user cannot write beside the log to read them; "
                          "read it as its owner, or after its server stops (which folds them "
                          "into the log)\n");
  chmod(copy.c_str(), 0755);
}

TEST(TrustCli, ServeRefusesTimingFlagsThatCannotBeMet) {
  const std::string db = MakeTempDir("tessel_trust_cli") + "/log.db";
  CliResult r = RunTessel("serve --db " + db + " --min-repeats -3");
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.output, "tessel serve: --min-repeats -3: give at least 1 timed repeat\n");
  r = RunTessel("serve --db " + db + " --min-repeats 0");
  EXPECT_EQ(r.output, "tessel serve: --min-repeats 0: give at least 1 timed repeat\n");
  r = RunTessel("serve --db " + db + " --min-total-ms -1");
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.output, "tessel serve: --min-total-ms -1: give 0 or more milliseconds\n");
  r = RunTessel("serve --db " + db + " --max-repeats 0");
  EXPECT_EQ(r.output,
            "tessel serve: --min-repeats 5 and --max-repeats 0 do not fit: give 1 <= min <= max\n");
  for (const char* bad : {"-0.1", "1"}) {
    r = RunTessel("serve --db " + db + " --median-precision " + bad);
    EXPECT_EQ(r.status, 1) << bad;
    EXPECT_EQ(r.output, absl::StrCat("tessel serve: --median-precision ", bad,
                                     ": give 0 (off) or a fraction in (0, 1), e.g. 0.005 for "
                                     "+-0.5%\n"))
        << bad;
  }
}

TEST(TrustCli, MeasureRefusesAMedianPrecisionThatIsNotAFraction) {
  CliResult r = RunTessel("measure --candidate /nonexistent.json --median-precision 2");
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.output,
            "tessel measure: --median-precision 2: give 0 (off) or a fraction in (0, 1), e.g. "
            "0.005 for +-0.5%\n");
}

TEST(TrustCli, ADamagedLogIsNamedWithHowToRecoverIt) {
  const std::string dir = MakeTempDir("tessel_trust_cli");
  const std::string db = dir + "/log.db";
  {
    auto log = store::OpenTuningLog(db);
    ASSERT_TRUE(log.ok()) << log.status();
    std::vector<store::Record> rs;
    for (int i = 0; i < 2000; ++i) rs.push_back(MakeTestRecord(i));
    ASSERT_TRUE((*log)->AddRecords(&rs).ok());
  }
  {
    // Pages 2 to 21 (of 16 KiB) overwritten; the header page is left whole.
    std::fstream f(db, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(16384);
    const std::string junk(16384 * 20, '\x13');
    f.write(junk.data(), static_cast<std::streamsize>(junk.size()));
  }
  const std::string how =
      " is damaged (database disk image is malformed): recover what it holds "
      "with `sqlite3 " +
      db +
      " .recover | sqlite3 recovered.db` and use recovered.db, or "
      "restore a backup written by tessel export\n";
  CliResult out = RunTessel("export --db " + db, false);
  EXPECT_EQ(out.status, 1);
  CliResult r = RunTessel("export --db " + db + " --out " + dir + "/x.jsonl");
  EXPECT_EQ(r.output, "tessel export: the tuning log " + db + how);
  CliResult check = RunTessel("check --db " + db);
  EXPECT_EQ(check.output, "tessel check: the tuning log " + db + how);
}

TEST(TrustCli, SampleRefusesAnUnboundedCount) {
  CliResult r = RunTessel("sample -w 'softmax(rows=4, cols=8)' -n 2147483648");
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.output,
            "tessel sample: -n 2147483648 is more samples than tessel sample draws in one run "
            "(1000000); give fewer, or run it several times with another --seed\n");
}

}  // namespace
}  // namespace tessel::testing
