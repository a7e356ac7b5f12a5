#include "server/worker_registry.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace tessel::server {

bool DevicesMatch(const std::vector<WorkerDevice>& devices, schedules::TargetKind kind,
                  const std::string& arch) {
  for (const WorkerDevice& d : devices) {
    if (d.kind != kind) continue;
    if (kind == schedules::TargetKind::kHost || schedules::CudaArchRunsOn(arch, d.arch)) {
      return true;
    }
  }
  return false;
}

uint64_t WorkerRegistry::Add(WorkerEntry entry, std::shared_ptr<WorkerConnection> connection,
                             std::string* worker_id) {
  absl::MutexLock lock(&mu_);
  auto taken = [&](const std::string& id) {
    for (const auto& [session, slot] : workers_) {
      if (slot.entry.worker_id == id) return true;
    }
    return false;
  };
  if (taken(entry.worker_id)) {
    const std::string asked = entry.worker_id;
    for (int n = 2; taken(entry.worker_id); ++n) entry.worker_id = absl::StrCat(asked, "#", n);
  }
  if (worker_id != nullptr) *worker_id = entry.worker_id;
  entry.session = next_session_++;
  const uint64_t session = entry.session;
  workers_[session] = Slot{std::move(entry), std::move(connection)};
  return session;
}

void WorkerRegistry::Remove(uint64_t session) {
  absl::MutexLock lock(&mu_);
  workers_.erase(session);
}

bool WorkerRegistry::Contains(uint64_t session) {
  absl::MutexLock lock(&mu_);
  return workers_.count(session) > 0;
}

void WorkerRegistry::Heard(uint64_t session, int64_t unix_ms) {
  absl::MutexLock lock(&mu_);
  if (auto it = workers_.find(session); it != workers_.end()) {
    it->second.entry.last_heard_unix_ms = unix_ms;
  }
}

void WorkerRegistry::AddCredits(uint64_t session, int batches) {
  absl::MutexLock lock(&mu_);
  if (auto it = workers_.find(session); it != workers_.end()) it->second.entry.credits += batches;
}

void WorkerRegistry::SetDraining(uint64_t session) {
  absl::MutexLock lock(&mu_);
  if (auto it = workers_.find(session); it != workers_.end()) it->second.entry.draining = true;
}

void WorkerRegistry::CountMeasured(uint64_t session) {
  absl::MutexLock lock(&mu_);
  if (auto it = workers_.find(session); it != workers_.end()) {
    ++it->second.entry.candidates_measured;
  }
}

void WorkerRegistry::BatchSent(uint64_t session) {
  absl::MutexLock lock(&mu_);
  if (auto it = workers_.find(session); it != workers_.end()) {
    --it->second.entry.credits;
    ++it->second.entry.batches_in_flight;
  }
}

void WorkerRegistry::BatchEnded(uint64_t session) {
  absl::MutexLock lock(&mu_);
  if (auto it = workers_.find(session); it != workers_.end()) {
    if (it->second.entry.batches_in_flight > 0) --it->second.entry.batches_in_flight;
  }
}

std::vector<WorkerRegistry::Free> WorkerRegistry::Available() {
  absl::MutexLock lock(&mu_);
  std::vector<Free> out;
  for (const auto& [session, slot] : workers_) {
    if (slot.entry.credits <= 0 || slot.entry.draining) continue;
    out.push_back({session, slot.entry.credits, slot.entry.devices, slot.connection});
  }
  return out;
}

bool WorkerRegistry::AnyCanServe(schedules::TargetKind kind, const std::string& arch) {
  absl::MutexLock lock(&mu_);
  for (const auto& [session, slot] : workers_) {
    if (DevicesMatch(slot.entry.devices, kind, arch)) return true;
  }
  return false;
}

int WorkerRegistry::FreeCredits(schedules::TargetKind kind, const std::string& arch) {
  absl::MutexLock lock(&mu_);
  int n = 0;
  for (const auto& [session, slot] : workers_) {
    if (slot.entry.draining || slot.entry.credits <= 0) continue;
    if (DevicesMatch(slot.entry.devices, kind, arch)) n += slot.entry.credits;
  }
  return n;
}

std::shared_ptr<WorkerConnection> WorkerRegistry::Connection(uint64_t session) {
  absl::MutexLock lock(&mu_);
  auto it = workers_.find(session);
  return it == workers_.end() ? nullptr : it->second.connection;
}

std::vector<uint64_t> WorkerRegistry::SilentSince(int64_t before_unix_ms) {
  absl::MutexLock lock(&mu_);
  std::vector<uint64_t> out;
  for (const auto& [session, slot] : workers_) {
    if (slot.entry.last_heard_unix_ms < before_unix_ms) out.push_back(session);
  }
  return out;
}

std::vector<WorkerEntry> WorkerRegistry::List() {
  absl::MutexLock lock(&mu_);
  std::vector<WorkerEntry> out;
  for (const auto& [session, slot] : workers_) out.push_back(slot.entry);
  return out;
}

std::string WorkerRegistry::NameOf(uint64_t session) {
  absl::MutexLock lock(&mu_);
  auto it = workers_.find(session);
  return it == workers_.end() ? "(gone)" : it->second.entry.worker_id;
}

}  // namespace tessel::server
