#include "schedules/target/target.h"

#include <unistd.h>

#include <algorithm>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "schedules/util/check.h"
#include "schedules/util/short_words.h"

namespace tessel::schedules {

namespace {

// "sm_90a" -> "sm_90": the architecture of the devices an architecture-specific one runs on.
std::string BaseArch(const std::string& arch) {
  if (!arch.empty() && arch.back() == 'a') return arch.substr(0, arch.size() - 1);
  return arch;
}

}  // namespace

const char* TargetFeatureName(TargetFeature f) {
  switch (f) {
    case TargetFeature::kThreadBlockClusters:
      return "thread-block clusters";
    case TargetFeature::kBulkTensorCopy:
      return "bulk tensor copies (TMA)";
    case TargetFeature::kWgmma:
      return "wgmma";
    case TargetFeature::kSetmaxnreg:
      return "setmaxnreg";
  }
  return "unknown feature";
}

std::string Target::ToString() const {
  if (kind == TargetKind::kCuda) return absl::StrCat("cuda -arch=", arch);
  return "host";
}

bool Target::HasArchSpecificFeatures() const {
  return is_cuda() && BaseArch(arch).size() != arch.size();
}

bool Target::Supports(TargetFeature f) const {
  if (!is_cuda()) return false;
  switch (f) {
    case TargetFeature::kThreadBlockClusters:
    case TargetFeature::kBulkTensorCopy:
      return BaseArch(arch) == "sm_90";
    case TargetFeature::kWgmma:
    case TargetFeature::kSetmaxnreg:
      return arch == "sm_90a";
  }
  return false;
}

const std::vector<std::string>& KnownCudaArchs() {
  static const auto* const archs = new std::vector<std::string>{"sm_80", "sm_90", "sm_90a"};
  return *archs;
}

std::string KnownCudaArchsText() {
  const std::vector<std::string>& a = KnownCudaArchs();
  return absl::StrCat(absl::StrJoin(a.begin(), a.end() - 1, ", "), " or ", a.back());
}

bool CudaArchRunsOn(const std::string& arch, const std::string& device_arch) {
  return !arch.empty() && BaseArch(arch) == device_arch;
}

std::string CudaDeviceArchOf(const std::string& arch) { return BaseArch(arch); }

absl::StatusOr<std::string> CudaBuildArch(const std::string& arch, const std::string& device_arch) {
  if (CudaArchRunsOn(arch, device_arch)) return arch;
  if (BaseArch(arch).size() != arch.size()) return CheckCudaArchRunsOn(arch, device_arch);
  return device_arch;
}

std::vector<std::string> KnownCudaArchsRunnableOn(const std::string& device_arch) {
  std::vector<std::string> out;
  for (const std::string& a : KnownCudaArchs()) {
    if (CudaArchRunsOn(a, device_arch)) out.push_back(a);
  }
  // The device's own architecture first.
  std::stable_partition(out.begin(), out.end(),
                        [&](const std::string& a) { return a == device_arch; });
  return out;
}

absl::Status CheckCudaArchRunsOn(const std::string& arch, const std::string& device_arch) {
  if (CudaArchRunsOn(arch, device_arch)) return absl::OkStatus();
  const std::string base = BaseArch(arch);
  std::string devices = absl::StrCat("only on ", base, " devices");
  if (base.size() != arch.size() && base.rfind("sm_", 0) == 0 && base.size() >= 5) {
    devices =
        absl::StrCat("only on devices of compute capability ", base.substr(3, base.size() - 4), ".",
                     base.substr(base.size() - 1), " (", base, ")");
  }
  return WithShortWords(absl::FailedPreconditionError(
      absl::StrCat(arch, " code runs ", devices, ", and this device is ", device_arch)));
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
    // sm_90a: the same GPUs as sm_90, so the same limits.
    TESSEL_CHECK(arch == "sm_90" || arch == "sm_90a") << "no built-in description of " << arch;
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

absl::StatusOr<Target> TargetOfKey(const std::string& target_key) {
  if (target_key == "host") return HostTarget();
  const std::string kCuda = "cuda -arch=";
  if (target_key.rfind(kCuda, 0) == 0) {
    absl::StatusOr<Target> t = MakeTarget("cuda", target_key.substr(kCuda.size()));
    if (t.ok()) return t;
  }
  std::string known = "host";
  for (const std::string& arch : KnownCudaArchs()) absl::StrAppend(&known, ", cuda -arch=", arch);
  return WithShortWords(absl::InvalidArgumentError(
      absl::StrCat("target '", target_key, "' is not one this build knows (", known, ")")));
}

absl::StatusOr<Target> MakeTarget(const std::string& kind, const std::string& arch) {
  if (kind == "host") return HostTarget();
  if (kind == "cuda") {
    std::string a = arch.empty() ? "sm_90" : arch;
    const std::vector<std::string>& known = KnownCudaArchs();
    if (std::find(known.begin(), known.end(), a) == known.end()) {
      return WithShortWords(absl::InvalidArgumentError(
          absl::StrCat("unknown CUDA architecture '", a, "'; use ", KnownCudaArchsText(),
                       ", the architectures Tessel has a built-in description of")));
    }
    return CudaTarget(a);
  }
  return WithShortWords(absl::InvalidArgumentError(
      absl::StrCat("unknown target '", kind, "'; use --target cuda or --target host")));
}

}  // namespace tessel::schedules
