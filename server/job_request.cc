#include "server/job_request.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <optional>
#include <tuple>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "schedules/space/candidate.h"
#include "schedules/target/target.h"
#include "schedules/workload/builtins.h"
#include "schedules/workload/key.h"
#include "search/search_strategy.h"

namespace tessel::server {

std::string ShortQuote(const std::string& text) {
  std::string one = text.substr(0, text.find('\n'));
  if (one.size() > 80) one = one.substr(0, 77) + "...";
  return one;
}

namespace {

// Each baseline of `request` checked and put at its task: it names one of the job's workloads
// (`keys`, parallel to request.workloads), by its text as listed or by any text of the same
// workload, at most once; its latency is a positive number of milliseconds; its label is short
// and one line. The client checks the same, but the server does not trust it.
absl::Status CheckBaselines(const JobRequest& request, const std::vector<std::string>& keys,
                            std::vector<double>* ms, std::vector<std::string>* labels) {
  for (size_t b = 0; b < request.baselines.size(); ++b) {
    const BaselineRequest& base = request.baselines[b];
    const std::string which =
        absl::StrCat("baseline ", b + 1, " ('", ShortQuote(base.workload), "')");
    if (base.workload.size() > kMaxWorkloadBytes) {
      return absl::InvalidArgumentError(absl::StrCat(
          which, " names a workload of ", base.workload.size(),
          " bytes, more than any workload text may have: give the workload's spec as listed"));
    }
    std::optional<size_t> task;
    for (size_t i = 0; i < request.workloads.size() && !task; ++i) {
      if (request.workloads[i] == base.workload) task = i;
    }
    if (!task) {
      // Another text of a listed workload (other spacing, names or order of arguments).
      absl::StatusOr<schedules::Workload> w = schedules::ParseWorkloadText(base.workload);
      if (w.ok()) {
        const std::string key = schedules::WorkloadKey(*w);
        for (size_t i = 0; i < keys.size() && !task; ++i) {
          if (keys[i] == key) task = i;
        }
      }
    }
    if (!task) {
      return absl::InvalidArgumentError(
          absl::StrCat(which,
                       " is not one of the job's workloads: give each baseline for a "
                       "workload the job lists, by its spec as listed"));
    }
    if (!std::isfinite(base.ms) || base.ms <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(which, " has latency ", base.ms,
                       " ms: a baseline is a positive number of milliseconds, e.g. 0.42"));
    }
    if (base.label.size() > kMaxBaselineLabelBytes) {
      return absl::InvalidArgumentError(absl::StrCat(
          which, " has a label of ", base.label.size(), " bytes, more than a label may have (",
          kMaxBaselineLabelBytes, "): give a short one such as \"PyTorch eager\""));
    }
    for (char c : base.label) {
      if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
        return absl::InvalidArgumentError(
            absl::StrCat(which,
                         " has a label with a control character (a line break?): give "
                         "one line of text such as \"cuBLAS\""));
      }
    }
    if ((*ms)[*task] > 0) {
      return absl::InvalidArgumentError(absl::StrCat(which, " is the second baseline of workload ",
                                                     *task + 1,
                                                     ": give each workload at most one baseline"));
    }
    (*ms)[*task] = base.ms;
    (*labels)[*task] = base.label.empty() ? kDefaultBaselineLabel : base.label;
  }
  return absl::OkStatus();
}

}  // namespace

JobRequest JobRequestFromProto(const proto::SubmitJobRequest& request, std::string submitted_by) {
  JobRequest r;
  r.submitted_by = std::move(submitted_by);
  r.workloads.assign(request.workloads().begin(), request.workloads().end());
  r.target_kind = request.target().kind();
  r.target_arch = request.target().arch();
  r.trials_per_task = request.trials_per_task();
  r.total_trials = request.total_trials();
  r.time_budget_s = request.time_budget_s();
  r.strategy = request.strategy();
  r.priority = request.priority();
  r.name = request.name();
  r.seed = request.seed();
  r.batch_size = request.batch_size();
  for (const proto::Baseline& b : request.baselines()) {
    r.baselines.push_back({b.workload(), b.ms(), b.label()});
  }
  return r;
}

absl::StatusOr<CheckedJob> CheckJobRequest(const JobRequest& request) {
  if (request.workloads.empty()) {
    return absl::InvalidArgumentError(
        "the job lists no workload: pass at least one, e.g. \"matmul(M=1024, N=1024, K=1024)\"");
  }
  if (request.workloads.size() > kMaxWorkloadsPerJob) {
    return absl::InvalidArgumentError(
        absl::StrCat("the job lists ", request.workloads.size(),
                     " workloads, more than the most one job may list (", kMaxWorkloadsPerJob,
                     "): split them over several jobs"));
  }
  if (request.name.size() > kMaxJobNameBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the job name ('", ShortQuote(request.name), "') is ", request.name.size(),
        " bytes, more than the most a name may have (", kMaxJobNameBytes, "): give a shorter one"));
  }
  std::vector<schedules::Workload> workloads;
  std::vector<std::string> keys;
  for (size_t i = 0; i < request.workloads.size(); ++i) {
    const std::string& text = request.workloads[i];
    if (text.size() > kMaxWorkloadBytes) {
      return absl::InvalidArgumentError(
          absl::StrCat("workload ", i + 1, " ('", ShortQuote(text), "') is ", text.size(),
                       " bytes, more than the most a workload text may have (", kMaxWorkloadBytes,
                       "): give a spec or a definition of its tensors and statements only"));
    }
    if (absl::StripAsciiWhitespace(text).empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("workload ", i + 1,
                       " is empty: pass a spec such as \"softmax(rows=4096, cols=4096)\" "
                       "or a definition in the text format"));
    }
    absl::StatusOr<schedules::Workload> w = schedules::ParseWorkloadText(text);
    if (!w.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("workload ", i + 1, " ('", ShortQuote(text), "'): ", w.status().message()));
    }
    const std::string key = schedules::WorkloadKey(*w);
    for (size_t j = 0; j < keys.size(); ++j) {
      if (keys[j] == key) {
        return absl::InvalidArgumentError(absl::StrCat("workloads ", j + 1, " and ", i + 1,
                                                       " are the same workload (key ", key,
                                                       "): list each workload once"));
      }
    }
    keys.push_back(key);
    workloads.push_back(std::move(*w));
  }
  // Names longer than any known one are refused before they are looked up, so that the error
  // does not echo them in full.
  for (const auto& [field, value, known] :
       {std::tuple<const char*, const std::string&, std::string>{"target", request.target_kind,
                                                                 "host or cuda"},
        {"CUDA architecture", request.target_arch, schedules::KnownCudaArchsText()},
        {"search strategy", request.strategy, "evolutionary, annealing or random"}}) {
    if (value.size() > kMaxNameBytes) {
      return absl::InvalidArgumentError(
          absl::StrCat("the ", field, " ('", ShortQuote(value), "') is ", value.size(),
                       " bytes, longer than any known one: use ", known));
    }
  }
  if (request.target_kind.empty()) {
    return absl::InvalidArgumentError("the job has no target: set the target to host or cuda");
  }
  absl::StatusOr<schedules::Target> target =
      schedules::MakeTarget(request.target_kind, request.target_arch);
  if (!target.ok()) return target.status();
  if (request.trials_per_task < 0 || request.total_trials < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("a negative trial budget (trials per task ", request.trials_per_task,
                     ", total ", request.total_trials, "): give a positive number of trials"));
  }
  if (request.trials_per_task == 0 && request.total_trials == 0) {
    return absl::InvalidArgumentError(
        "the job has a zero trial budget: set the trials per task (e.g. --trials 64) or the "
        "total trials to a positive number");
  }
  if (request.trials_per_task > kMaxTrials || request.total_trials > kMaxTrials) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a trial budget of ", std::max(request.trials_per_task, request.total_trials),
        " is more than the most a job may ask for (", kMaxTrials, "): give fewer trials"));
  }
  if (!std::isfinite(request.time_budget_s) || request.time_budget_s < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("time budget ", request.time_budget_s,
                     " s is not a positive number of seconds: give one, or 0 for no time limit"));
  }
  if (request.batch_size < 0 || request.batch_size > kMaxBatchSize) {
    return absl::InvalidArgumentError(absl::StrCat("batch size ", request.batch_size,
                                                   " is out of range: give 1 to ", kMaxBatchSize,
                                                   ", or 0 for the server's default"));
  }
  if (absl::Status s = search::CheckStrategyName(request.strategy); !s.ok()) return s;
  const int64_t n = static_cast<int64_t>(workloads.size());
  std::vector<int64_t> budgets(workloads.size());
  if (request.total_trials == 0) {
    std::fill(budgets.begin(), budgets.end(), request.trials_per_task);
  } else {
    if (request.total_trials < n) {
      return absl::InvalidArgumentError(absl::StrCat("total trials ", request.total_trials,
                                                     " is fewer than the ", n,
                                                     " tasks: give every task at least one trial"));
    }
    // One budget shared by the tasks (the task scheduler spends it); a task's own budget is
    // its cap: the trials per task when given, else the whole budget.
    for (int64_t i = 0; i < n; ++i) {
      budgets[i] = request.trials_per_task > 0
                       ? std::min(request.trials_per_task, request.total_trials)
                       : request.total_trials;
    }
  }
  // Every workload must have a design space and a reference on the target.
  for (size_t i = 0; i < workloads.size(); ++i) {
    search::SearchContext c;
    c.workload = workloads[i];
    c.target = *target;
    absl::StatusOr<std::unique_ptr<search::SearchStrategy>> s =
        search::MakeSearchStrategy(request.strategy, std::move(c));
    if (!s.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("workload ", i + 1, ": ", s.status().message()));
    }
    absl::StatusOr<schedules::Candidate> ref =
        schedules::BuildCandidate(workloads[i], *target, std::nullopt);
    if (!ref.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("workload ", i + 1, ": its reference kernel cannot be built for ",
                       target->ToString(), ": ", ref.status().message()));
    }
  }

  std::vector<double> baseline_ms(workloads.size(), 0);
  std::vector<std::string> baseline_labels(workloads.size());
  if (absl::Status s = CheckBaselines(request, keys, &baseline_ms, &baseline_labels); !s.ok()) {
    return s;
  }

  CheckedJob checked;
  checked.baseline_ms = std::move(baseline_ms);
  checked.baseline_labels = std::move(baseline_labels);
  checked.workloads = std::move(workloads);
  checked.keys = std::move(keys);
  checked.target = *std::move(target);
  checked.budgets = std::move(budgets);
  return checked;
}

}  // namespace tessel::server
