#pragma once

// Generated source code and what is needed to run it.

#include <string>
#include <vector>

#include "schedules/lower/program.h"

namespace tessel::schedules {

struct KernelSource {
  std::string entry;        // extern "C" symbol
  LaunchConfig launch;      // CUDA only
  std::vector<int> params;  // indices into GeneratedSource::buffers, in parameter order
};

struct GeneratedSource {
  TargetKind target = TargetKind::kHost;
  std::string code;
  // CUDA: kernels launched in order. Host: a single entry `void entry(void* const* buffers)`
  // that receives every buffer of `buffers` in order and runs the whole program.
  std::vector<KernelSource> kernels;
  std::vector<ProgramBuffer> buffers;
};

}  // namespace tessel::schedules
