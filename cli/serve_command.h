#pragma once

#include "CLI/CLI.hpp"

namespace tessel::cli {

// `tessel serve --db FILE [--listen HOST:PORT] [--batch-size N] [--heartbeat-timeout-s S] ...`:
// the search server (server/server.h) until SIGTERM or SIGINT, then a clean shutdown (exit 0).
void AddServeCommand(CLI::App& app);

}  // namespace tessel::cli
