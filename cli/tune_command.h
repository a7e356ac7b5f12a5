#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "cli/baseline_flags.h"
#include "cli/screening_flags.h"

namespace tessel::cli {

// `tessel tune [--workload SPEC_OR_FILE]... [--trials N] [--db FILE] [--target auto|host|cuda]
//  [--baseline SPEC=MS]... [--baselines FILE] [--baseline-label TEXT]`:
// the embedded default. Starts a server (on a loopback port) over the tuning log and a worker
// for this machine in one process (the GPU when there is one, else the host), submits one job
// with a task per workload, shows its progress, and ends with a table of the best kernels found
// and where they are stored. Ctrl-C cancels the job (what was measured stays in the log).
struct TuneOptions {
  std::vector<std::string> workloads;  // default: DefaultWorkload(target)
  std::string target = "auto";
  std::string arch;                       // default: the GPU's
  int64_t trials = 64;                    // per workload
  std::string db;                         // default: DefaultLogPath()
  std::string strategy = "evolutionary";  // search::KnownStrategies()
  uint64_t seed = 0;
  bool quiet = false;       // no kernel source at the end
  bool verbose = false;     // the server's and worker's log lines on stderr, and the timeline
  bool timeline = false;    // the job's timeline at the end (also with verbose)
  BaselineFlags baselines;  // --baseline, --baselines, --baseline-label
  ScreeningFlags screening;
};

// $TESSEL_DB, or $XDG_DATA_HOME/tessel/tuning.db, or ~/.local/share/tessel/tuning.db.
std::string DefaultLogPath();

void AddTuneCommand(CLI::App& app);
int RunTune(const TuneOptions& options);

}  // namespace tessel::cli
