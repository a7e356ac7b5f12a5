#include "cli/tune_command.h"

#include <cstdio>
#include <iostream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "cli/exit_code.h"
#include "schedules/space/candidate.h"
#include "schedules/templates/templates.h"
#include "schedules/workload/builtins.h"
#include "schedules/workload/key.h"
#include "worker/verify_run.h"
#ifdef TESSEL_HAVE_CUDA
#include "worker/cuda/cuda_runner.h"
#endif

namespace tessel::cli {

namespace {

bool HaveGpu() {
#ifdef TESSEL_HAVE_CUDA
  return worker::CudaDeviceAvailable();
#else
  return false;
#endif
}

std::string DefaultWorkload(bool cuda) {
  return cuda ? "matmul(M=1024, N=1024, K=1024, dtype=f32)"
              : "matmul(M=512, N=512, K=512, dtype=f32)";
}

}  // namespace

void AddTuneCommand(CLI::App& app) {
  auto opts = std::make_shared<TuneOptions>();
  CLI::App* cmd = app.add_subcommand(
      "tune",
      "Measure Tessel's candidates for a workload and report the fastest (the GPU when "
      "there is one, else the host)");
  cmd->add_option("--workload,-w", opts->workload,
                  "Built-in spec, definition or file (default: a 1024^3 f32 matmul on the GPU, "
                  "512^3 on the host)");
  cmd->add_option("--target,-t", opts->target, "auto, host or cuda")->capture_default_str();
  cmd->add_option("--arch", opts->arch, "CUDA architecture for --target cuda")
      ->capture_default_str();
  cmd->add_flag("--quiet,-q", opts->quiet, "Do not print the fastest kernel's source");
  cmd->add_option("--seed", opts->seed, "Seed of the random inputs")->capture_default_str();
  cmd->callback([opts]() { SetExitCode(RunTune(*opts)); });
}

int RunTune(const TuneOptions& o) {
  auto fail = [](const absl::Status& s) {
    std::cerr << "tessel tune: " << s.message() << "\n";
    return 1;
  };
  std::string kind = o.target;
  if (kind == "auto") kind = HaveGpu() ? "cuda" : "host";
  if (kind == "cuda" && !HaveGpu()) {
    return fail(absl::FailedPreconditionError(
        "--target cuda needs a CUDA GPU and driver, and none was found; use --target host"));
  }
  auto target = schedules::MakeTarget(kind, o.arch);
  if (!target.ok()) return fail(target.status());
#ifdef TESSEL_HAVE_CUDA
  if (target->is_cuda()) {
    // Describe the GPU that will run the kernels, not the built-in description of its arch.
    auto device = worker::CudaDevice::Open(0);
    if (!device.ok()) return fail(device.status());
    const worker::CudaDeviceInfo& info = (*device)->info();
    if (info.arch != "sm_80" && info.arch != "sm_90") {
      return fail(absl::FailedPreconditionError(absl::StrCat(
          "the GPU is ", info.name, " (", info.arch,
          "); Tessel has target descriptions for sm_80 and sm_90 only; use --target host")));
    }
    target = schedules::CudaTarget(info.arch);
    target->device_name = info.name;
    target->sm_count = info.sm_count;
    target->l2_bytes = info.l2_bytes;
    target->max_shared_bytes_optin = info.max_shared_per_block_optin;
  }
#endif
  const std::string spec = o.workload.empty() ? DefaultWorkload(target->is_cuda()) : o.workload;
  auto workload = schedules::LoadWorkload(spec);
  if (!workload.ok()) return fail(workload.status());

  std::cout << "tessel tune: " << workload->spec << " (key " << schedules::WorkloadKey(*workload)
            << ") on " << target->ToString() << " [" << target->device_name << "]\n";
  auto reference = schedules::BuildCandidate(*workload, *target, std::nullopt);
  if (!reference.ok()) return fail(reference.status());

  struct Row {
    std::string name;
    std::string status = "ok";
    double ms = 0;
    const schedules::GeneratedSource* source = nullptr;
  };
  std::vector<Row> rows;
  std::vector<schedules::Candidate> built;
  built.reserve(2);
  built.push_back(*reference);
  auto hand = schedules::HandwrittenSchedule(*workload, *target);
  if (hand.ok()) {
    auto c = schedules::BuildCandidate(*workload, *target, hand->trace());
    if (c.ok()) {
      built.push_back(std::move(*c));
    } else {
      rows.push_back({"hand-written", std::string(c.status().message())});
    }
  } else {
    rows.push_back({"hand-written", std::string(hand.status().message())});
  }

  worker::MeasureOptions mo;
  mo.seed = o.seed;
  for (size_t i = 0; i < built.size(); ++i) {
    Row row{i == 0 ? "reference" : "hand-written"};
    row.source = &built[i].source;
    if (i > 0) {
      absl::Status v = worker::RunAndVerify(built[i].source, built[0].source, o.seed);
      if (!v.ok()) {
        row.status = absl::StrCat("verify: ", v.message());
        rows.push_back(row);
        continue;
      }
    }
    auto t = worker::Measure(built[i].source, mo);
    if (!t.ok()) {
      row.status = std::string(t.status().message());
    } else {
      row.ms = t->median_ms;
    }
    rows.push_back(row);
  }

  const Row* best = nullptr;
  for (const Row& r : rows) {
    if (r.status == "ok" && (!best || r.ms < best->ms)) best = &r;
  }
  if (best && !o.quiet) {
    std::cout << "\n// fastest: " << best->name << "\n" << best->source->code << "\n";
  }
  const double flops = workload->Flops();
  const double bytes = static_cast<double>(workload->CompulsoryBytes());
  std::printf("\n%-14s %12s %12s %10s %10s  %s\n", "candidate", "median ms", "GFLOP/s", "GB/s",
              "speedup", "status");
  double ref_ms = 0;
  for (const Row& r : rows) {
    if (r.name == "reference" && r.status == "ok") ref_ms = r.ms;
  }
  for (const Row& r : rows) {
    if (r.status != "ok") {
      std::printf("%-14s %12s %12s %10s %10s  %s\n", r.name.c_str(), "-", "-", "-", "-",
                  r.status.c_str());
      continue;
    }
    std::printf("%-14s %12.4f %12.1f %10.1f %9.2fx  ok\n", r.name.c_str(), r.ms,
                flops / (r.ms * 1e6), bytes / (r.ms * 1e6), ref_ms > 0 ? ref_ms / r.ms : 0.0);
  }
  if (!best) {
    std::cerr << "tessel tune: no candidate measured successfully\n";
    return 1;
  }
  std::printf("\nbest: %s, %.4f ms (median of repeats, caches flushed before each)\n",
              best->name.c_str(), best->ms);
  return 0;
}

}  // namespace tessel::cli
