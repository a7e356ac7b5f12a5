#pragma once

#include <string>
#include <vector>

#include "CLI/CLI.hpp"

namespace tessel::cli {

// `tessel import --db FILE FILE...`: adds the workloads and records of JSON-lines files
// (written by tessel export) that the log does not have, by record uid; each file in one
// transaction. The log is created when missing.
struct ImportOptions {
  std::string db;
  std::vector<std::string> files;
};

void AddImportCommand(CLI::App& app);
int RunImport(const ImportOptions& options);

}  // namespace tessel::cli
