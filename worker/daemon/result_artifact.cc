#include "worker/daemon/result_artifact.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "schedules/codegen/codegen_version.h"
#include "schedules/codegen/source_json.h"

namespace tessel::worker {

measure::Artifact ResultArtifact(const schedules::GeneratedSource& source,
                                 const PrecompiledProgram& compiled, const proto::Device& device,
                                 const HostCompileOptions& host) {
  measure::Artifact a;
  a.codegen_version = schedules::kCodegenVersion;
  a.source = source.code;
  a.launch_json = schedules::SourceLaunchToJson(source);
  a.compiler_version = device.toolkit_version();
  a.device_arch = device.arch();
  if (source.target == schedules::TargetKind::kCuda) {
    a.binary_format = "cubin";
    a.binary_arch = compiled.cuda.arch;
    a.binary = compiled.cuda.cubin;
    a.compile_options = absl::StrJoin(compiled.cuda.options, " ");
    a.driver_version = device.driver_version() > 0 ? absl::StrCat(device.driver_version()) : "";
    a.multiprocessor_count = device.sm_count();
  } else {
    std::vector<std::string> flags = host.flags;
    flags.insert(flags.end(), host.extra_flags.begin(), host.extra_flags.end());
    a.compile_options = absl::StrJoin(flags, " ");
    a.multiprocessor_count = device.cores();
  }
  return a;
}

}  // namespace tessel::worker
