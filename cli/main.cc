// The tessel command line.

#include <iostream>

#include "CLI/CLI.hpp"
#include "cli/allocator.h"
#include "cli/best_command.h"
#include "cli/check_command.h"
#include "cli/costmodel_command.h"
#include "cli/exit_code.h"
#include "cli/export_command.h"
#include "cli/import_command.h"
#include "cli/job_commands.h"
#include "cli/lower_command.h"
#include "cli/measure_command.h"
#include "cli/pack_command.h"
#include "cli/report_command.h"
#include "cli/sample_command.h"
#include "cli/serve_command.h"
#include "cli/submit_command.h"
#include "cli/token_command.h"
#include "cli/tune_command.h"
#include "cli/worker_command.h"
#include "worker/worker_build_info.h"

int main(int argc, char** argv) {
  CLI::App app{"Tessel: an auto-tuner for GPU and CPU tensor kernels"};
  app.require_subcommand(0, 1);
  bool version = false;
  app.add_flag("--version", version, "Print the version and the targets this build supports");
  tessel::cli::AddLowerCommand(app);
  tessel::cli::AddSampleCommand(app);
  tessel::cli::AddTuneCommand(app);
  tessel::cli::AddWorkerCommand(app);
  tessel::cli::AddMeasureCommand(app);
  tessel::cli::AddServeCommand(app);
  tessel::cli::AddSubmitCommand(app);
  tessel::cli::AddJobCommands(app);
  tessel::cli::AddBestCommand(app);
  tessel::cli::AddExportCommand(app);
  tessel::cli::AddReportCommand(app);
  tessel::cli::AddPackCommand(app);
  tessel::cli::AddImportCommand(app);
  tessel::cli::AddCheckCommand(app);
  tessel::cli::AddCostModelCommand(app);
  tessel::cli::AddTokenCommand(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  if (version || app.get_subcommands().empty()) {
    std::cout << "tessel " << TESSEL_VERSION << "\n"
              << tessel::worker::BuildSummary() << "\n"
              << tessel::cli::AllocatorSummary() << "\n";
    if (!version) std::cout << "\n" << app.help();
  }
  return tessel::cli::ExitCode();
}
