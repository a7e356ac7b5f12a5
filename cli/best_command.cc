#include "cli/best_command.h"

#include "cli/client.h"

#include <ctime>
#include <iostream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "cli/exit_code.h"
#include "nlohmann/json.hpp"
#include "schedules/space/candidate.h"
#include "schedules/workload/builtins.h"
#include "schedules/workload/key.h"
#include "store/measured_traces.h"

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
  CLI::Option* db =
      cmd->add_option("--db", opts->db, "Tuning log (SQLite file) to read; opened read-only");
  CLI::Option* server = cmd->add_option("--server,-s", opts->server,
                                        "Ask this server (HOST:PORT) instead of reading a log");
  db->excludes(server);
  server->excludes(db);
  cmd->add_option("--workload,-w", opts->workload,
                  "Built-in spec such as 'matmul(M=64, N=64, K=64)', a definition, or a file")
      ->required();
  cmd->add_option("--target,-t", opts->target, "host or cuda")->capture_default_str();
  cmd->add_option("--arch", opts->arch, "CUDA architecture: sm_80 or sm_90")->capture_default_str();
  cmd->add_option("--emit", opts->emit,
                  "cuda, cpp, json or summary (default: the target's source)");
  AddTransportFlags(cmd, &opts->transport);
  cmd->callback([opts]() { SetExitCode(RunBest(*opts)); });
}

absl::StatusOr<std::optional<BestRecord>> FetchBestFromDb(const std::string& db_path,
                                                          const schedules::Workload& workload,
                                                          const schedules::Target& target) {
  store::TuningLogOptions options;
  options.read_only = true;
  auto log = store::OpenTuningLog(db_path, options);
  if (!log.ok()) return log.status();
  auto best = store::BestReplayingRecord(log->get(), workload, target, [](const std::string& line) {
    std::cerr << "tessel best: warning: " << line << "\n";
  });
  if (!best.ok()) return best.status();
  if (!best->has_value()) return std::optional<BestRecord>();
  auto count = (*log)->CountOk(schedules::WorkloadKey(workload), target.ToString());
  if (!count.ok()) return count.status();
  return std::optional<BestRecord>(BestRecord{std::move((*best)->record), *count, db_path});
}

absl::StatusOr<std::optional<BestRecord>> FetchBestFromServer(
    const std::string& address, const proto::TransportOptions& transport,
    const std::string& workload_arg, const schedules::Target& target) {
  absl::StatusOr<Client> client = Client::Connect(address, transport);
  if (!client.ok()) return client.status();
  absl::StatusOr<std::string> text = WorkloadArgumentText(workload_arg);
  if (!text.ok()) return text.status();
  proto::QueryBestRequest request;
  request.set_workload(*text);
  request.mutable_target()->set_kind(target.is_cuda() ? "cuda" : "host");
  request.mutable_target()->set_arch(target.is_cuda() ? target.arch : "");
  absl::StatusOr<proto::BestRecord> b = client->QueryBest(request);
  if (absl::IsNotFound(b.status())) return std::optional<BestRecord>();
  if (!b.ok()) return b.status();
  BestRecord best;
  best.ok_records = b->records();
  best.source = absl::StrCat("the server at ", address);
  store::Record& r = best.record;
  r.id = b->record_id();
  r.uid = absl::StrCat("#", b->record_id());
  r.job_id = b->job_id();
  r.workload_key = b->workload_key();
  r.target_key = b->target();
  r.trace_json = b->trace_json();
  measure::Measurement& m = r.measurement;
  m.timings = measure::MakeTimings({b->repeats_ms().begin(), b->repeats_ms().end()});
  m.timings.median_ms = b->median_ms();
  m.worker_id = b->worker_id();
  m.device_name = b->device_name();
  r.unix_ms = b->unix_ms();
  return std::optional<BestRecord>(std::move(best));
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
  const measure::Measurement& m = r.measurement;
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
        trace ? "a tuned schedule" : "the reference lowering", m.timings.median_ms,
        static_cast<int>(m.timings.repeats_ms.size()), m.timings.repeats_ms.size() == 1 ? "" : "s",
        m.timings.min_ms, m.timings.max_ms,
        m.device_name.empty() ? "an unnamed device" : m.device_name, m.device,
        m.worker_id.empty() ? "(none)" : m.worker_id, FormatUnixMs(r.unix_ms), r.uid);
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
  if (o.db.empty() == o.server.empty()) {
    return fail(absl::InvalidArgumentError(
        "say where to look: --db FILE (a tuning log) or --server HOST:PORT (a tessel serve)"));
  }
  // Fetch.
  auto best = o.server.empty() ? FetchBestFromDb(o.db, *workload, *target)
                               : FetchBestFromServer(o.server, o.transport, o.workload, *target);
  if (!best.ok()) return fail(best.status());
  if (!best->has_value()) {
    return fail(NoBestRecordError(*workload, *target,
                                  o.server.empty() ? o.db : "the server at " + o.server));
  }
  // Print.
  absl::Status printed = PrintBestRecord(*workload, *target, **best, *emit, std::cout);
  if (!printed.ok()) return fail(printed);
  return 0;
}

}  // namespace tessel::cli
