#pragma once

#include <string>
#include <vector>

#include "CLI/CLI.hpp"

namespace tessel::cli {

// `tessel import --db FILE FILE...`: adds the workloads and records of JSON-lines files
// (written by tessel export) that the log does not have, by record uid; each file in one
// transaction. The log is created when missing. Nothing in a file is trusted: a record with a
// timing that is not finite and positive, or a workload or trace that does not parse and replay,
// fails its file with the line and the problem, and nothing of that file is added.
struct ImportOptions {
  std::string db;
  std::vector<std::string> files;
};

void AddImportCommand(CLI::App& app);
int RunImport(const ImportOptions& options);

}  // namespace tessel::cli
