#pragma once

#include "CLI/CLI.hpp"

namespace tessel::cli {

// `tessel submit --server ADDR --workload SPEC_OR_FILE... --target host|cuda [--arch sm_90]
//  --trials N [--trials-per-task N] [--time-budget-s S] [--strategy evolutionary|annealing|random]
//  [--priority P]
//  [--name NAME] [--seed S] [--baseline SPEC=MS]... [--baselines FILE] [--baseline-label TEXT]
//  [--wait]`: submits a tuning job and prints its id; with --wait, shows a live progress bar
// until the job is finished and prints its table. Baselines: cli/baseline_flags.h.
void AddSubmitCommand(CLI::App& app);

}  // namespace tessel::cli
