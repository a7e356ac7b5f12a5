#pragma once

// Shared by the GPU suites (CTest label `gpu`): a test that needs a GPU skips itself, with the
// reason, where none is usable, so CTest reports it as skipped rather than passed; and design-space
// samples verified on the GPU against the reference.

#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "tests/e2e/e2e_util.h"
#include "worker/cuda/cuda_runner.h"

#define SKIP_WITHOUT_GPU()                                             \
  do {                                                                 \
    absl::Status gpu = ::tessel::worker::CudaDeviceStatus();           \
    if (!gpu.ok()) GTEST_SKIP() << "no usable GPU: " << gpu.message(); \
  } while (false)

namespace tessel::testing {

// VerifySamples on GPU 0 for `arch` (a failure to open it fails the test and checks none).
inline int VerifySamplesOnGpu(const std::string& spec, uint64_t seeds, int most,
                              const SampleFilter& keep = nullptr,
                              const std::string& arch = "sm_90") {
  auto device = worker::CudaDevice::Open(0);
  if (!device.ok()) {
    ADD_FAILURE() << device.status();
    return 0;
  }
  worker::VerifyOptions vo;
  vo.run.device = device->get();
  vo.run.nvrtc.arch = arch;
  return VerifySamples(spec, schedules::CudaTarget(arch), seeds, most, keep, vo);
}

}  // namespace tessel::testing
