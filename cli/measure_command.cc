#include "cli/measure_command.h"

#include <cstdio>
#include <iostream>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "cli/exit_code.h"
#include "measure/measurement.h"
#include "proto/convert.h"
#include "proto/measure_child.pb.h"
#include "schedules/space/candidate.h"
#include "schedules/target/target.h"
#include "worker/compile_pool.h"
#include "worker/isolation/measure_child.h"

namespace tessel::cli {
namespace {

struct MeasureFlags {
  std::string candidate;
  std::string target = "auto";
  int device = 0;
  std::string cache_dir;
  uint64_t seed = 1;
  double timeout_s = 120;
  // A repeat of a tiny kernel is cheap but the cache flush before it is not: at most 100.
  measure::TimingOptions timing = {.max_repeats = 100};
  bool skip_verify = false;
};

std::string DefaultCacheDir() {
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg != nullptr && xdg[0] != '\0') {
    return absl::StrCat(xdg, "/tessel");
  }
  if (const char* home = std::getenv("HOME"); home != nullptr && home[0] != '\0') {
    return absl::StrCat(home, "/.cache/tessel");
  }
  return "/tmp/tessel-cache";
}

void Print(const measure::Measurement& r, const std::string& path) {
  std::cout << "status: " << measure::MeasureStatusName(r.status) << "\n";
  std::cout << "candidate: " << path << "\n";
  if (r.status == measure::MeasureStatus::kOk) {
    std::cout << absl::StrFormat("median_ms: %.6f\nmin_ms: %.6f\nmax_ms: %.6f\n",
                                 r.timings.median_ms, r.timings.min_ms, r.timings.max_ms);
    std::cout << "repeats_ms (" << r.timings.repeats_ms.size() << "): "
              << absl::StrJoin(
                     r.timings.repeats_ms, " ",
                     [](std::string* out, double ms) { absl::StrAppendFormat(out, "%.6f", ms); })
              << "\n";
  }
  if (!r.timings.kernel_repeats_ms.empty()) {
    std::cout << absl::StrFormat("kernel_median_ms: %.6f (CUPTI activity records)\n",
                                 r.timings.kernel_median_ms);
    std::cout << "kernel_repeats_ms (" << r.timings.kernel_repeats_ms.size() << "): "
              << absl::StrJoin(
                     r.timings.kernel_repeats_ms, " ",
                     [](std::string* out, double ms) { absl::StrAppendFormat(out, "%.6f", ms); })
              << "\n";
  }
  if (r.timings.counters) {
    std::cout << absl::StrFormat(
        "dram_read_bytes: %.0f\ndram_write_bytes: %.0f\nachieved_occupancy: %.1f%%\n",
        r.timings.counters->dram_read_bytes, r.timings.counters->dram_write_bytes,
        r.timings.counters->achieved_occupancy);
  }
  if (r.timings.device_state.known()) {
    std::cout << absl::StrFormat("sm_clock_mhz: %d\nmemory_clock_mhz: %d\ntemperature_c: %d\n",
                                 r.timings.device_state.sm_clock_mhz,
                                 r.timings.device_state.memory_clock_mhz,
                                 r.timings.device_state.temperature_c);
  }
  if (!r.timings.note.empty()) std::cout << "timing_note: " << r.timings.note << "\n";
  std::cout << absl::StrFormat("compile_ms: %.1f%s\n", r.compile_ms,
                               r.compile_cache_hit ? " (cache hit)" : "");
  if (r.verify_ms > 0) std::cout << absl::StrFormat("verify_ms: %.1f\n", r.verify_ms);
  for (const measure::KernelResources& k : r.kernels) {
    std::cout << absl::StrFormat(
        "kernel %s: %d registers, %d bytes static shared, %d bytes dynamic shared, %d bytes "
        "local per thread\n",
        k.entry, k.registers, k.static_shared_bytes, k.dynamic_shared_bytes,
        k.local_bytes_per_thread);
  }
  std::cout << "device: " << r.device << " (" << r.device_name << ")\n";
  if (!r.error.empty()) std::cout << "error: " << r.error << "\n";
}

int RunMeasure(const MeasureFlags& f) {
  auto fail = [](const std::string& message) {
    std::cerr << "tessel measure: " << message << "\n";
    return 1;
  };
  if (f.target != "auto" && f.target != "host" && f.target != "cuda") {
    return fail(absl::StrCat("unknown --target '", f.target, "'; use auto, host or cuda"));
  }
  if (!measure::ValidMedianPrecision(f.timing.median_precision)) {
    return fail(absl::StrCat("--median-precision ", f.timing.median_precision,
                             ": give 0 (off) or a fraction in (0, 1), e.g. 0.005 for +-0.5%"));
  }
  absl::StatusOr<schedules::CandidateFile> file = schedules::ReadCandidateFile(f.candidate);
  if (!file.ok()) return fail(std::string(file.status().message()));
  const std::string kind = file->target.is_cuda() ? "cuda" : "host";
  if (f.target != "auto" && f.target != kind) {
    return fail(absl::StrCat(f.candidate, " holds a ", kind,
                             " candidate, which cannot run on --target ", f.target,
                             ": drop --target or sample the workload for ", f.target));
  }
  absl::StatusOr<schedules::Candidate> reference =
      schedules::BuildCandidate(file->workload, file->target, std::nullopt);
  if (!reference.ok()) {
    return fail(absl::StrCat("cannot build the reference of ", f.candidate, ": ",
                             reference.status().message()));
  }

  worker::MeasureChildOptions co;
  co.target = kind;
  co.device = f.device;
  worker::MeasureChild child(co);
  if (absl::Status s = child.Start(); !s.ok()) {
    return fail(
        absl::StrCat(s.message(), kind == "cuda" ? ": measure CUDA candidates on a GPU host" : ""));
  }
  worker::CompilePoolOptions po;
  po.threads = 2;
  po.cache_dir = f.cache_dir.empty() ? DefaultCacheDir() : f.cache_dir;
  worker::CompilePool pool(po);
  // A CUDA candidate is built for its target's architecture where the GPU runs it (sm_90a on a
  // 9.0 GPU), else for the GPU's.
  std::string arch = child.device().arch();
  if (kind == "cuda") {
    absl::StatusOr<std::string> build = schedules::CudaBuildArch(file->target.arch, arch);
    if (!build.ok()) {
      return fail(absl::StrCat(f.candidate, " is a candidate for ", file->target.ToString(),
                               ", and GPU ", child.device().ordinal(), " (", child.device().name(),
                               ") cannot run it: ", build.status().message()));
    }
    arch = *build;
  }
  worker::CompileFuture cand_future = pool.Compile(file->source, arch);
  worker::CompileFuture ref_future = pool.Compile(reference->source, arch);

  measure::Measurement result;
  const absl::StatusOr<worker::CompileOutput>& ref = ref_future.get();
  const absl::StatusOr<worker::CompileOutput>& cand = cand_future.get();
  if (!ref.ok()) {
    return fail(absl::StrCat(
        "the reference of ", f.candidate,
        " does not compile (a Tessel bug; please report it): ", ref.status().message()));
  }
  if (!cand.ok()) {
    result = measure::Measurement::FromStatus(cand.status());
    result.device = f.device;
    result.device_name = child.device().name();
  } else {
    proto::ChildMeasure request;
    proto::ToProto(file->source, request.mutable_candidate());
    worker::ToArtifact(*cand, request.mutable_candidate_artifact());
    proto::ToProto(reference->source, request.mutable_reference());
    worker::ToArtifact(*ref, request.mutable_reference_artifact());
    proto::ToProto(f.timing, request.mutable_options()->mutable_timing());
    request.mutable_options()->set_verify_seed(f.seed);
    request.mutable_options()->set_skip_verify(f.skip_verify);
    result = child.Measure(request, f.timeout_s);
  }
  Print(result, f.candidate);
  return result.status == measure::MeasureStatus::kOk
             ? 0
             : (result.status == measure::MeasureStatus::kWorkerError ? 1 : 2);
}

}  // namespace

void AddMeasureCommand(CLI::App& app) {
  auto f = std::make_shared<MeasureFlags>();
  CLI::App* cmd = app.add_subcommand(
      "measure",
      "Measure one candidate file (from tessel sample --out) here: compile, verify against the "
      "reference, time, isolated; prints the result, status first");
  cmd->add_option("--candidate,-c", f->candidate, "Candidate JSON file")->required();
  cmd->add_option("--target,-t", f->target, "auto (the candidate's own), host or cuda")
      ->capture_default_str();
  cmd->add_option("--device,-d", f->device, "GPU number")->capture_default_str();
  cmd->add_option("--cache", f->cache_dir,
                  "Compile cache directory (default: $XDG_CACHE_HOME/tessel or ~/.cache/tessel)");
  cmd->add_option("--seed", f->seed, "Seed of the random inputs")->capture_default_str();
  cmd->add_option("--timeout-s", f->timeout_s, "Time limit for verification and timing")
      ->capture_default_str();
  cmd->add_option("--warmup", f->timing.warmup_runs, "Untimed runs first")->capture_default_str();
  cmd->add_option("--min-repeats", f->timing.min_repeats, "At least this many timed repeats")
      ->capture_default_str();
  cmd->add_option("--max-repeats", f->timing.max_repeats, "At most this many timed repeats")
      ->capture_default_str();
  cmd->add_option("--min-ms", f->timing.min_total_ms,
                  "Repeat until this much time is measured, unless the median is precise sooner")
      ->capture_default_str();
  cmd->add_option("--median-precision", f->timing.median_precision,
                  "Stop once the median's 95% confidence half-width is this fraction of it (0: "
                  "off, repeat until --min-ms)")
      ->capture_default_str();
  cmd->add_flag("--no-flush{false}", f->timing.flush_cache,
                "Do not flush the caches before each repeat");
  cmd->add_flag("--counters", f->timing.hardware_counters,
                "CUDA: also collect DRAM bytes and achieved occupancy (CUPTI, one untimed run)");
  cmd->add_flag("--skip-verify", f->skip_verify, "Time without checking against the reference");
  cmd->callback([f]() { SetExitCode(RunMeasure(*f)); });
}

}  // namespace tessel::cli
