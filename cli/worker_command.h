#pragma once

#include "CLI/CLI.hpp"

namespace tessel::cli {

// `tessel worker --server HOST:PORT [--target host|cuda|auto] [--devices 0,1]
//  [--compile-threads N] [--cache DIR] ...`: the worker daemon (worker/daemon/worker_daemon.h).
// Also registers the hidden `tessel __measure-child`, the daemon's measuring child process.
void AddWorkerCommand(CLI::App& app);

}  // namespace tessel::cli
