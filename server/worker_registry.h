#pragma once

// The workers connected to the server: who they are, their devices, the credits they granted
// (batches the server may still send them), when they were last heard from, how many batches
// they hold, and the connection to send them batches on.
//
// Threads: every method may be called from any thread (one internal mutex). Lock order: a
// caller may hold the Dispatcher's mutex while calling in; the registry never calls out while
// holding its own.

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "measure/measurement.h"
#include "schedules/codegen/source.h"
#include "schedules/target/target.h"

namespace tessel::server {

// A batch as the dispatcher sends it (the worker service turns it into a MeasureBatch).
struct OutgoingBatch {
  uint64_t batch_id = 0;
  struct Item {
    uint64_t candidate_id = 0;
    std::shared_ptr<const schedules::GeneratedSource> source;
    bool confirm = false;  // screening: the full measurement whatever the screen says
  };
  std::vector<Item> candidates;
  std::shared_ptr<const schedules::GeneratedSource> reference;
  measure::TimingOptions timing;
  measure::ScreenOptions screen;  // sent when enabled
  uint64_t screen_task = 0;       // the task, which scopes the worker's own best
  uint64_t verify_seed = 0;
  double timeout_s = 0;
  double deadline_s = 0;  // the dispatcher's deadline for the batch (for the server's log)
  std::string cuda_arch;  // the task's CUDA architecture, what the worker compiles for
};

// The sending side of one worker's stream. Threads: any; the implementation serializes writes.
class WorkerConnection {
 public:
  virtual ~WorkerConnection() = default;
  // False when the stream is gone.
  virtual bool SendBatch(const OutgoingBatch& batch) = 0;
  // Ends the stream (the worker sees the server hang up and reconnects).
  virtual void Close() = 0;
};

struct WorkerDevice {
  int ordinal = 0;
  schedules::TargetKind kind = schedules::TargetKind::kHost;
  std::string name;
  std::string arch;
  int sm_count = 0;
  int64_t memory_bytes = 0;
  int cores = 0;
};

struct WorkerEntry {
  uint64_t session = 0;  // this connection; a reconnecting worker gets a new one
  std::string worker_id;
  std::string host;
  std::string version;
  std::vector<WorkerDevice> devices;
  int64_t connected_unix_ms = 0;
  int64_t last_heard_unix_ms = 0;
  int credits = 0;
  int batches_in_flight = 0;
  int64_t candidates_measured = 0;
  bool draining = false;
};

// True when a task for (kind, arch) may run on one of `devices`: the host for the host, a GPU
// that runs `arch`'s code for CUDA (schedules::CudaArchRunsOn: sm_90 and sm_90a on a 9.0 GPU).
bool DevicesMatch(const std::vector<WorkerDevice>& devices, schedules::TargetKind kind,
                  const std::string& arch);

class WorkerRegistry {
 public:
  // Adds a worker; returns its session id. Worker ids are unique among the connected workers: an
  // id already connected gets "#2" (then "#3", ...) appended; `worker_id` (may be null) is set
  // to the id given.
  uint64_t Add(WorkerEntry entry, std::shared_ptr<WorkerConnection> connection,
               std::string* worker_id = nullptr);
  // Forgets the session (no-op when absent).
  void Remove(uint64_t session);
  bool Contains(uint64_t session);

  void Heard(uint64_t session, int64_t unix_ms);
  void AddCredits(uint64_t session, int batches);
  void SetDraining(uint64_t session);
  void CountMeasured(uint64_t session);
  void BatchSent(uint64_t session);   // takes a credit, one more in flight
  void BatchEnded(uint64_t session);  // one fewer in flight

  // Sessions that may take a batch now (credits left, not draining), with their devices.
  struct Free {
    uint64_t session = 0;
    int credits = 0;
    std::vector<WorkerDevice> devices;
    std::shared_ptr<WorkerConnection> connection;
  };
  std::vector<Free> Available();
  // Whether a connected worker (draining or not, with credits or not) has a device for
  // (kind, arch).
  bool AnyCanServe(schedules::TargetKind kind, const std::string& arch);
  // Credits of non-draining workers with a device for (kind, arch).
  int FreeCredits(schedules::TargetKind kind, const std::string& arch);
  std::shared_ptr<WorkerConnection> Connection(uint64_t session);
  // Sessions not heard from since `before_unix_ms`.
  std::vector<uint64_t> SilentSince(int64_t before_unix_ms);
  std::vector<WorkerEntry> List();
  std::string NameOf(uint64_t session);

 private:
  struct Slot {
    WorkerEntry entry;
    std::shared_ptr<WorkerConnection> connection;
  };
  absl::Mutex mu_;
  uint64_t next_session_ ABSL_GUARDED_BY(mu_) = 1;
  std::map<uint64_t, Slot> workers_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tessel::server
