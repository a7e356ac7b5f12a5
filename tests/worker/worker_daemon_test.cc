// A real `tessel worker` process driven through the worker protocol by a fake server on a
// loopback port: registration, credits, batches, results, heartbeats, planted host faults,
// reconnects, SIGTERM drain and version mismatches.

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "schedules/util/check.h"
#include "tests/test_util.h"
#include "tests/worker/worker_test_util.h"
#include "worker/daemon/worker_daemon.h"

namespace tessel::testing {
namespace {

using ::testing::HasSubstr;

// Worker flags for fast tests: frequent heartbeats, quick reconnects, a private compile cache.
std::vector<std::string> WorkerArgs(const std::string& address, const std::string& dir) {
  return {"worker",
          "--server",
          address,
          "--target",
          "host",
          "--cache",
          dir + "/cache",
          "--heartbeat-s",
          "0.1",
          "--reconnect-initial-s",
          "0.05",
          "--reconnect-max-s",
          "0.2",
          "--worker-id",
          "test-worker",
          "--compile-threads",
          "2"};
}

bool IsRegister(const proto::WorkerMessage& m) { return m.has_register_(); }

TEST(WorkerDaemon, RegistersMeasuresAndHeartbeats) {
  const std::string dir = MakeTempDir("tessel_worker");
  auto server = FakeWorkerServer::Start();
  ASSERT_NE(server, nullptr);
  TesselProcess worker(WorkerArgs(server->address(), dir), dir + "/worker.log");
  ASSERT_TRUE(worker.started());

  std::optional<proto::WorkerMessage> reg = server->WaitFor(IsRegister);
  ASSERT_TRUE(reg.has_value()) << worker.Log();
  EXPECT_EQ(reg->register_().protocol_version(), proto::kWorkerProtocolVersion);
  EXPECT_EQ(reg->register_().worker_id(), "test-worker");
  EXPECT_EQ(reg->register_().version(), "0.1.0");
  ASSERT_EQ(reg->register_().devices_size(), 1);
  EXPECT_EQ(reg->register_().devices(0).kind(), proto::TARGET_KIND_HOST);
  EXPECT_GE(reg->register_().devices(0).cores(), 1);
  EXPECT_FALSE(reg->register_().devices(0).name().empty());
  std::optional<proto::WorkerMessage> credits =
      server->WaitFor([](const proto::WorkerMessage& m) { return m.has_credits(); });
  ASSERT_TRUE(credits.has_value());
  // Not told, it sizes its credits to its compile pool (--compile-threads 2) and its device.
  EXPECT_EQ(credits->credits().batches(), static_cast<uint32_t>(worker::WorkerCredits(2, 1)));

  const schedules::GeneratedSource ref = HostMatmulSource();
  ASSERT_TRUE(server->Send(
      MakeBatch(1, {PlantHostFault(ref, Plant::kNone, "a"), PlantHostFault(ref, Plant::kNone, "b")},
                ref, FastMeasureOptions())));
  std::vector<proto::MeasureResult> results = server->WaitForResults(1, 2);
  ASSERT_EQ(results.size(), 2u) << worker.Log();
  for (const proto::MeasureResult& r : results) {
    EXPECT_EQ(r.status(), proto::MEASURE_STATUS_OK) << r.error();
    EXPECT_EQ(r.repeats_ms_size(), 3);
    EXPECT_GT(r.median_ms(), 0);
    EXPECT_EQ(r.worker_id(), "test-worker");
    EXPECT_FALSE(r.device_name().empty());
  }
  EXPECT_EQ(results[0].candidate_id(), 100u);
  EXPECT_EQ(results[1].candidate_id(), 101u);
  // The batch is done and its credit comes back.
  size_t done_at = 0;
  ASSERT_TRUE(server
                  ->WaitFor([](const proto::WorkerMessage& m) { return m.has_batch_done(); },
                            absl::Seconds(10), 0, &done_at)
                  .has_value());
  EXPECT_TRUE(server
                  ->WaitFor([](const proto::WorkerMessage& m) { return m.has_credits(); },
                            absl::Seconds(10), done_at)
                  .has_value());
  // Heartbeats keep coming.
  size_t first_beat = 0;
  ASSERT_TRUE(server
                  ->WaitFor([](const proto::WorkerMessage& m) { return m.has_heartbeat(); },
                            absl::Seconds(10), 0, &first_beat)
                  .has_value());
  std::optional<proto::WorkerMessage> beat =
      server->WaitFor([](const proto::WorkerMessage& m) { return m.has_heartbeat(); },
                      absl::Seconds(10), first_beat + 1);
  ASSERT_TRUE(beat.has_value());
  EXPECT_GT(beat->heartbeat().unix_ms(), 0);

  worker.Signal(SIGTERM);
  EXPECT_EQ(worker.Wait(absl::Seconds(20)), 0) << worker.Log();
  EXPECT_THAT(worker.Log(), HasSubstr("registered with " + server->address()));
  EXPECT_THAT(worker.Log(), HasSubstr("batch 1 candidate 100: ok"));
}

TEST(WorkerDaemon, PlantedHostFaultsGetTheirStatusAndTheWorkerKeepsServing) {
  const std::string dir = MakeTempDir("tessel_worker");
  auto server = FakeWorkerServer::Start();
  ASSERT_NE(server, nullptr);
  TesselProcess worker(WorkerArgs(server->address(), dir), dir + "/worker.log");
  ASSERT_TRUE(server->WaitFor(IsRegister).has_value()) << worker.Log();

  const schedules::GeneratedSource ref = HostMatmulSource();
  ASSERT_TRUE(server->Send(MakeBatch(
      7,
      {PlantHostFault(ref, Plant::kSegfault, "segv"), PlantHostFault(ref, Plant::kHang, "hang"),
       PlantHostFault(ref, Plant::kWrongAnswer, "wrong"),
       PlantHostFault(ref, Plant::kCompileError, "bad"), PlantHostFault(ref, Plant::kNone, "good")},
      ref, FastMeasureOptions(/*timeout_s=*/1.5))));
  std::vector<proto::MeasureResult> r = server->WaitForResults(7, 5);
  ASSERT_EQ(r.size(), 5u) << worker.Log();
  EXPECT_EQ(r[0].status(), proto::MEASURE_STATUS_RUNTIME_ERROR) << r[0].error();
  EXPECT_THAT(r[0].error(), HasSubstr("crashed the measuring process (killed by signal 11"));
  EXPECT_EQ(r[1].status(), proto::MEASURE_STATUS_TIMEOUT) << r[1].error();
  EXPECT_THAT(r[1].error(), HasSubstr("ran past the 1.5 s time limit"));
  EXPECT_EQ(r[2].status(), proto::MEASURE_STATUS_VERIFY_FAILED) << r[2].error();
  EXPECT_THAT(r[2].error(), HasSubstr("'C'"));
  EXPECT_EQ(r[3].status(), proto::MEASURE_STATUS_COMPILE_ERROR) << r[3].error();
  EXPECT_THAT(r[3].error(), HasSubstr("compiler log:"));
  EXPECT_THAT(r[3].error(), HasSubstr("error:"));
  EXPECT_EQ(r[4].status(), proto::MEASURE_STATUS_OK) << r[4].error();
  EXPECT_GT(r[4].median_ms(), 0);

  // A second batch on the same worker still measures.
  ASSERT_TRUE(server->Send(
      MakeBatch(8, {PlantHostFault(ref, Plant::kNone, "good")}, ref, FastMeasureOptions())));
  std::vector<proto::MeasureResult> again = server->WaitForResults(8, 1);
  ASSERT_EQ(again.size(), 1u) << worker.Log();
  EXPECT_EQ(again[0].status(), proto::MEASURE_STATUS_OK) << again[0].error();
  EXPECT_THAT(worker.Log(), HasSubstr("measuring process restarted"));
  worker.Signal(SIGTERM);
  EXPECT_EQ(worker.Wait(absl::Seconds(20)), 0) << worker.Log();
}

TEST(WorkerDaemon, ReconnectsWhenTheServerRestarts) {
  const std::string dir = MakeTempDir("tessel_worker");
  auto server = FakeWorkerServer::Start();
  ASSERT_NE(server, nullptr);
  const int port = server->port();
  TesselProcess worker(WorkerArgs(server->address(), dir), dir + "/worker.log");
  ASSERT_TRUE(server->WaitFor(IsRegister).has_value()) << worker.Log();
  server->Shutdown();
  server.reset();

  auto restarted = FakeWorkerServer::Start(port);
  ASSERT_NE(restarted, nullptr);
  ASSERT_TRUE(restarted->WaitFor(IsRegister).has_value()) << worker.Log();
  const schedules::GeneratedSource ref = HostMatmulSource();
  ASSERT_TRUE(restarted->Send(
      MakeBatch(3, {PlantHostFault(ref, Plant::kNone, "a")}, ref, FastMeasureOptions())));
  std::vector<proto::MeasureResult> r = restarted->WaitForResults(3, 1);
  ASSERT_EQ(r.size(), 1u) << worker.Log();
  EXPECT_EQ(r[0].status(), proto::MEASURE_STATUS_OK) << r[0].error();
  EXPECT_THAT(worker.Log(), HasSubstr("reconnecting to 127.0.0.1:" + std::to_string(port)));
  worker.Signal(SIGTERM);
  EXPECT_EQ(worker.Wait(absl::Seconds(20)), 0) << worker.Log();
}

TEST(WorkerDaemon, WaitsForAServerThatIsNotUpYet) {
  const std::string dir = MakeTempDir("tessel_worker");
  // Take a free port, then free it for the server that comes later.
  int port = 0;
  {
    auto probe = FakeWorkerServer::Start();
    ASSERT_NE(probe, nullptr);
    port = probe->port();
  }
  TesselProcess worker(WorkerArgs("127.0.0.1:" + std::to_string(port), dir), dir + "/worker.log");
  absl::SleepFor(absl::Milliseconds(300));
  auto server = FakeWorkerServer::Start(port);
  ASSERT_NE(server, nullptr);
  ASSERT_TRUE(server->WaitFor(IsRegister).has_value()) << worker.Log();
  EXPECT_THAT(worker.Log(), HasSubstr("cannot reach the server at 127.0.0.1:"));
  worker.Signal(SIGTERM);
  EXPECT_EQ(worker.Wait(absl::Seconds(20)), 0) << worker.Log();
}

TEST(WorkerDaemon, SigtermFinishesTheBatchHeldReturnsNewOnesAndCloses) {
  const std::string dir = MakeTempDir("tessel_worker");
  auto server = FakeWorkerServer::Start();
  ASSERT_NE(server, nullptr);
  TesselProcess worker(WorkerArgs(server->address(), dir), dir + "/worker.log");
  ASSERT_TRUE(server->WaitFor(IsRegister).has_value()) << worker.Log();

  const schedules::GeneratedSource ref = HostMatmulSource();
  // The first candidate hangs for a while (until its 1 s limit), so the batch is still held when
  // SIGTERM arrives.
  ASSERT_TRUE(server->Send(MakeBatch(
      5, {PlantHostFault(ref, Plant::kHang, "hang"), PlantHostFault(ref, Plant::kNone, "x")}, ref,
      FastMeasureOptions(/*timeout_s=*/1.0))));
  ASSERT_TRUE(server
                  ->WaitFor([](const proto::WorkerMessage& m) {
                    return m.has_heartbeat() && m.heartbeat().batches_held() > 0;
                  })
                  .has_value());
  worker.Signal(SIGTERM);
  ASSERT_TRUE(
      server->WaitFor([](const proto::WorkerMessage& m) { return m.has_draining(); }).has_value())
      << worker.Log();
  // A batch sent after Draining is returned unmeasured.
  ASSERT_TRUE(server->Send(
      MakeBatch(6, {PlantHostFault(ref, Plant::kNone, "late")}, ref, FastMeasureOptions())));
  std::optional<proto::WorkerMessage> returned =
      server->WaitFor([](const proto::WorkerMessage& m) { return m.has_returned(); });
  ASSERT_TRUE(returned.has_value()) << worker.Log();
  EXPECT_EQ(returned->returned().batch_id(), 6u);
  EXPECT_EQ(returned->returned().candidate_ids_size(), 1);
  // The held batch is finished.
  std::vector<proto::MeasureResult> r = server->WaitForResults(5, 2);
  ASSERT_EQ(r.size(), 2u) << worker.Log();
  EXPECT_EQ(r[0].status(), proto::MEASURE_STATUS_TIMEOUT);
  EXPECT_EQ(r[1].status(), proto::MEASURE_STATUS_OK);
  // Then the worker closes its side and exits cleanly.
  EXPECT_TRUE(server->WaitUntilClosedByWorker(absl::Seconds(20))) << worker.Log();
  EXPECT_EQ(worker.Wait(absl::Seconds(20)), 0) << worker.Log();
  EXPECT_THAT(worker.Log(), HasSubstr("received SIGTERM: draining"));
  EXPECT_THAT(worker.Log(), HasSubstr("drained"));
}

TEST(WorkerDaemon, DrainTimeoutReturnsWhatIsLeft) {
  const std::string dir = MakeTempDir("tessel_worker");
  auto server = FakeWorkerServer::Start();
  ASSERT_NE(server, nullptr);
  std::vector<std::string> args = WorkerArgs(server->address(), dir);
  args.insert(args.end(), {"--drain-timeout-s", "0.2"});
  TesselProcess worker(args, dir + "/worker.log");
  ASSERT_TRUE(server->WaitFor(IsRegister).has_value()) << worker.Log();

  const schedules::GeneratedSource ref = HostMatmulSource();
  ASSERT_TRUE(server->Send(
      MakeBatch(9,
                {PlantHostFault(ref, Plant::kHang, "hang"), PlantHostFault(ref, Plant::kNone, "a"),
                 PlantHostFault(ref, Plant::kNone, "b")},
                ref, FastMeasureOptions(/*timeout_s=*/1.0))));
  ASSERT_TRUE(server
                  ->WaitFor([](const proto::WorkerMessage& m) {
                    return m.has_heartbeat() && m.heartbeat().batches_held() > 0;
                  })
                  .has_value());
  worker.Signal(SIGTERM);
  // The drain runs out of time while the hanging candidate is compiled or measured: whatever was
  // not measured is handed back, and every candidate is either measured or returned, once.
  std::optional<proto::WorkerMessage> returned =
      server->WaitFor([](const proto::WorkerMessage& m) { return m.has_returned(); });
  ASSERT_TRUE(returned.has_value()) << worker.Log();
  EXPECT_EQ(returned->returned().batch_id(), 9u);
  EXPECT_EQ(worker.Wait(absl::Seconds(20)), 0) << worker.Log();
  std::vector<uint64_t> ids(returned->returned().candidate_ids().begin(),
                            returned->returned().candidate_ids().end());
  for (const proto::MeasureResult& r : server->WaitForResults(9, 0)) {
    EXPECT_EQ(r.status(), proto::MEASURE_STATUS_TIMEOUT);
    ids.push_back(r.candidate_id());
  }
  std::sort(ids.begin(), ids.end());
  EXPECT_EQ(ids, (std::vector<uint64_t>{100, 101, 102}));
  EXPECT_THAT(worker.Log(), HasSubstr("at the drain timeout: returning their unmeasured"));
}

TEST(WorkerDaemon, ASilentServerIsLeftAfterTheRegistrationTimeoutAndSigtermStillStops) {
  const std::string dir = MakeTempDir("tessel_worker");
  FakeWorkerServer::Options options;
  options.silent = true;
  auto server = FakeWorkerServer::Start(0, options);
  ASSERT_NE(server, nullptr);
  std::vector<std::string> args = WorkerArgs(server->address(), dir);
  args.insert(args.end(), {"--register-timeout-s", "0.3"});
  TesselProcess worker(args, dir + "/worker.log");
  // It gives up on the first registration and tries again.
  size_t first = 0;
  ASSERT_TRUE(server->WaitFor(IsRegister, absl::Seconds(30), 0, &first).has_value());
  ASSERT_TRUE(server->WaitFor(IsRegister, absl::Seconds(30), first + 1).has_value())
      << worker.Log();
  EXPECT_THAT(worker.Log(), HasSubstr("did not answer the registration in 0.3 s"));
  // A SIGTERM while a registration waits for its answer ends the worker at once.
  worker.Signal(SIGTERM);
  EXPECT_EQ(worker.Wait(absl::Seconds(5)), 0) << worker.Log();
}

TEST(WorkerDaemon, ServerOfAnotherProtocolVersionIsRefused) {
  const std::string dir = MakeTempDir("tessel_worker");
  FakeWorkerServer::Options options;
  options.protocol_version = 99;
  auto server = FakeWorkerServer::Start(0, options);
  ASSERT_NE(server, nullptr);
  TesselProcess worker(WorkerArgs(server->address(), dir), dir + "/worker.log");
  EXPECT_EQ(worker.Wait(absl::Seconds(20)), 1) << worker.Log();
  EXPECT_THAT(worker.Log(),
              HasSubstr("tessel worker: worker protocol version mismatch: the server at " +
                        server->address() +
                        " speaks version 99, this worker speaks version 3: run the same Tessel "
                        "release on the server and its workers"));
}

TEST(WorkerDaemon, RejectedRegistrationIsFatalWithTheServersReason) {
  const std::string dir = MakeTempDir("tessel_worker");
  FakeWorkerServer::Options options;
  options.reject_reason = "worker protocol version mismatch: worker 'test-worker' speaks version 1";
  auto server = FakeWorkerServer::Start(0, options);
  ASSERT_NE(server, nullptr);
  TesselProcess worker(WorkerArgs(server->address(), dir), dir + "/worker.log");
  EXPECT_EQ(worker.Wait(absl::Seconds(20)), 1) << worker.Log();
  EXPECT_THAT(worker.Log(), HasSubstr("tessel worker: the server at " + server->address() +
                                      " rejected this worker: worker protocol version mismatch"));
}

// A worker holds enough batches that its compile pool keeps ahead of its devices (issue 21: with
// two batches an H100 waited for compilations three quarters of its time), or what it is told.
TEST(WorkerDaemon, CreditsFollowTheCompilePoolUnlessGiven) {
  EXPECT_EQ(worker::WorkerCredits(1, 1), 2);
  EXPECT_EQ(worker::WorkerCredits(2, 1), 2);
  EXPECT_EQ(worker::WorkerCredits(16, 1), 4);
  EXPECT_EQ(worker::WorkerCredits(30, 1), 8);
  EXPECT_EQ(worker::WorkerCredits(16, 8), 16);
  const std::string dir = MakeTempDir("tessel_worker");
  for (const auto& [extra, want] : std::vector<std::pair<std::vector<std::string>, uint32_t>>{
           {{"--compile-threads", "12"}, 3u}, {{"--max-batches", "5"}, 5u}}) {
    auto server = FakeWorkerServer::Start();
    ASSERT_NE(server, nullptr);
    std::vector<std::string> args = WorkerArgs(server->address(), dir);
    auto given = std::find(args.begin(), args.end(), extra[0]);
    if (given != args.end()) args.erase(given, given + 2);  // WorkerArgs' own --compile-threads
    args.insert(args.end(), extra.begin(), extra.end());
    TesselProcess worker(args, dir + "/credits.log");
    ASSERT_TRUE(worker.started());
    std::optional<proto::WorkerMessage> credits =
        server->WaitFor([](const proto::WorkerMessage& m) { return m.has_credits(); });
    ASSERT_TRUE(credits.has_value()) << worker.Log();
    EXPECT_EQ(credits->credits().batches(), want) << extra[0];
    worker.Signal(SIGTERM);
    EXPECT_EQ(worker.Wait(absl::Seconds(20)), 0) << worker.Log();
  }
}

TEST(WorkerDaemon, BadFlagsNameTheProblemAndTheFix) {
  const std::string dir = MakeTempDir("tessel_worker");
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{"worker", "--server", "localhost"},
       "tessel worker: --server 'localhost' has no port: pass the server's HOST:PORT, e.g. "
       "--server localhost:7070"},
      {{"worker", "--server", "localhost:99999"},
       "--server 'localhost:99999' has port '99999', not a number from 1 to 65535"},
      {{"worker", "--server", ":7070"}, "--server ':7070' has no host"},
      {{"worker", "--server", "localhost:7070", "--devices", "0,x"},
       "tessel worker: --devices '0,x' is not a list of GPU numbers: pass e.g. --devices 0,1"},
      {{"worker", "--server", "localhost:7070", "--target", "gpu"},
       "tessel worker: unknown --target 'gpu': use host, cuda or auto"},
      {{"worker", "--server", "localhost:7070", "--target", "host", "--max-batches", "-1"},
       "max batches -1: give the batches the worker holds at once, or 0 to size them to its "
       "compile threads and devices"},
  };
  for (const Case& c : cases) {
    TesselProcess p(c.args, dir + "/flags.log");
    EXPECT_EQ(p.Wait(absl::Seconds(20)), 1) << p.Log();
    EXPECT_THAT(p.Log(), HasSubstr(c.message));
  }
}

}  // namespace
}  // namespace tessel::testing

namespace tessel::testing {
namespace {

// Screening (issue 21): a batch sent with MeasureOptions.screen gives each candidate a short
// screening measurement, and the full one only when it can matter: within the margin of the best
// (here: a best no candidate comes near, and one every candidate beats), with no best yet, or when
// the server asks (Candidate.confirm). The worker also reports where its time went.
TEST(WorkerDaemon, ScreeningTimesClearlySlowCandidatesBrieflyAndConfirmsThoseNearTheBest) {
  const std::string dir = MakeTempDir("tessel_worker");
  auto server = FakeWorkerServer::Start();
  ASSERT_NE(server, nullptr);
  TesselProcess worker(WorkerArgs(server->address(), dir), dir + "/worker.log");
  ASSERT_TRUE(worker.started());
  ASSERT_TRUE(server->WaitFor(IsRegister).has_value()) << worker.Log();

  proto::MeasureOptions options = FastMeasureOptions();
  options.mutable_timing()->set_min_repeats(9);
  options.mutable_timing()->set_max_repeats(9);
  proto::ScreenOptions* screen = options.mutable_screen();
  *screen->mutable_timing() = options.timing();
  screen->mutable_timing()->set_min_repeats(2);
  screen->set_margin(0.05);
  const schedules::GeneratedSource ref = HostMatmulSource();
  auto batch = [&](uint64_t id, double best_ms, const std::string& tag) {
    proto::MeasureOptions o = options;
    o.mutable_screen()->set_best_ms(best_ms);
    o.mutable_screen()->set_task_id(id);  // each batch its own task: no best of the worker's
    proto::ServerMessage m = MakeBatch(
        id,
        {PlantHostFault(ref, Plant::kNone, tag + "a"), PlantHostFault(ref, Plant::kNone, tag + "b"),
         PlantHostFault(ref, Plant::kNone, tag + "c")},
        ref, o);
    return m;
  };

  // A best a thousand times below anything this kernel can do: every candidate is clearly slow
  // and gets 2 repeats, except the one the server asks to confirm.
  proto::ServerMessage slow = batch(1, 1e-9, "slow");
  slow.mutable_batch()->mutable_candidates(1)->set_confirm(true);
  ASSERT_TRUE(server->Send(slow));
  std::vector<proto::MeasureResult> results = server->WaitForResults(1, 3);
  ASSERT_EQ(results.size(), 3u) << worker.Log();
  for (const proto::MeasureResult& r : results) {
    ASSERT_EQ(r.status(), proto::MEASURE_STATUS_OK) << r.error();
    EXPECT_EQ(r.screen_repeats(), 2);
    EXPECT_GT(r.screen_median_ms(), 0);
    if (r.candidate_id() == 101) {
      EXPECT_EQ(r.timing_kind(), proto::TIMING_KIND_CONFIRMED);
      EXPECT_EQ(r.repeats_ms_size(), 9);
    } else {
      EXPECT_EQ(r.timing_kind(), proto::TIMING_KIND_SCREENED);
      EXPECT_EQ(r.repeats_ms_size(), 2);
      EXPECT_DOUBLE_EQ(r.median_ms(), r.screen_median_ms());
    }
    // The timeline's worker side: the device's time holds the verification and the timing.
    ASSERT_TRUE(r.has_worker_times());
    EXPECT_GT(r.worker_times().timing_ms(), 0);
    EXPECT_GE(r.worker_times().queue_ms(), 0);
    EXPECT_GE(r.worker_times().compile_wait_ms(), 0);
    EXPECT_GE(r.worker_times().device_ms(),
              r.worker_times().timing_ms() + r.verify_ms() + r.worker_times().compile_wait_ms());
  }
  // A best far above anything this kernel takes: the first candidate is near it and confirmed.
  // Its median becomes the worker's own best of the task and takes over from the second
  // candidate on (copies of one kernel may differ by more than the 5% margin), so only the first
  // is certain to be confirmed.
  ASSERT_TRUE(server->Send(batch(2, 1e9, "fast")));
  results = server->WaitForResults(2, 3);
  ASSERT_EQ(results.size(), 3u) << worker.Log();
  EXPECT_EQ(results[0].timing_kind(), proto::TIMING_KIND_CONFIRMED);
  EXPECT_EQ(results[0].repeats_ms_size(), 9);
  for (const proto::MeasureResult& r : results) {
    EXPECT_EQ(r.repeats_ms_size(), r.timing_kind() == proto::TIMING_KIND_CONFIRMED ? 9 : 2);
  }
  // Without screening options, the full measurement only, as before.
  proto::MeasureOptions plain = options;
  plain.clear_screen();
  ASSERT_TRUE(server->Send(MakeBatch(3, {PlantHostFault(ref, Plant::kNone, "plain")}, ref, plain)));
  results = server->WaitForResults(3, 1);
  ASSERT_EQ(results.size(), 1u) << worker.Log();
  EXPECT_EQ(results[0].repeats_ms_size(), 9);
  EXPECT_EQ(results[0].screen_repeats(), 0);
  EXPECT_EQ(results[0].timing_kind(), proto::TIMING_KIND_CONFIRMED);
  worker.Signal(SIGTERM);
  EXPECT_EQ(worker.Wait(absl::Seconds(20)), 0) << worker.Log();
  EXPECT_THAT(worker.Log(), HasSubstr("(screened)"));
}

}  // namespace
}  // namespace tessel::testing
