#pragma once

#include <string>

#include "CLI/CLI.hpp"

namespace tessel::cli {

// `tessel export --db FILE [--out FILE]`: the tuning log as JSON lines (store/tuning_log.h), to
// stdout or a file.
struct ExportOptions {
  std::string db;
  std::string out;  // empty: stdout
};

void AddExportCommand(CLI::App& app);
int RunExport(const ExportOptions& options);

}  // namespace tessel::cli
