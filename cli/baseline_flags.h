#pragma once

// The flags that give a job baselines to compare its tasks against (tessel tune, tessel submit):
//   --baseline SPEC=MS      repeatable; SPEC is a workload as given to --workload, MS > 0
//   --baselines FILE        the TSV bench/torch_baselines.py prints: one line per workload,
//                           SPEC<TAB>median_ms[<TAB>repeats]; empty lines and lines starting with
//                           '#' are passed over
//   --baseline-label TEXT   what the baselines measured (default "PyTorch eager")
// Each baseline becomes a proto::Baseline of the SubmitJobRequest, naming the job's workload by
// the text the request lists. The server checks them again (it does not trust the client); here a
// mistake is named before anything is submitted, with the flag or the file's line.
//
// Threads: free functions of their arguments, callable from any thread.

#include <istream>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "proto/tessel.pb.h"

namespace tessel::cli {

inline constexpr char kDefaultBaselineLabel[] = "PyTorch eager";

struct BaselineFlags {
  std::vector<std::string> specs;  // --baseline SPEC=MS
  std::string file;                // --baselines
  std::string label = kDefaultBaselineLabel;
};

void AddBaselineFlags(CLI::App* cmd, BaselineFlags* flags);

// One baseline as a flag or a line of the file gives it; `origin` says which, for errors
// ("--baseline 'SPEC=MS'", "FILE line 3").
struct BaselineArg {
  std::string spec;
  double ms = 0;
  std::string origin;
};

// `--baseline` values: SPEC=MS, split at the last '=' (a spec holds '=' of its own).
absl::StatusOr<BaselineArg> ParseBaselineFlag(const std::string& value);
// The lines of a TSV file named `file` (for errors), as bench/torch_baselines.py prints them.
absl::StatusOr<std::vector<BaselineArg>> ParseBaselinesTsv(std::istream& in,
                                                           const std::string& file);

// Adds the flags' baselines to `request`, whose workloads are set: each SPEC must be one of
// `workload_args` (the --workload arguments, parallel to request->workloads()) as given, or the
// same workload (same key) written otherwise; each workload gets at most one baseline.
absl::Status AddBaselinesToRequest(const BaselineFlags& flags,
                                   const std::vector<std::string>& workload_args,
                                   proto::SubmitJobRequest* request);

}  // namespace tessel::cli
