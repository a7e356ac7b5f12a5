// Issue 22: giving a job baselines from the command line (`--baseline SPEC=MS`, `--baselines FILE`
// with the TSV bench/torch_baselines.py prints, `--baseline-label`), for `tessel submit` and
// `tessel tune`: every mistake is named, with the flag or the file's line and the fix, before
// anything is submitted; a good baseline reaches the job and its final table.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "tests/cli/cli_test_util.h"
#include "tests/test_util.h"

namespace tessel::testing {
namespace {

using ::testing::HasSubstr;

constexpr char kMatmul[] = "matmul(M=32, N=32, K=32)";
constexpr char kSoftmax[] = "softmax(rows=8, cols=64)";
constexpr char kFix[] = " (write SPEC=MS, e.g. --baseline 'matmul(M=1024, N=1024, K=1024)=0.42')";

class BaselineCli : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = MakeTempDir("tessel_baseline_cli_"); }
  // `tessel submit` of kMatmul and kSoftmax with `flags`, to a port where no server listens: a
  // baseline error must come before any connection.
  CliResult Submit(const std::string& flags) {
    return RunTessel(absl::StrCat("submit --server 127.0.0.1:1 --trials 4 --workload '", kMatmul,
                                  "' --workload '", kSoftmax, "' ", flags));
  }
  std::string File(const std::string& name, const std::string& text) {
    const std::string path = dir_ + "/" + name;
    std::ofstream(path) << text;
    return path;
  }
  // The one line `r` printed, which must be an error.
  static std::string Error(const CliResult& r) {
    EXPECT_EQ(r.status, 1) << r.output;
    return r.output;
  }
  std::string dir_;
};

TEST_F(BaselineCli, ASpecThatIsNotOneOfTheJobsWorkloads) {
  EXPECT_EQ(Error(Submit("--baseline 'softmax(rows=8, cols=128)=0.5'")),
            absl::StrCat("tessel submit: --baseline 'softmax(rows=8, cols=128)=0.5': "
                         "'softmax(rows=8, cols=128)' is not one of the job's workloads ('",
                         kMatmul, "', '", kSoftmax,
                         "'); give a baseline only for a workload passed to --workload, spelled "
                         "as there\n"));
}

TEST_F(BaselineCli, ALatencyThatIsNotANumber) {
  EXPECT_EQ(Error(Submit(absl::StrCat("--baseline '", kMatmul, "=fast'"))),
            absl::StrCat("tessel submit: --baseline '", kMatmul,
                         "=fast': 'fast' is not a number of milliseconds; give one such as 0.42",
                         kFix, "\n"));
  // A spec without =MS splits at its own last '='.
  EXPECT_EQ(
      Error(Submit(absl::StrCat("--baseline '", kMatmul, "'"))),
      absl::StrCat("tessel submit: --baseline '", kMatmul,
                   "': '32)' is not a number of milliseconds; give one such as 0.42", kFix, "\n"));
  EXPECT_EQ(Error(Submit(absl::StrCat("--baseline '", kMatmul, "=inf'"))),
            absl::StrCat("tessel submit: --baseline '", kMatmul,
                         "=inf': 'inf' is not a number of milliseconds; give one such as 0.42",
                         kFix, "\n"));
}

TEST_F(BaselineCli, AFlagWithoutSpecOrEquals) {
  const std::string fix =
      " is not SPEC=MS: give the workload as passed to --workload, '=', and its latency in "
      "milliseconds, e.g. --baseline 'matmul(M=1024, N=1024, K=1024)=0.42'\n";
  EXPECT_EQ(Error(Submit("--baseline 0.5")), "tessel submit: --baseline '0.5'" + fix);
  EXPECT_EQ(Error(Submit("--baseline =0.5")), "tessel submit: --baseline '=0.5'" + fix);
}

TEST_F(BaselineCli, ALatencyThatIsNotPositive) {
  for (const char* ms : {"0", "-1.5"}) {
    EXPECT_EQ(Error(Submit(absl::StrCat("--baseline '", kMatmul, "=", ms, "'"))),
              absl::StrCat("tessel submit: --baseline '", kMatmul, "=", ms, "': ", ms,
                           " ms is not positive; a baseline is the latency of a run, e.g. 0.42",
                           kFix, "\n"));
  }
}

TEST_F(BaselineCli, AFileThatCannotBeRead) {
  const std::string missing = dir_ + "/none.tsv";
  EXPECT_EQ(Error(Submit("--baselines " + missing)),
            absl::StrCat("tessel submit: cannot read --baselines ", missing,
                         ": No such file or directory; give the file bench/torch_baselines.py's "
                         "output was saved to (python3 bench/torch_baselines.py SPEC... > "
                         "baselines.tsv)\n"));
}

TEST_F(BaselineCli, AMalformedLineIsNamedByItsNumber) {
  const std::string f =
      File("a.tsv", absl::StrCat("# from torch_baselines.py\n\n", kMatmul, " 0.5 100\n"));
  EXPECT_EQ(Error(Submit("--baselines " + f)),
            absl::StrCat("tessel submit: ", f,
                         " line 3 is not SPEC<TAB>median_ms<TAB>repeats (found 1 tab-separated "
                         "fields in '",
                         kMatmul,
                         " 0.5 100'); give the lines bench/torch_baselines.py prints, one per "
                         "workload\n"));
  const std::string g = File("b.tsv", absl::StrCat(kMatmul, "\t0.5\t100\textra\n"));
  EXPECT_THAT(Error(Submit("--baselines " + g)),
              HasSubstr(g + " line 1 is not SPEC<TAB>median_ms<TAB>repeats (found 4 "));
}

TEST_F(BaselineCli, ABadLatencyOrRepeatsInTheFileIsNamedByItsLine) {
  const std::string f =
      File("a.tsv", absl::StrCat(kSoftmax, "\t0.25\t100\n", kMatmul, "\tn/a\t100\n"));
  EXPECT_EQ(Error(Submit("--baselines " + f)),
            absl::StrCat("tessel submit: ", f,
                         " line 2, median_ms: 'n/a' is not a number of milliseconds; give one "
                         "such as 0.42\n"));
  const std::string g = File("b.tsv", absl::StrCat(kMatmul, "\t-3\t100\n"));
  EXPECT_EQ(Error(Submit("--baselines " + g)),
            absl::StrCat("tessel submit: ", g,
                         " line 1, median_ms: -3 ms is not positive; a baseline is the latency of "
                         "a run, e.g. 0.42\n"));
  const std::string h = File("c.tsv", absl::StrCat(kMatmul, "\t0.5\tmany\n"));
  EXPECT_EQ(Error(Submit("--baselines " + h)),
            absl::StrCat("tessel submit: ", h,
                         " line 1, repeats: 'many' is not a positive count of runs; give the lines "
                         "bench/torch_baselines.py prints, or leave the third field out\n"));
  // A line for a workload the job does not list.
  const std::string u = File("d.tsv", "layernorm(rows=8, cols=64)\t0.5\t100\n");
  EXPECT_THAT(Error(Submit("--baselines " + u)),
              HasSubstr(u + " line 1: 'layernorm(rows=8, cols=64)' is not one of the job's "
                            "workloads"));
}

TEST_F(BaselineCli, AWorkloadGivenTwoBaselines) {
  const std::string f = File("a.tsv", absl::StrCat(kMatmul, "\t0.5\t100\n"));
  // The second names it in another spelling (same key).
  EXPECT_EQ(Error(Submit(absl::StrCat("--baseline '", kMatmul, "=0.4' --baselines ", f))),
            absl::StrCat("tessel submit: ", f, " line 1: workload '", kMatmul,
                         "' already has a baseline (--baseline '", kMatmul,
                         "=0.4'); give each workload one\n"));
  EXPECT_THAT(Error(Submit(absl::StrCat("--baseline '", kMatmul,
                                        "=0.4' --baseline 'matmul(K=32, N=32, M=32)=0.3'"))),
              HasSubstr("--baseline 'matmul(K=32, N=32, M=32)=0.3': workload 'matmul(K=32, N=32, "
                        "M=32)' already has a baseline"));
}

TEST_F(BaselineCli, ABadLabel) {
  const std::string b = absl::StrCat("--baseline '", kMatmul, "=0.4' ");
  EXPECT_EQ(Error(Submit(b + "--baseline-label ''")),
            "tessel submit: --baseline-label '' is empty: name what the baselines measured in at "
            "most 64 bytes, e.g. cuBLAS\n");
  EXPECT_EQ(Error(Submit(b + "--baseline-label " + std::string(65, 'x'))),
            "tessel submit: --baseline-label '" + std::string(65, 'x') +
                "' is not one short line: name what the baselines measured in at most 64 bytes, "
                "e.g. cuBLAS\n");
  EXPECT_EQ(Error(Submit(b + "--baseline-label \"$(printf 'a\\tb')\"")),
            "tessel submit: --baseline-label has a control character (a line break?): give one "
            "line of text, e.g. cuBLAS\n");
}

// tessel tune checks the same flags before its server starts, and shows the ratio in its table.
TEST_F(BaselineCli, TuneChecksBaselinesAndShowsTheRatio) {
  const std::string db = dir_ + "/tune.db";
  CliResult bad = RunTessel(absl::StrCat("tune --target host --db ", db, " --workload '", kMatmul,
                                         "' --baseline '", kSoftmax, "=1'"));
  EXPECT_EQ(bad.output, absl::StrCat("tessel tune: --baseline '", kSoftmax, "=1': '", kSoftmax,
                                     "' is not one of the job's workloads ('", kMatmul,
                                     "'); give a baseline only for a workload passed to "
                                     "--workload, spelled as there\n"));
  EXPECT_EQ(bad.status, 1);
  const std::string f = File(
      "t.tsv", absl::StrCat("# SPEC\tmedian_ms\trepeats\nmatmul(K=32, N=32, M=32)\t0.001\t100\n"));
  CliResult good = RunTessel(absl::StrCat("tune --target host --trials 4 --quiet --db ", db,
                                          " --workload '", kMatmul, "' --workload '", kSoftmax,
                                          "' --baselines ", f, " --baseline-label cuBLAS"));
  ASSERT_EQ(good.status, 0) << good.output;
  EXPECT_THAT(good.output, HasSubstr("vs baseline"));
  EXPECT_THAT(good.output, HasSubstr("task 1: cuBLAS 0.001 ms"));
  EXPECT_THAT(good.output, HasSubstr("x\n"));  // the matmul task's ratio ends its row
}

}  // namespace
}  // namespace tessel::testing
