#include "cli/baseline_flags.h"

#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <optional>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "schedules/workload/builtins.h"
#include "schedules/workload/key.h"
#include "server/job_request.h"

namespace tessel::cli {
namespace {

constexpr char kFlagExample[] = "--baseline 'matmul(M=1024, N=1024, K=1024)=0.42'";

// `text` as a number of milliseconds, or what is wrong with it (`what` names where it came from).
absl::StatusOr<double> ParseMs(const std::string& what, absl::string_view text) {
  double ms = 0;
  const std::string t(absl::StripAsciiWhitespace(text));
  if (t.empty() || !absl::SimpleAtod(t, &ms) || !std::isfinite(ms)) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": '", t, "' is not a number of milliseconds; give one such as 0.42"));
  }
  if (ms <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": ", t, " ms is not positive; a baseline is the latency of a run, e.g. 0.42"));
  }
  return ms;
}

// The key of `text` as a workload, or nullopt when it is none.
std::optional<std::string> KeyOf(const std::string& text) {
  absl::StatusOr<schedules::Workload> w = schedules::ParseWorkloadText(text);
  if (!w.ok()) return std::nullopt;
  return schedules::WorkloadKey(*w);
}

}  // namespace

void AddBaselineFlags(CLI::App* cmd, BaselineFlags* flags) {
  cmd->add_option("--baseline", flags->specs,
                  "SPEC=MS: the latency of a workload (SPEC as given to --workload) in another "
                  "implementation, drawn as a line on its tuning curves; repeat for several");
  cmd->add_option("--baselines", flags->file,
                  "A file of baselines as bench/torch_baselines.py prints them: one "
                  "SPEC<TAB>median_ms<TAB>repeats line per workload");
  cmd->add_option("--baseline-label", flags->label, "What the baselines measured, e.g. cuBLAS")
      ->capture_default_str();
}

absl::StatusOr<BaselineArg> ParseBaselineFlag(const std::string& value) {
  const std::string what = absl::StrCat("--baseline '", value, "'");
  const size_t eq = value.rfind('=');
  if (eq == std::string::npos || absl::StripAsciiWhitespace(value.substr(0, eq)).empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(what,
                     " is not SPEC=MS: give the workload as passed to --workload, '=', and its "
                     "latency in milliseconds, e.g. ",
                     kFlagExample));
  }
  // A spec without "=MS" ("matmul(M=1024)") splits at its own last '=': its tail is no number.
  absl::StatusOr<double> ms = ParseMs(what, value.substr(eq + 1));
  if (!ms.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(ms.status().message(), " (write SPEC=MS, e.g. ", kFlagExample, ")"));
  }
  return BaselineArg{std::string(absl::StripAsciiWhitespace(value.substr(0, eq))), *ms, what};
}

absl::StatusOr<std::vector<BaselineArg>> ParseBaselinesTsv(std::istream& in,
                                                           const std::string& file) {
  std::vector<BaselineArg> out;
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (absl::StripAsciiWhitespace(line).empty() || line[0] == '#') continue;
    const std::string where = absl::StrCat(file, " line ", n);
    std::vector<std::string> fields = absl::StrSplit(line, '\t');
    if (fields.size() < 2 || fields.size() > 3 || absl::StripAsciiWhitespace(fields[0]).empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, " is not SPEC<TAB>median_ms<TAB>repeats (found ", fields.size(),
                       " tab-separated fields in '", server::ShortQuote(line),
                       "'); give the lines bench/torch_baselines.py prints, one per workload"));
    }
    absl::StatusOr<double> ms = ParseMs(absl::StrCat(where, ", median_ms"), fields[1]);
    if (!ms.ok()) return ms.status();
    if (fields.size() == 3) {
      int64_t repeats = 0;
      if (!absl::SimpleAtoi(fields[2], &repeats) || repeats < 1) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, ", repeats: '", fields[2],
                         "' is not a positive count of runs; give the lines "
                         "bench/torch_baselines.py prints, or leave the third field out"));
      }
    }
    out.push_back({std::string(absl::StripAsciiWhitespace(fields[0])), *ms, where});
  }
  if (in.bad()) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot read --baselines ", file, ": a read failed; check the file"));
  }
  return out;
}

absl::Status AddBaselinesToRequest(const BaselineFlags& flags,
                                   const std::vector<std::string>& workload_args,
                                   proto::SubmitJobRequest* request) {
  std::vector<BaselineArg> all;
  for (const std::string& value : flags.specs) {
    absl::StatusOr<BaselineArg> b = ParseBaselineFlag(value);
    if (!b.ok()) return b.status();
    all.push_back(*std::move(b));
  }
  if (!flags.file.empty()) {
    std::ifstream in(flags.file);
    if (!in) {
      return absl::NotFoundError(
          absl::StrCat("cannot read --baselines ", flags.file, ": ", std::strerror(errno),
                       "; give the file bench/torch_baselines.py's output was saved to (python3 "
                       "bench/torch_baselines.py SPEC... > baselines.tsv)"));
    }
    absl::StatusOr<std::vector<BaselineArg>> lines = ParseBaselinesTsv(in, flags.file);
    if (!lines.ok()) return lines.status();
    for (BaselineArg& b : *lines) all.push_back(std::move(b));
  }
  if (all.empty()) return absl::OkStatus();
  const bool blank = absl::StripAsciiWhitespace(flags.label).empty();
  if (blank || flags.label.size() > server::kMaxBaselineLabelBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--baseline-label '", server::ShortQuote(flags.label), "' is ",
        blank ? "empty" : "not one short line", ": name what the baselines measured in at most ",
        server::kMaxBaselineLabelBytes, " bytes, e.g. cuBLAS"));
  }
  for (char c : flags.label) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
      return absl::InvalidArgumentError(
          "--baseline-label has a control character (a line break?): give one line of text, "
          "e.g. cuBLAS");
    }
  }

  const int n = request->workloads_size();
  std::vector<std::optional<std::string>> keys(n);  // parsed when first needed
  std::vector<std::string> given(n);                // the origin of each workload's baseline
  for (const BaselineArg& b : all) {
    std::optional<int> task;
    for (int i = 0; i < n && !task; ++i) {
      const std::string arg =
          i < static_cast<int>(workload_args.size()) ? workload_args[i] : request->workloads(i);
      if (b.spec == absl::StripAsciiWhitespace(arg) ||
          b.spec == absl::StripAsciiWhitespace(request->workloads(i))) {
        task = i;
      }
    }
    if (!task) {
      // The same workload written otherwise (spacing, order of arguments).
      if (std::optional<std::string> key = KeyOf(b.spec)) {
        for (int i = 0; i < n && !task; ++i) {
          if (!keys[i]) keys[i] = KeyOf(request->workloads(i)).value_or("");
          if (*keys[i] == *key) task = i;
        }
      }
    }
    if (!task) {
      std::string listed;
      for (int i = 0; i < n; ++i) {
        absl::StrAppend(
            &listed, i > 0 ? ", '" : "'",
            server::ShortQuote(i < static_cast<int>(workload_args.size()) ? workload_args[i]
                                                                          : request->workloads(i)),
            "'");
      }
      return absl::InvalidArgumentError(absl::StrCat(
          b.origin, ": '", server::ShortQuote(b.spec), "' is not one of the job's workloads (",
          listed, "); give a baseline only for a workload passed to --workload, spelled as there"));
    }
    if (!given[*task].empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(b.origin, ": workload '", server::ShortQuote(b.spec),
                       "' already has a baseline (", given[*task], "); give each workload one"));
    }
    given[*task] = b.origin;
    proto::Baseline* p = request->add_baselines();
    p->set_workload(request->workloads(*task));
    p->set_ms(b.ms);
    p->set_label(flags.label);
  }
  return absl::OkStatus();
}

}  // namespace tessel::cli
