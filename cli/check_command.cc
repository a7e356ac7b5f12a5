#include "cli/check_command.h"

#include <iostream>
#include <memory>

#include "cli/exit_code.h"
#include "store/tuning_log.h"

namespace tessel::cli {

void AddCheckCommand(CLI::App& app) {
  auto opts = std::make_shared<CheckOptions>();
  CLI::App* cmd = app.add_subcommand(
      "check", "List the records of a tuning log that readers skip, and quarantine them");
  cmd->add_option("--db", opts->db, "Tuning log (SQLite file) to check")->required();
  cmd->add_flag("--quarantine", opts->quarantine,
                "Move the bad records into the log's quarantined_records table");
  cmd->callback([opts]() { SetExitCode(RunCheck(*opts)); });
}

int RunCheck(const CheckOptions& o) {
  auto fail = [](const absl::Status& s) {
    std::cerr << "tessel check: " << s.message() << "\n";
    return 1;
  };
  store::TuningLogOptions options;
  options.read_only = !o.quarantine;
  auto log = store::OpenTuningLog(o.db, options);
  if (!log.ok()) return fail(log.status());
  auto bad = (*log)->BadRecords();
  if (!bad.ok()) return fail(bad.status());
  for (const store::BadRecord& b : *bad) {
    std::cout << "record " << b.id << " (uid " << b.uid << ", workload " << b.workload_key << ", "
              << b.target_key << "): " << b.problem << "\n";
  }
  if (bad->empty()) {
    std::cout << o.db << ": no bad records\n";
    return 0;
  }
  const size_t n = bad->size();
  if (!o.quarantine) {
    std::cout << o.db << ": " << n << " bad record" << (n == 1 ? "" : "s")
              << "; readers skip them; `tessel check --db " << o.db
              << " --quarantine` moves them into its quarantined_records table\n";
    return 1;
  }
  auto moved = (*log)->QuarantineRecords(*bad);
  if (!moved.ok()) return fail(moved.status());
  std::cout << o.db << ": moved " << *moved << " bad record" << (*moved == 1 ? "" : "s")
            << " into its quarantined_records table\n";
  return 0;
}

}  // namespace tessel::cli
