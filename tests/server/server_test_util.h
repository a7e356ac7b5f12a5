#pragma once

// Shared by the server tests: a real server (in-process StartServer or a `tessel serve`
// process) over a SQLite log in a temp dir, real `tessel worker --target host` processes, and a
// client of service Tessel.

#include <grpcpp/grpcpp.h>

#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "proto/tessel.grpc.pb.h"
#include "server/server.h"
#include "store/tuning_log.h"
#include "tests/test_util.h"
#include "tests/worker/worker_test_util.h"

namespace tessel::testing {

// Timing that keeps host measurement short: a few repeats, no cache flush.
inline measure::TimingOptions FastTiming() {
  measure::TimingOptions t;
  t.warmup_runs = 1;
  t.min_repeats = 3;
  t.max_repeats = 3;
  t.min_total_ms = 0;
  t.flush_cache = false;
  return t;
}

inline server::ServerOptions TestServerOptions(const std::string& db) {
  server::ServerOptions o;
  o.db_path = db;
  o.quiet = false;
  o.version = "test";
  o.timing = FastTiming();
  o.heartbeat_timeout_s = 5;
  o.tick_s = 0.05;
  return o;
}

// The `tessel serve` flags that match TestServerOptions.
inline std::vector<std::string> FastServeFlags() {
  return {"--min-repeats", "3", "--max-repeats", "3", "--min-total-ms", "0", "--no-flush"};
}

// A `tessel worker --target host` process for the server at `address`.
inline std::unique_ptr<TesselProcess> StartHostWorker(const std::string& address,
                                                      const std::string& dir, const std::string& id,
                                                      int max_batches = 2) {
  return std::make_unique<TesselProcess>(
      std::vector<std::string>{"worker", "--server", address, "--target", "host", "--worker-id", id,
                               "--cache", dir + "/cache_" + id, "--heartbeat-s", "0.2",
                               "--max-batches", std::to_string(max_batches),
                               "--reconnect-initial-s", "0.1", "--reconnect-max-s", "0.3"},
      dir + "/" + id + ".log");
}

// A `tessel serve` process over `db` with the fast timing flags and `extra` flags, listening on
// `listen` (port 0: any free one); its log is `log_path`. *address is set to HOST:PORT once it
// says it listens (empty when it does not within 20 s).
inline std::unique_ptr<TesselProcess> StartServe(const std::string& db, const std::string& listen,
                                                 const std::vector<std::string>& extra,
                                                 const std::string& log_path,
                                                 std::string* address) {
  std::vector<std::string> args = {"serve", "--db", db, "--listen", listen};
  for (const std::string& f : FastServeFlags()) args.push_back(f);
  args.insert(args.end(), extra.begin(), extra.end());
  auto serve = std::make_unique<TesselProcess>(args, log_path);
  address->clear();
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  while (absl::Now() < deadline) {
    const std::string log = serve->Log();
    const size_t at = log.find("listening on ");
    const size_t end = at == std::string::npos ? at : log.find(", log", at);
    if (end != std::string::npos) {
      *address = log.substr(at + 13, end - at - 13);
      break;
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
  return serve;
}

inline std::unique_ptr<proto::Tessel::Stub> Client(const std::string& address) {
  return proto::Tessel::NewStub(grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
}

inline proto::SubmitJobRequest HostJob(const std::vector<std::string>& workloads, int64_t trials,
                                       int batch_size, int priority = 0) {
  proto::SubmitJobRequest r;
  for (const std::string& w : workloads) r.add_workloads(w);
  r.mutable_target()->set_kind("host");
  r.set_trials_per_task(trials);
  r.set_batch_size(batch_size);
  r.set_priority(priority);
  r.set_seed(11);
  return r;
}

// Waits until `pred` holds (polling); false at the timeout.
inline bool WaitUntil(const std::function<bool()>& pred, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    if (pred()) return true;
    absl::SleepFor(absl::Milliseconds(50));
  }
  return pred();
}

inline proto::JobInfo GetJob(proto::Tessel::Stub* client, int64_t job_id) {
  grpc::ClientContext ctx;
  proto::GetJobRequest req;
  req.set_job_id(job_id);
  proto::JobInfo info;
  grpc::Status s = client->GetJob(&ctx, req, &info);
  EXPECT_TRUE(s.ok()) << s.error_message();
  return info;
}

inline bool WaitForJobState(proto::Tessel::Stub* client, int64_t job_id, proto::JobState state,
                            absl::Duration timeout) {
  return WaitUntil([&] { return GetJob(client, job_id).state() == state; }, timeout);
}

// Every record of a job's tasks, read through a second connection to the log file.
inline std::vector<store::Record> RecordsOfJob(const std::string& db, int64_t job_id) {
  auto log = store::OpenTuningLog(db);
  EXPECT_TRUE(log.ok()) << log.status();
  if (!log.ok()) return {};
  auto tasks = (*log)->TasksOf(job_id);
  EXPECT_TRUE(tasks.ok()) << tasks.status();
  std::vector<store::Record> out;
  for (const store::TaskRow& t : *tasks) {
    auto rs = (*log)->RecordsOf(t.id);
    EXPECT_TRUE(rs.ok()) << rs.status();
    out.insert(out.end(), rs->begin(), rs->end());
  }
  return out;
}

}  // namespace tessel::testing
