#include "cli/sample_command.h"

#include <chrono>
#include <iostream>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "cli/exit_code.h"
#include "schedules/space/space_generator.h"
#include "schedules/target/target.h"
#include "schedules/workload/builtins.h"

namespace tessel::cli {

void AddSampleCommand(CLI::App& app) {
  auto opts = std::make_shared<SampleOptions>();
  CLI::App* cmd = app.add_subcommand("sample", "Draw candidates from a workload's design space");
  cmd->add_option("--workload,-w", opts->workload,
                  "Built-in spec such as 'matmul(M=64, N=64, K=64)', a definition, or a file")
      ->required();
  cmd->add_option("--target,-t", opts->target, "host or cuda")->capture_default_str();
  cmd->add_option("--arch", opts->arch, "CUDA architecture: " + schedules::KnownCudaArchsText())
      ->capture_default_str();
  cmd->add_option("-n", opts->n, "How many samples to draw")->capture_default_str();
  cmd->add_option("--seed", opts->seed, "Seed of the first sample (the others follow)")
      ->capture_default_str();
  cmd->add_option("--out", opts->out,
                  "Directory for the candidate files (<name>.json beside <name>.cu or .cc)");
  cmd->callback([opts]() { SetExitCode(RunSample(*opts)); });
}

int RunSample(const SampleOptions& o) {
  auto fail = [](const absl::Status& s) {
    std::cerr << "tessel sample: " << s.message() << "\n";
    return 1;
  };
  if (o.n <= 0) {
    return fail(absl::InvalidArgumentError(
        absl::StrCat("-n ", o.n, " asks for no samples; give a positive count")));
  }
  // Each sample is lowered: a million takes minutes already, and nothing is printed meanwhile.
  constexpr int64_t kMaxSamples = 1000000;
  if (o.n > kMaxSamples) {
    return fail(absl::InvalidArgumentError(
        absl::StrCat("-n ", o.n, " is more samples than tessel sample draws in one run (",
                     kMaxSamples, "); give fewer, or run it several times with another --seed")));
  }
  auto workload = schedules::LoadWorkload(o.workload);
  if (!workload.ok()) return fail(workload.status());
  auto target = schedules::MakeTarget(o.target, o.arch);
  if (!target.ok()) return fail(target.status());
  auto space = schedules::SpaceGenerator::Create(*workload, *target);
  if (!space.ok()) return fail(space.status());
  const auto start = std::chrono::steady_clock::now();
  int64_t valid = 0;
  std::map<std::string, std::pair<int64_t, std::string>> rejected;  // step -> count, example
  for (int64_t i = 0; i < o.n; ++i) {
    const uint64_t seed = o.seed + static_cast<uint64_t>(i);
    schedules::Rejection why;
    auto c = space->Sample(seed, &why);
    if (!c.ok()) {
      auto& [count, example] = rejected[why.step];
      if (count++ == 0) example = why.message;
      continue;
    }
    ++valid;
    if (!o.out.empty()) {
      auto path = schedules::WriteCandidateFiles(*c, o.out, absl::StrFormat("cand_%06d", seed));
      if (!path.ok()) return fail(path.status());
    }
  }
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  std::cout << absl::StrFormat(
      "%s on %s: %d sketch%s; %d of %d samples valid (%.1f ms per sample)\n", workload->spec,
      target->ToString(), space->sketches().size(), space->sketches().size() == 1 ? "" : "es",
      valid, o.n, ms / static_cast<double>(o.n));
  for (const auto& [step, ce] : rejected) {
    std::cout << absl::StrFormat("  rejected at %s: %d (e.g. %s)\n", step, ce.first, ce.second);
  }
  if (!o.out.empty() && valid > 0) std::cout << "candidates written to " << o.out << "\n";
  return valid > 0 ? 0 : 1;
}

}  // namespace tessel::cli
