#include "measure/resources.h"

#include <algorithm>

namespace tessel::measure {

PeakResources PeakOf(const std::vector<KernelResources>& kernels) {
  PeakResources peak;
  for (const KernelResources& k : kernels) {
    peak.registers = std::max(peak.registers, k.registers);
    peak.shared_bytes = std::max(peak.shared_bytes, k.static_shared_bytes + k.dynamic_shared_bytes);
    peak.local_bytes = std::max(peak.local_bytes, k.local_bytes_per_thread);
  }
  return peak;
}

std::vector<KernelResources> KernelsOfPeak(const PeakResources& peak) {
  if (peak == PeakResources{}) return {};
  KernelResources k;
  k.registers = peak.registers;
  k.static_shared_bytes = peak.shared_bytes;
  k.local_bytes_per_thread = peak.local_bytes;
  return {k};
}

}  // namespace tessel::measure
