#pragma once

// Shared by the GPU suites (CTest label `gpu`): a test that needs a GPU skips itself, with the
// reason, where none is usable, so CTest reports it as skipped rather than passed.

#include <gtest/gtest.h>

#include "absl/status/status.h"
#include "worker/cuda/cuda_runner.h"

#define SKIP_WITHOUT_GPU()                                             \
  do {                                                                 \
    absl::Status gpu = ::tessel::worker::CudaDeviceStatus();           \
    if (!gpu.ok()) GTEST_SKIP() << "no usable GPU: " << gpu.message(); \
  } while (false)
