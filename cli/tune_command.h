#pragma once

#include <string>

#include "CLI/CLI.hpp"

namespace tessel::cli {

// `tessel tune [--workload SPEC] [--target auto|host|cuda] [--arch sm_90] [--quiet]`.
// Until the search server exists, tuning measures the candidates Tessel has for the workload —
// the reference lowering and the hand-written template schedule — verifies each against the
// reference, times it, and prints the fastest kernel's source and a table of results. The GPU is
// used when one is present, the host otherwise.
struct TuneOptions {
  std::string workload;  // default: DefaultWorkload(target)
  std::string target = "auto";
  std::string arch = "sm_90";
  bool quiet = false;  // no kernel source
  uint64_t seed = 1;
};

void AddTuneCommand(CLI::App& app);
int RunTune(const TuneOptions& options);

}  // namespace tessel::cli
