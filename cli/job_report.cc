#include "cli/job_report.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ostream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace tessel::cli {

std::string Rate(double flops, double bytes, double ms) {
  if (ms <= 0) return "-";
  if (bytes <= 0 || flops >= 4 * bytes) return absl::StrFormat("%.1f GFLOP/s", flops / (ms * 1e6));
  return absl::StrFormat("%.1f GB/s", bytes / (ms * 1e6));
}

namespace {

std::string Duration(double s) {
  if (!std::isfinite(s) || s < 0) return "?";
  if (s < 60) return absl::StrFormat("%.0f s", s);
  if (s < 3600)
    return absl::StrFormat("%dm%02ds", static_cast<int>(s) / 60, static_cast<int>(s) % 60);
  return absl::StrFormat("%dh%02dm", static_cast<int>(s) / 3600, static_cast<int>(s) / 60 % 60);
}

// The one-line view shows the best latency of the first task that has one (and names the task
// when the job has several).
const proto::TaskInfo* FirstWithResult(const proto::JobInfo& job) {
  for (const proto::TaskInfo& t : job.tasks()) {
    if (t.best_ms() > 0) return &t;
  }
  return nullptr;
}

}  // namespace

std::string ProgressLine(const proto::JobInfo& job, int width) {
  const int64_t budget = std::max<int64_t>(job.trials_budget(), 1);
  const double frac = std::min(1.0, static_cast<double>(job.trials_done()) / budget);
  const int filled = static_cast<int>(std::lround(frac * width));
  std::string bar =
      absl::StrCat("[", std::string(filled, '#'), std::string(width - filled, '.'), "]");
  std::string line =
      absl::StrFormat("%s %d/%d trials", bar, job.trials_done(), job.trials_budget());
  if (const proto::TaskInfo* t = FirstWithResult(job)) {
    absl::StrAppend(
        &line, absl::StrFormat("  best %.4g ms (%s)", t->best_ms(),
                               Rate(t->flops(), static_cast<double>(t->bytes()), t->best_ms())));
    if (job.tasks_size() > 1) absl::StrAppend(&line, " [", t->workload_name(), "]");
  } else {
    absl::StrAppend(&line, "  best -");
  }
  if (job.trials_per_s() > 0) {
    absl::StrAppend(&line, absl::StrFormat("  %.1f trials/s", job.trials_per_s()));
    if (!IsFinished(job.state())) {
      const double left = static_cast<double>(job.trials_budget() - job.trials_done());
      absl::StrAppend(&line, "  ETA ", Duration(left / job.trials_per_s()));
    }
  }
  absl::StrAppend(&line, "  ", JobStateName(job.state()));
  if (!job.warning().empty()) absl::StrAppend(&line, "; warning: ", job.warning());
  return line;
}

void PrintJob(std::ostream& out, const proto::JobInfo& job) {
  out << absl::StrFormat(
      "job %d%s: %s, target %s, strategy %s, priority %d, %d/%d trials, %s (search %.1f%%)\n",
      job.job_id(), job.name().empty() ? "" : absl::StrCat(" (", job.name(), ")"),
      JobStateName(job.state()), job.target(), job.strategy(), job.priority(), job.trials_done(),
      job.trials_budget(), Duration(job.elapsed_s()),
      job.elapsed_s() > 0 ? 100 * job.search_s() / job.elapsed_s() : 0.0);
  if (!job.submitted_by().empty()) out << "  submitted by token '" << job.submitted_by() << "'\n";
  if (!job.error().empty()) out << "  error: " << job.error() << "\n";
  if (!job.warning().empty()) out << "  warning: " << job.warning() << "\n";
  auto label = [](const proto::TaskInfo& t) {
    if (t.workload_spec().find('\n') != std::string::npos || t.workload_spec().empty()) {
      return absl::StrCat(t.workload_name(), " (key ", t.workload_key(), ")");
    }
    return t.workload_spec();
  };
  int width = 8;
  for (const proto::TaskInfo& t : job.tasks()) {
    width = std::max(width, static_cast<int>(label(t).size()));
  }
  // A column of best-vs-baseline ratios when the job was given baselines.
  std::string baseline_label;
  for (const proto::TaskInfo& t : job.tasks()) {
    if (t.baseline_ms() > 0 && baseline_label.empty()) baseline_label = t.baseline_label();
  }
  const bool baselines = !baseline_label.empty();
  out << absl::StrFormat("  %-6s %-*s %-9s %9s %6s %12s %16s%s\n", "task", width, "workload",
                         "state", "trials", "ok", "best ms", "rate",
                         baselines ? absl::StrFormat(" %12s", "vs baseline") : "");
  for (const proto::TaskInfo& t : job.tasks()) {
    std::string ratio;
    if (baselines) {
      ratio = absl::StrFormat(" %12s", t.baseline_ms() > 0 && t.best_ms() > 0
                                           ? absl::StrFormat("%.2fx", t.baseline_ms() / t.best_ms())
                                           : std::string("-"));
    }
    out << absl::StrFormat(
        "  %-6d %-*s %-9s %4d/%-4d %6d %12s %16s%s\n", t.task_id(), width, label(t),
        JobStateName(t.state()), t.trials_done(), t.trials_budget(), t.trials_ok(),
        t.best_ms() > 0 ? absl::StrFormat("%.4f", t.best_ms()) : std::string("-"),
        Rate(t.flops(), static_cast<double>(t.bytes()), t.best_ms()), ratio);
  }
  if (baselines) {
    out << "  vs baseline: the baseline's latency over the best (>1: faster than it)";
    for (const proto::TaskInfo& t : job.tasks()) {
      if (t.baseline_ms() > 0) {
        out << absl::StrFormat("; task %d: %s %.4g ms", t.task_id(), t.baseline_label(),
                               t.baseline_ms());
      }
    }
    out << "\n";
  }
  for (const proto::TaskInfo& t : job.tasks()) {
    if (!t.note().empty()) out << "  task " << t.task_id() << " " << t.note() << "\n";
  }
  for (const proto::TaskInfo& t : job.tasks()) {
    if (t.screen_margin() <= 0) continue;
    out << absl::StrFormat(
        "  task %d screening: %d of %d ok results screened only, %d timed in full; margin "
        "%.1f%% (from %d screened/confirmed pairs%s)\n",
        t.task_id(), t.trials_screened(), t.trials_ok(), t.trials_ok() - t.trials_screened(),
        100 * t.screen_margin(), t.screen_pairs(),
        t.screen_pairs() < 8 ? ", too few: the initial margin or the job's" : "");
  }
}

void PrintTimeline(std::ostream& out, const proto::JobInfo& job) {
  if (job.timeline().empty()) {
    out << "timeline of job " << job.job_id()
        << ": none (the server keeps it for the results of the jobs it runs)\n";
    return;
  }
  int64_t candidates = 0;
  for (const proto::TimelineStage& s : job.timeline()) {
    if (s.name() == "total") candidates = s.count();
  }
  const double wall_ms = 1000 * job.elapsed_s();
  out << absl::StrFormat(
      "timeline of job %d: %d candidates in %s (%.2f candidates/s over the job)\n", job.job_id(),
      candidates, Duration(job.elapsed_s()),
      job.elapsed_s() > 0 ? static_cast<double>(candidates) / job.elapsed_s() : 0.0);
  out << absl::StrFormat("  %-16s %10s %12s %9s %12s  %s\n", "stage", "candidates", "sum s",
                         "% wall", "median ms", "what");
  for (const proto::TimelineStage& s : job.timeline()) {
    out << absl::StrFormat("  %-16s %10d %12.3f %8.1f%% %12.3f  %s\n", s.name(), s.count(),
                           s.sum_ms() / 1000, wall_ms > 0 ? 100 * s.sum_ms() / wall_ms : 0.0,
                           s.median_ms(), s.what());
  }
}

void PrintJobList(std::ostream& out, const proto::ListJobsResponse& jobs) {
  if (jobs.jobs().empty()) {
    out << "no jobs; submit one with tessel submit\n";
    return;
  }
  out << absl::StrFormat("%-6s %-10s %-18s %-10s %5s %13s %9s  %s\n", "job", "state", "target",
                         "strategy", "prio", "trials", "elapsed", "name");
  for (const proto::JobInfo& j : jobs.jobs()) {
    out << absl::StrFormat("%-6d %-10s %-18s %-10s %5d %6d/%-6d %9s  %s\n", j.job_id(),
                           JobStateName(j.state()), j.target(), j.strategy(), j.priority(),
                           j.trials_done(), j.trials_budget(), Duration(j.elapsed_s()), j.name());
  }
}

void PrintWorkers(std::ostream& out, const proto::ListWorkersResponse& workers) {
  if (workers.workers().empty()) {
    out << "no workers connected; start one with tessel worker --server HOST:PORT\n";
    return;
  }
  const int64_t now = absl::ToUnixMillis(absl::Now());
  out << absl::StrFormat("%-28s %-10s %-40s %8s %10s %10s  %s\n", "worker", "version", "devices",
                         "batches", "measured", "heartbeat", "state");
  for (const proto::WorkerInfo& w : workers.workers()) {
    std::string devices;
    for (const proto::Device& d : w.devices()) {
      if (!devices.empty()) devices += ", ";
      absl::StrAppend(&devices, d.ordinal(), ":", d.name(), " (", d.arch(), ")");
    }
    const double ago = w.last_heartbeat_unix_ms() > 0
                           ? static_cast<double>(now - w.last_heartbeat_unix_ms()) / 1000.0
                           : -1;
    out << absl::StrFormat("%-28s %-10s %-40s %8d %10d %10s  %s\n", w.worker_id(), w.version(),
                           devices, w.batches_in_flight(), w.candidates_measured(),
                           ago < 0 ? std::string("-") : absl::StrFormat("%.0f s ago", ago),
                           w.draining() ? "draining" : "serving");
  }
}

void AddReattachFlag(CLI::App* cmd, double* seconds) {
  cmd->add_option("--reattach-s", *seconds,
                  "With --wait: how long to keep trying to reach a server that went away (a "
                  "restart resumes the job), 0: give up at once")
      ->capture_default_str();
}

absl::Status CheckReattachSeconds(double seconds) {
  if (seconds >= 0 && std::isfinite(seconds)) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("--reattach-s ", seconds, ": give 0 (do not reattach) or more seconds"));
}

absl::StatusOr<proto::JobInfo> WaitForJob(const Client& client, int64_t job_id,
                                          std::ostream& progress, bool terminal,
                                          const WaitOptions& options) {
  absl::Time last_line = absl::InfinitePast();
  size_t last_width = 0;
  bool seen = options.job_known;  // reattaching makes sense
  absl::Time lost_at = absl::InfinitePast();
  bool lost = false;
  constexpr absl::Duration kFirstBackoff = absl::Milliseconds(200);
  absl::Duration backoff = kFirstBackoff;
  // A line of its own, after the progress line drawn in place.
  auto say = [&](const std::string& line) {
    if (terminal && last_width > 0) progress << "\n";
    last_width = 0;
    progress << options.command << ": " << line << "\n";
    progress.flush();
  };
  auto show = [&](const proto::JobInfo& job) {
    seen = true;
    if (lost) {
      lost = false;
      backoff = kFirstBackoff;
      say(absl::StrCat("reattached to job ", job_id, " at ", client.address()));
    }
    const std::string line = ProgressLine(job);
    if (terminal) {
      progress << "\r" << line;
      if (line.size() < last_width) progress << std::string(last_width - line.size(), ' ');
      last_width = line.size();
      progress.flush();
    } else if (IsFinished(job.state()) || absl::Now() - last_line >= absl::Seconds(10)) {
      progress << line << "\n";
      progress.flush();
      last_line = absl::Now();
    }
  };
  while (true) {
    absl::StatusOr<proto::JobInfo> last = client.WatchJob(job_id, show);
    const bool retry = !last.ok() && absl::IsUnavailable(last.status()) && seen &&
                       options.reattach_for > absl::ZeroDuration();
    if (!retry) {
      if (terminal && last_width > 0) progress << "\n";
      return last;
    }
    if (!lost) {
      lost = true;
      lost_at = absl::Now();
      say(absl::StrCat("lost the server at ", client.address(), "; trying again for up to ",
                       absl::ToDoubleSeconds(options.reattach_for), " s to follow job ", job_id));
    } else if (absl::Now() - lost_at >= options.reattach_for) {
      return absl::UnavailableError(absl::StrCat(
          last.status().message(), "; gave up following job ", job_id, " after ",
          absl::ToDoubleSeconds(options.reattach_for),
          " s: the job stays in the log and resumes when a server on it starts (`tessel status ",
          job_id, " --wait` follows it again)"));
    }
    absl::SleepFor(backoff);
    backoff = std::min(backoff * 2, absl::Seconds(2));
  }
}

}  // namespace tessel::cli
