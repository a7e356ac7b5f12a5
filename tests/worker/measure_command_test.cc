// `tessel measure --candidate FILE`: one candidate file measured locally, status first, with
// planted faults and every user-facing error.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <string>

#include "schedules/space/candidate.h"
#include "schedules/workload/builtins.h"
#include "tests/test_util.h"
#include "tests/worker/worker_test_util.h"

namespace tessel::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

// Writes the unscheduled host candidate of a small matmul, with `plant`, as <dir>/<stem>.json.
std::string WriteHostCandidate(const std::string& dir, const std::string& stem, Plant plant) {
  absl::StatusOr<schedules::Workload> w = schedules::ParseWorkloadSpec("matmul(M=16, N=12, K=8)");
  TESSEL_CHECK(w.ok());
  // An unscheduled trace (an empty one; candidate files need a trace).
  absl::StatusOr<schedules::Schedule> sch = schedules::Schedule::Create(*w);
  TESSEL_CHECK(sch.ok()) << sch.status();
  absl::StatusOr<schedules::Candidate> c = schedules::BuildCandidate(*sch, schedules::HostTarget());
  TESSEL_CHECK(c.ok()) << c.status();
  c->source = PlantHostFault(c->source, plant, stem);
  absl::StatusOr<std::string> path = schedules::WriteCandidateFiles(*c, dir, stem);
  TESSEL_CHECK(path.ok()) << path.status();
  return *path;
}

struct MeasureRun {
  int status;
  std::string output;
};

MeasureRun Measure(const std::string& dir, const std::vector<std::string>& args) {
  std::vector<std::string> all = {
      "measure",  "--cache", dir + "/cache", "--min-repeats", "3", "--max-repeats", "3",
      "--min-ms", "0",       "--no-flush"};
  // A generous time limit (CI machines are busy); the hang case sets its own.
  if (std::find(args.begin(), args.end(), "--timeout-s") == args.end()) {
    all.insert(all.end(), {"--timeout-s", "60"});
  }
  all.insert(all.end(), args.begin(), args.end());
  TesselProcess p(all, dir + "/measure.log");
  std::optional<int> status = p.Wait(absl::Seconds(60));
  return MeasureRun{status.value_or(-1), p.Log()};
}

TEST(MeasureCommand, PrintsTheResultStatusFirst) {
  const std::string dir = MakeTempDir("tessel_measure");
  const std::string file = WriteHostCandidate(dir, "good", Plant::kNone);
  MeasureRun r = Measure(dir, {"--candidate", file});
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_THAT(r.output, StartsWith("status: ok\n"));
  EXPECT_THAT(r.output, HasSubstr("median_ms: "));
  EXPECT_THAT(r.output, HasSubstr("repeats_ms (3): "));
  EXPECT_THAT(r.output, HasSubstr("compile_ms: "));
}

TEST(MeasureCommand, PlantedFaultsAreReportedWithTheirStatus) {
  const std::string dir = MakeTempDir("tessel_measure");
  struct Case {
    Plant plant;
    std::string status;
    std::string detail;
  };
  for (const Case& c : {Case{Plant::kSegfault, "runtime_error", "Segmentation fault"},
                        Case{Plant::kHang, "timeout", "ran past the 2 s time limit"},
                        Case{Plant::kWrongAnswer, "verify_failed", "verification failed"},
                        Case{Plant::kCompileError, "compile_error", "this is not C++"}}) {
    const std::string file = WriteHostCandidate(dir, "plant" + c.status, c.plant);
    MeasureRun r =
        Measure(dir, {"--candidate", file, "--timeout-s", c.plant == Plant::kHang ? "2" : "60"});
    EXPECT_EQ(r.status, 2) << r.output;
    EXPECT_THAT(r.output, StartsWith("status: " + c.status + "\n"));
    EXPECT_THAT(r.output, HasSubstr(c.detail));
  }
}

TEST(MeasureCommand, ErrorsNameTheProblemAndTheFix) {
  const std::string dir = MakeTempDir("tessel_measure");
  MeasureRun missing = Measure(dir, {"--candidate", dir + "/nope.json"});
  EXPECT_EQ(missing.status, 1);
  EXPECT_THAT(missing.output, HasSubstr("tessel measure: cannot read"));
  EXPECT_THAT(missing.output, HasSubstr("nope.json'; check the path"));

  std::ofstream(dir + "/junk.json") << "{\"format\": \"something else\"}";
  MeasureRun junk = Measure(dir, {"--candidate", dir + "/junk.json"});
  EXPECT_EQ(junk.status, 1);
  EXPECT_THAT(junk.output, HasSubstr("tessel measure: "));
  EXPECT_THAT(junk.output, HasSubstr("\"format\" is not \"tessel-candidate\""));

  const std::string file = WriteHostCandidate(dir, "good", Plant::kNone);
  MeasureRun wrong_target = Measure(dir, {"--candidate", file, "--target", "cuda"});
  EXPECT_EQ(wrong_target.status, 1);
  EXPECT_THAT(wrong_target.output,
              HasSubstr("holds a host candidate, which cannot run on --target cuda: drop --target "
                        "or sample the workload for cuda"));
  MeasureRun bad_target = Measure(dir, {"--candidate", file, "--target", "tpu"});
  EXPECT_EQ(bad_target.status, 1);
  EXPECT_THAT(bad_target.output,
              HasSubstr("tessel measure: unknown --target 'tpu'; use auto, host or cuda"));
}

}  // namespace
}  // namespace tessel::testing
