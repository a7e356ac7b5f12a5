// The service as a user drives it from the shell: `tessel serve` and `tessel worker` processes,
// and the client commands (submit --wait, jobs, status, workers, cancel, best --server) with
// their outputs and error messages.

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <memory>
#include <regex>
#include <string>

#include "tests/cli/cli_test_util.h"
#include "tests/test_util.h"
#include "tests/worker/worker_test_util.h"

namespace tessel::testing {
namespace {

using ::testing::HasSubstr;

// A `tessel serve` on a free loopback port over a log in a temp dir, and one host worker.
class Service {
 public:
  Service() : dir_(MakeTempDir("service")) {
    server_ = std::make_unique<TesselProcess>(
        std::vector<std::string>{"serve", "--db", db(), "--listen", "127.0.0.1:0", "--max-repeats",
                                 "5", "--min-total-ms", "1"},
        dir_ + "/serve.log");
    const absl::Time deadline = absl::Now() + absl::Seconds(20);
    const std::regex listening("listening on (127\\.0\\.0\\.1:[0-9]+)");
    std::smatch m;
    while (absl::Now() < deadline) {
      const std::string log = server_->Log();
      if (std::regex_search(log, m, listening)) {
        address_ = m[1];
        break;
      }
      absl::SleepFor(absl::Milliseconds(20));
    }
    if (address_.empty()) return;
    worker_ = std::make_unique<TesselProcess>(
        std::vector<std::string>{"worker", "--server", address_, "--target", "host", "--worker-id",
                                 "cli-test-worker", "--heartbeat-s", "0.5", "--cache",
                                 dir_ + "/cache"},
        dir_ + "/worker.log");
  }
  const std::string& address() const { return address_; }
  std::string db() const { return dir_ + "/log.db"; }
  std::string Logs() const { return server_->Log() + "\n--- worker\n" + worker_->Log(); }

 private:
  std::string dir_;
  std::string address_;
  std::unique_ptr<TesselProcess> server_;
  std::unique_ptr<TesselProcess> worker_;
};

TEST(ServiceCli, SubmitWaitThenJobsStatusWorkersAndBest) {
  Service service;
  ASSERT_FALSE(service.address().empty()) << service.Logs();
  const std::string s = " -s " + service.address();
  CliResult submit =
      RunTessel("submit" + s + " -w 'matmul(M=16, N=16, K=16)' -t host --trials 6 --seed 3 --wait");
  ASSERT_EQ(submit.status, 0) << submit.output << service.Logs();
  EXPECT_THAT(submit.output, HasSubstr("job 1 submitted to " + service.address()));
  EXPECT_THAT(submit.output, HasSubstr("6/6 trials"));
  EXPECT_THAT(submit.output, HasSubstr("matmul(M=16, N=16, K=16, batch=1"));
  EXPECT_THAT(submit.output, HasSubstr("GB/s"));  // a 16^3 matmul is bound by its bytes

  CliResult jobs = RunTessel("jobs" + s);
  EXPECT_EQ(jobs.status, 0) << jobs.output;
  EXPECT_THAT(jobs.output, HasSubstr("done"));
  CliResult status = RunTessel("status 1" + s);
  EXPECT_EQ(status.status, 0) << status.output;
  EXPECT_THAT(status.output, HasSubstr("job 1: done, target host, strategy evolutionary"));
  CliResult workers = RunTessel("workers" + s);
  EXPECT_EQ(workers.status, 0) << workers.output;
  EXPECT_THAT(workers.output, HasSubstr("cli-test-worker"));

  // The source only (stderr names the match, which differs: the server does not match devices).
  CliResult best = RunTessel(
      "best --server " + service.address() + " -w 'matmul(M=16, N=16, K=16)' -t host --emit cpp",
      false);
  EXPECT_EQ(best.status, 0) << best.output;
  EXPECT_THAT(best.output, HasSubstr("extern \"C\""));
  CliResult from_db = RunTessel(
      "best --db " + service.db() + " -w 'matmul(M=16, N=16, K=16)' -t host --emit cpp", false);
  EXPECT_EQ(from_db.status, 0) << from_db.output;
  EXPECT_EQ(from_db.output, best.output);
}

TEST(ServiceCli, ErrorsNameTheProblem) {
  Service service;
  ASSERT_FALSE(service.address().empty()) << service.Logs();
  const std::string s = " -s " + service.address();
  CliResult missing = RunTessel("status 99" + s);
  EXPECT_EQ(missing.status, 1);
  EXPECT_THAT(missing.output, HasSubstr("tessel status: "));
  EXPECT_THAT(missing.output, HasSubstr("99"));
  CliResult cancel = RunTessel("cancel 42" + s);
  EXPECT_EQ(cancel.status, 1);
  EXPECT_THAT(cancel.output, HasSubstr("42"));
  CliResult bad = RunTessel("submit" + s + " -w 'matmul(M=0, N=4, K=4)' -t host --trials 4");
  EXPECT_EQ(bad.status, 1);
  EXPECT_THAT(bad.output, HasSubstr("tessel submit: "));
  EXPECT_THAT(bad.output, HasSubstr("M"));
  CliResult zero = RunTessel("submit" + s + " -w 'matmul(M=8, N=4, K=4)' -t host");
  EXPECT_EQ(zero.status, 1);
  EXPECT_THAT(zero.output, HasSubstr("trials"));
  CliResult not_a_file = RunTessel("submit" + s + " -w no_such_workload.tsl -t host --trials 4");
  EXPECT_EQ(not_a_file.status, 1);
  EXPECT_THAT(not_a_file.output,
              HasSubstr("--workload 'no_such_workload.tsl' is neither a built-in spec"));
  CliResult nothing =
      RunTessel("best --server " + service.address() + " -w 'softmax(rows=4, cols=8)' -t host");
  EXPECT_EQ(nothing.status, 1);
  // The log is untouched by the refused requests: no job was created.
  CliResult jobs = RunTessel("jobs" + s);
  EXPECT_THAT(jobs.output, HasSubstr("no jobs; submit one with tessel submit"));
}

TEST(ServiceCli, AServerThatIsNotThereIsNamedWithTheFix) {
  CliResult r = RunTessel("jobs -s 127.0.0.1:1");
  EXPECT_EQ(r.status, 1);
  EXPECT_THAT(r.output, HasSubstr("no Tessel server answers at 127.0.0.1:1"));
  EXPECT_THAT(r.output, HasSubstr("tessel serve --db FILE --listen 127.0.0.1:1"));
  CliResult addr = RunTessel("workers -s nonsense");
  EXPECT_EQ(addr.status, 1);
  EXPECT_THAT(addr.output, HasSubstr("tessel workers: "));
  EXPECT_THAT(addr.output, HasSubstr("nonsense"));
}

}  // namespace
}  // namespace tessel::testing
