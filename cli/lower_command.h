#pragma once

#include <string>

#include "CLI/CLI.hpp"

namespace tessel::cli {

// `tessel lower --workload SPEC_OR_FILE --target host|cuda [--arch sm_90] [--trace FILE |
//  --template] [--emit ir|cuda|cpp|json|trace] [--print-after-all]`: prints the lowered
// program, its generated source or its trace (the reference lowering when neither a trace nor
// --template is given); with --print-after-all, first the program after every lowering pass
// (schedules/lower/pipeline.h).
struct LowerOptions {
  std::string workload;
  std::string target = "host";
  std::string arch = "sm_90";
  std::string trace_file;
  bool use_template = false;  // the hand-written template schedule instead of a trace
  std::string emit;           // default: cpp for host, cuda for cuda
  bool print_after_all = false;
};

void AddLowerCommand(CLI::App& app);
int RunLower(const LowerOptions& options);

}  // namespace tessel::cli
