#pragma once

#include "CLI/CLI.hpp"

namespace tessel::cli {

// `tessel measure --candidate FILE [--target auto|host|cuda] [--device N] [timing flags]`:
// measures one candidate file (as `tessel sample --out DIR` writes it) on this machine the way a
// worker does — compiled (cached), verified against the workload's reference on random inputs,
// timed, in an isolated child process — and prints the result, status first. A debugging aid for
// users writing schedules. Exit status: 0 when the candidate measured ok, 2 when it failed
// (compile_error, verify_failed, runtime_error, timeout, device_limit_exceeded), 1 when it could
// not be measured (a bad file or flag, no device).
void AddMeasureCommand(CLI::App& app);

}  // namespace tessel::cli
