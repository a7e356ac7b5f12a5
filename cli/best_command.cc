#include "cli/best_command.h"

#include <ctime>
#include <iostream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "cli/exit_code.h"
#include "nlohmann/json.hpp"
#include "schedules/space/candidate.h"
#include "schedules/workload/builtins.h"
#include "schedules/workload/key.h"

namespace tessel::cli {
namespace {

// The workload as a user recognizes it: its one-line spec, or "custom workload" for a definition.
std::string WorkloadLabel(const schedules::Workload& w) {
  if (w.spec.find('\n') == std::string::npos && !w.spec.empty()) return w.spec;
  return w.name.empty() || w.name == "custom" ? "custom workload" : w.name;
}

std::string FormatUnixMs(int64_t unix_ms) {
  const std::time_t t = static_cast<std::time_t>(unix_ms / 1000);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M:%S UTC", &tm);
  return buf;
}

}  // namespace

void AddBestCommand(CLI::App& app) {
  auto opts = std::make_shared<BestOptions>();
  CLI::App* cmd = app.add_subcommand(
      "best", "Print the fastest kernel of a workload and target found in a tuning log");
  cmd->add_option("--db", opts->db, "Tuning log (SQLite file) to read; opened read-only")
      ->required();
  cmd->add_option("--workload,-w", opts->workload,
                  "Built-in spec such as 'matmul(M=64, N=64, K=64)', a definition, or a file")
      ->required();
  cmd->add_option("--target,-t", opts->target, "host or cuda")->capture_default_str();
  cmd->add_option("--arch", opts->arch, "CUDA architecture: sm_80 or sm_90")->capture_default_str();
  cmd->add_option("--emit", opts->emit,
                  "cuda, cpp, json or summary (default: the target's source)");
  cmd->callback([opts]() { SetExitCode(RunBest(*opts)); });
}

absl::StatusOr<std::optional<BestRecord>> FetchBestFromDb(const std::string& db_path,
                                                          const schedules::Workload& workload,
                                                          const schedules::Target& target) {
  store::TuningLogOptions options;
  options.read_only = true;
  auto log = store::OpenTuningLog(db_path, options);
  if (!log.ok()) return log.status();
  const std::string key = schedules::WorkloadKey(workload);
  const std::string target_key = target.ToString();
  auto best = (*log)->Best(key, target_key);
  if (!best.ok()) return best.status();
  if (!best->has_value()) return std::optional<BestRecord>();
  auto count = (*log)->CountOk(key, target_key);
  if (!count.ok()) return count.status();
  return std::optional<BestRecord>(BestRecord{std::move(**best), *count, db_path});
}

absl::Status NoBestRecordError(const schedules::Workload& workload, const schedules::Target& target,
                               const std::string& source) {
  return absl::NotFoundError(absl::StrCat("no ok record of ", WorkloadLabel(workload), " (key ",
                                          schedules::WorkloadKey(workload), ") for ",
                                          target.ToString(), " in ", source,
                                          "; tune it first with tessel tune or tessel submit"));
}

absl::StatusOr<std::string> ResolveBestEmit(const std::string& emit,
                                            const schedules::Target& target) {
  const std::string e = emit.empty() ? (target.is_cuda() ? "cuda" : "cpp") : emit;
  if (e != "cuda" && e != "cpp" && e != "json" && e != "summary") {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown --emit '", e, "'; use cuda, cpp, json or summary"));
  }
  if ((e == "cuda" && !target.is_cuda()) || (e == "cpp" && target.is_cuda())) {
    return absl::InvalidArgumentError(
        absl::StrCat("--emit ", e, " does not match --target ", target.is_cuda() ? "cuda" : "host",
                     "; use --emit ", target.is_cuda() ? "cuda" : "cpp"));
  }
  return e;
}

absl::Status PrintBestRecord(const schedules::Workload& workload, const schedules::Target& target,
                             const BestRecord& best, const std::string& emit, std::ostream& out) {
  const store::Record& r = best.record;
  std::optional<schedules::Trace> trace;
  nlohmann::json trace_json = nlohmann::json::parse(r.trace_json, nullptr, false);
  if (trace_json.is_discarded()) {
    return absl::DataLossError(absl::StrCat("record ", r.uid, " in ", best.source,
                                            " has a trace that is not JSON; the log is damaged"));
  }
  if (!trace_json.is_null()) {
    auto t = schedules::Trace::FromJson(trace_json);
    if (!t.ok()) {
      return absl::Status(t.status().code(), absl::StrCat("record ", r.uid, " in ", best.source,
                                                          " has a trace this build cannot read: ",
                                                          t.status().message()));
    }
    trace = std::move(*t);
  }
  auto c = schedules::BuildCandidate(workload, target, trace);
  if (!c.ok()) {
    return absl::Status(c.status().code(),
                        absl::StrCat("the best record ", r.uid, " in ", best.source,
                                     " does not rebuild here: ", c.status().message()));
  }
  if (emit == "json") {
    out << schedules::CandidateToJson(*c, "").dump(2) << "\n";
  } else if (emit == "summary") {
    out << absl::StrFormat(
        "The best of %d ok record%s of %s (key %s) for %s in %s is %s: median %.4f ms over %d "
        "repeat%s (%.4f to %.4f ms), measured on %s (device %d) by worker %s at %s; uid %s.\n",
        best.ok_records, best.ok_records == 1 ? "" : "s", WorkloadLabel(workload),
        schedules::WorkloadKey(workload), target.ToString(), best.source,
        trace ? "a tuned schedule" : "the reference lowering", r.median_ms,
        static_cast<int>(r.repeats_ms.size()), r.repeats_ms.size() == 1 ? "" : "s",
        r.repeats_ms.empty() ? 0.0 : *std::min_element(r.repeats_ms.begin(), r.repeats_ms.end()),
        r.repeats_ms.empty() ? 0.0 : *std::max_element(r.repeats_ms.begin(), r.repeats_ms.end()),
        r.device_name.empty() ? "an unnamed device" : r.device_name, r.device,
        r.worker_id.empty() ? "(none)" : r.worker_id, FormatUnixMs(r.unix_ms), r.uid);
  } else {
    out << c->source.code;
  }
  return absl::OkStatus();
}

int RunBest(const BestOptions& o) {
  auto fail = [](const absl::Status& s) {
    std::cerr << "tessel best: " << s.message() << "\n";
    return 1;
  };
  // Flags.
  auto workload = schedules::LoadWorkload(o.workload);
  if (!workload.ok()) return fail(workload.status());
  auto target = schedules::MakeTarget(o.target, o.arch);
  if (!target.ok()) return fail(target.status());
  auto emit = ResolveBestEmit(o.emit, *target);
  if (!emit.ok()) return fail(emit.status());
  // Fetch.
  auto best = FetchBestFromDb(o.db, *workload, *target);
  if (!best.ok()) return fail(best.status());
  if (!best->has_value()) return fail(NoBestRecordError(*workload, *target, o.db));
  // Print.
  absl::Status printed = PrintBestRecord(*workload, *target, **best, *emit, std::cout);
  if (!printed.ok()) return fail(printed);
  return 0;
}

}  // namespace tessel::cli
