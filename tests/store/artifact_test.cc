// Records that reproduce their measurement (issue 19): the artifact a record keeps (source,
// launch configuration, binary, toolchain, device) through the log, export and import, schema
// migration, the deploy lookup's fallback (same device, same architecture, nothing), and kernel
// packs. Real SQLite files in temporary folders.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sstream>
#include <string>

#include "schedules/codegen/codegen_version.h"
#include "schedules/codegen/source_json.h"
#include "schedules/space/candidate.h"
#include "schedules/target/target.h"
#include "schedules/workload/builtins.h"
#include "schedules/workload/key.h"
#include "store/deploy_lookup.h"
#include "store/kernel_pack.h"
#include "store/sqlite_tuning_log.h"
#include "store/tuning_log.h"
#include "tests/store/store_test_util.h"
#include "tests/test_util.h"

namespace tessel::testing {
namespace {

using ::testing::HasSubstr;

constexpr char kSpec[] = "matmul(M=16, N=16, K=16)";

// A binary with every byte value, NULs included: what a cubin looks like to the store.
std::string AllBytes() {
  std::string b;
  for (int i = 0; i < 512; ++i) b.push_back(static_cast<char>(i % 256));
  return b;
}

struct Fixture {
  std::string dir;
  std::string db;
  std::unique_ptr<store::TuningLog> log;
  schedules::Workload workload;
  schedules::Target host;
  schedules::Candidate reference;  // the workload's reference lowering on the host
};

Fixture MakeFixture() {
  Fixture f;
  f.dir = MakeTempDir("tessel_artifact");
  f.db = f.dir + "/log.db";
  auto log = store::OpenTuningLog(f.db);
  EXPECT_TRUE(log.ok()) << log.status();
  f.log = *std::move(log);
  f.workload = *schedules::ParseWorkloadSpec(kSpec);
  f.host = *schedules::MakeTarget("host");
  EXPECT_TRUE(
      f.log
          ->PutWorkload({schedules::WorkloadKey(f.workload), schedules::CanonicalText(f.workload),
                         f.workload.name, f.workload.spec})
          .ok());
  auto c = schedules::BuildCandidate(f.workload, f.host, std::nullopt);
  EXPECT_TRUE(c.ok()) << c.status();
  f.reference = *std::move(c);
  return f;
}

measure::Artifact ArtifactOf(const schedules::GeneratedSource& source, const std::string& marker) {
  measure::Artifact a;
  a.codegen_version = schedules::kCodegenVersion;
  a.source = source.code + marker;
  a.launch_json = schedules::SourceLaunchToJson(source);
  a.binary_format = "cubin";
  a.binary_arch = "sm_90";
  a.binary = AllBytes();
  a.compile_options = "--gpu-architecture=sm_90 -I/usr/local/cuda/include";
  a.compiler_version = "NVRTC 13.0";
  a.driver_version = "13000";
  a.device_arch = "sm_90";
  a.multiprocessor_count = 132;
  return a;
}

// A record of the fixture's workload on the host, measured on `device` in `median` ms, with an
// artifact when `with_artifact`.
store::Record AddRecord(Fixture& f, const std::string& device, double median, bool with_artifact,
                        const std::string& marker = "", const std::string& target_key = "host") {
  store::Record r = MakeTestRecord(1, schedules::WorkloadKey(f.workload), target_key);
  r.trace_json = "null";
  r.measurement.timings = measure::MakeTimings({median, median});
  r.measurement.device_name = device;
  if (with_artifact) r.measurement.artifact = ArtifactOf(f.reference.source, marker);
  auto id = f.log->AddRecord(&r);
  EXPECT_TRUE(id.ok()) << id.status();
  return r;
}

TEST(Artifact, StoredWithItsRecordAndReadBackByteForByte) {
  Fixture f = MakeFixture();
  store::Record with = AddRecord(f, "Dev A", 1.0, true, "// marker\n");
  store::Record without = AddRecord(f, "Dev A", 2.0, false);
  auto a = f.log->GetArtifact(with.id);
  ASSERT_TRUE(a.ok() && a->has_value()) << a.status();
  EXPECT_EQ(**a, with.measurement.artifact);
  EXPECT_EQ((*a)->binary, AllBytes());
  auto none = f.log->GetArtifact(without.id);
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
  // The readers of records do not page through artifacts.
  auto best = f.log->Best(with.workload_key, "host");
  ASSERT_TRUE(best.ok() && best->has_value());
  EXPECT_FALSE((*best)->measurement.artifact.stored());
}

TEST(Artifact, KeptOnlyForTheFastestOfItsDeviceWhenAdded) {
  Fixture f = MakeFixture();
  store::Record first = AddRecord(f, "Dev A", 2.0, true);
  store::Record slower = AddRecord(f, "Dev A", 3.0, true);
  store::Record faster = AddRecord(f, "Dev A", 1.0, true);
  store::Record other_device = AddRecord(f, "Dev B", 5.0, true);
  for (const auto& [r, kept] : {std::pair{&first, true}, std::pair{&slower, false},
                                std::pair{&faster, true}, std::pair{&other_device, true}}) {
    auto a = f.log->GetArtifact(r->id);
    ASSERT_TRUE(a.ok());
    EXPECT_EQ(a->has_value(), kept) << r->measurement.timings.median_ms;
  }
}

TEST(Artifact, ExportAndImportCarryIt) {
  Fixture f = MakeFixture();
  store::Record with = AddRecord(f, "Dev A", 1.0, true, "// exported\n");
  AddRecord(f, "Dev A", 2.0, false);
  std::stringstream jsonl;
  ASSERT_TRUE(f.log->ExportJsonl(jsonl).ok());
  EXPECT_THAT(jsonl.str(), HasSubstr("\"binary_base64\""));
  auto other = store::OpenTuningLog(f.dir + "/other.db");
  ASSERT_TRUE(other.ok());
  store::JsonlImportOptions replay;
  replay.replay = true;
  auto stats = (*other)->ImportJsonl(jsonl, replay);
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->records_added, 2);
  auto best = (*other)->Best(with.workload_key, "host");
  ASSERT_TRUE(best.ok() && best->has_value());
  EXPECT_EQ((*best)->uid, with.uid);
  auto a = (*other)->GetArtifact((*best)->id);
  ASSERT_TRUE(a.ok() && a->has_value());
  EXPECT_EQ(**a, with.measurement.artifact);
}

TEST(Artifact, ImportRefusesAMalformedArtifactNamingTheLine) {
  Fixture f = MakeFixture();
  AddRecord(f, "Dev A", 1.0, true);
  std::stringstream jsonl;
  ASSERT_TRUE(f.log->ExportJsonl(jsonl).ok());
  std::string text = jsonl.str();
  const size_t at = text.find("\"binary_base64\":\"") + std::string("\"binary_base64\":\"").size();
  text.insert(at, "!!");
  auto other = store::OpenTuningLog(f.dir + "/other.db");
  ASSERT_TRUE(other.ok());
  std::stringstream in(text);
  auto stats = (*other)->ImportJsonl(in);
  ASSERT_FALSE(stats.ok());
  EXPECT_THAT(stats.status().message(),
              HasSubstr("line 2: artifact: field 'binary_base64' is not base64"));
}

TEST(Artifact, AVersion2LogMigratesAndItsRecordsAnswerRegenerated) {
  // A version-2 log made by the schema's own SQL, with an ok record of the reference lowering.
  Fixture f = MakeFixture();
  const std::string path = f.dir + "/v2.db";
  const auto& steps = store::TuningLogMigrations();
  const std::string key = schedules::WorkloadKey(f.workload);
  ASSERT_EQ(
      RawExec(path, "BEGIN; " + steps[0].sql + steps[1].sql +
                        "INSERT INTO workloads (key, canonical, name, spec) VALUES ('" + key +
                        "', '" + schedules::CanonicalText(f.workload) + "', 'matmul', '" + kSpec +
                        "'); INSERT INTO records (uid, workload_key, target_key, trace, "
                        "status, repeats_ms, median_ms, device_name, unix_ms) VALUES ('old', '" +
                        key +
                        "', 'host', 'null', 'ok', '[1.5,2.5]', 2.0, 'Dev A', 1); "
                        "PRAGMA user_version = 2; PRAGMA application_id = " +
                        std::to_string(store::kTuningLogApplicationId) + "; COMMIT;"),
      "");
  {
    store::TuningLogOptions ro;
    ro.read_only = true;
    auto refused = store::OpenTuningLog(path, ro);
    EXPECT_EQ(refused.status().message(),
              path + " has schema 2 and this build reads schema " +
                  std::to_string(store::LatestSchemaVersion()) +
                  "; open it once for writing (tessel serve or tessel import) to migrate it");
  }
  auto log = store::OpenTuningLog(path);  // a writer migrates
  ASSERT_TRUE(log.ok()) << log.status();
  EXPECT_EQ(RawQuery(path, "PRAGMA user_version"), std::to_string(store::LatestSchemaVersion()));
  auto found = store::FindDeployedKernel(log->get(), {f.workload, f.host, "Dev A"});
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ(found->record.uid, "old");
  EXPECT_TRUE(found->regenerated);
  EXPECT_EQ(found->artifact.source, f.reference.source.code);
  EXPECT_EQ(found->artifact.codegen_version, schedules::kCodegenVersion);
  EXPECT_TRUE(found->artifact.binary.empty());
}

TEST(DeployLookup, SameDeviceFirstThenSameArchitecture) {
  Fixture f = MakeFixture();
  store::Record slow_here = AddRecord(f, "Dev A", 2.0, true, "// A\n");
  store::Record fast_there = AddRecord(f, "Dev B", 1.0, true, "// B\n");
  store::DeployQuery q{f.workload, f.host, "Dev A"};
  auto here = store::FindDeployedKernel(f.log.get(), q);
  ASSERT_TRUE(here.ok()) << here.status();
  EXPECT_EQ(here->match, store::DeployMatch::kDevice);
  EXPECT_EQ(here->record.uid, slow_here.uid);
  EXPECT_EQ(here->artifact, slow_here.measurement.artifact);
  EXPECT_FALSE(here->regenerated);
  EXPECT_EQ(here->ok_records, 2);
  EXPECT_EQ(here->MatchDescription(q), "same device (Dev A)");

  store::DeployQuery elsewhere{f.workload, f.host, "Dev C"};
  auto arch = store::FindDeployedKernel(f.log.get(), elsewhere);
  ASSERT_TRUE(arch.ok()) << arch.status();
  EXPECT_EQ(arch->match, store::DeployMatch::kArchitecture);
  EXPECT_EQ(arch->record.uid, fast_there.uid);
  EXPECT_EQ(arch->MatchDescription(elsewhere),
            "same architecture (host), measured on Dev B; no record of Dev C");
}

TEST(DeployLookup, PassesOverAFasterRecordThatHasNeitherArtifactNorAReplayingTrace) {
  Fixture f = MakeFixture();
  store::Record usable = AddRecord(f, "Dev A", 2.0, false);  // regenerated from "null"
  store::Record broken = MakeTestRecord(2, schedules::WorkloadKey(f.workload), "host");
  broken.trace_json = R"({"version": 1, "insts": [{"kind": "nope"}]})";
  broken.measurement.timings = measure::MakeTimings({1.0, 1.0});
  broken.measurement.device_name = "Dev A";
  ASSERT_TRUE(f.log->AddRecord(&broken).ok());
  std::vector<std::string> skipped;
  store::DeployQuery q{f.workload, f.host, "Dev A",
                       [&](const std::string& line) { skipped.push_back(line); }};
  auto found = store::FindDeployedKernel(f.log.get(), q);
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ(found->record.uid, usable.uid);
  EXPECT_TRUE(found->regenerated);
  ASSERT_EQ(skipped.size(), 1u);  // once, though both levels rank it
  EXPECT_THAT(skipped[0], HasSubstr("record " + broken.uid + " of " + f.db + " is passed over: "));
  // With nothing usable left, the error says so and what to do.
  ASSERT_EQ(RawExec(f.db, "UPDATE records SET trace = '" + broken.trace_json + "'"), "");
  auto none = store::FindDeployedKernel(f.log.get(), q);
  EXPECT_EQ(none.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(none.status().message(),
              HasSubstr("none of the 2 fastest ok records of " + f.workload.spec + " on host in " +
                        f.db + " replays here; the fastest: "));
  EXPECT_THAT(none.status().message(),
              HasSubstr("; none has its source stored (a log from before Tessel kept them); tune "
                        "it again with this release"));
}

TEST(DeployLookup, NothingNamesWhatTheLogHas) {
  Fixture f = MakeFixture();
  AddRecord(f, "Dev A", 2.0, true);
  AddRecord(f, "Dev A", 3.0, true);
  auto cuda = schedules::MakeTarget("cuda", "sm_90");
  ASSERT_TRUE(cuda.ok());
  auto none = store::FindDeployedKernel(f.log.get(), {f.workload, *cuda, "NVIDIA H100"});
  EXPECT_EQ(none.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(none.status().message(),
            "no ok record of " + f.workload.spec + " (key " + schedules::WorkloadKey(f.workload) +
                ") for cuda -arch=sm_90 (device NVIDIA H100) in " + f.db +
                ": neither on the same device nor on the same architecture; it has ok records of "
                "this workload for host on Dev A (2 ok records). Tune it on this target first "
                "(tessel tune or tessel submit)");
  auto other = schedules::ParseWorkloadSpec("matmul(M=8, N=8, K=8)");
  ASSERT_TRUE(other.ok());
  auto unknown = store::FindDeployedKernel(f.log.get(), {*other, f.host, ""});
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(unknown.status().message(),
              HasSubstr("for host in " + f.db +
                        ": neither on the same device nor on the same architecture; it has no "
                        "ok record of this workload on any target."));
}

// A 9.0 GPU runs the records of cuda -arch=sm_90 and of cuda -arch=sm_90a (issue 23): the deploy
// lookup for it asks both targets and takes the best answer (the same device first, then the
// fastest); the two targets' records stay apart in the log; an 8.0 GPU never gets an sm_90a one.
TEST(DeployLookup, A90GpuGetsTheBestOfItsSm90AndSm90aRecords) {
  Fixture f = MakeFixture();
  const std::string sm90 = schedules::CudaTarget("sm_90").ToString();
  const std::string sm90a = schedules::CudaTarget("sm_90a").ToString();
  store::Record plain = AddRecord(f, "NVIDIA H100", 2.0, true, "// sm_90\n", sm90);
  store::Record hopper = AddRecord(f, "NVIDIA H100", 1.0, true, "// sm_90a\n", sm90a);
  store::Record elsewhere = AddRecord(f, "NVIDIA H200", 0.5, true, "// H200\n", sm90a);
  const std::string key = schedules::WorkloadKey(f.workload);
  auto top = f.log->TopK(key, sm90, 10);
  ASSERT_TRUE(top.ok()) << top.status();
  ASSERT_EQ(top->size(), 1u);  // kept apart
  EXPECT_EQ((*top)[0].uid, plain.uid);

  auto queries = [&](const std::string& device, const std::vector<std::string>& archs) {
    std::vector<store::DeployQuery> q;
    for (const std::string& a : archs) q.push_back({f.workload, schedules::CudaTarget(a), device});
    return q;
  };
  const std::vector<std::string> on90 = schedules::KnownCudaArchsRunnableOn("sm_90");
  auto h100 = store::FindDeployedKernelOfAny(f.log.get(), queries("NVIDIA H100", on90));
  ASSERT_TRUE(h100.ok()) << h100.status();
  EXPECT_EQ(h100->record.uid, hopper.uid);  // on this device, faster than the sm_90 one
  EXPECT_EQ(h100->record.target_key, sm90a);
  EXPECT_EQ(h100->match, store::DeployMatch::kDevice);
  // No record of this device: the fastest of both targets.
  auto gh200 = store::FindDeployedKernelOfAny(f.log.get(), queries("NVIDIA GH200", on90));
  ASSERT_TRUE(gh200.ok()) << gh200.status();
  EXPECT_EQ(gh200->record.uid, elsewhere.uid);
  EXPECT_EQ(gh200->MatchDescription(queries("NVIDIA GH200", on90)[0]),
            "same architecture (cuda -arch=sm_90a), measured on NVIDIA H200; no record of "
            "NVIDIA GH200");

  // An 8.0 GPU asks for sm_80 only, and hears what the log has.
  auto a100 = store::FindDeployedKernelOfAny(
      f.log.get(), queries("NVIDIA A100", schedules::KnownCudaArchsRunnableOn("sm_80")));
  EXPECT_EQ(a100.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(a100.status().message(),
              HasSubstr("for cuda -arch=sm_80 (device NVIDIA A100) in " + f.db +
                        ": neither on the same device nor on the same architecture; it has ok "
                        "records of this workload for "));
  EXPECT_THAT(a100.status().message(), HasSubstr("cuda -arch=sm_90a on NVIDIA H100 (1 ok record)"));

  // Nothing for either target: the error names both.
  auto other = schedules::ParseWorkloadSpec("matmul(M=8, N=8, K=8)");
  ASSERT_TRUE(other.ok());
  std::vector<store::DeployQuery> none_q = queries("NVIDIA H100", on90);
  for (store::DeployQuery& q : none_q) q.workload = *other;
  auto none = store::FindDeployedKernelOfAny(f.log.get(), none_q);
  EXPECT_EQ(none.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(none.status().message(),
              HasSubstr("for cuda -arch=sm_90 (device NVIDIA H100) in " + f.db + ": "));
  EXPECT_THAT(none.status().message(),
              HasSubstr("; this device also runs the records of cuda -arch=sm_90a, and the log "
                        "has none of those either"));
}

TEST(KernelPack, HoldsTheBestRecordPerDeviceOnly) {
  Fixture f = MakeFixture();
  AddRecord(f, "Dev A", 3.0, true);
  store::Record best_a = AddRecord(f, "Dev A", 2.0, true, "// best A\n");
  store::Record best_b = AddRecord(f, "Dev B", 1.0, false);
  const std::string pack = f.dir + "/kernels.pack";
  auto packed = store::WriteKernelPack(f.log.get(), {f.workload}, pack);
  ASSERT_TRUE(packed.ok()) << packed.status();
  ASSERT_EQ(packed->size(), 2u);
  EXPECT_EQ((*packed)[0].uid, best_a.uid);
  EXPECT_TRUE((*packed)[0].has_artifact);
  EXPECT_EQ((*packed)[1].uid, best_b.uid);
  EXPECT_FALSE((*packed)[1].has_artifact);
  // One self-contained file with only those records, each with its artifact.
  EXPECT_EQ(RawQuery(pack, "PRAGMA journal_mode"), "delete");
  EXPECT_EQ(RawQuery(pack, "SELECT group_concat(uid) FROM (SELECT uid FROM records ORDER BY uid)"),
            std::min(best_a.uid, best_b.uid) + "," + std::max(best_a.uid, best_b.uid));
  EXPECT_EQ(RawQuery(pack, "SELECT count(*) FROM jobs"), "0");
  store::TuningLogOptions ro;
  ro.read_only = true;
  auto opened = store::OpenTuningLog(pack, ro);
  ASSERT_TRUE(opened.ok()) << opened.status();
  auto found = store::FindDeployedKernel(opened->get(), {f.workload, f.host, "Dev A"});
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ(found->record.uid, best_a.uid);
  EXPECT_EQ(found->artifact, best_a.measurement.artifact);
}

TEST(KernelPack, AWorkloadWithoutRecordsWritesNothing) {
  Fixture f = MakeFixture();
  AddRecord(f, "Dev A", 1.0, true);
  auto other = schedules::ParseWorkloadSpec("matmul(M=8, N=8, K=8)");
  ASSERT_TRUE(other.ok());
  const std::string pack = f.dir + "/kernels.pack";
  auto packed = store::WriteKernelPack(f.log.get(), {f.workload, *other}, pack);
  EXPECT_EQ(packed.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(packed.status().message(), "no ok record of " + other->spec + " (key " +
                                           schedules::WorkloadKey(*other) + ") in " + f.db +
                                           "; tune it first (tessel tune or tessel submit)");
  EXPECT_FALSE(std::ifstream(pack).good());
  auto itself = store::WriteKernelPack(f.log.get(), {f.workload}, f.db);
  EXPECT_EQ(itself.status().message(),
            "--out " + f.db + " is the tuning log itself; pass a new file");
}

}  // namespace
}  // namespace tessel::testing
