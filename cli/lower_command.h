#pragma once

#include <string>

#include "CLI/CLI.hpp"

namespace tessel::cli {

// `tessel lower --workload SPEC_OR_FILE --target host|cuda [--arch sm_90] [--trace FILE]
//  [--emit ir|cuda|cpp|json]`: prints the lowered program or its generated source (the
// reference lowering when no trace is given).
struct LowerOptions {
  std::string workload;
  std::string target = "host";
  std::string arch = "sm_90";
  std::string trace_file;
  std::string emit;  // default: cpp for host, cuda for cuda
};

void AddLowerCommand(CLI::App& app);
int RunLower(const LowerOptions& options);

}  // namespace tessel::cli
