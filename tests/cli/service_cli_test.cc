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
#include "tests/server/server_test_util.h"
#include "tests/store/store_test_util.h"
#include "tests/test_util.h"
#include "tests/worker/worker_test_util.h"

namespace tessel::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

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
  void SignalServer(int sig) { server_->Signal(sig); }

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
  CliResult timeout = RunTessel("jobs -s 127.0.0.1:1 --timeout 0");
  EXPECT_EQ(timeout.status, 1);
  EXPECT_THAT(timeout.output,
              HasSubstr("tessel jobs: --timeout 0: give a positive number of seconds to wait"));
  CliResult addr = RunTessel("workers -s nonsense");
  EXPECT_EQ(addr.status, 1);
  EXPECT_THAT(addr.output, HasSubstr("tessel workers: "));
  EXPECT_THAT(addr.output, HasSubstr("nonsense"));
}

// Issue 20, point 8: a server that answers too slowly was reported as absent ("no Tessel server
// answers"). A stopped server accepts connections but answers nothing: the client is told the
// server is busy, with the deadline and the flag that raises it.
TEST(ServiceCli, AServerTooSlowToAnswerIsCalledBusyNotAbsent) {
  Service service;
  ASSERT_FALSE(service.address().empty()) << service.Logs();
  service.SignalServer(SIGSTOP);
  CliResult slow = RunTessel("jobs -s " + service.address() + " --timeout 1");
  service.SignalServer(SIGCONT);
  EXPECT_EQ(slow.status, 1);
  EXPECT_THAT(slow.output, HasSubstr("tessel jobs: the server at " + service.address() +
                                     " is busy (deadline of 1 s exceeded): retry, or raise "
                                     "--timeout"));
  EXPECT_THAT(slow.output, Not(HasSubstr("no Tessel server answers")));
  CliResult again = RunTessel("jobs -s " + service.address() + " --timeout 1");
  EXPECT_EQ(again.status, 0) << again.output;
  EXPECT_THAT(again.output, HasSubstr("no jobs"));
}

// Issue 20, point 8: `submit --wait` gave up when its server restarted (exit 1, "no Tessel server
// answers") although the job completed. submit --wait and status --wait now reattach to the
// same job, which the restarted server resumes from its log; one that may not wait that long
// gives up saying how to follow the job again.
TEST(ServiceCli, SubmitAndStatusWaitReattachAfterTheServerRestarts) {
  const std::string dir = MakeTempDir("tessel_reattach");
  const std::string db = dir + "/log.db";
  std::string address;
  auto serve = StartServe(db, "127.0.0.1:0", {"--batch-size", "2"}, dir + "/serve1.log", &address);
  ASSERT_FALSE(address.empty()) << serve->Log();
  auto worker = StartHostWorker(address, dir, "w", 1);
  const std::string s = " -s " + address;
  TesselProcess submit({"submit", "-s", address, "-w", "softmax(rows=8, cols=64)", "-t", "host",
                        "--trials", "30", "--batch-size", "2", "--seed", "5", "--wait"},
                       dir + "/submit.log");
  auto records = [&] { return std::stoi("0" + RawQuery(db, "SELECT count(*) FROM records")); };
  ASSERT_TRUE(WaitUntil([&] { return records() >= 2; }, absl::Seconds(30)))
      << submit.Log() << serve->Log() << worker->Log();
  TesselProcess status({"status", "1", "-s", address, "--wait"}, dir + "/status.log");
  TesselProcess impatient({"status", "1", "-s", address, "--wait", "--reattach-s", "1"},
                          dir + "/impatient.log");
  ASSERT_TRUE(WaitUntil(
      [&] {
        return status.Log().find("trials") != std::string::npos &&
               impatient.Log().find("trials") != std::string::npos;
      },
      absl::Seconds(20)))
      << status.Log() << impatient.Log();
  ASSERT_LT(records(), 30) << "the job ended before the restart";

  serve->Signal(SIGKILL);
  serve->Wait(absl::Seconds(5));
  // Down for longer than the impatient watcher waits.
  EXPECT_EQ(impatient.Wait(absl::Seconds(30)), 1) << impatient.Log();
  serve = std::make_unique<TesselProcess>(
      std::vector<std::string>{"serve", "--db", db, "--listen", address, "--batch-size", "2",
                               "--min-repeats", "3", "--max-repeats", "3", "--min-total-ms", "0",
                               "--no-flush"},
      dir + "/serve2.log");
  EXPECT_EQ(submit.Wait(absl::Seconds(120)), 0) << submit.Log() << serve->Log();
  EXPECT_EQ(status.Wait(absl::Seconds(30)), 0) << status.Log();
  const std::string lost =
      "lost the server at " + address + "; trying again for up to 120 s to follow job 1\n";
  EXPECT_THAT(submit.Log(), HasSubstr("tessel submit: " + lost));
  EXPECT_THAT(submit.Log(), HasSubstr("tessel submit: reattached to job 1 at " + address + "\n"));
  EXPECT_THAT(submit.Log(), HasSubstr("30/30 trials"));
  EXPECT_THAT(submit.Log(), HasSubstr("job 1: done"));
  EXPECT_THAT(status.Log(), HasSubstr("tessel status: " + lost));
  EXPECT_THAT(status.Log(), HasSubstr("tessel status: reattached to job 1 at " + address));
  EXPECT_THAT(status.Log(), HasSubstr("job 1: done"));
  EXPECT_THAT(impatient.Log(), HasSubstr("tessel status: lost the server at " + address +
                                         "; trying again for up to 1 s to follow job 1"));
  EXPECT_THAT(impatient.Log(), HasSubstr("tessel status: no Tessel server answers at " + address));
  EXPECT_THAT(impatient.Log(),
              HasSubstr("; gave up following job 1 after 1 s: the job stays in the log and "
                        "resumes when a server on it starts (`tessel status 1 --wait` follows it "
                        "again)"));
  EXPECT_EQ(records(), 30);
}

// Issue 20, point 9: a CUDA job with no CUDA worker waited without a word. The job says what it
// waits for, in submit and in status (and on submit --wait's progress line), while no connected
// worker can measure its target; a host job, which the connected host worker serves, has no
// warning.
TEST(ServiceCli, AJobNoConnectedWorkerCanMeasureSaysSo) {
  Service service;
  ASSERT_FALSE(service.address().empty()) << service.Logs();
  const std::string s = " -s " + service.address();
  const std::string warning =
      "no connected worker can measure cuda -arch=sm_90: the job waits until one connects "
      "(tessel worker --server HOST:PORT on a machine with an sm_90 GPU)";
  CliResult submit =
      RunTessel("submit" + s + " -w 'softmax(rows=8, cols=64)' -t cuda --arch sm_90 --trials 4");
  ASSERT_EQ(submit.status, 0) << submit.output;
  EXPECT_THAT(submit.output, HasSubstr("job 1 submitted to " + service.address()));
  EXPECT_THAT(submit.output, HasSubstr("tessel submit: warning: " + warning));
  CliResult status = RunTessel("status 1" + s);
  EXPECT_EQ(status.status, 0) << status.output;
  EXPECT_THAT(status.output, HasSubstr("\n  warning: " + warning + "\n"));
  CliResult cancel = RunTessel("cancel 1" + s);
  EXPECT_EQ(cancel.status, 0) << cancel.output;
  EXPECT_THAT(cancel.output, Not(HasSubstr("warning")));  // finished: nothing to wait for
  ASSERT_TRUE(WaitUntil(
      [&] { return RunTessel("workers" + s).output.find("cli-test-worker") != std::string::npos; },
      absl::Seconds(20)))
      << service.Logs();
  CliResult host = RunTessel("submit" + s + " -w 'softmax(rows=8, cols=64)' -t host --trials 2");
  ASSERT_EQ(host.status, 0) << host.output;
  EXPECT_THAT(host.output, Not(HasSubstr("warning")));
}

// Issue 20, point 9: `status` showed "done 64/240" without saying why the budget was not spent.
// A task whose design space runs out says so under the task table.
TEST(ServiceCli, ATaskWhoseDesignSpaceRanDrySaysSo) {
  Service service;
  ASSERT_FALSE(service.address().empty()) << service.Logs();
  const std::string s = " -s " + service.address();
  // A 1x1x1 matmul has a handful of schedules on the host.
  CliResult submit = RunTessel("submit" + s +
                               " -w 'matmul(M=1, N=1, K=1)' -t host --trials 200 --strategy "
                               "random --seed 3 --wait");
  ASSERT_EQ(submit.status, 0) << submit.output << service.Logs();
  const std::regex note(
      "\n  task 1 stopped at ([0-9]+) of 200 trials: its design space has no new candidate "
      "\\(every schedule it can make was measured\\)\n");
  std::smatch m;
  ASSERT_TRUE(std::regex_search(submit.output, m, note)) << submit.output;
  EXPECT_LT(std::stoi(m[1]), 200);
  EXPECT_THAT(submit.output, HasSubstr("job 1: done"));
  CliResult status = RunTessel("status 1" + s);
  EXPECT_TRUE(std::regex_search(status.output, note)) << status.output;
}

TEST(ServiceCli, ANegativeReattachTimeIsRefused) {
  CliResult submit = RunTessel(
      "submit -s 127.0.0.1:1 -w 'softmax(rows=8, cols=64)' --trials 2 --wait "
      "--reattach-s -1");
  EXPECT_EQ(submit.status, 1);
  EXPECT_THAT(
      submit.output,
      HasSubstr("tessel submit: --reattach-s -1: give 0 (do not reattach) or more seconds"));
  CliResult status = RunTessel("status 1 -s 127.0.0.1:1 --wait --reattach-s -1");
  EXPECT_EQ(status.status, 1);
  EXPECT_THAT(
      status.output,
      HasSubstr("tessel status: --reattach-s -1: give 0 (do not reattach) or more seconds"));
}

}  // namespace
}  // namespace tessel::testing
