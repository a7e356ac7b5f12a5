#pragma once

// The copy engine's tensor maps (CUtensorMap) of a kernel's bulk tensor copies
// (schedules::TensorMapSpec), encoded on the host over a buffer's device address through the
// driver (cuTensorMapEncodeTiled). The runner (cuda_runner.h) and the deploy runtime
// (runtime/cuda_kernel.cc) pass them to kernels by value after the buffers.
//
// Threads: a free function, callable from any thread.

#include <cuda.h>

#include "absl/status/statusor.h"
#include "schedules/ir/buffer.h"
#include "schedules/lower/program.h"
#include "worker/cuda/cuda_driver.h"

namespace tessel::worker {

// The map of `spec`'s box over `buffer` (its dtype, shape and strides) at `address`. The copy
// engine fills what a box holds past the buffer's extents with zeros. InvalidArgument naming the
// buffer and the fix when the address is not 16-byte aligned, a type has no tensor-map form, or
// the driver refuses the map.
absl::StatusOr<CUtensorMap> EncodeTensorMap(const CudaDriver& driver,
                                            const schedules::TensorMapSpec& spec,
                                            const schedules::Buffer& buffer, CUdeviceptr address);

}  // namespace tessel::worker
