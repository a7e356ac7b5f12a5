#pragma once

#include <string>
#include <vector>

#include "CLI/CLI.hpp"

namespace tessel::cli {

// `tessel pack --db LOG -w SPEC_OR_FILE... --out FILE`: a kernel pack (store/kernel_pack.h) of
// the workloads' best records, one per (target, device), for an application to ship and open
// with libtessel_runtime.
struct PackOptions {
  std::string db;
  std::vector<std::string> workloads;
  std::string out;
};

void AddPackCommand(CLI::App& app);
int RunPack(const PackOptions& options);

}  // namespace tessel::cli
