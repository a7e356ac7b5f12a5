#pragma once

#include <string>

namespace tessel::worker {

// Whether this build links the CUDA toolkit (NVRTC, driver API, CUPTI), and a one-line summary
// for `tessel --version`: "cuda 13.0 (NVRTC, driver API, CUPTI)" or "host only (no CUDA toolkit
// at build time)".
bool BuiltWithCuda();
std::string BuildSummary();

}  // namespace tessel::worker
