#include "schedules/target/target.h"

#include <unistd.h>

#include <fstream>

#include "absl/strings/str_cat.h"
#include "schedules/util/check.h"
#include "schedules/util/short_words.h"

namespace tessel::schedules {

std::string Target::ToString() const {
  if (kind == TargetKind::kCuda) return absl::StrCat("cuda -arch=", arch);
  return "host";
}

Target CudaTarget(const std::string& arch) {
  Target t;
  t.kind = TargetKind::kCuda;
  t.arch = arch;
  if (arch == "sm_80") {
    t.device_name = "NVIDIA A100";
    t.max_shared_bytes_optin = 163 * 1024;
    t.shared_bytes_per_sm = 164 * 1024;
    t.sm_count = 108;
    t.l2_bytes = 40LL << 20;
  } else {
    TESSEL_CHECK(arch == "sm_90") << "no built-in description of " << arch;
    t.device_name = "NVIDIA H100";
    t.max_shared_bytes_optin = 227 * 1024;
    t.shared_bytes_per_sm = 228 * 1024;
    t.sm_count = 132;
    t.l2_bytes = 50LL << 20;
    t.max_cluster_ctas = 8;
  }
  return t;
}

Target HostTarget() {
  Target t;
  t.kind = TargetKind::kHost;
  t.arch = "x86_64";
  t.cores = std::max<long>(1, sysconf(_SC_NPROCESSORS_ONLN));
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  bool avx512 = false, avx2 = false;
  while (std::getline(cpuinfo, line)) {
    if (t.device_name.empty() && line.rfind("model name", 0) == 0) {
      auto pos = line.find(':');
      if (pos != std::string::npos) t.device_name = line.substr(pos + 2);
    }
    if (line.rfind("flags", 0) == 0) {
      avx512 = line.find(" avx512f") != std::string::npos;
      avx2 = line.find(" avx2") != std::string::npos;
    }
  }
  t.host_vector_bytes = avx512 ? 64 : (avx2 ? 32 : 16);
  if (t.device_name.empty()) t.device_name = "host CPU";
  return t;
}

absl::StatusOr<Target> MakeTarget(const std::string& kind, const std::string& arch) {
  if (kind == "host") return HostTarget();
  if (kind == "cuda") {
    std::string a = arch.empty() ? "sm_90" : arch;
    if (a != "sm_80" && a != "sm_90") {
      return WithShortWords(absl::InvalidArgumentError(absl::StrCat(
          "unknown CUDA architecture '", a, "'; built-in descriptions exist for sm_80 and sm_90")));
    }
    return CudaTarget(a);
  }
  return WithShortWords(absl::InvalidArgumentError(
      absl::StrCat("unknown target '", kind, "'; use --target cuda or --target host")));
}

}  // namespace tessel::schedules
