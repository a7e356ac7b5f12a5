#include "cli/export_command.h"

#include <cstdio>
#include <fstream>
#include <iostream>

#include "absl/strings/str_cat.h"
#include "cli/exit_code.h"
#include "store/tuning_log.h"

namespace tessel::cli {

void AddExportCommand(CLI::App& app) {
  auto opts = std::make_shared<ExportOptions>();
  CLI::App* cmd =
      app.add_subcommand("export", "Write a tuning log's workloads and records as JSON lines");
  cmd->add_option("--db", opts->db, "Tuning log (SQLite file) to export; opened read-only")
      ->required();
  cmd->add_option("--out,-o", opts->out, "File to write (default: stdout)");
  cmd->callback([opts]() { SetExitCode(RunExport(*opts)); });
}

int RunExport(const ExportOptions& o) {
  auto fail = [](const absl::Status& s) {
    std::cerr << "tessel export: " << s.message() << "\n";
    return 1;
  };
  store::TuningLogOptions options;
  options.read_only = true;
  auto log = store::OpenTuningLog(o.db, options);
  if (!log.ok()) return fail(log.status());
  if (o.out.empty()) {
    absl::Status s = (*log)->ExportJsonl(std::cout);
    std::cout.flush();
    return s.ok() ? 0 : fail(s);
  }
  // Written beside the target and renamed into place: a failed export leaves no partial file.
  const std::string tmp = o.out + ".tmp";
  std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
  if (!out) {
    return fail(absl::PermissionDeniedError(
        absl::StrCat("cannot write ", o.out, "; check that its directory exists and is writable")));
  }
  absl::Status s = (*log)->ExportJsonl(out);
  out.close();
  if (s.ok() && !out) s = absl::DataLossError(absl::StrCat("writing ", o.out, " failed"));
  if (s.ok() && std::rename(tmp.c_str(), o.out.c_str()) != 0) {
    s = absl::DataLossError(absl::StrCat("cannot rename ", tmp, " to ", o.out));
  }
  if (!s.ok()) {
    std::remove(tmp.c_str());
    return fail(s);
  }
  std::cerr << "tessel export: wrote " << o.out << "\n";
  return 0;
}

}  // namespace tessel::cli
