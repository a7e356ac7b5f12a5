#include "worker/worker_build_info.h"

#include "absl/strings/str_cat.h"
#ifdef TESSEL_HAVE_CUDA
#include <nvrtc.h>
#endif
#ifdef TESSEL_HAVE_CUPTI
#include <cupti.h>
#endif

namespace tessel::worker {

#ifdef TESSEL_HAVE_CUDA
bool BuiltWithCuda() { return true; }
std::string BuildSummary() {
  int major = 0, minor = 0;
  nvrtcVersion(&major, &minor);
  std::string s = absl::StrCat("targets: host, cuda (NVRTC ", major, ".", minor,
                               " linked; the CUDA driver is loaded at run time");
#ifdef TESSEL_HAVE_CUPTI
  uint32_t cupti = 0;
  if (cuptiGetVersion(&cupti) == CUPTI_SUCCESS) absl::StrAppend(&s, "; CUPTI API ", cupti);
#endif
  return s + ")";
}
#else
bool BuiltWithCuda() { return false; }
std::string BuildSummary() { return "targets: host only (no CUDA toolkit found at build time)"; }
#endif

}  // namespace tessel::worker
