#include "server/job_manager.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <set>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "costmodel/training_set.h"
#include "nlohmann/json.hpp"
#include "schedules/space/candidate.h"
#include "schedules/util/elapsed.h"
#include "schedules/util/status_macros.h"
#include "schedules/workload/builtins.h"
#include "schedules/workload/key.h"
#include "schedules/workload/parser.h"
#include "server/log_readers.h"
#include "store/measured_traces.h"

namespace tessel::server {
namespace {

using schedules::MsBetween;

int64_t NowMs() { return absl::ToUnixMillis(absl::Now()); }

}  // namespace

JobManager::JobManager(store::TuningLog* log, Dispatcher* dispatcher, JobManagerOptions options,
                       const EventLog* events)
    : log_(log), dispatcher_(dispatcher), options_(std::move(options)), events_(events) {}

absl::StatusOr<std::shared_ptr<costmodel::CostModel>> JobManager::ModelFor(
    const schedules::Target& target, const std::string& family, const std::string& strategy) {
  if (strategy == "random") return std::shared_ptr<costmodel::CostModel>();
  absl::MutexLock lock(&models_mu_);
  const std::pair<std::string, std::string> key(target.ToString(), family);
  std::shared_ptr<costmodel::CostModel>& m = models_[key];
  if (m) return m;
  costmodel::CostModelOptions o;
  o.seed = 1;
  absl::StatusOr<costmodel::TrainingSet> set = TrainingSetOfLog(log_, target, 20000, family);
  absl::StatusOr<std::unique_ptr<costmodel::CostModel>> made =
      set.ok() ? costmodel::ModelForTarget(*set, options_.cost_model, o) : set.status();
  if (!made.ok()) {
    models_.erase(key);
    return made.status();
  }
  m = std::move(*made);
  events_->Log(absl::StrFormat(
      "cost model %s for %s workloads on %s: trained on %d records of %d workloads (%d skipped) "
      "in %.0f ms",
      options_.cost_model, family, target.ToString(), set->stats.examples, set->stats.workloads,
      set->stats.skipped_trace + set->stats.skipped_workload, set->stats.features_ms));
  return m;
}

void JobManager::SaveModelsLocked(const std::string& target_key) {
  std::vector<std::pair<std::string, std::shared_ptr<costmodel::CostModel>>> ms;
  {
    absl::MutexLock lock(&models_mu_);
    for (const auto& [key, m] : models_) {
      if (key.first == target_key && m && m->trained()) ms.emplace_back(key.second, m);
    }
  }
  for (const auto& [family, m] : ms) {
    absl::StatusOr<costmodel::SavedModel> saved = m->Serialize();
    store::CostModelRow row;
    if (saved.ok()) {
      nlohmann::json meta = nlohmann::json::parse(saved->meta_json, nullptr, false);
      if (!meta.is_object()) meta = nlohmann::json::object();
      meta["family"] = family;
      row = {0,           target_key, saved->kind, saved->feature_version, std::move(saved->bytes),
             meta.dump(), 0};
    }
    absl::Status s = saved.ok() ? log_->SaveCostModel(&row).status() : saved.status();
    if (!s.ok()) {
      events_->Log(absl::StrCat("the cost model of ", family, " workloads on ", target_key,
                                " was not saved: ", s.message()));
    }
  }
}

absl::Status JobManager::Resume() {
  absl::StatusOr<std::vector<store::JobRow>> jobs = log_->ListJobs(/*unfinished_only=*/true);
  if (!jobs.ok()) return jobs.status();
  // Tasks and cost models first, without mu_ (making a model rebuilds the log's candidates).
  std::vector<std::vector<store::TaskRow>> job_tasks;
  for (const store::JobRow& row : *jobs) {
    absl::StatusOr<std::vector<store::TaskRow>> tasks = log_->TasksOf(row.id);
    if (!tasks.ok()) return tasks.status();
    absl::StatusOr<schedules::Target> target =
        schedules::MakeTarget(row.target_kind, row.target_arch);
    for (const store::TaskRow& t : target.ok() ? *tasks : std::vector<store::TaskRow>{}) {
      absl::StatusOr<std::optional<store::WorkloadRow>> w = log_->GetWorkload(t.workload_key);
      if (!w.ok() || !w->has_value()) continue;  // LoadJobLocked reports it
      if (absl::Status s =
              ModelFor(*target, costmodel::WorkloadFamily((*w)->name), row.strategy).status();
          !s.ok()) {
        events_->Log(absl::StrCat("job ", row.id, ": no cost model: ", s.message()));
      }
    }
    job_tasks.push_back(std::move(*tasks));
  }
  absl::MutexLock lock(&mu_);
  for (size_t k = 0; k < jobs->size(); ++k) {
    const store::JobRow& row = (*jobs)[k];
    const std::vector<store::TaskRow>* tasks = &job_tasks[k];
    std::vector<std::vector<store::Record>> measured;
    int64_t done = 0;
    for (const store::TaskRow& t : *tasks) {
      absl::StatusOr<std::vector<store::Record>> rs = log_->RecordsOf(t.id);
      if (!rs.ok()) return rs.status();
      done += static_cast<int64_t>(rs->size());
      measured.push_back(std::move(*rs));
    }
    if (absl::Status s = LoadJobLocked(row, *tasks, measured); !s.ok()) {
      events_->Log(absl::StrCat("job ", row.id, " cannot resume: ", s.message()));
      (void)log_->SetJobState(row.id, store::JobState::kFailed,
                              absl::StrCat("cannot resume: ", s.message()));
      continue;
    }
    events_->Log(absl::StrCat("job ", row.id, " resumed with ", done, " of ", row.trials_budget,
                              " trials already recorded"));
  }
  return absl::OkStatus();
}

absl::Status JobManager::LoadJobLocked(const store::JobRow& row,
                                       const std::vector<store::TaskRow>& tasks,
                                       const std::vector<std::vector<store::Record>>& measured) {
  absl::StatusOr<schedules::Target> target =
      schedules::MakeTarget(row.target_kind, row.target_arch);
  if (!target.ok()) return target.status();
  auto job = std::make_unique<Job>();
  job->row = row;
  job->margin = ScreenMargin(options_.screening.margin);
  const int64_t batch = row.batch_size > 0 ? row.batch_size : options_.default_batch_size;
  int64_t caps = 0;
  for (const store::TaskRow& t : tasks) caps += t.trials_budget;
  if (tasks.size() > 1 && row.trials_budget < caps) {
    job->scheduler =
        std::make_unique<search::TaskScheduler>(std::vector<double>(tasks.size(), 1.0));
  }
  for (size_t i = 0; i < tasks.size(); ++i) {
    auto task = std::make_unique<Task>();
    task->row = tasks[i];
    task->index = static_cast<int>(i);
    task->margin = ScreenMargin(options_.screening.margin);
    absl::StatusOr<std::optional<store::WorkloadRow>> w = log_->GetWorkload(tasks[i].workload_key);
    if (!w.ok()) return w.status();
    if (!w->has_value()) {
      return absl::DataLossError(absl::StrCat("workload ", tasks[i].workload_key, " of task ",
                                              tasks[i].id, " is not in the log"));
    }
    absl::StatusOr<schedules::Workload> wl = store::WorkloadFromLog(log_, tasks[i].workload_key);
    if (!wl.ok()) return wl.status();
    task->workload = *wl;
    task->workload_name = (*w)->name;
    task->workload_spec = (*w)->spec;
    search::SearchContext context;
    context.workload = *wl;
    context.target = *target;
    context.seed = row.seed;
    context.task_id = tasks[i].id;
    {
      // The target's shared model (ModelFor made it before mu_ was taken); it has seen every
      // record of the log, these tasks' included.
      absl::MutexLock models_lock(&models_mu_);
      auto it = models_.find({target->ToString(), costmodel::WorkloadFamily(wl->name)});
      if (it != models_.end() && row.strategy != "random") {
        context.cost_model = it->second;
        context.model_has_measured = true;
      }
    }
    for (const store::Record& r : measured[i]) {
      context.measured.push_back({r.candidate_id, r.trace_json, r.measurement});
      ++task->done;
      if (r.measurement.ok()) {
        ++task->ok;
        const double ms = r.measurement.latency_ms();
        if (r.measurement.confirmed() && (task->best_ms == 0 || ms < task->best_ms)) {
          task->best_ms = ms;
        }
      }
      if (job->scheduler) job->scheduler->Recorded(task->index, task->best_ms);
    }
    task->issued = task->done;
    // Resumed trials count as the batches they filled.
    for (int64_t n = 0; job->scheduler && n < task->done; n += batch) {
      job->scheduler->Issued(task->index, std::min(batch, task->done - n));
    }
    absl::StatusOr<std::unique_ptr<search::SearchStrategy>> strategy =
        search::MakeSearchStrategy(row.strategy, std::move(context));
    if (!strategy.ok()) return strategy.status();
    task->strategy = std::move(*strategy);
    absl::StatusOr<schedules::Candidate> reference =
        schedules::BuildCandidate(*wl, *target, std::nullopt);
    if (!reference.ok()) return reference.status();
    TaskDispatch d;
    d.task_id = tasks[i].id;
    d.job_id = row.id;
    d.priority = row.priority;
    d.kind = target->kind;
    d.arch = target->is_cuda() ? target->arch : "";
    d.batch_size = static_cast<int>(batch);
    d.reference = std::make_shared<const schedules::GeneratedSource>(std::move(reference->source));
    d.timing = options_.timing;
    d.verify_seed = row.seed;
    d.timeout_s = options_.candidate_timeout_s;
    if (options_.screening.enabled()) {
      d.screen.enabled = true;
      d.screen.timing = ScreenTiming(options_.screening, options_.timing);
      d.screen.best_ms = task->best_ms;
      d.screen.margin = options_.screening.margin.initial;
      d.screen_audit = options_.screening.audit;
    }
    // A resumed task's deadlines start from what its newest records took.
    const size_t newest = std::min<size_t>(measured[i].size(), 16);
    for (size_t k = measured[i].size() - newest; k < measured[i].size(); ++k) {
      d.expected_candidate_s =
          std::max(d.expected_candidate_s, MeasuredCandidateS(measured[i][k].measurement));
    }
    if (!store::IsFinished(task->row.state)) dispatcher_->AddTask(std::move(d));
    job->tasks.push_back(std::move(task));
  }
  Job& j = *job;
  jobs_[row.id] = std::move(job);
  for (auto& t : j.tasks) {
    tasks_[t->row.id] = {&j, t.get()};
    if (!store::IsFinished(t->row.state) && t->done >= t->row.trials_budget) {
      FinishTaskLocked(j, *t, store::JobState::kDone, "budget reached");
    }
  }
  FinishIfSharedBudgetSpentLocked(j);
  bool all = true;
  for (auto& t : j.tasks) all = all && store::IsFinished(t->row.state);
  if (all && !store::IsFinished(j.row.state)) FinishJobLocked(j, store::JobState::kDone, "");
  return absl::OkStatus();
}

absl::StatusOr<int64_t> JobManager::Submit(const JobRequest& request) {
  // Validate everything first: a refused request stores nothing.
  absl::StatusOr<CheckedJob> checked = CheckJobRequest(request);
  if (!checked.ok()) return checked.status();
  const std::vector<schedules::Workload>& workloads = checked->workloads;
  const std::vector<std::string>& keys = checked->keys;
  const schedules::Target* target = &checked->target;
  const std::vector<int64_t>& budgets = checked->budgets;

  store::JobRow job;
  job.name = request.name;
  job.target_kind = request.target_kind;
  job.target_arch = target->is_cuda() ? target->arch : "";
  job.target_key = target->ToString();
  job.strategy = request.strategy.empty() ? search::kDefaultStrategy : request.strategy;
  for (const schedules::Workload& w : workloads) {
    const std::string family = costmodel::WorkloadFamily(w.name);
    if (absl::Status s = ModelFor(*target, family, job.strategy).status(); !s.ok()) {
      return absl::InternalError(absl::StrCat("the cost model of ", family, " workloads on ",
                                              target->ToString(),
                                              " cannot be made: ", s.message()));
    }
  }
  job.priority = request.priority;
  for (int64_t b : budgets) job.trials_budget += b;
  if (request.total_trials > 0)
    job.trials_budget = std::min(job.trials_budget, request.total_trials);
  job.time_budget_s = request.time_budget_s;
  job.seed =
      request.seed != 0 ? request.seed : static_cast<uint64_t>(absl::ToUnixNanos(absl::Now())) | 1;
  job.batch_size = request.batch_size > 0 ? request.batch_size : options_.default_batch_size;
  job.state = store::JobState::kQueued;
  job.created_unix_ms = NowMs();
  job.submitted_by = request.submitted_by;
  std::vector<store::TaskRow> tasks;
  for (size_t i = 0; i < workloads.size(); ++i) {
    store::WorkloadRow w;
    w.key = keys[i];
    w.canonical = schedules::CanonicalText(workloads[i]);
    w.name = workloads[i].name;
    w.spec = workloads[i].spec;
    if (absl::Status s = log_->PutWorkload(w); !s.ok()) return s;
    store::TaskRow t;
    t.workload_key = keys[i];
    t.trials_budget = budgets[i];
    t.state = store::JobState::kQueued;
    t.baseline_ms = checked->baseline_ms[i];
    t.baseline_label = checked->baseline_labels[i];
    tasks.push_back(t);
  }
  if (absl::Status s = log_->CreateJob(&job, &tasks); !s.ok()) return s;
  std::vector<std::vector<store::Record>> measured(tasks.size());
  {
    absl::MutexLock lock(&mu_);
    if (absl::Status s = LoadJobLocked(job, tasks, measured); !s.ok()) {
      (void)log_->SetJobState(job.id, store::JobState::kFailed, std::string(s.message()));
      return s;
    }
  }
  std::string what;
  for (const schedules::Workload& w : workloads) {
    absl::StrAppend(&what, what.empty() ? "" : ", ", ShortQuote(w.spec));
  }
  events_->Log(absl::StrCat("job ", job.id, " submitted: ", what, " on ", job.target_key, ", ",
                            job.trials_budget, " trials, priority ", job.priority, ", strategy ",
                            job.strategy));
  return job.id;
}

void JobManager::FinishIfSharedBudgetSpentLocked(Job& job) {
  if (!job.scheduler) return;
  int64_t done = 0;
  for (const auto& t : job.tasks) done += t->done;
  if (done < job.row.trials_budget) return;
  for (auto& t : job.tasks) {
    FinishTaskLocked(job, *t, store::JobState::kDone, "the job's shared budget is spent");
  }
}

void JobManager::FinishTaskLocked(Job& job, Task& task, store::JobState state,
                                  const std::string& why) {
  if (store::IsFinished(task.row.state)) return;
  task.row.state = state;
  if (absl::Status s = log_->SetTaskState(task.row.id, state); !s.ok()) {
    events_->Log(absl::StrCat("task ", task.row.id, ": cannot store its state: ", s.message()));
  }
  if (job.scheduler) job.scheduler->Finish(task.index);
  const size_t dropped = dispatcher_->RemoveTask(task.row.id);
  events_->Log(absl::StrCat(
      "job ", job.row.id, " task ", task.row.id, " ", store::JobStateName(state), " (", why,
      ") after ", task.done, " trials, best ",
      task.best_ms > 0 ? absl::StrFormat("%.4f ms", task.best_ms) : std::string("none"),
      dropped > 0 ? absl::StrCat(", ", dropped, " queued dropped") : ""));
  ChangedLocked(job);
}

void JobManager::FinishJobLocked(Job& job, store::JobState state, const std::string& why) {
  if (store::IsFinished(job.row.state)) return;
  for (auto& t : job.tasks) FinishTaskLocked(job, *t, state, why.empty() ? "job finished" : why);
  job.row.state = state;
  job.row.error = state == store::JobState::kFailed ? why : "";
  job.row.finished_unix_ms = NowMs();
  if (job.row.strategy != "random") SaveModelsLocked(job.row.target_key);
  if (absl::Status s = log_->SetJobState(job.row.id, state, job.row.error); !s.ok()) {
    events_->Log(absl::StrCat("job ", job.row.id, ": cannot store its state: ", s.message()));
  }
  int64_t done = 0;
  for (auto& t : job.tasks) done += t->done;
  events_->Log(
      absl::StrCat("job ", job.row.id, " ", store::JobStateName(state),
                   why.empty() ? "" : absl::StrCat(" (", why, ")"), " after ", done,
                   absl::StrFormat(" trials; %.3f s in the search strategies", job.search_s)));
  ChangedLocked(job);
}

void JobManager::ChangedLocked(Job& job) {
  ++job.version;
  changed_.SignalAll();
}

double JobManager::MarginLocked(const Job& job, const Task& task) const {
  return ScreenMargin::MarginOf(task.margin, job.margin);
}

void JobManager::OnResult(const QueuedCandidate& candidate, const measure::Measurement& result) {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point arrived = Clock::now();
  store::Record r;
  {
    absl::MutexLock lock(&mu_);
    auto it = tasks_.find(candidate.task_id);
    if (it == tasks_.end()) {
      events_->Log(absl::StrCat("a result for task ", candidate.task_id,
                                ", which this server does not run, is dropped"));
      dispatcher_->Recorded(candidate.task_id);
      return;
    }
    const Job& job = *it->second.first;
    r.workload_key = it->second.second->row.workload_key;
    r.target_key = job.row.target_key;
    r.job_id = job.row.id;
    r.task_id = candidate.task_id;
  }
  r.candidate_id = candidate.candidate_id;
  r.trace_json = candidate.trace_json;
  r.measurement = result;
  r.unix_ms = NowMs();
  // Committed before it counts.
  const Clock::time_point store_start = Clock::now();
  absl::StatusOr<int64_t> id = log_->AddRecord(&r);
  const double store_ms = MsBetween(store_start, Clock::now());
  if (!id.ok()) {
    if (absl::IsAlreadyExists(id.status())) {
      events_->Log(absl::StrCat("task ", r.task_id, " candidate ", r.candidate_id,
                                ": already recorded, the repeated result is dropped"));
      dispatcher_->Recorded(candidate.task_id);
      return;
    }
    events_->Log(absl::StrCat("task ", r.task_id, " candidate ", r.candidate_id,
                              ": the log refused the result (", id.status().message(),
                              "); it will be measured again"));
    dispatcher_->Unaccept(candidate);
    return;
  }
  absl::MutexLock lock(&mu_);
  dispatcher_->Recorded(candidate.task_id);
  auto it = tasks_.find(candidate.task_id);
  if (it == tasks_.end()) return;
  Job& job = *it->second.first;
  Task& task = *it->second.second;
  ++task.done;
  if (result.ok()) {
    ++task.ok;
    // The best is always a confirmed measurement (a screened one is, by the rule that screened
    // it, slower than a confirmed best the worker knew of).
    const double ms = result.latency_ms();
    if (result.confirmed() && (task.best_ms == 0 || ms < task.best_ms)) task.best_ms = ms;
    if (result.timings.kind == measure::TimingKind::kScreened) ++task.screened;
    if (result.confirmed() && result.timings.screen_repeats > 0) {
      task.margin.Add(result.timings.screen_median_ms, ms);
      job.margin.Add(result.timings.screen_median_ms, ms);
    }
    if (options_.screening.enabled()) {
      dispatcher_->SetScreening(task.row.id, task.best_ms, MarginLocked(job, task));
    }
  }
  const int64_t now = NowMs();
  job.result_unix_ms.push_back(now);
  while (!job.result_unix_ms.empty() && job.result_unix_ms.front() < now - 60000) {
    job.result_unix_ms.pop_front();
  }
  const absl::Time t0 = absl::Now();
  const Clock::time_point learn_start = Clock::now();
  task.strategy->NotifyResults({{r.candidate_id, r.trace_json, r.measurement}});
  job.search_s += absl::ToDoubleSeconds(absl::Now() - t0);
  const Clock::time_point learned = Clock::now();
  CandidateStages stages;
  stages.sample_ms = candidate.sample_ms;
  stages.build_ms = candidate.build_ms;
  if (candidate.enqueued != Clock::time_point()) {
    stages.total_ms = std::max(0.0, candidate.sample_ms) + MsBetween(candidate.enqueued, learned);
    if (candidate.sent != Clock::time_point()) {
      stages.server_queue_ms = MsBetween(candidate.enqueued, candidate.sent);
      stages.in_flight_ms = MsBetween(candidate.sent, arrived);
    }
  }
  stages.store_ms = store_ms;
  stages.learn_ms = MsBetween(learn_start, learned);
  stages.result = &result;
  job.timeline.Add(stages);
  if (job.row.state == store::JobState::kQueued) {
    job.row.state = store::JobState::kRunning;
    (void)log_->SetJobState(job.row.id, store::JobState::kRunning);
  }
  if (task.row.state == store::JobState::kQueued) {
    task.row.state = store::JobState::kRunning;
    (void)log_->SetTaskState(task.row.id, store::JobState::kRunning);
  }
  if (job.scheduler) job.scheduler->Recorded(task.index, task.best_ms);
  if (task.done >= task.row.trials_budget) {
    FinishTaskLocked(job, task, store::JobState::kDone, "budget reached");
  }
  FinishIfSharedBudgetSpentLocked(job);
  bool all = true;
  for (auto& t : job.tasks) all = all && store::IsFinished(t->row.state);
  if (all) FinishJobLocked(job, store::JobState::kDone, "");
  ChangedLocked(job);
}

int64_t JobManager::TopUpLocked(Job& job, Task& task, int64_t limit) {
  const int64_t remaining = std::min(limit, task.row.trials_budget - task.issued);
  if (remaining <= 0) return 0;
  const int64_t batch = job.row.batch_size > 0 ? job.row.batch_size : options_.default_batch_size;
  const int64_t queued = static_cast<int64_t>(dispatcher_->Queued(task.row.id));
  const int64_t free = dispatcher_->FreeCredits(task.row.id);
  const int64_t want = std::min(remaining, batch * std::max<int64_t>(2, free + 1) - queued);
  if (want <= 0) return 0;
  const absl::Time t0 = absl::Now();
  const double build_before_ms = task.strategy->build_ms();
  absl::StatusOr<std::vector<search::Proposal>> ps =
      task.strategy->GenerateCandidates(static_cast<int>(want));
  const double sample_s = absl::ToDoubleSeconds(absl::Now() - t0);
  const double build_ms = task.strategy->build_ms() - build_before_ms;
  job.search_s += sample_s;
  if (!ps.ok()) {
    FinishJobLocked(job, store::JobState::kFailed,
                    absl::StrCat("the search strategy failed: ", ps.status().message()));
    return -1;
  }
  if (ps->empty()) {
    if (task.issued == task.done && queued == 0) {
      if (task.done < task.row.trials_budget) {
        task.note = absl::StrCat("stopped at ", task.done, " of ", task.row.trials_budget,
                                 " trials: its design space has no new candidate (every "
                                 "schedule it can make was measured)");
      }
      FinishTaskLocked(job, task, store::JobState::kDone, "the design space has no new candidate");
    }
    return 0;
  }
  std::vector<QueuedCandidate> qs;
  const auto enqueued = std::chrono::steady_clock::now();
  for (search::Proposal& p : *ps) {
    QueuedCandidate q;
    q.sample_ms = 1000 * sample_s / static_cast<double>(ps->size());
    q.build_ms = build_ms / static_cast<double>(ps->size());
    q.enqueued = enqueued;
    q.task_id = task.row.id;
    q.candidate_id = p.candidate_id;
    q.trace_json = std::move(p.trace_json);
    q.source = std::make_shared<const schedules::GeneratedSource>(std::move(p.candidate.source));
    qs.push_back(std::move(q));
  }
  const int64_t n = static_cast<int64_t>(qs.size());
  task.issued += n;
  if (job.scheduler) job.scheduler->Issued(task.index, n);
  dispatcher_->Enqueue(std::move(qs));
  return n;
}

int JobManager::Pump() {
  int enqueued = 0;
  {
    absl::MutexLock lock(&mu_);
    if (stopped_) return 0;
    // Higher priorities first (then older jobs): generating candidates takes time, and a worker
    // that asks meanwhile is served from what is queued.
    std::vector<Job*> order;
    for (auto& [job_id, job] : jobs_) order.push_back(job.get());
    std::stable_sort(order.begin(), order.end(),
                     [](const Job* a, const Job* b) { return a->row.priority > b->row.priority; });
    for (Job* job : order) {
      if (store::IsFinished(job->row.state)) continue;
      if (!job->scheduler) {
        for (auto& t : job->tasks) {
          if (store::IsFinished(t->row.state)) continue;
          const int64_t n = TopUpLocked(*job, *t, t->row.trials_budget);
          if (n < 0) break;
          enqueued += static_cast<int>(n);
        }
      } else {
        // The shared budget: the scheduler's pick is topped up; when its queue is full the
        // others wait (the workers are busy with it). A pick that ran dry is finished and the
        // next one tried.
        for (int tries = 0; tries <= static_cast<int>(job->tasks.size()); ++tries) {
          int64_t issued = 0;
          for (auto& t : job->tasks) issued += t->issued;
          const int64_t left = job->row.trials_budget - issued;
          const int pick = job->scheduler->Next();
          if (left <= 0 || pick < 0) break;
          Task& task = *job->tasks[pick];
          const bool was_finished = store::IsFinished(task.row.state);
          const int64_t n = TopUpLocked(*job, task, left);
          if (n < 0) break;
          enqueued += static_cast<int>(n);
          if (n == 0 && !was_finished && store::IsFinished(task.row.state)) continue;
          if (n == 0 && task.issued >= task.row.trials_budget) {
            job->scheduler->Finish(pick);  // its cap is issued; results still count
            continue;
          }
          // Warm-up: the next task's turn in the same pump.
          if (n > 0 && job->scheduler->batches(pick) <= 1) continue;
          break;
        }
      }
      if (store::IsFinished(job->row.state)) continue;
      bool all = true;
      for (auto& t : job->tasks) all = all && store::IsFinished(t->row.state);
      if (all) FinishJobLocked(*job, store::JobState::kDone, "");
    }
  }
  dispatcher_->Dispatch();
  return enqueued;
}

void JobManager::Tick(int64_t now_unix_ms) {
  absl::MutexLock lock(&mu_);
  for (auto& [id, job] : jobs_) {
    if (store::IsFinished(job->row.state) || job->row.time_budget_s <= 0) continue;
    const double elapsed_s = (now_unix_ms - job->row.created_unix_ms) / 1000.0;
    if (elapsed_s >= job->row.time_budget_s) {
      FinishJobLocked(*job, store::JobState::kDone,
                      absl::StrFormat("time budget of %.4g s spent", job->row.time_budget_s));
    }
  }
  // In-flight counts change without an event of their own: watchers see them at the next tick.
}

void JobManager::Stop() {
  absl::MutexLock lock(&mu_);
  stopped_ = true;
  changed_.SignalAll();
}

absl::StatusOr<JobStatus> JobManager::Cancel(int64_t job_id) {
  {
    absl::MutexLock lock(&mu_);
    auto it = jobs_.find(job_id);
    if (it != jobs_.end()) {
      FinishJobLocked(*it->second, store::JobState::kCancelled, "cancelled");
      return StatusLocked(*it->second);
    }
  }
  // Not in memory: a finished job of the log (cancel changes nothing) or none.
  return Get(job_id);
}

JobStatus JobManager::StatusLocked(Job& job) {
  JobStatus s;
  s.row = job.row;
  s.version = job.version;
  for (auto& t : job.tasks) {
    TaskStatus ts;
    ts.row = t->row;
    ts.workload_name = t->workload_name;
    ts.workload_spec = t->workload_spec;
    ts.trials_done = t->done;
    ts.trials_ok = t->ok;
    ts.best_ms = t->best_ms;
    ts.flops = t->workload.Flops();
    ts.bytes = t->workload.CompulsoryBytes();
    ts.in_flight = static_cast<int64_t>(dispatcher_->InFlight(t->row.id));
    ts.note = t->note;
    ts.trials_screened = t->screened;
    ts.screen_margin = options_.screening.enabled() ? MarginLocked(job, *t) : 0;
    ts.screen_pairs = t->margin.pairs();
    s.trials_done += t->done;
    s.tasks.push_back(std::move(ts));
  }
  if (job.timeline.candidates() > 0) s.timeline = job.timeline.Stages();
  const int64_t end = job.row.finished_unix_ms > 0 ? job.row.finished_unix_ms : NowMs();
  s.elapsed_s = (end - job.row.created_unix_ms) / 1000.0;
  const int64_t now = NowMs();
  int64_t recent = 0;
  for (int64_t t : job.result_unix_ms) recent += t >= now - 60000 ? 1 : 0;
  const double window_s = std::min(60.0, std::max(1.0, s.elapsed_s));
  s.trials_per_s = recent / window_s;
  s.search_s = job.search_s;
  return s;
}

absl::StatusOr<JobStatus> JobManager::StatusFromLog(const store::JobRow& row) {
  JobStatus s;
  s.row = row;
  absl::StatusOr<std::vector<store::TaskRow>> tasks = log_->TasksOf(row.id);
  if (!tasks.ok()) return tasks.status();
  for (const store::TaskRow& t : *tasks) {
    TaskStatus ts;
    ts.row = t;
    absl::StatusOr<store::TaskCounts> c = log_->CountsOf(t.id);
    if (!c.ok()) return c.status();
    ts.trials_done = c->trials;
    ts.trials_ok = c->ok;
    ts.best_ms = c->best_ms;
    absl::StatusOr<std::optional<store::WorkloadRow>> w = log_->GetWorkload(t.workload_key);
    if (w.ok() && w->has_value()) {
      ts.workload_name = (*w)->name;
      ts.workload_spec = (*w)->spec;
      absl::StatusOr<schedules::Workload> wl = schedules::ParseWorkload((*w)->canonical);
      if (wl.ok()) {
        ts.flops = wl->Flops();
        ts.bytes = wl->CompulsoryBytes();
      }
    }
    s.trials_done += ts.trials_done;
    s.tasks.push_back(std::move(ts));
  }
  const int64_t end = row.finished_unix_ms > 0 ? row.finished_unix_ms : NowMs();
  s.elapsed_s = (end - row.created_unix_ms) / 1000.0;
  return s;
}

absl::StatusOr<JobStatus> JobManager::Get(int64_t job_id) {
  {
    absl::MutexLock lock(&mu_);
    auto it = jobs_.find(job_id);
    if (it != jobs_.end()) return StatusLocked(*it->second);
  }
  absl::StatusOr<store::JobRow> row = log_->GetJob(job_id);
  if (!row.ok()) {
    if (absl::IsNotFound(row.status())) {
      return absl::NotFoundError(
          absl::StrCat("job ", job_id, " does not exist: list the jobs with `tessel jobs`"));
    }
    return row.status();
  }
  return StatusFromLog(*row);
}

absl::StatusOr<std::vector<JobStatus>> JobManager::List(bool unfinished_only) {
  absl::StatusOr<std::vector<store::JobRow>> rows = log_->ListJobs(unfinished_only);
  if (!rows.ok()) return rows.status();
  std::vector<JobStatus> out;
  for (const store::JobRow& row : *rows) {
    absl::StatusOr<JobStatus> s = Get(row.id);
    if (!s.ok()) return s.status();
    out.push_back(std::move(*s));
  }
  return out;
}

absl::StatusOr<JobStatus> JobManager::WaitForChange(int64_t job_id, uint64_t seen_version,
                                                    absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  {
    absl::MutexLock lock(&mu_);
    auto it = jobs_.find(job_id);
    if (it != jobs_.end()) {
      Job& job = *it->second;
      while (!stopped_ && job.version <= seen_version && !store::IsFinished(job.row.state)) {
        if (changed_.WaitWithDeadline(&mu_, deadline)) break;
      }
      return StatusLocked(job);
    }
  }
  return Get(job_id);
}

}  // namespace tessel::server
