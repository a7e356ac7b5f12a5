#include "cli/best_command.h"

#include "cli/client.h"

#include <ctime>
#include <iostream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "cli/exit_code.h"
#include "nlohmann/json.hpp"
#include "proto/convert.h"
#include "schedules/codegen/codegen_version.h"
#include "schedules/codegen/source_json.h"
#include "schedules/space/candidate.h"
#include "schedules/target/target.h"
#include "schedules/workload/builtins.h"
#include "schedules/workload/key.h"
#include "store/deploy_lookup.h"
#include "store/measured_traces.h"

namespace tessel::cli {
namespace {

using store::WorkloadLabel;

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
  cmd->add_option("--arch", opts->arch, "CUDA architecture: " + schedules::KnownCudaArchsText())
      ->capture_default_str();
  cmd->add_option("--device", opts->device,
                  "Prefer records measured on this device (its name as `tessel workers` shows "
                  "it); default: this machine's CPU for --target host, any device for cuda");
  cmd->add_option("--emit", opts->emit,
                  "cuda, cpp, json, summary or binary (default: the target's source)");
  AddTransportFlags(cmd, &opts->transport);
  cmd->callback([opts]() { SetExitCode(RunBest(*opts)); });
}

absl::StatusOr<std::optional<BestRecord>> FetchBestFromDb(const std::string& db_path,
                                                          const schedules::Workload& workload,
                                                          const schedules::Target& target,
                                                          const std::string& device_name) {
  store::TuningLogOptions options;
  options.read_only = true;
  options.on_bad_row = [](const std::string& line) {
    std::cerr << "tessel best: warning: " << line << "\n";
  };
  auto log = store::OpenTuningLog(db_path, options);
  if (!log.ok()) return log.status();
  const store::DeployQuery query{workload, target, device_name, [](const std::string& line) {
                                   std::cerr << "tessel best: warning: " << line << "\n";
                                 }};
  absl::StatusOr<store::DeployedKernel> found = store::FindDeployedKernel(log->get(), query);
  if (!found.ok()) return found.status();
  BestRecord best;
  best.match = found->MatchDescription(query);
  best.record = std::move(found->record);
  best.ok_records = found->ok_records;
  best.source = db_path;
  best.regenerated = found->regenerated;
  return std::optional<BestRecord>(std::move(best));
}

absl::StatusOr<std::optional<BestRecord>> FetchBestFromServer(
    const std::string& address, const proto::TransportOptions& transport,
    const std::string& workload_arg, const schedules::Target& target,
    const std::string& device_name) {
  absl::StatusOr<Client> client = Client::Connect(address, transport);
  if (!client.ok()) return client.status();
  absl::StatusOr<std::string> text = WorkloadArgumentText(workload_arg);
  if (!text.ok()) return text.status();
  proto::QueryBestRequest request;
  request.set_workload(*text);
  request.mutable_target()->set_kind(target.is_cuda() ? "cuda" : "host");
  request.mutable_target()->set_arch(target.is_cuda() ? target.arch : "");
  request.set_device_name(device_name);
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
  m.timings.kernel_median_ms = b->kernel_median_ms();
  m.worker_id = b->worker_id();
  m.device_name = b->device_name();
  r.unix_ms = b->unix_ms();
  best.match = b->match().empty() ? "same architecture (a server that does not say)" : b->match();
  if (b->has_artifact()) {
    absl::StatusOr<measure::Artifact> artifact = proto::FromProto(b->artifact());
    if (!artifact.ok()) {
      return absl::DataLossError(absl::StrCat("the server at ", address, " sent a malformed ",
                                              artifact.status().message()));
    }
    m.artifact = *std::move(artifact);
  } else {
    // A record stored without its artifact: the server regenerated the source from the trace.
    m.artifact.codegen_version = schedules::kCodegenVersion;
    m.artifact.source = b->source().code();
    absl::StatusOr<schedules::GeneratedSource> source = proto::FromProto(b->source());
    if (!source.ok()) return source.status();
    m.artifact.launch_json = schedules::SourceLaunchToJson(*source);
    best.regenerated = true;
  }
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
  if (e != "cuda" && e != "cpp" && e != "json" && e != "summary" && e != "binary") {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown --emit '", e, "'; use cuda, cpp, json, summary or binary"));
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
  const measure::Artifact& a = m.artifact;
  if (emit == "binary") {
    if (a.binary.empty()) {
      return absl::FailedPreconditionError(
          absl::StrCat("record ", r.uid, " in ", best.source, " has no stored binary (",
                       best.regenerated ? "it was stored without its artifact"
                                        : "the host target keeps the source only",
                       "); print its source with --emit ", target.is_cuda() ? "cuda" : "cpp"));
    }
    out.write(a.binary.data(), static_cast<std::streamsize>(a.binary.size()));
    return absl::OkStatus();
  }
  std::optional<schedules::Trace> trace;
  nlohmann::json trace_json = nlohmann::json::parse(r.trace_json, nullptr, false);
  if (trace_json.is_discarded()) {
    return absl::DataLossError(absl::StrCat("record ", r.uid, " in ", best.source,
                                            " has a trace that is not JSON; the log is damaged"));
  }
  if (emit == "json") {
    schedules::Candidate c;
    c.workload = workload;
    c.target = target;
    if (!trace_json.is_null()) {
      auto t = schedules::Trace::FromJson(trace_json);
      if (t.ok()) trace = std::move(*t);
    }
    c.trace = trace;
    auto source = schedules::SourceFromLaunchJson(a.launch_json, a.source);
    if (!source.ok()) {
      return absl::DataLossError(
          absl::StrCat("record ", r.uid, " in ", best.source, ": ", source.status().message()));
    }
    c.source = *std::move(source);
    nlohmann::json j = schedules::CandidateToJson(c, "");
    if (!trace && !trace_json.is_null()) j["trace"] = trace_json;  // kept as stored
    j["artifact"] = {
        {"codegen_version", a.codegen_version},   {"regenerated", best.regenerated},
        {"binary_format", a.binary_format},       {"binary_arch", a.binary_arch},
        {"binary_bytes", a.binary.size()},        {"compile_options", a.compile_options},
        {"compiler_version", a.compiler_version}, {"driver_version", a.driver_version},
        {"device_arch", a.device_arch},           {"multiprocessor_count", a.multiprocessor_count}};
    j["record"] = {{"uid", r.uid},
                   {"match", best.match},
                   {"median_ms", m.timings.median_ms},
                   {"repeats_ms", m.timings.repeats_ms},
                   {"kernel_median_ms", m.timings.kernel_median_ms},
                   {"device_name", m.device_name},
                   {"worker_id", m.worker_id},
                   {"unix_ms", r.unix_ms}};
    out << j.dump(2) << "\n";
  } else if (emit == "summary") {
    out << absl::StrFormat(
        "The best of %d ok record%s of %s (key %s) for %s in %s is %s: median %.4f ms over %d "
        "repeat%s (%.4f to %.4f ms)%s, measured on %s (device %d) by worker %s at %s; uid %s. "
        "Match: %s. Source: %s.\n",
        best.ok_records, best.ok_records == 1 ? "" : "s", WorkloadLabel(workload),
        schedules::WorkloadKey(workload), target.ToString(), best.source,
        trace_json.is_null() ? "the reference lowering" : "a tuned schedule", m.timings.median_ms,
        static_cast<int>(m.timings.repeats_ms.size()), m.timings.repeats_ms.size() == 1 ? "" : "s",
        m.timings.min_ms, m.timings.max_ms,
        m.timings.kernel_median_ms > 0
            ? absl::StrFormat(", kernel median %.4f ms (CUPTI)", m.timings.kernel_median_ms)
            : std::string(),
        m.device_name.empty() ? "an unnamed device" : m.device_name, m.device,
        m.worker_id.empty() ? "(none)" : m.worker_id, FormatUnixMs(r.unix_ms), r.uid, best.match,
        best.regenerated
            ? absl::StrCat("regenerated from the trace by code generator version ",
                           a.codegen_version, " (the record was stored without its source)")
            : absl::StrCat(
                  "as measured (code generator version ", a.codegen_version,
                  a.binary.empty() ? ", no binary"
                                   : absl::StrCat(", ", a.binary_format, " for ", a.binary_arch,
                                                  " of ", a.binary.size(), " bytes"),
                  ", ", a.compiler_version.empty() ? "unknown compiler" : a.compiler_version, ")"));
  } else {
    out << a.source;
  }
  return absl::OkStatus();
}

// What stderr says about the answer: the match, and where the source came from when it is not
// simply what this build would print.
void NoteBestRecord(const BestRecord& best) {
  const measure::Artifact& a = best.record.measurement.artifact;
  std::cerr << "tessel best: record " << best.record.uid << ", match: " << best.match << "\n";
  if (best.regenerated) {
    std::cerr << "tessel best: record " << best.record.uid
              << " was stored without its source and binary (a log from before Tessel kept "
                 "them); the source is regenerated from its trace by this build's code "
                 "generator (version "
              << schedules::kCodegenVersion << ") and may differ from the kernel measured\n";
  } else if (a.codegen_version != schedules::kCodegenVersion) {
    std::cerr << "tessel best: record " << best.record.uid
              << " was measured with code generator version " << a.codegen_version
              << " (this build's is " << schedules::kCodegenVersion
              << "); printing the stored source, as measured\n";
  }
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
  std::string device = o.device;
  if (device.empty() && !target->is_cuda()) device = target->device_name;
  auto best = o.server.empty()
                  ? FetchBestFromDb(o.db, *workload, *target, device)
                  : FetchBestFromServer(o.server, o.transport, o.workload, *target, device);
  if (!best.ok()) return fail(best.status());
  if (!best->has_value()) {
    return fail(NoBestRecordError(*workload, *target,
                                  o.server.empty() ? o.db : "the server at " + o.server));
  }
  NoteBestRecord(**best);
  // Print.
  absl::Status printed = PrintBestRecord(*workload, *target, **best, *emit, std::cout);
  if (!printed.ok()) return fail(printed);
  return 0;
}

}  // namespace tessel::cli
