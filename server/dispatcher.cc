#include "server/dispatcher.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace tessel::server {

double BatchDeadlineS(const DispatcherOptions& options, double expected_s) {
  return std::min(options.batch_deadline_s,
                  options.batch_deadline_min_s + options.deadline_slack * expected_s);
}

double MeasuredCandidateS(const measure::Measurement& m) {
  double ms = m.compile_ms + m.verify_ms;
  for (double r : m.timings.repeats_ms) ms += r;
  return ms / 1000;
}

double Dispatcher::ExpectedCandidateSLocked(const Task& t) const {
  if (!t.candidate_s.empty()) return *std::max_element(t.candidate_s.begin(), t.candidate_s.end());
  return t.info.expected_candidate_s > 0 ? t.info.expected_candidate_s : options_.prior_candidate_s;
}

double Dispatcher::HeldSLocked(uint64_t session) {
  double held = 0;
  for (const auto& [id, b] : batches_) {
    if (b.session == session && !b.expired) {
      held += static_cast<double>(b.unanswered.size()) * b.expected_candidate_s;
    }
  }
  return held;
}

void Dispatcher::AddTask(TaskDispatch task) {
  absl::MutexLock lock(&mu_);
  const int64_t id = task.task_id;
  tasks_[id].info = std::move(task);
}

size_t Dispatcher::RemoveTask(int64_t task_id) {
  absl::MutexLock lock(&mu_);
  auto it = tasks_.find(task_id);
  if (it == tasks_.end()) return 0;
  const size_t dropped = it->second.queue.size();
  it->second.queue.clear();
  it->second.removed = true;
  return dropped;
}

void Dispatcher::Enqueue(std::vector<QueuedCandidate> candidates) {
  absl::MutexLock lock(&mu_);
  for (QueuedCandidate& c : candidates) {
    auto it = tasks_.find(c.task_id);
    if (it == tasks_.end() || it->second.removed) continue;
    it->second.queue.push_back(std::move(c));
  }
}

size_t Dispatcher::Queued(int64_t task_id) {
  absl::MutexLock lock(&mu_);
  auto it = tasks_.find(task_id);
  return it == tasks_.end() ? 0 : it->second.queue.size();
}

size_t Dispatcher::InFlight(int64_t task_id) {
  absl::MutexLock lock(&mu_);
  size_t n = 0;
  for (const auto& [id, b] : batches_) {
    if (b.task_id == task_id && !b.expired) n += b.unanswered.size();
  }
  if (auto it = tasks_.find(task_id); it != tasks_.end()) {
    n += static_cast<size_t>(it->second.recording);
  }
  return n;
}

int Dispatcher::FreeCredits(int64_t task_id) {
  schedules::TargetKind kind;
  std::string arch;
  {
    absl::MutexLock lock(&mu_);
    auto it = tasks_.find(task_id);
    if (it == tasks_.end()) return 0;
    kind = it->second.info.kind;
    arch = it->second.info.arch;
  }
  return registry_->FreeCredits(kind, arch);
}

void Dispatcher::SetScreening(int64_t task_id, double best_ms, double margin) {
  absl::MutexLock lock(&mu_);
  auto it = tasks_.find(task_id);
  if (it == tasks_.end()) return;
  it->second.info.screen.best_ms = best_ms;
  it->second.info.screen.margin = margin;
}

Dispatcher::Task* Dispatcher::PickTaskLocked(const std::vector<WorkerDevice>& devices) {
  Task* best = nullptr;
  auto better = [&](Task& t) {
    if (best == nullptr) return true;
    if (t.info.priority != best->info.priority) return t.info.priority > best->info.priority;
    const uint64_t jt = job_last_served_[t.info.job_id];
    const uint64_t jb = job_last_served_[best->info.job_id];
    if (jt != jb) return jt < jb;
    return t.last_served < best->last_served;
  };
  for (auto& [id, t] : tasks_) {
    if (t.removed || t.queue.empty()) continue;
    if (!DevicesMatch(devices, t.info.kind, t.info.arch)) continue;
    if (better(t)) best = &t;
  }
  return best;
}

int Dispatcher::Dispatch() {
  struct Send {
    uint64_t session;
    std::shared_ptr<WorkerConnection> connection;
    OutgoingBatch batch;
  };
  std::vector<Send> sends;
  {
    absl::MutexLock lock(&mu_);
    const int64_t now = absl::ToUnixMillis(absl::Now());
    for (WorkerRegistry::Free& w : registry_->Available()) {
      for (int credit = 0; credit < w.credits; ++credit) {
        Task* t = PickTaskLocked(w.devices);
        if (t == nullptr) break;
        Batch b;
        b.batch_id = next_batch_id_++;
        b.session = w.session;
        b.task_id = t->info.task_id;
        b.sent_unix_ms = now;
        b.expected_candidate_s = ExpectedCandidateSLocked(*t);
        const double held_s = HeldSLocked(w.session);
        if (held_s == 0) progress_unix_ms_[w.session] = now;  // the worker starts on it now
        OutgoingBatch out;
        out.batch_id = b.batch_id;
        out.reference = t->info.reference;
        out.cuda_arch = t->info.kind == schedules::TargetKind::kCuda ? t->info.arch : "";
        out.timing = t->info.timing;
        out.verify_seed = t->info.verify_seed;
        out.timeout_s = t->info.timeout_s;
        out.screen = t->info.screen;
        out.screen_task = static_cast<uint64_t>(t->info.task_id);
        const int64_t audit_every =
            t->info.screen.enabled && t->info.screen_audit > 0
                ? std::max<int64_t>(1, std::llround(1 / t->info.screen_audit))
                : 0;
        const auto sent_at = std::chrono::steady_clock::now();
        const int n = std::max(1, t->info.batch_size);
        while (!t->queue.empty() && static_cast<int>(out.candidates.size()) < n) {
          QueuedCandidate c = std::move(t->queue.front());
          t->queue.pop_front();
          c.sent = sent_at;
          ++t->sent;
          const bool confirm = audit_every > 0 && t->sent % audit_every == 0;
          out.candidates.push_back({c.candidate_id, c.source, confirm});
          b.unanswered[c.candidate_id] = std::move(c);
        }
        b.sent = b.unanswered.size();
        const double deadline_s =
            BatchDeadlineS(options_, held_s + static_cast<double>(b.sent) * b.expected_candidate_s);
        b.deadline_unix_ms = now + static_cast<int64_t>(deadline_s * 1000);
        out.deadline_s = deadline_s;
        t->last_served = ++serve_clock_;
        job_last_served_[t->info.job_id] = serve_clock_;
        batches_[b.batch_id] = std::move(b);
        registry_->BatchSent(w.session);
        sends.push_back({w.session, w.connection, std::move(out)});
      }
    }
  }
  int sent = 0;
  for (Send& s : sends) {
    const bool ok = s.connection != nullptr && s.connection->SendBatch(s.batch);
    if (ok) {
      ++sent;
      log_->Log(absl::StrFormat("batch %d: %d candidates to %s (deadline %.3g s)", s.batch.batch_id,
                                s.batch.candidates.size(), registry_->NameOf(s.session),
                                s.batch.deadline_s));
    } else {
      absl::MutexLock lock(&mu_);
      EndBatchLocked(s.batch.batch_id, "its worker's stream is gone");
    }
  }
  return sent;
}

void Dispatcher::RequeueLocked(QueuedCandidate c) {
  auto it = tasks_.find(c.task_id);
  if (it == tasks_.end() || it->second.removed) return;
  if (it->second.accepted.count(c.candidate_id) > 0) return;
  for (const QueuedCandidate& q : it->second.queue) {
    if (q.candidate_id == c.candidate_id) return;
  }
  it->second.queue.push_front(std::move(c));
}

void Dispatcher::EndBatchLocked(uint64_t batch_id, const std::string& why) {
  auto it = batches_.find(batch_id);
  if (it == batches_.end()) return;
  Batch b = std::move(it->second);
  batches_.erase(it);
  if (!b.expired) registry_->BatchEnded(b.session);
  if (b.expired || b.unanswered.empty()) return;
  log_->Log(absl::StrCat("batch ", batch_id, ": ", b.unanswered.size(),
                         " unanswered candidates back to the queue (", why, ")"));
  for (auto& [id, c] : b.unanswered) RequeueLocked(std::move(c));
}

std::optional<QueuedCandidate> Dispatcher::OnResult(uint64_t session, uint64_t batch_id,
                                                    uint64_t candidate_id, bool worker_error) {
  absl::MutexLock lock(&mu_);
  auto bit = batches_.find(batch_id);
  if (bit == batches_.end() || bit->second.session != session) return std::nullopt;
  Batch& b = bit->second;
  auto cit = b.unanswered.find(candidate_id);
  if (cit == b.unanswered.end()) return std::nullopt;
  QueuedCandidate c = std::move(cit->second);
  b.unanswered.erase(cit);
  auto tit = tasks_.find(c.task_id);
  if (tit == tasks_.end()) return std::nullopt;
  Task& t = tit->second;
  // The time the worker spent on this candidate: since its previous result, or since it was
  // sent this batch while holding nothing else. A late answer (past the deadline) is not a
  // measure of the task: its worker stalled.
  const int64_t now = absl::ToUnixMillis(absl::Now());
  if (auto p = progress_unix_ms_.find(session); p != progress_unix_ms_.end()) {
    if (!b.expired) {
      t.candidate_s.push_back(static_cast<double>(std::max<int64_t>(0, now - p->second)) / 1000);
      if (t.candidate_s.size() > kTimedResults) t.candidate_s.pop_front();
    }
    p->second = now;
  }
  if (t.accepted.count(c.candidate_id) > 0) return std::nullopt;  // answered elsewhere already
  if (worker_error && ++c.attempts < options_.max_attempts && !t.removed) {
    RequeueLocked(std::move(c));
    return std::nullopt;
  }
  t.accepted.insert(c.candidate_id);
  ++t.recording;
  // A late answer for a candidate requeued meanwhile: it is no longer needed.
  for (auto q = t.queue.begin(); q != t.queue.end(); ++q) {
    if (q->candidate_id == c.candidate_id) {
      t.queue.erase(q);
      break;
    }
  }
  registry_->CountMeasured(session);
  return c;
}

void Dispatcher::Unaccept(QueuedCandidate c) {
  absl::MutexLock lock(&mu_);
  auto it = tasks_.find(c.task_id);
  if (it == tasks_.end()) return;
  it->second.accepted.erase(c.candidate_id);
  --it->second.recording;
  RequeueLocked(std::move(c));
}

void Dispatcher::Recorded(int64_t task_id) {
  absl::MutexLock lock(&mu_);
  if (auto it = tasks_.find(task_id); it != tasks_.end()) --it->second.recording;
}

void Dispatcher::OnReturned(uint64_t session, uint64_t batch_id, const std::vector<uint64_t>& ids) {
  absl::MutexLock lock(&mu_);
  auto bit = batches_.find(batch_id);
  if (bit == batches_.end() || bit->second.session != session) return;
  size_t n = 0;
  for (uint64_t id : ids) {
    auto cit = bit->second.unanswered.find(id);
    if (cit == bit->second.unanswered.end()) continue;
    QueuedCandidate c = std::move(cit->second);
    bit->second.unanswered.erase(cit);
    RequeueLocked(std::move(c));
    ++n;
  }
  log_->Log(absl::StrCat("batch ", batch_id, ": ", n, " candidates returned by ",
                         registry_->NameOf(session), ", back to the queue"));
}

void Dispatcher::OnBatchDone(uint64_t session, uint64_t batch_id) {
  absl::MutexLock lock(&mu_);
  auto bit = batches_.find(batch_id);
  if (bit == batches_.end() || bit->second.session != session) return;
  EndBatchLocked(batch_id, "the worker ended the batch without answering them");
}

void Dispatcher::DropWorker(uint64_t session) {
  absl::MutexLock lock(&mu_);
  std::vector<uint64_t> ids;
  for (const auto& [id, b] : batches_) {
    if (b.session == session) ids.push_back(id);
  }
  for (uint64_t id : ids) EndBatchLocked(id, "its worker is gone");
  progress_unix_ms_.erase(session);
}

void Dispatcher::Tick(int64_t now_unix_ms) {
  absl::MutexLock lock(&mu_);
  for (auto& [id, b] : batches_) {
    if (b.expired || b.deadline_unix_ms > now_unix_ms) continue;
    b.expired = true;
    registry_->BatchEnded(b.session);
    log_->Log(absl::StrFormat(
        "batch %d: %s answered %d of its %d candidates within the batch's deadline of %.3g s "
        "(about %.3g s a candidate expected): the %d unanswered go back to the queue for "
        "another worker",
        id, registry_->NameOf(b.session), b.sent - b.unanswered.size(), b.sent,
        static_cast<double>(b.deadline_unix_ms - b.sent_unix_ms) / 1000, b.expected_candidate_s,
        b.unanswered.size()));
    // Copies: a late result of the expired batch is still accepted once.
    for (const auto& [cid, c] : b.unanswered) RequeueLocked(c);
  }
}

}  // namespace tessel::server
