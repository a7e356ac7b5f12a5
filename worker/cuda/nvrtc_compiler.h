#pragma once

// Compiles CUDA C++ with NVRTC to a CUBIN for one GPU architecture. Needs no GPU and no driver
// (CI compiles for sm_80 and sm_90 on machines without either).

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "schedules/codegen/source.h"

namespace tessel::worker {

struct NvrtcOptions {
  // Real architecture to build machine code for: "sm_80", "sm_90", "sm_90a" (wgmma, setmaxnreg).
  // Required; RunAndVerify and Measure fill it from the device when it is empty.
  std::string arch;
  bool fast_math = false;  // --use_fast_math (off: results must match the reference)
  bool line_info = false;  // -lineinfo, for profilers
  int max_registers = 0;   // --maxrregcount when > 0
  // Directory passed as -I (cuda_fp16.h, cuda_bf16.h, ...). Empty: FindCudaIncludeDir().
  std::string include_dir;
  std::vector<std::string> extra_options;  // appended as given
};

struct CudaBinary {
  std::string arch;                  // what it was built for
  std::string cubin;                 // the ELF image, for cuModuleLoadDataEx
  std::string log;                   // NVRTC's log (warnings), possibly empty
  std::vector<std::string> options;  // the NVRTC options used
  double compile_ms = 0;
};

// Compiles `code` (named `name` in messages). A compile error returns InvalidArgument with
// measure::MeasureStatus::kCompileError and NVRTC's log in the message.
// Threads: safe to call concurrently (each call has its own NVRTC program).
absl::StatusOr<CudaBinary> CompileCudaSource(const std::string& code, const NvrtcOptions& options,
                                             const std::string& name = "tessel_kernel.cu");

// Compiles a CUDA GeneratedSource (target kCuda, at least one kernel) and checks that every
// kernel's entry is a symbol of the CUBIN (kernels must be `extern "C" __global__`).
absl::StatusOr<CudaBinary> CompileCuda(const schedules::GeneratedSource& source,
                                       const NvrtcOptions& options);

// The CUDA headers directory: $CUDA_HOME/include, $CUDA_PATH/include, /usr/local/cuda/include, or
// the toolkit's include directory at build time, the first that has cuda_fp16.h.
absl::StatusOr<std::string> FindCudaIncludeDir();

// "NVRTC 13.0".
std::string NvrtcVersionString();

}  // namespace tessel::worker
