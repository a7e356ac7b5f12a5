// The artifact a worker attaches to an ok result (worker/daemon/result_artifact.h): the source and
// launch configuration it compiled, the cubin for CUDA (none for the host), and the toolchain,
// driver and device of the registration.

#include "worker/daemon/result_artifact.h"

#include <gtest/gtest.h>

#include "schedules/codegen/codegen_version.h"
#include "schedules/codegen/source_json.h"
#include "schedules/space/candidate.h"
#include "schedules/target/target.h"
#include "schedules/workload/builtins.h"

namespace tessel::testing {
namespace {

schedules::GeneratedSource Reference(const schedules::Target& target) {
  auto w = schedules::ParseWorkloadSpec("softmax(rows=4, cols=64)");
  EXPECT_TRUE(w.ok());
  auto c = schedules::BuildCandidate(*w, target, std::nullopt);
  EXPECT_TRUE(c.ok()) << c.status();
  return c->source;
}

TEST(ResultArtifact, CudaKeepsTheCubinAndTheDevice) {
  const schedules::GeneratedSource source = Reference(schedules::CudaTarget("sm_90"));
  worker::PrecompiledProgram compiled;
  compiled.cuda.arch = "sm_90a";
  compiled.cuda.cubin = std::string(
      "\x7f"
      "ELF\0\x02",
      6);
  compiled.cuda.options = {"--gpu-architecture=sm_90a", "-default-device"};
  proto::Device device;
  device.set_name("NVIDIA H100 80GB HBM3");
  device.set_arch("sm_90");
  device.set_sm_count(132);
  device.set_driver_version(13000);
  device.set_toolkit_version("NVRTC 13.0");
  const measure::Artifact a =
      worker::ResultArtifact(source, compiled, device, worker::HostCompileOptions());
  EXPECT_EQ(a.codegen_version, schedules::kCodegenVersion);
  EXPECT_EQ(a.source, source.code);
  EXPECT_EQ(a.launch_json, schedules::SourceLaunchToJson(source));
  EXPECT_EQ(a.binary_format, "cubin");
  EXPECT_EQ(a.binary_arch, "sm_90a");
  EXPECT_EQ(a.binary, compiled.cuda.cubin);
  EXPECT_EQ(a.compile_options, "--gpu-architecture=sm_90a -default-device");
  EXPECT_EQ(a.compiler_version, "NVRTC 13.0");
  EXPECT_EQ(a.driver_version, "13000");
  EXPECT_EQ(a.device_arch, "sm_90");
  EXPECT_EQ(a.multiprocessor_count, 132);
  EXPECT_TRUE(a.stored());
}

TEST(ResultArtifact, HostKeepsTheSourceAndTheCompilerFlags) {
  const schedules::GeneratedSource source = Reference(schedules::HostTarget());
  worker::PrecompiledProgram compiled;
  compiled.host.library_path = "/tmp/ignored.so";
  proto::Device device;
  device.set_name("AMD EPYC");
  device.set_arch("x86_64");
  device.set_cores(16);
  device.set_toolkit_version("c++ (Debian 12.2.0-14) 12.2.0");
  worker::HostCompileOptions host;
  host.extra_flags = {"-ffast-math"};
  const measure::Artifact a = worker::ResultArtifact(source, compiled, device, host);
  EXPECT_EQ(a.source, source.code);
  EXPECT_EQ(a.binary_format, "");
  EXPECT_EQ(a.binary, "");
  EXPECT_EQ(a.compile_options, "-O3 -march=native -fopenmp -shared -fPIC -std=c++17 -ffast-math");
  EXPECT_EQ(a.compiler_version, "c++ (Debian 12.2.0-14) 12.2.0");
  EXPECT_EQ(a.driver_version, "");
  EXPECT_EQ(a.device_arch, "x86_64");
  EXPECT_EQ(a.multiprocessor_count, 16);
}

}  // namespace
}  // namespace tessel::testing
