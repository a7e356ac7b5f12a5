#include "worker/cuda/nvml_device_monitor.h"

#include <dlfcn.h>

#include <type_traits>
#include <utility>

#include "absl/strings/str_cat.h"

namespace tessel::worker {
namespace {

// The part of nvml.h this file uses, with the values of its ABI (stable since NVML 1).
using NvmlReturn = int;  // nvmlReturn_t
constexpr NvmlReturn kNvmlSuccess = 0;
using NvmlDevice = void*;               // nvmlDevice_t: struct nvmlDevice_st*
constexpr int kNvmlClockSm = 1;         // NVML_CLOCK_SM
constexpr int kNvmlClockMem = 2;        // NVML_CLOCK_MEM
constexpr int kNvmlTemperatureGpu = 0;  // NVML_TEMPERATURE_GPU

}  // namespace

struct NvmlDeviceMonitor::Api {
  NvmlReturn (*init)() = nullptr;                                          // nvmlInit_v2
  NvmlReturn (*shutdown)() = nullptr;                                      // nvmlShutdown
  const char* (*error_string)(NvmlReturn) = nullptr;                       // nvmlErrorString
  NvmlReturn (*handle_by_pci_bus_id)(const char*, NvmlDevice*) = nullptr;  // ..._v2
  NvmlReturn (*clock_info)(NvmlDevice, int, unsigned int*) = nullptr;      // nvmlDeviceGetClockInfo
  NvmlReturn (*temperature)(NvmlDevice, int, unsigned int*) = nullptr;  // nvmlDeviceGetTemperature

  // "nvmlDeviceGetClockInfo failed: NVML error 3 (Not Supported)".
  absl::Status Error(const char* call, NvmlReturn r) const {
    const char* what = error_string != nullptr ? error_string(r) : nullptr;
    return absl::InternalError(absl::StrCat(call, " failed: NVML error ", r, " (",
                                            what != nullptr ? what : "unknown", ")"));
  }
};

absl::StatusOr<std::unique_ptr<NvmlDeviceMonitor>> NvmlDeviceMonitor::Create(
    const std::string& pci_bus_id, const std::string& library) {
  void* lib = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    const char* why = dlerror();
    return absl::FailedPreconditionError(absl::StrCat(
        "NVML is not available (dlopen(\"", library,
        "\"): ", why != nullptr ? why : "unknown error",
        "): clocks and temperature are not recorded; NVML comes with the NVIDIA driver"));
  }
  // Kept loaded for the life of the process, as the driver is: NVML may leave threads behind.
  auto api = std::make_unique<Api>();
  std::string missing;
  auto resolve = [&](auto** fn, const char* name) {
    *fn = reinterpret_cast<std::remove_pointer_t<decltype(fn)>>(dlsym(lib, name));
    if (*fn == nullptr) absl::StrAppend(&missing, missing.empty() ? "" : ", ", name);
  };
  resolve(&api->init, "nvmlInit_v2");
  resolve(&api->shutdown, "nvmlShutdown");
  resolve(&api->error_string, "nvmlErrorString");
  resolve(&api->handle_by_pci_bus_id, "nvmlDeviceGetHandleByPciBusId_v2");
  resolve(&api->clock_info, "nvmlDeviceGetClockInfo");
  resolve(&api->temperature, "nvmlDeviceGetTemperature");
  if (!missing.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("NVML is not available (", library, " lacks ", missing,
                     "): clocks and temperature are not recorded; upgrade the NVIDIA driver"));
  }
  if (NvmlReturn r = api->init(); r != kNvmlSuccess) return api->Error("nvmlInit_v2", r);
  NvmlDevice device = nullptr;
  if (NvmlReturn r = api->handle_by_pci_bus_id(pci_bus_id.c_str(), &device); r != kNvmlSuccess) {
    absl::Status s = api->Error("nvmlDeviceGetHandleByPciBusId_v2", r);
    api->shutdown();
    return absl::Status(s.code(), absl::StrCat(s.message(), " for PCI bus id ", pci_bus_id));
  }
  return std::unique_ptr<NvmlDeviceMonitor>(
      new NvmlDeviceMonitor(std::move(api), device, pci_bus_id));
}

NvmlDeviceMonitor::NvmlDeviceMonitor(std::unique_ptr<Api> api, void* device, std::string pci_bus_id)
    : api_(std::move(api)), device_(device), pci_bus_id_(std::move(pci_bus_id)) {}

NvmlDeviceMonitor::~NvmlDeviceMonitor() { api_->shutdown(); }

absl::StatusOr<measure::DeviceState> NvmlDeviceMonitor::Read() const {
  unsigned int sm = 0, mem = 0, temp = 0;
  if (NvmlReturn r = api_->clock_info(device_, kNvmlClockSm, &sm); r != kNvmlSuccess) {
    return api_->Error("nvmlDeviceGetClockInfo(NVML_CLOCK_SM)", r);
  }
  if (NvmlReturn r = api_->clock_info(device_, kNvmlClockMem, &mem); r != kNvmlSuccess) {
    return api_->Error("nvmlDeviceGetClockInfo(NVML_CLOCK_MEM)", r);
  }
  if (NvmlReturn r = api_->temperature(device_, kNvmlTemperatureGpu, &temp); r != kNvmlSuccess) {
    return api_->Error("nvmlDeviceGetTemperature(NVML_TEMPERATURE_GPU)", r);
  }
  return measure::DeviceState{static_cast<int>(sm), static_cast<int>(mem), static_cast<int>(temp)};
}

}  // namespace tessel::worker
