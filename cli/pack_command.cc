#include "cli/pack_command.h"

#include <iostream>
#include <memory>

#include "absl/strings/str_format.h"
#include "cli/exit_code.h"
#include "schedules/workload/builtins.h"
#include "store/kernel_pack.h"
#include "store/tuning_log.h"

namespace tessel::cli {

void AddPackCommand(CLI::App& app) {
  auto opts = std::make_shared<PackOptions>();
  CLI::App* cmd = app.add_subcommand(
      "pack", "Write the best kernel of each workload per device into a kernel pack to ship");
  cmd->add_option("--db", opts->db, "Tuning log (SQLite file) to read; opened read-only")
      ->required();
  cmd->add_option("--workload,-w", opts->workloads,
                  "Built-in spec such as 'matmul(M=64, N=64, K=64)', a definition, or a file; "
                  "repeat for more")
      ->required();
  cmd->add_option("--out,-o", opts->out, "The pack file to write (replaced when it exists)")
      ->required();
  cmd->callback([opts]() { SetExitCode(RunPack(*opts)); });
}

int RunPack(const PackOptions& o) {
  auto fail = [](const absl::Status& s) {
    std::cerr << "tessel pack: " << s.message() << "\n";
    return 1;
  };
  std::vector<schedules::Workload> workloads;
  for (const std::string& spec : o.workloads) {
    auto w = schedules::LoadWorkload(spec);
    if (!w.ok()) return fail(w.status());
    workloads.push_back(*std::move(w));
  }
  store::TuningLogOptions options;
  options.read_only = true;
  auto log = store::OpenTuningLog(o.db, options);
  if (!log.ok()) return fail(log.status());
  auto packed = store::WriteKernelPack(log->get(), workloads, o.out);
  if (!packed.ok()) return fail(packed.status());
  for (const store::PackedKernel& k : *packed) {
    std::cout << absl::StrFormat("  %s on %s (%s): record %s, %.4f ms%s\n", k.workload_label,
                                 k.target_key, k.device_name, k.uid, k.median_ms,
                                 k.has_artifact ? ""
                                                : " (stored without its source: regenerated "
                                                  "when loaded)");
  }
  std::cout << "tessel pack: wrote " << packed->size() << " kernel"
            << (packed->size() == 1 ? "" : "s") << " of " << workloads.size() << " workload"
            << (workloads.size() == 1 ? "" : "s") << " to " << o.out << "\n";
  return 0;
}

}  // namespace tessel::cli
