#include "worker/worker_build_info.h"

namespace tessel::worker {

#ifdef TESSEL_HAVE_CUDA
bool BuiltWithCuda() { return true; }
std::string BuildSummary() { return "cuda target enabled (NVRTC, driver API, CUPTI linked)"; }
#else
bool BuiltWithCuda() { return false; }
std::string BuildSummary() { return "host target only (no CUDA toolkit found at build time)"; }
#endif

}  // namespace tessel::worker
