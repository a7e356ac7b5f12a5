#include "server/dashboard_page.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"

namespace tessel::server {
namespace {

constexpr int kWidth = 420;
constexpr int kHeight = 200;
constexpr int kLeft = 64;  // room for the latency labels
constexpr int kRight = 12;
constexpr int kTop = 12;
constexpr int kBottom = 36;  // room for the axis labels

std::string Time(int64_t unix_ms) {
  if (unix_ms <= 0) return "";
  return absl::FormatTime("%Y-%m-%d %H:%M:%S UTC", absl::FromUnixMillis(unix_ms),
                          absl::UTCTimeZone());
}

std::string Ms(double ms) {
  if (ms <= 0) return "-";
  if (ms < 1) return absl::StrFormat("%.4g us", ms * 1000);
  return absl::StrFormat("%.4g ms", ms);
}

std::string Duration(double s) {
  if (s < 60) return absl::StrFormat("%.0f s", s);
  if (s < 3600) return absl::StrFormat("%.1f min", s / 60);
  return absl::StrFormat("%.1f h", s / 3600);
}

// A task's baseline as a chart draws it; ms 0: none.
struct BaselineLine {
  double ms = 0;
  std::string label;
};

// "PyTorch eager 0.42 ms": how a baseline is labelled on a curve and in the task's heading.
std::string BaselineText(const BaselineLine& b) {
  return absl::StrFormat("%s %.4g ms", b.label, b.ms);
}

// A step curve of `points` (x, best ms) on [0, x_max] as an <svg>, with the baseline (when there
// is one) as a dashed horizontal line across the plot.
std::string Chart(const std::string& id, const std::string& x_label,
                  const std::vector<std::pair<double, double>>& points, double x_max,
                  double best_ms, const BaselineLine& baseline) {
  std::string out = absl::StrFormat(
      "<svg id=\"%s\" class=\"curve\" data-best-ms=\"%.6g\"%s width=\"%d\" height=\"%d\" "
      "viewBox=\"0 0 %d %d\" xmlns=\"http://www.w3.org/2000/svg\" role=\"img\">\n",
      id, best_ms,
      baseline.ms > 0 ? absl::StrFormat(" data-baseline-ms=\"%.6g\"", baseline.ms) : "", kWidth,
      kHeight, kWidth, kHeight);
  const double pw = kWidth - kLeft - kRight;
  const double ph = kHeight - kTop - kBottom;
  absl::StrAppendFormat(&out,
                        "<rect x=\"%d\" y=\"%d\" width=\"%g\" height=\"%g\" class=\"plot\"/>\n",
                        kLeft, kTop, pw, ph);
  if (points.empty() && baseline.ms <= 0) {
    absl::StrAppendFormat(&out,
                          "<text x=\"%g\" y=\"%g\" text-anchor=\"middle\">no successful "
                          "measurement yet</text>\n</svg>\n",
                          kLeft + pw / 2, kTop + ph / 2);
    return out;
  }
  // The y range holds the curve and the baseline, so that the line is always inside the plot.
  double lo = points.empty() ? baseline.ms : points[0].second;
  double hi = lo;
  for (const auto& p : points) {
    lo = std::min(lo, p.second);
    hi = std::max(hi, p.second);
  }
  if (baseline.ms > 0) {
    lo = std::min(lo, baseline.ms);
    hi = std::max(hi, baseline.ms);
  }
  // A log scale when the curve spans more than a factor of 10 (early candidates are often far
  // slower than the last), linear otherwise; a flat curve gets a band around it.
  const bool log_scale = hi / lo > 10;
  if (!log_scale) {
    const double pad = hi > lo ? (hi - lo) * 0.08 : lo * 0.1;
    lo = std::max(0.0, lo - pad);
    hi += pad;
  }
  auto yf = [&](double v) {
    const double f = log_scale ? (std::log(v) - std::log(lo)) / (std::log(hi) - std::log(lo))
                               : (v - lo) / (hi - lo);
    return kTop + ph * (1 - f);
  };
  const double xm = x_max > 0 ? x_max : 1;
  auto xf = [&](double x) { return kLeft + pw * std::clamp(x / xm, 0.0, 1.0); };
  // Axis labels: the latency at 4 levels, x at 0, half and the end.
  for (int i = 0; i <= 3; ++i) {
    const double f = i / 3.0;
    const double v =
        log_scale ? std::exp(std::log(lo) + f * (std::log(hi) - std::log(lo))) : lo + f * (hi - lo);
    const double y = yf(v);
    absl::StrAppendFormat(&out,
                          "<line x1=\"%d\" x2=\"%g\" y1=\"%.1f\" y2=\"%.1f\" class=\"grid\"/>"
                          "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%s</text>\n",
                          kLeft, kLeft + pw, y, y, kLeft - 4, y + 4, Ms(v));
  }
  for (int i = 0; i <= 2; ++i) {
    const double x = xm * i / 2;
    absl::StrAppendFormat(&out, "<text x=\"%.1f\" y=\"%g\" text-anchor=\"middle\">%s</text>\n",
                          xf(x), kTop + ph + 14,
                          x_label == "trials" ? absl::StrFormat("%.0f", x) : Duration(x));
  }
  absl::StrAppendFormat(&out, "<text x=\"%g\" y=\"%d\" text-anchor=\"middle\">%s%s</text>\n",
                        kLeft + pw / 2, kHeight - 4, x_label,
                        log_scale ? " (best latency, log scale)" : " (best latency)");
  std::string pts;
  for (size_t i = 0; i < points.size(); ++i) {
    if (i > 0) {
      absl::StrAppendFormat(&pts, "%.1f,%.1f ", xf(points[i].first), yf(points[i - 1].second));
    }
    absl::StrAppendFormat(&pts, "%.1f,%.1f ", xf(points[i].first), yf(points[i].second));
  }
  if (baseline.ms > 0) {
    // Drawn under the curve. Its label goes where the curve is not: a curve falls from left to
    // right, so a baseline below the curve's start is labelled above the line at the left, one
    // above it below the line at the right; either side flips when the plot's edge is too near.
    const double y = yf(baseline.ms);
    const bool left = points.empty() || baseline.ms < points.front().second;
    bool above = left;
    if (above && y - 14 < kTop) above = false;
    if (!above && y + 12 > kTop + ph) above = true;
    absl::StrAppendFormat(&out,
                          "<line class=\"baseline\" x1=\"%d\" x2=\"%g\" y1=\"%.1f\" y2=\"%.1f\" "
                          "stroke-dasharray=\"6 4\"/>"
                          "<text class=\"baseline\" x=\"%g\" y=\"%.1f\" text-anchor=\"%s\">%s"
                          "</text>\n",
                          kLeft, kLeft + pw, y, y, left ? kLeft + 4 : kLeft + pw - 4,
                          above ? y - 4 : y + 12, left ? "start" : "end",
                          HtmlEscape(BaselineText(baseline)));
  }
  if (points.empty()) {
    absl::StrAppendFormat(&out,
                          "<text x=\"%g\" y=\"%g\" text-anchor=\"middle\">no successful "
                          "measurement yet</text>\n</svg>\n",
                          kLeft + pw / 2, kTop + ph / 2);
    return out;
  }
  absl::StrAppendFormat(&out, "<polyline class=\"best\" points=\"%s\"/>\n", pts);
  // A dot at each improvement (the last point only extends the curve to the last trial).
  for (size_t i = 0; i < points.size(); ++i) {
    if (i > 0 && points[i].second == points[i - 1].second) continue;
    absl::StrAppendFormat(&out,
                          "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"2.5\"><title>%s</title></circle>\n",
                          xf(points[i].first), yf(points[i].second), Ms(points[i].second));
  }
  out += "</svg>\n";
  return out;
}

const char kStyle[] = R"(<style>
body { font-family: system-ui, sans-serif; margin: 1.5em; color: #222; }
h1 { font-size: 1.4em; } h2 { font-size: 1.2em; margin-top: 1.6em; } h3 { font-size: 1em; }
table { border-collapse: collapse; margin: 0.5em 0; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: left; font-size: 0.9em; }
th { background: #f3f3f3; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
.state-running { color: #0a6; } .state-failed { color: #c22; } .state-cancelled { color: #888; }
.task { display: inline-block; vertical-align: top; margin: 0.5em 1.5em 1em 0; }
.task code { font-size: 0.8em; color: #555; }
svg.curve { font-size: 10px; }
svg.curve rect.plot { fill: #fafafa; stroke: #bbb; }
svg.curve line.grid { stroke: #e4e4e4; }
svg.curve polyline.best { fill: none; stroke: #1f6feb; stroke-width: 2; }
svg.curve circle { fill: #1f6feb; }
svg.curve line.baseline { stroke: #d1242f; stroke-width: 1.5; }
svg.curve text.baseline { fill: #d1242f; }
.muted { color: #777; }
</style>
)";

void Workers(const DashboardData& d, std::string* out) {
  absl::StrAppend(out, "<h2 id=\"workers\">Workers</h2>\n");
  if (d.workers.empty()) {
    absl::StrAppend(out, d.live ? "<p class=\"muted\">No worker is connected.</p>\n"
                                : "<p class=\"muted\">No record names a worker.</p>\n");
    return;
  }
  absl::StrAppend(out, "<table><tr><th>worker</th>", d.live ? "<th>host</th>" : "",
                  "<th>devices</th><th>measured</th>",
                  d.live ? "<th>batches held</th><th>busy (last minute)</th>" : "", "<th>",
                  d.live ? "last heard" : "last record", "</th></tr>\n");
  for (const DashboardWorker& w : d.workers) {
    absl::StrAppend(out, "<tr><td>", HtmlEscape(w.worker_id), "</td>");
    if (d.live) absl::StrAppend(out, "<td>", HtmlEscape(w.host), "</td>");
    absl::StrAppend(out, "<td>", HtmlEscape(w.devices), "</td><td class=\"num\">", w.measured,
                    "</td>");
    if (d.live) {
      absl::StrAppend(out, "<td class=\"num\">", w.batches_in_flight, "</td><td class=\"num\">",
                      absl::StrFormat("%.0f%%", 100 * std::max(0.0, w.busy_fraction)), "</td>");
    }
    absl::StrAppend(out, "<td>", Time(w.last_seen_unix_ms), "</td></tr>\n");
  }
  absl::StrAppend(out, "</table>\n");
}

void Job(const DashboardData& d, const DashboardJob& job, std::string* out) {
  const store::JobRow& r = job.row;
  const char* state = store::JobStateName(r.state);
  absl::StrAppend(out, "<h2 id=\"job-", r.id, "\">Job ", r.id,
                  r.name.empty() ? "" : absl::StrCat(" ", HtmlEscape(r.name)),
                  " <span class=\"state-", state, "\">", state, "</span></h2>\n");
  const int64_t end_ms = r.finished_unix_ms > 0 ? r.finished_unix_ms : d.generated_unix_ms;
  absl::StrAppend(out, "<p>", HtmlEscape(r.target_key), ", strategy ", HtmlEscape(r.strategy), ", ",
                  job.trials, " of ", r.trials_budget, " trials, created ", Time(r.created_unix_ms),
                  ", ", r.finished_unix_ms > 0 ? "took " : "running for ",
                  Duration(std::max<int64_t>(0, end_ms - r.created_unix_ms) / 1000.0),
                  r.submitted_by.empty() ? "" : absl::StrCat(", by ", HtmlEscape(r.submitted_by)),
                  r.error.empty() ? "" : absl::StrCat(": ", HtmlEscape(r.error)), "</p>\n");
  // A column of best-vs-baseline ratios when any task of the job was given a baseline.
  bool baselines = false;
  for (const DashboardTask& t : job.tasks) baselines = baselines || t.row.baseline_ms > 0;
  absl::StrAppend(out,
                  "<table><tr><th>task</th><th>workload</th><th>state</th><th>trials</th>"
                  "<th>ok</th><th>best</th>",
                  baselines ? "<th>baseline</th><th title=\"the baseline's latency over the best: "
                              "&gt;1 means faster than the baseline\">vs baseline "
                              "(&gt;1: faster)</th>"
                            : "",
                  "<th>failures</th>", d.live ? "<th>queued</th><th>in flight</th>" : "",
                  "</tr>\n");
  for (const DashboardTask& t : job.tasks) {
    std::string failures;
    for (const auto& [status, n] : t.by_status) {
      if (status == "ok") continue;
      absl::StrAppend(&failures, failures.empty() ? "" : ", ", status, " ", n);
    }
    absl::StrAppend(out, "<tr><td><a href=\"#task-", t.row.id, "\">", t.row.id, "</a></td><td>",
                    HtmlEscape(t.workload_name), "</td><td class=\"state-",
                    store::JobStateName(t.row.state), "\">", store::JobStateName(t.row.state),
                    "</td><td class=\"num\">", t.trials, " / ", t.row.trials_budget,
                    "</td><td class=\"num\">", t.ok, "</td><td class=\"num\">", Ms(t.best_ms),
                    "</td>");
    if (baselines) {
      const double b = t.row.baseline_ms;
      absl::StrAppend(
          out, "<td>",
          b > 0 ? HtmlEscape(BaselineText({b, t.row.baseline_label})) : std::string("-"),
          "</td><td class=\"num ratio\">",
          b > 0 && t.best_ms > 0 ? absl::StrFormat("%.2fx", b / t.best_ms) : std::string("-"),
          "</td>");
    }
    absl::StrAppend(out, "<td>", failures.empty() ? "none" : failures, "</td>");
    if (d.live) {
      absl::StrAppend(out, "<td class=\"num\">", std::max<int64_t>(0, t.queued),
                      "</td><td class=\"num\">", std::max<int64_t>(0, t.in_flight), "</td>");
    }
    absl::StrAppend(out, "</tr>\n");
  }
  absl::StrAppend(out, "</table>\n");
  for (const DashboardTask& t : job.tasks) {
    absl::StrAppend(out, "<div class=\"task\" id=\"task-", t.row.id, "\"><h3>Task ", t.row.id, ": ",
                    HtmlEscape(t.workload_name), ", best ", Ms(t.best_ms),
                    t.row.baseline_ms > 0 && t.best_ms > 0
                        ? absl::StrFormat(", %.2fx %s", t.row.baseline_ms / t.best_ms,
                                          HtmlEscape(t.row.baseline_label))
                        : "",
                    "</h3><code>", HtmlEscape(t.workload_spec), "</code><br>\n");
    std::vector<std::pair<double, double>> by_trial, by_time;
    for (const CurvePoint& p : t.curve) {
      by_trial.emplace_back(static_cast<double>(p.trial), p.best_ms);
      by_time.emplace_back(p.elapsed_s, p.best_ms);
    }
    const double trials_max = static_cast<double>(std::max(t.trials, t.row.trials_budget));
    const BaselineLine baseline{t.row.baseline_ms, t.row.baseline_label};
    out->append(Chart(absl::StrCat("curve-trials-", t.row.id), "trials", by_trial, trials_max,
                      t.best_ms, baseline));
    out->append(Chart(absl::StrCat("curve-time-", t.row.id), "seconds since the job began", by_time,
                      std::max(1.0, t.last_trial_elapsed_ms / 1000.0), t.best_ms, baseline));
    absl::StrAppend(out, "</div>\n");
  }
}

}  // namespace

std::string HtmlEscape(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string RenderDashboard(const DashboardData& d) {
  std::string out = "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n";
  if (d.live) out += "<meta http-equiv=\"refresh\" content=\"10\">\n";
  absl::StrAppend(&out, "<title>Tessel: ", HtmlEscape(d.source), "</title>\n", kStyle,
                  "</head><body>\n<h1>Tessel ", d.live ? "dashboard" : "report", "</h1>\n");
  int64_t running = 0, trials = 0;
  for (const DashboardJob& j : d.jobs) {
    if (!store::IsFinished(j.row.state)) ++running;
    trials += j.trials;
  }
  absl::StrAppend(
      &out, "<p>Tuning log <code>", HtmlEscape(d.source), "</code>, ", Time(d.generated_unix_ms),
      ": ", d.jobs.size(), " jobs shown (", running, " unfinished), ", trials, " trials, ",
      d.workers.size(), " workers",
      d.jobs_not_shown > 0 ? absl::StrCat("; ", d.jobs_not_shown, " older jobs not shown") : "",
      ".</p>\n");
  Workers(d, &out);
  absl::StrAppend(&out, "<h2>Jobs</h2>\n");
  if (d.jobs.empty()) {
    absl::StrAppend(&out, "<p class=\"muted\">No job yet.</p>\n");
  } else {
    absl::StrAppend(&out,
                    "<table><tr><th>job</th><th>name</th><th>state</th><th>target</th>"
                    "<th>tasks</th><th>trials</th><th>created</th></tr>\n");
    for (const DashboardJob& j : d.jobs) {
      const char* state = store::JobStateName(j.row.state);
      absl::StrAppend(&out, "<tr><td><a href=\"#job-", j.row.id, "\">", j.row.id, "</a></td><td>",
                      HtmlEscape(j.row.name), "</td><td class=\"state-", state, "\">", state,
                      "</td><td>", HtmlEscape(j.row.target_key), "</td><td class=\"num\">",
                      j.tasks.size(), "</td><td class=\"num\">", j.trials, " / ",
                      j.row.trials_budget, "</td><td>", Time(j.row.created_unix_ms),
                      "</td></tr>\n");
    }
    absl::StrAppend(&out, "</table>\n");
  }
  for (const DashboardJob& j : d.jobs) Job(d, j, &out);
  out += "</body></html>\n";
  return out;
}

}  // namespace tessel::server
