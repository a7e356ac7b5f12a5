#pragma once

#include <cstdint>
#include <string>

#include "CLI/CLI.hpp"

namespace tessel::cli {

// `tessel sample --workload SPEC --target cuda|host [--arch sm_90] -n N [--seed S] [--out DIR]`:
// draws N candidates from the workload's design space (schedules/space/space_generator.h),
// writes each valid one as a candidate file (JSON beside its .cu/.cc source) when --out is
// given, and prints how many were valid and why the rest were rejected.
struct SampleOptions {
  std::string workload;
  std::string target = "host";
  std::string arch = "sm_90";
  int64_t n = 16;
  uint64_t seed = 0;
  std::string out;
};

void AddSampleCommand(CLI::App& app);
int RunSample(const SampleOptions& options);

}  // namespace tessel::cli
