// NVRTC compiles without a GPU: these run in CI. The driver is only probed (never required).

#include <gtest/gtest.h>

#ifdef TESSEL_HAVE_CUDA

#include <string>

#include "measure/measurement.h"
#include "schedules/codegen/source.h"
#include "schedules/ir/buffer.h"
#include "worker/cuda/cuda_runner.h"
#include "worker/cuda/nvrtc_compiler.h"

namespace tessel::worker {
namespace {

const char kKernel[] = R"(
#include <cuda_fp16.h>
extern "C" __global__ void scale_half(const __half* __restrict__ x, float* __restrict__ y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = 2.0f * __half2float(x[i]);
}
)";

bool IsElf(const std::string& image) {
  return image.size() > 4 && image.compare(0, 4,
                                           "\x7f"
                                           "ELF") == 0;
}

TEST(NvrtcCompilerTest, CompilesToCubinForSm80AndSm90) {
  for (const char* arch : {"sm_80", "sm_90", "sm_90a"}) {
    SCOPED_TRACE(arch);
    NvrtcOptions options;
    options.arch = arch;
    absl::StatusOr<CudaBinary> bin = CompileCudaSource(kKernel, options);
    ASSERT_TRUE(bin.ok()) << bin.status();
    EXPECT_TRUE(IsElf(bin->cubin));
    EXPECT_EQ(bin->arch, arch);
    EXPECT_NE(bin->cubin.find("scale_half"), std::string::npos);
  }
}

// Hopper's architecture-specific instructions (wgmma, setmaxnreg) exist only in sm_90a: NVRTC
// builds them for sm_90a and refuses them for sm_90 with ptxas's message.
TEST(NvrtcCompilerTest, WgmmaCompilesForSm90aOnlyAndSm90SaysWhy) {
  const char kWgmma[] = R"(
extern "C" __global__ void fence_and_grow() {
  asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
  asm volatile("setmaxnreg.inc.sync.aligned.u32 240;");
}
)";
  NvrtcOptions options;
  options.arch = "sm_90a";
  absl::StatusOr<CudaBinary> a = CompileCudaSource(kWgmma, options, "wgmma.cu");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_TRUE(IsElf(a->cubin));
  EXPECT_EQ(a->arch, "sm_90a");
  EXPECT_EQ(a->options.front(), "--gpu-architecture=sm_90a");
  EXPECT_NE(a->cubin.find("fence_and_grow"), std::string::npos);

  options.arch = "sm_90";
  absl::StatusOr<CudaBinary> plain = CompileCudaSource(kWgmma, options, "wgmma.cu");
  ASSERT_FALSE(plain.ok());
  const absl::Status& s = plain.status();
  EXPECT_EQ(measure::AttachedMeasureStatus(s), measure::MeasureStatus::kCompileError);
  EXPECT_NE(s.message().find("could not compile wgmma.cu for sm_90"), absl::string_view::npos) << s;
  EXPECT_NE(s.message().find("Instruction 'wgmma.fence' not supported on .target 'sm_90'"),
            absl::string_view::npos)
      << s;
}

TEST(NvrtcCompilerTest, SyntaxErrorReturnsTheLog) {
  NvrtcOptions options;
  options.arch = "sm_90";
  absl::StatusOr<CudaBinary> bin = CompileCudaSource(
      "extern \"C\" __global__ void k(float* y) { y[0] = oops_undefined; }", options, "broken.cu");
  ASSERT_FALSE(bin.ok());
  const absl::Status& s = bin.status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(measure::AttachedMeasureStatus(s), measure::MeasureStatus::kCompileError);
  EXPECT_NE(s.message().find("broken.cu"), absl::string_view::npos) << s;
  EXPECT_NE(s.message().find("oops_undefined"), absl::string_view::npos) << s;
  EXPECT_NE(s.message().find("error"), absl::string_view::npos) << s;
}

TEST(NvrtcCompilerTest, ArchIsRequiredAndMustBeReal) {
  NvrtcOptions options;
  absl::StatusOr<CudaBinary> none = CompileCudaSource(kKernel, options);
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("NvrtcOptions::arch"), absl::string_view::npos);
  options.arch = "compute_90";
  absl::StatusOr<CudaBinary> virt = CompileCudaSource(kKernel, options);
  ASSERT_FALSE(virt.ok());
  EXPECT_NE(virt.status().message().find("not a real architecture"), absl::string_view::npos);
}

TEST(NvrtcCompilerTest, GeneratedSourceKernelsMustBeUnmangled) {
  schedules::GeneratedSource src;
  src.target = schedules::TargetKind::kCuda;
  src.code = "__global__ void mangled(float* y) { y[0] = 1; }";
  schedules::KernelSource k;
  k.entry = "mangled";
  k.params = {0};
  src.kernels.push_back(k);
  src.buffers = {{schedules::MakeBuffer("y", schedules::DType::kFloat32, {1}),
                  schedules::BufferRole::kOutput}};
  NvrtcOptions options;
  options.arch = "sm_90";
  absl::StatusOr<CudaBinary> bin = CompileCuda(src, options);
  ASSERT_FALSE(bin.ok());
  EXPECT_NE(bin.status().message().find("extern \"C\""), absl::string_view::npos) << bin.status();
  src.code = "extern \"C\" " + src.code;
  EXPECT_TRUE(CompileCuda(src, options).ok());
}

TEST(NvrtcCompilerTest, FindsTheCudaHeaders) {
  absl::StatusOr<std::string> dir = FindCudaIncludeDir();
  ASSERT_TRUE(dir.ok()) << dir.status();
  EXPECT_FALSE(dir->empty());
  EXPECT_NE(NvrtcVersionString().find("NVRTC"), std::string::npos);
}

// Without a driver (CI, build hosts) the probe returns a status instead of crashing.
TEST(NvrtcDriverProbeTest, DeviceStatusNeverCrashes) {
  absl::Status s = CudaDeviceStatus();
  EXPECT_EQ(s.ok(), CudaDeviceAvailable());
  if (!s.ok()) {
    EXPECT_FALSE(s.message().empty());
  }
}

}  // namespace
}  // namespace tessel::worker

#else  // !TESSEL_HAVE_CUDA

TEST(NvrtcCompilerTest, SkippedWithoutCudaToolkit) {
  GTEST_SKIP() << "built without the CUDA toolkit: NVRTC is not available";
}

#endif  // TESSEL_HAVE_CUDA
