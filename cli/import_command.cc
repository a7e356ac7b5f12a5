#include "cli/import_command.h"

#include <fstream>
#include <iostream>

#include "absl/strings/str_cat.h"
#include "cli/exit_code.h"
#include "store/tuning_log.h"

namespace tessel::cli {

void AddImportCommand(CLI::App& app) {
  auto opts = std::make_shared<ImportOptions>();
  CLI::App* cmd = app.add_subcommand(
      "import", "Merge JSON-lines exports (tessel export) into a tuning log, skipping what it has");
  cmd->add_option("--db", opts->db, "Tuning log (SQLite file) to add to; created when missing")
      ->required();
  cmd->add_option("files", opts->files, "JSON-lines files written by tessel export")->required();
  cmd->callback([opts]() { SetExitCode(RunImport(*opts)); });
}

int RunImport(const ImportOptions& o) {
  auto fail = [](const absl::Status& s) {
    std::cerr << "tessel import: " << s.message() << "\n";
    return 1;
  };
  auto log = store::OpenTuningLog(o.db);
  if (!log.ok()) return fail(log.status());
  for (const std::string& file : o.files) {
    std::ifstream in(file, std::ios::binary);
    if (!in) {
      return fail(absl::NotFoundError(
          absl::StrCat("cannot read ", file, "; check the path (files before it were imported)")));
    }
    store::JsonlImportOptions import_options;
    import_options.replay = true;  // a file from elsewhere: nothing in it is trusted
    auto stats = (*log)->ImportJsonl(in, import_options);
    if (!stats.ok()) {
      return fail(
          absl::Status(stats.status().code(), absl::StrCat(file, ": ", stats.status().message(),
                                                           "; nothing from this file was added")));
    }
    std::cout << file << ": added " << stats->workloads_added << " workload"
              << (stats->workloads_added == 1 ? "" : "s") << " and " << stats->records_added
              << " record" << (stats->records_added == 1 ? "" : "s") << ", skipped "
              << stats->records_skipped << " record" << (stats->records_skipped == 1 ? "" : "s")
              << " already in " << o.db << "\n";
  }
  return 0;
}

}  // namespace tessel::cli
