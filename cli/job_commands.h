#pragma once

#include "CLI/CLI.hpp"

namespace tessel::cli {

// The commands that look at and steer a server's jobs and workers:
//   tessel jobs [--server ADDR] [--unfinished]
//   tessel status JOB [--server ADDR] [--wait]
//   tessel cancel JOB [--server ADDR]
//   tessel workers [--server ADDR]
void AddJobCommands(CLI::App& app);

}  // namespace tessel::cli
