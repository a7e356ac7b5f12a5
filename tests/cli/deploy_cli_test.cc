// Deploy time from the command line and the runtime (issue 19): a record keeps the kernel it
// measured, so `tessel best` and libtessel_runtime return that source and binary byte for byte
// even once the code generator prints something else; `tessel pack`; `tessel best`'s notes and
// errors. Real `tessel tune` runs on the host, real SQLite files, real compiles.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "runtime/include/tessel/runtime.h"
#include "schedules/codegen/codegen_version.h"
#include "schedules/codegen/source_json.h"
#include "schedules/space/candidate.h"
#include "schedules/workload/builtins.h"
#include "schedules/workload/key.h"
#include "store/tuning_log.h"
#include "tests/cli/cli_test_util.h"
#include "tests/store/store_test_util.h"
#include "tests/test_util.h"

namespace tessel::testing {
namespace {

using ::testing::HasSubstr;

constexpr char kSpec[] = "matmul(M=16, N=8, K=8)";

std::string Q(const std::string& s) { return "'" + s + "'"; }

// What this build's generator would print is no longer what was measured: the best record's
// stored source gets a line this build never prints, and a code generator version other than
// this build's, as a log written before a code generation change would have it.
std::string PretendAnOlderCodeGenerator(const std::string& db, const std::string& record_id) {
  const std::string marker = "// printed by code generator version " +
                             std::to_string(schedules::kCodegenVersion + 1) + "\n";
  EXPECT_EQ(RawExec(db, "UPDATE artifacts SET codegen_version = " +
                            std::to_string(schedules::kCodegenVersion + 1) +
                            ", source = source || '" + marker + "' WHERE record_id = " + record_id),
            "");
  return RawQuery(db, "SELECT source FROM artifacts WHERE record_id = " + record_id);
}

TEST(DeployCli, BestAndTheRuntimeReturnTheMeasuredSourceAfterTheCodeGeneratorChanges) {
  const std::string dir = MakeTempDir("tessel_deploy_cli");
  const std::string db = dir + "/tuning.db";
  CliResult tune = RunTessel("tune -w " + Q(kSpec) + " -n 4 --target host --quiet --db " + Q(db));
  ASSERT_EQ(tune.status, 0) << tune.output;
  // The best record carries what was compiled; a slower one only when it was the fastest so far.
  const std::string id =
      RawQuery(db, "SELECT id FROM records WHERE status = 'ok' ORDER BY median_ms, id LIMIT 1");
  EXPECT_EQ(RawQuery(db, "SELECT count(*) FROM artifacts WHERE record_id = " + id), "1");
  EXPECT_EQ(RawQuery(db,
                     "SELECT count(*) FROM artifacts JOIN records ON records.id = record_id "
                     "WHERE EXISTS (SELECT 1 FROM records AS r WHERE r.status = 'ok' AND "
                     "r.median_ms < records.median_ms AND r.id < records.id)"),
            "0");
  CliResult before = RunTessel("best --db " + Q(db) + " -w " + Q(kSpec) + " -t host", false);
  ASSERT_EQ(before.status, 0) << before.output;
  EXPECT_EQ(before.output, RawQuery(db, "SELECT source FROM artifacts WHERE record_id = " + id));

  const std::string stored = PretendAnOlderCodeGenerator(db, id);
  CliResult after = RunTessel("best --db " + Q(db) + " -w " + Q(kSpec) + " -t host", false);
  ASSERT_EQ(after.status, 0) << after.output;
  EXPECT_EQ(after.output, stored);
  EXPECT_NE(after.output, before.output);
  CliResult notes = RunTessel("best --db " + Q(db) + " -w " + Q(kSpec) + " -t host --emit summary");
  EXPECT_THAT(notes.output,
              HasSubstr("was measured with code generator version " +
                        std::to_string(schedules::kCodegenVersion + 1) + " (this build's is " +
                        std::to_string(schedules::kCodegenVersion) +
                        "); printing the stored source, as measured\n"));
  EXPECT_THAT(notes.output, HasSubstr("match: same device ("));
  EXPECT_THAT(notes.output, HasSubstr("Source: as measured (code generator version " +
                                      std::to_string(schedules::kCodegenVersion + 1)));

  // The runtime loads and runs that very source.
  const std::string cache = dir + "/cache";
  tessel_open_options o{cache.c_str(), 0};
  tessel_db* rt = nullptr;
  ASSERT_EQ(tessel_open(db.c_str(), &o, &rt), TESSEL_OK) << tessel_last_error();
  tessel_kernel* k = nullptr;
  ASSERT_EQ(tessel_find(rt, kSpec, TESSEL_TARGET_HOST, &k), TESSEL_OK) << tessel_last_error();
  size_t size = 0;
  const char* source = tessel_kernel_source(k, &size);
  EXPECT_EQ(std::string(source, size), stored);
  EXPECT_EQ(tessel_kernel_codegen_version(k), schedules::kCodegenVersion + 1);
  EXPECT_EQ(tessel_kernel_regenerated(k), 0);
  std::vector<float> a(16 * 8), b(8 * 8), c(16 * 8, NAN);
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(-1, 1);
  for (float& v : a) v = u(rng);
  for (float& v : b) v = u(rng);
  const int64_t sa[2] = {16, 8}, sb[2] = {8, 8}, sc[2] = {16, 8};
  tessel_tensor args[3] = {
      {a.data(), "f32", 2, sa}, {b.data(), "f32", 2, sb}, {c.data(), "f32", 2, sc}};
  ASSERT_EQ(tessel_launch(k, args, 3, nullptr), TESSEL_OK) << tessel_last_error();
  for (int i = 0; i < 16; ++i) {
    for (int j = 0; j < 8; ++j) {
      double want = 0;
      for (int kk = 0; kk < 8; ++kk) want += double(a[i * 8 + kk]) * b[kk * 8 + j];
      ASSERT_NEAR(c[i * 8 + j], want, 1e-4) << i << "," << j;
    }
  }
  tessel_kernel_release(k);
  tessel_close(rt);
  // What the compiler was given is the stored text (the host compiler keeps it in the cache).
  int matching = 0;
  for (const auto& e : std::filesystem::recursive_directory_iterator(cache)) {
    if (e.path().extension() == ".cc" && ReadBytes(e.path().string()) == stored) ++matching;
  }
  EXPECT_EQ(matching, 1);
}

TEST(DeployCli, BestReturnsTheMeasuredCubinByteForByte) {
  // A CUDA record as a GPU worker stores it (no GPU is needed to read it back).
  const std::string dir = MakeTempDir("tessel_deploy_cli");
  const std::string db = dir + "/tuning.db";
  auto log = store::OpenTuningLog(db);
  ASSERT_TRUE(log.ok());
  auto w = schedules::ParseWorkloadSpec("softmax(rows=4, cols=64)");
  auto cuda = schedules::MakeTarget("cuda", "sm_90");
  ASSERT_TRUE(w.ok() && cuda.ok());
  ASSERT_TRUE((*log)
                  ->PutWorkload(
                      {schedules::WorkloadKey(*w), schedules::CanonicalText(*w), w->name, w->spec})
                  .ok());
  auto c = schedules::BuildCandidate(*w, *cuda, std::nullopt);
  ASSERT_TRUE(c.ok()) << c.status();
  store::Record r = MakeTestRecord(1, schedules::WorkloadKey(*w), cuda->ToString());
  r.trace_json = "null";
  r.measurement.device_name = "NVIDIA H100 80GB HBM3";
  measure::Artifact& a = r.measurement.artifact;
  a.codegen_version = schedules::kCodegenVersion + 1;
  a.source = c->source.code + "// as an older generator printed it\n";
  a.launch_json = schedules::SourceLaunchToJson(c->source);
  a.binary_format = "cubin";
  a.binary_arch = "sm_90";
  for (int i = 0; i < 4096; ++i) a.binary.push_back(static_cast<char>((i * 7) % 256));
  a.compiler_version = "NVRTC 13.0";
  a.driver_version = "13000";
  a.device_arch = "sm_90";
  a.multiprocessor_count = 132;
  ASSERT_TRUE((*log)->AddRecord(&r).ok());
  log->reset();

  const std::string args = "best --db " + Q(db) + " -w 'softmax(rows=4, cols=64)' -t cuda";
  CliResult bin = RunTessel(args + " --emit binary", false);
  ASSERT_EQ(bin.status, 0) << bin.output;
  EXPECT_EQ(bin.output, a.binary);
  CliResult src = RunTessel(args, false);
  EXPECT_EQ(src.output, a.source);
  CliResult device = RunTessel(args + " --device 'NVIDIA H100 80GB HBM3' --emit summary");
  EXPECT_THAT(device.output, HasSubstr("match: same device (NVIDIA H100 80GB HBM3)"));
  EXPECT_THAT(device.output, HasSubstr(", cubin for sm_90 of 4096 bytes, NVRTC 13.0)."));
  CliResult other = RunTessel(args + " --device 'NVIDIA H200' --emit json");
  ASSERT_EQ(other.status, 0) << other.output;
  EXPECT_THAT(other.output,
              HasSubstr("match: same architecture (cuda -arch=sm_90), measured on NVIDIA H100 "
                        "80GB HBM3; no record of NVIDIA H200"));
  auto j = nlohmann::json::parse(other.output.substr(other.output.find('{')));
  EXPECT_EQ(j["code"], a.source);
  EXPECT_EQ(j["artifact"]["binary_bytes"], 4096);
  EXPECT_EQ(j["kernels"].size(), c->source.kernels.size());

  // Export and import carry it.
  const std::string jsonl = dir + "/log.jsonl";
  ASSERT_EQ(RunTessel("export --db " + Q(db) + " --out " + Q(jsonl)).status, 0);
  const std::string db2 = dir + "/imported.db";
  CliResult imp = RunTessel("import --db " + Q(db2) + " " + Q(jsonl));
  ASSERT_EQ(imp.status, 0) << imp.output;
  CliResult bin2 = RunTessel(
      "best --db " + Q(db2) + " -w 'softmax(rows=4, cols=64)' -t cuda --emit binary", false);
  EXPECT_EQ(bin2.output, a.binary);
}

TEST(DeployCli, BestOfARecordWithoutArtifactSaysItRegenerated) {
  // A record as a log from before artifacts holds it.
  const std::string dir = MakeTempDir("tessel_deploy_cli");
  const std::string db = dir + "/tuning.db";
  auto log = store::OpenTuningLog(db);
  ASSERT_TRUE(log.ok());
  auto w = schedules::ParseWorkloadSpec(kSpec);
  ASSERT_TRUE((*log)
                  ->PutWorkload(
                      {schedules::WorkloadKey(*w), schedules::CanonicalText(*w), w->name, w->spec})
                  .ok());
  store::Record r = MakeTestRecord(1, schedules::WorkloadKey(*w), "host");
  r.trace_json = "null";
  ASSERT_TRUE((*log)->AddRecord(&r).ok());
  log->reset();
  CliResult best = RunTessel("best --db " + Q(db) + " -w " + Q(kSpec) + " -t host");
  EXPECT_EQ(best.status, 0) << best.output;
  EXPECT_THAT(best.output, HasSubstr("tessel best: record " + r.uid +
                                     ", match: same architecture (host), measured on Test CPU; "
                                     "no record of " +
                                     schedules::HostTarget().device_name + "\n"));
  EXPECT_THAT(best.output,
              HasSubstr("tessel best: record " + r.uid +
                        " was stored without its source and binary (a log from before Tessel "
                        "kept them); the source is regenerated from its trace by this build's "
                        "code generator (version " +
                        std::to_string(schedules::kCodegenVersion) +
                        ") and may differ from the kernel measured\n"));
  CliResult bin = RunTessel("best --db " + Q(db) + " -w " + Q(kSpec) + " -t host --emit binary");
  EXPECT_EQ(bin.status, 1);
  EXPECT_THAT(bin.output, HasSubstr("tessel best: record " + r.uid + " in " + db +
                                    " has no stored binary (it was stored without its "
                                    "artifact); print its source with --emit cpp\n"));
}

TEST(DeployCli, PackWritesTheBestPerDeviceAndNamesWhatIsMissing) {
  const std::string dir = MakeTempDir("tessel_deploy_cli");
  const std::string db = dir + "/tuning.db";
  ASSERT_EQ(RunTessel("tune -w " + Q(kSpec) + " -n 3 --target host --quiet --db " + Q(db)).status,
            0);
  const std::string pack = dir + "/kernels.pack";
  CliResult p = RunTessel("pack --db " + Q(db) + " -w " + Q(kSpec) + " --out " + Q(pack));
  ASSERT_EQ(p.status, 0) << p.output;
  EXPECT_THAT(p.output, HasSubstr("tessel pack: wrote 1 kernel of 1 workload to " + pack + "\n"));
  EXPECT_EQ(RawQuery(pack, "SELECT count(*) FROM records"), "1");
  EXPECT_EQ(RawQuery(pack, "SELECT count(*) FROM artifacts"), "1");
  EXPECT_FALSE(std::filesystem::exists(pack + "-wal"));
  CliResult from_pack = RunTessel("best --db " + Q(pack) + " -w " + Q(kSpec) + " -t host", false);
  CliResult from_log = RunTessel("best --db " + Q(db) + " -w " + Q(kSpec) + " -t host", false);
  EXPECT_EQ(from_pack.output, from_log.output);

  auto other = schedules::ParseWorkloadSpec("matmul(M=4, N=4, K=4)");
  CliResult missing = RunTessel("pack --db " + Q(db) + " -w " + Q(kSpec) +
                                " -w 'matmul(M=4, N=4, K=4)' --out " + Q(dir + "/b.pack"));
  EXPECT_EQ(missing.status, 1);
  EXPECT_EQ(missing.output, "tessel pack: no ok record of " + other->spec + " (key " +
                                schedules::WorkloadKey(*other) + ") in " + db +
                                "; tune it first (tessel tune or tessel submit)\n");
  EXPECT_FALSE(std::filesystem::exists(dir + "/b.pack"));
  CliResult bad = RunTessel("pack --db " + Q(db) + " -w 'matmul(M=4)' --out " + Q(dir + "/c.pack"));
  EXPECT_EQ(bad.status, 1);
  EXPECT_THAT(bad.output, HasSubstr("tessel pack: "));
  CliResult no_log = RunTessel("pack --db " + Q(dir + "/none.db") + " -w " + Q(kSpec) + " --out " +
                               Q(dir + "/d.pack"));
  EXPECT_EQ(no_log.output, "tessel pack: tuning log " + dir +
                               "/none.db does not exist; check the path (a read-only open never "
                               "creates a log)\n");
}

}  // namespace
}  // namespace tessel::testing
