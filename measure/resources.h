#pragma once

// What a measured program uses of the device: per kernel as the loader reports it, and the peak
// over the program's kernels (what the tuning log keeps).

#include <cstdint>
#include <string>
#include <vector>

namespace tessel::measure {

// What the loader found out about one compiled kernel (CUDA; the host reports none).
struct KernelResources {
  std::string entry;
  int registers = 0;  // per thread
  int64_t static_shared_bytes = 0;
  int64_t dynamic_shared_bytes = 0;
  int64_t local_bytes_per_thread = 0;  // spills and local arrays
};

// The most any kernel of a program uses.
struct PeakResources {
  int registers = 0;         // per thread
  int64_t shared_bytes = 0;  // static + dynamic shared memory
  int64_t local_bytes = 0;   // local memory (spills) per thread

  bool operator==(const PeakResources&) const = default;
};

PeakResources PeakOf(const std::vector<KernelResources>& kernels);
// The one unnamed kernel whose resources are `peak` (none when it is all zero): what a
// measurement read back from the tuning log reports, so that PeakOf gives `peak` again.
std::vector<KernelResources> KernelsOfPeak(const PeakResources& peak);

}  // namespace tessel::measure
