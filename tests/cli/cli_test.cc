// The tessel binary as a user runs it: outputs and every error message of the existing commands.

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <string>

#include "tests/cli/cli_test_util.h"
#include "tests/test_util.h"

namespace tessel::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(Cli, VersionSaysWhichTargetsAreBuilt) {
  CliResult r = RunTessel("--version");
  EXPECT_EQ(r.status, 0);
  EXPECT_THAT(r.output, HasSubstr("tessel 0.1.0"));
  EXPECT_THAT(r.output, HasSubstr("targets: host"));
}

TEST(Cli, LowerPrintsHostSourceByDefault) {
  CliResult r = RunTessel("lower -w 'matmul(M=8, N=8, K=8)' -t host");
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("extern \"C\" void tessel_matmul(void* const* buffers)"));
}

TEST(Cli, LowerEmitsIrTraceAndJson) {
  CliResult ir = RunTessel("lower -w 'softmax(rows=4, cols=64)' -t cuda --template --emit ir");
  EXPECT_EQ(ir.status, 0) << ir.output;
  EXPECT_THAT(ir.output, HasSubstr("allreduce_max"));
  CliResult tr = RunTessel("lower -w 'softmax(rows=4, cols=64)' -t cuda --template --emit trace");
  EXPECT_EQ(tr.status, 0) << tr.output;
  EXPECT_THAT(tr.output, HasSubstr("\"version\": 1"));
  CliResult js = RunTessel("lower -w 'reduce(rows=4, cols=64)' -t cuda --emit json");
  EXPECT_EQ(js.status, 0) << js.output;
  EXPECT_THAT(js.output, HasSubstr("\"format\": \"tessel-candidate\""));
  EXPECT_THAT(js.output, HasSubstr("\"key\""));
  EXPECT_THAT(js.output, HasSubstr("\"block\""));
}

TEST(Cli, LowerReplaysATraceFile) {
  const std::string dir = MakeTempDir("tessel_cli");
  CliResult tr = RunTessel("lower -w 'matmul(M=40, N=24, K=16)' -t cuda --template --emit trace");
  ASSERT_EQ(tr.status, 0) << tr.output;
  std::ofstream(dir + "/t.json") << tr.output;
  CliResult r = RunTessel("lower -w 'matmul(M=40, N=24, K=16)' -t cuda --trace " + dir + "/t.json");
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("__shared__"));
}

TEST(Cli, LowerPrintsTheProgramAfterEveryPass) {
  CliResult r = RunTessel(
      "lower -w 'softmax(rows=4, cols=64)' -t cuda --template --emit ir --print-after-all");
  ASSERT_EQ(r.status, 0) << r.output;
  // Each pass in order, then the --emit ir output.
  const size_t first = r.output.find("// after uniquify_loop_names: ");
  const size_t build = r.output.find("// after build_nests: ");
  const size_t vthread = r.output.find("// after inject_vthread: ");
  const size_t last = r.output.find("// after collect_kernel_params: ");
  const size_t all_reduce = r.output.find("// after lower_all_reduce: ");
  const size_t emitted = r.output.find("// workload softmax");
  ASSERT_NE(first, std::string::npos) << r.output;
  EXPECT_LT(first, build);
  EXPECT_LT(build, vthread);
  EXPECT_LT(vthread, last);
  EXPECT_LT(last, all_reduce);
  EXPECT_LT(all_reduce, emitted);
  EXPECT_NE(emitted, std::string::npos);
  // The stage passes print a program without kernels; build_nests the first kernels.
  EXPECT_EQ(r.output.substr(first, build - first).find("kernel "), std::string::npos);
  EXPECT_NE(r.output.substr(build, vthread - build).find("kernel tessel_softmax"),
            std::string::npos);
}

TEST(Cli, UnknownEmitIsAnError) {
  CliResult r = RunTessel("lower -w 'matmul(M=8, N=8, K=8)' --emit ptx");
  EXPECT_EQ(r.status, 1);
  EXPECT_THAT(r.output, HasSubstr("unknown --emit 'ptx'; use ir, cuda, cpp, json or trace"));
}

TEST(Cli, EmitMustMatchTarget) {
  CliResult r = RunTessel("lower -w 'matmul(M=8, N=8, K=8)' -t host --emit cuda");
  EXPECT_EQ(r.status, 1);
  EXPECT_THAT(r.output, HasSubstr("--emit cuda does not match --target host; use --emit cpp"));
}

TEST(Cli, TraceAndTemplateAreExclusive) {
  CliResult r = RunTessel("lower -w 'matmul(M=8, N=8, K=8)' --template --trace x.json");
  EXPECT_EQ(r.status, 1);
  EXPECT_THAT(r.output, HasSubstr("--trace and --template both give a schedule"));
}

TEST(Cli, EmitTraceNeedsASchedule) {
  CliResult r = RunTessel("lower -w 'matmul(M=8, N=8, K=8)' --emit trace");
  EXPECT_EQ(r.status, 1);
  EXPECT_THAT(r.output, HasSubstr("--emit trace needs a schedule: give --template or --trace"));
}

TEST(Cli, MissingTraceFileIsNamed) {
  CliResult r = RunTessel("lower -w 'matmul(M=8, N=8, K=8)' --trace /nonexistent/t.json");
  EXPECT_EQ(r.status, 1);
  EXPECT_THAT(r.output, HasSubstr("cannot read trace file '/nonexistent/t.json'"));
}

TEST(Cli, MalformedTraceFileIsNamed) {
  const std::string dir = MakeTempDir("tessel_cli");
  std::ofstream(dir + "/bad.json") << "{\"version\": 7, \"insts\": []}";
  CliResult r = RunTessel("lower -w 'matmul(M=8, N=8, K=8)' --trace " + dir + "/bad.json");
  EXPECT_EQ(r.status, 1);
  EXPECT_THAT(r.output, HasSubstr("bad.json: trace version 7 is not supported"));
}

TEST(Cli, TraceOfAnotherWorkloadFailsToReplay) {
  const std::string dir = MakeTempDir("tessel_cli");
  CliResult tr = RunTessel("lower -w 'softmax(rows=4, cols=64)' -t cuda --template --emit trace");
  ASSERT_EQ(tr.status, 0);
  std::ofstream(dir + "/t.json") << tr.output;
  CliResult r = RunTessel("lower -w 'matmul(M=8, N=8, K=8)' -t cuda --trace " + dir + "/t.json");
  EXPECT_EQ(r.status, 1);
  EXPECT_THAT(r.output, HasSubstr("replaying instruction 0"));
}

TEST(Cli, UnknownTargetAndArch) {
  CliResult t = RunTessel("lower -w 'matmul(M=8, N=8, K=8)' -t tpu");
  EXPECT_EQ(t.status, 1);
  EXPECT_THAT(t.output, HasSubstr("unknown target 'tpu'; use --target cuda or --target host"));
  CliResult a = RunTessel("lower -w 'matmul(M=8, N=8, K=8)' -t cuda --arch sm_75");
  EXPECT_EQ(a.status, 1);
  EXPECT_THAT(a.output, HasSubstr("unknown CUDA architecture 'sm_75'; use sm_80, sm_90 or sm_90a, "
                                  "the architectures Tessel has a built-in description of"));
  // Every command that takes --arch checks it the same way.
  for (const std::string cmd : {"sample -w 'matmul(M=8, N=8, K=8)' -t cuda -n 1",
                                "best --db /nonexistent.db -w "
                                "'matmul(M=8, N=8, K=8)' -t cuda"}) {
    CliResult r = RunTessel(cmd + " --arch sm_89");
    EXPECT_EQ(r.status, 1) << cmd;
    EXPECT_THAT(r.output, HasSubstr("unknown CUDA architecture 'sm_89'; use sm_80, sm_90 or "
                                    "sm_90a"))
        << cmd;
  }
}

// sm_90a is a target of its own: lowering, sampling and the candidate file say so.
TEST(Cli, Sm90aIsATargetOfItsOwn) {
  CliResult lower =
      RunTessel("lower -w 'matmul(M=64, N=64, K=64)' -t cuda --arch sm_90a --emit json");
  ASSERT_EQ(lower.status, 0) << lower.output;
  EXPECT_THAT(lower.output, HasSubstr("\"arch\": \"sm_90a\""));
  CliResult sample = RunTessel("sample -w 'matmul(M=64, N=64, K=64)' -t cuda --arch sm_90a -n 4");
  ASSERT_EQ(sample.status, 0) << sample.output;
  EXPECT_THAT(sample.output, HasSubstr("cuda -arch=sm_90a"));
  CliResult help = RunTessel("submit --help");
  EXPECT_THAT(help.output, HasSubstr("sm_80, sm_90 or sm_90a"));
}

TEST(Cli, BadWorkloadSpecIsReported) {
  CliResult r = RunTessel("lower -w 'matmul(M=8, N=8)'");
  EXPECT_EQ(r.status, 1);
  EXPECT_THAT(r.output, HasSubstr("tessel lower: "));
  EXPECT_THAT(r.output, HasSubstr("K"));
}

TEST(Cli, TuneOnTheHostRunsAJobAndStoresItsResults) {
  const std::string dir = MakeTempDir("tune");
  CliResult r = RunTessel("tune -t host -q -n 4 --seed 7 --db " + dir +
                          "/log.db -w 'matmul(M=16, N=24, K=8)'");
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("4/4 trials"));
  EXPECT_THAT(r.output, HasSubstr("matmul(M=16, N=24, K=8, batch=1"));
  EXPECT_THAT(r.output, HasSubstr("results are in the tuning log " + dir + "/log.db"));
  EXPECT_THAT(r.output, HasSubstr("tessel best --db " + dir + "/log.db"));
  // The log holds them: the best record of the workload is there.
  CliResult best =
      RunTessel("best --db " + dir + "/log.db -w 'matmul(M=16, N=24, K=8)' -t host --emit summary");
  EXPECT_EQ(best.status, 0) << best.output;
}

TEST(Cli, TuneRefusesZeroTrials) {
  const std::string dir = MakeTempDir("tune0");
  CliResult r = RunTessel("tune -t host -n 0 --db " + dir + "/log.db");
  EXPECT_EQ(r.status, 1);
  EXPECT_THAT(r.output, HasSubstr("--trials 0: tune needs at least 1 trial per workload"));
}

TEST(Cli, TuneCudaWithoutGpuSaysSo) {
  const std::string dir = MakeTempDir("tunecuda");
  CliResult r =
      RunTessel("tune -t cuda -q -n 1 --db " + dir + "/log.db -w 'matmul(M=8, N=8, K=8)'");
  if (r.status == 0) GTEST_SKIP() << "this machine has a GPU";
  EXPECT_THAT(r.output, HasSubstr("--target cuda needs a CUDA GPU and driver"));
}

TEST(Cli, SampleWritesCandidatesAndCounts) {
  const std::string dir = MakeTempDir("sample");
  CliResult r =
      RunTessel("sample -w 'softmax(rows=200, cols=300)' -t cuda -n 6 --seed 3 --out " + dir);
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("softmax(rows=200, cols=300, dtype=f32) on cuda -arch=sm_90: 2 "
                                  "sketches; 6 of 6 samples valid"));
  EXPECT_THAT(r.output, HasSubstr("candidates written to " + dir));
  std::ifstream json(dir + "/cand_000003.json");
  EXPECT_TRUE(json.good());
  std::ifstream cu(dir + "/cand_000008.cu");
  EXPECT_TRUE(cu.good());
}

TEST(Cli, SampleReportsRejections) {
  CliResult r = RunTessel("sample -w 'matmul(M=64, N=64, K=64)' -t host -n 3");
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("3 of 3 samples valid"));
}

TEST(Cli, SampleNeedsAPositiveCount) {
  CliResult r = RunTessel("sample -w 'matmul(M=64, N=64, K=64)' -n 0");
  EXPECT_EQ(r.status, 1);
  EXPECT_THAT(r.output,
              HasSubstr("tessel sample: -n 0 asks for no samples; give a positive count"));
}

TEST(Cli, SampleBadWorkloadAndTarget) {
  CliResult w = RunTessel("sample -w 'matmull(M=1)' -n 1");
  EXPECT_EQ(w.status, 1);
  EXPECT_THAT(
      w.output,
      HasSubstr("tessel sample: unknown workload family 'matmull'; known families: matmul"));
  CliResult t = RunTessel("sample -w 'matmul(M=8, N=8, K=8)' -t tpu -n 1");
  EXPECT_EQ(t.status, 1);
  EXPECT_THAT(t.output, HasSubstr("unknown target 'tpu'; use --target cuda or --target host"));
}

TEST(Cli, SampleUnwritableOutDirectory) {
  CliResult r = RunTessel("sample -w 'matmul(M=8, N=8, K=8)' -n 1 --out /proc/tessel-no");
  EXPECT_EQ(r.status, 1);
  EXPECT_THAT(r.output, HasSubstr("cannot create directory '/proc/tessel-no'"));
  EXPECT_THAT(r.output, HasSubstr("choose another --out directory"));
}

}  // namespace
}  // namespace tessel::testing
