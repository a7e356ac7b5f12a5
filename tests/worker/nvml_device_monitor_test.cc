// The NVML monitor as far as it can be checked without a GPU: a library that is missing (a bogus
// name through the factory) is a clear not-available status, never a crash. Clocks and
// temperature from a real GPU are checked in tests/gpu/worker_gpu_test.cc.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#ifdef TESSEL_HAVE_CUDA
#include "worker/cuda/nvml_device_monitor.h"
#endif

namespace tessel::worker {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

#ifdef TESSEL_HAVE_CUDA
TEST(NvmlDeviceMonitor, AMissingLibraryIsNotAvailableAndSaysWhy) {
  absl::StatusOr<std::unique_ptr<NvmlDeviceMonitor>> m =
      NvmlDeviceMonitor::Create("0000:65:00.0", "libtessel-no-such-nvml.so.1");
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(m.status().message()), StartsWith("NVML is not available (dlopen(\""
                                                            "libtessel-no-such-nvml.so.1\"): "));
  EXPECT_THAT(m.status().message(),
              HasSubstr("): clocks and temperature are not recorded; NVML comes with the NVIDIA "
                        "driver"));
}

TEST(NvmlDeviceMonitor, ALibraryWithoutNvmlSaysWhatItLacks) {
  // libc loads, but has none of NVML's functions.
  absl::StatusOr<std::unique_ptr<NvmlDeviceMonitor>> m =
      NvmlDeviceMonitor::Create("0000:65:00.0", "libc.so.6");
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(m.status().message(),
            "NVML is not available (libc.so.6 lacks nvmlInit_v2, nvmlShutdown, nvmlErrorString, "
            "nvmlDeviceGetHandleByPciBusId_v2, nvmlDeviceGetClockInfo, "
            "nvmlDeviceGetTemperature): clocks and temperature are not recorded; upgrade the "
            "NVIDIA driver");
}
#endif  // TESSEL_HAVE_CUDA

}  // namespace
}  // namespace tessel::worker
