// Architectures on a real GPU (CTest label gpu; skipped without one): `tessel tune` refuses, before
// it starts, an --arch whose kernels this GPU does not run (an sm_80 job on a 9.0 GPU, an sm_90a
// job on any other), instead of waiting for a worker that never comes.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "tests/cli/cli_test_util.h"
#include "tests/test_util.h"
#ifdef TESSEL_HAVE_CUDA
#include "tests/gpu/gpu_test_util.h"
#include "worker/cuda/cuda_runner.h"
#endif

namespace tessel::testing {
namespace {

#ifdef TESSEL_HAVE_CUDA

using ::testing::HasSubstr;

TEST(ArchGpu, TuneRefusesAnArchitectureThisGpuDoesNotRunSayingWhy) {
  SKIP_WITHOUT_GPU();
  auto device = worker::CudaDevice::Open(0);
  ASSERT_TRUE(device.ok()) << device.status();
  const std::string here = (*device)->info().arch;
  const std::string other = here == "sm_90" ? "sm_80" : "sm_90a";
  const std::string db = MakeTempDir("tessel_arch_gpu") + "/log.db";
  CliResult r = RunTessel("tune -w 'softmax(rows=8, cols=64)' -n 2 --target cuda --arch " + other +
                          " --quiet --db " + db);
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_THAT(r.output,
              HasSubstr("tessel tune: --arch " + other + ": GPU 0 (" + (*device)->info().name +
                        ") cannot run its kernels: " + other + " code runs only on "));
  EXPECT_THAT(r.output,
              HasSubstr(", and this device is " + here + "; leave --arch out to tune for " + here +
                        ", or tessel submit the job to a server that has a "
                        "worker with such a GPU"));
}

#else

TEST(ArchGpu, NeedsTheCudaToolkit) { GTEST_SKIP() << "built without the CUDA toolkit"; }

#endif  // TESSEL_HAVE_CUDA

}  // namespace
}  // namespace tessel::testing
