#pragma once

// The dashboard as one self-contained HTML page: a summary, the workers, the jobs and, for each
// task, its tuning curve (the best latency so far against trials and against seconds since the
// job was created) drawn here as inline SVG: no script, no external file, so that the page
// `tessel report` writes can be mailed or archived. The live page (tessel serve --http) reloads
// itself every 10 s (a meta refresh).
//
// Each curve is an <svg> with id "curve-trials-TASK" or "curve-time-TASK" and the attribute
// data-best-ms (the task's best latency, %.6g): what tests and scrapers look for. A task whose job
// was given a baseline (PyTorch eager, cuBLAS) has it on both curves as a dashed
// <line class="baseline"> with a <text class="baseline"> label ("PyTorch eager 0.42 ms"), the svg
// gets data-baseline-ms, the y range includes it, and the job's task table gets the baseline and
// the ratio baseline / best (>1: faster than the baseline).
//
// Threads: a free function, callable from any thread.

#include <string>

#include "server/dashboard_data.h"

namespace tessel::server {

std::string RenderDashboard(const DashboardData& data);

// `text` with &, <, >, " and ' escaped for HTML text and attribute values.
std::string HtmlEscape(const std::string& text);

}  // namespace tessel::server
