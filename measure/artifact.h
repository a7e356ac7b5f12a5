#pragma once

// What a worker ran, kept so that a tuning record reproduces its measurement (issue 19): the
// generated source exactly as compiled, the compiled binary, the launch configuration, the
// code-generation version that printed the source, the toolchain and driver versions, and the
// device. The worker fills it in for every ok result; the tuning log stores it beside the record
// (store/tuning_log.h), and deploy-time readers (tessel best, the runtime) load it instead of
// regenerating the source from the trace.
//
// The launch configuration is kept as JSON text (schedules/codegen/source_json.h writes and
// reads it) so that this vocabulary layer depends on nothing of ours.

#include <string>

namespace tessel::measure {

struct Artifact {
  // The code generator's version (schedules::kCodegenVersion) that printed `source`; 0 when
  // nothing is stored (a record of a log from before artifacts).
  int codegen_version = 0;
  std::string source;  // the generated source, byte for byte what was compiled
  // Kernels (entries, grid, block, dynamic shared memory, parameters) and buffers (names, dtypes,
  // shapes, roles): schedules::SourceLaunchToJson.
  std::string launch_json;
  // The compiled program: "cubin" (NVRTC's ELF image for `binary_arch`) or empty for the host,
  // whose shared object is not kept (see store/tuning_log.h).
  std::string binary_format;
  std::string binary_arch;       // "sm_90"; empty for the host
  std::string binary;            // bytes
  std::string compile_options;   // NVRTC options or the host compiler's flags, space-separated
  std::string compiler_version;  // "NVRTC 13.0", or the host compiler's first --version line
  std::string driver_version;    // "13000" (cuDriverGetVersion); empty for the host
  std::string device_arch;       // "sm_90" or the host's architecture ("x86_64")
  int multiprocessor_count = 0;  // SMs, or the host's logical cores

  bool stored() const { return codegen_version > 0 && !source.empty(); }
  bool operator==(const Artifact&) const = default;
};

}  // namespace tessel::measure
