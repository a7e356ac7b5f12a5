#pragma once

#include <string>

#include "CLI/CLI.hpp"

namespace tessel::cli {

// `tessel check --db FILE [--quarantine]`: lists the records of a tuning log that its readers
// skip (store::BadRecord: unreadable, or timings that are not finite and positive), one line
// each; with --quarantine, moves them into the log's quarantined_records table (nothing is
// lost). Exit status 0 when the log has none left, 1 when bad records remain (or on an error).
struct CheckOptions {
  std::string db;
  bool quarantine = false;
};

void AddCheckCommand(CLI::App& app);
int RunCheck(const CheckOptions& options);

}  // namespace tessel::cli
