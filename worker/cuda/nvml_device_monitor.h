#pragma once

// The GPU's state while a candidate is timed (DESIGN.md section 6: every figure the worker
// measured is stored): the current SM and memory clocks and the GPU temperature, from NVML.
//
// NVML is loaded at run time, like the driver (cuda_driver.h): dlopen("libnvidia-ml.so.1"), which
// every host with the NVIDIA driver has, so that Tessel needs no NVML at build time and a host
// without it still measures. The few NVML types and functions used are declared in the .cc (the
// toolkit does not always ship nvml.h). A CUDA device is matched to its NVML device by its PCI bus
// id (cuDeviceGetPCIBusId), which, unlike an ordinal, CUDA_VISIBLE_DEVICES does not renumber.
//
// Threads: Create from any thread; Read from one thread at a time (the device's measuring
// thread). NVML itself may be used by several monitors of one process (its init is counted).

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "measure/timing.h"

namespace tessel::worker {

// The library the NVIDIA driver installs NVML as.
inline constexpr char kNvmlLibrary[] = "libnvidia-ml.so.1";

class NvmlDeviceMonitor {
 public:
  // Loads NVML from `library`, initializes it and finds the device of PCI bus id `pci_bus_id`
  // (as cuDeviceGetPCIBusId writes it, "0000:65:00.0"). FailedPrecondition starting "NVML is not
  // available" when the library cannot be loaded or lacks a function; Internal naming the NVML
  // call and its error when NVML cannot be initialized or has no such device. Never crashes.
  static absl::StatusOr<std::unique_ptr<NvmlDeviceMonitor>> Create(
      const std::string& pci_bus_id, const std::string& library = kNvmlLibrary);

  NvmlDeviceMonitor(const NvmlDeviceMonitor&) = delete;
  NvmlDeviceMonitor& operator=(const NvmlDeviceMonitor&) = delete;
  // Shuts its use of NVML down (the library stays loaded for the process).
  ~NvmlDeviceMonitor();

  // The current SM clock, memory clock (MHz) and GPU temperature (degrees C). Internal naming
  // the NVML call and its error when one fails.
  absl::StatusOr<measure::DeviceState> Read() const;

  const std::string& pci_bus_id() const { return pci_bus_id_; }

 private:
  struct Api;  // the NVML functions, resolved from the library
  NvmlDeviceMonitor(std::unique_ptr<Api> api, void* device, std::string pci_bus_id);

  std::unique_ptr<Api> api_;
  void* device_ = nullptr;  // nvmlDevice_t
  std::string pci_bus_id_;
};

}  // namespace tessel::worker
