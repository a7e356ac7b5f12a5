// On an H100/H200 (CTest label gpu; skipped without a GPU): matmuls scheduled with virtual
// threads (2 and 4 per axis, one axis or a nested m/n pair, shapes the tiles divide and shapes
// they do not), lowered with vthread injection (the shared fetch once per reduction step, the
// accumulator per virtual thread), match the reference kernel on random inputs.

#include <gtest/gtest.h>

#include <string>
#include <tuple>

#include "schedules/lower/lower.h"
#include "tests/e2e/e2e_util.h"
#include "tests/schedules/vthread_matmul.h"
#include "worker/backend.h"
#ifdef TESSEL_HAVE_CUDA
#include "worker/cuda/cuda_runner.h"
#endif

namespace tessel::testing {
namespace {

using schedules::test_workloads::VThreadMatmul;
using schedules::test_workloads::VTile;

class InjectVThreadGpu : public ::testing::TestWithParam<std::tuple<int64_t, int64_t, bool, bool>> {
};

TEST_P(InjectVThreadGpu, MatchesReference) {
#ifndef TESSEL_HAVE_CUDA
  GTEST_SKIP() << "built without the CUDA toolkit";
#else
  if (!worker::CudaDeviceAvailable()) GTEST_SKIP() << "no CUDA GPU";
  const auto [vm, vn, local, dividing] = GetParam();
  const auto target = schedules::CudaTarget("sm_90");
  const schedules::Workload w = dividing ? schedules::test_workloads::Matmul(128, 96, 64)
                                         : schedules::test_workloads::Matmul(100, 75, 37);
  schedules::Schedule sch =
      VThreadMatmul(w, {.vm = vm, .vn = vn, .local_caches = local}, /*cuda=*/true);
  // The injected path: no vthread loop is left a plain loop around the fetch.
  auto prog = schedules::Lower(sch, target);
  ASSERT_TRUE(prog.ok()) << prog.status();
  const std::string ir = schedules::ToString(prog->kernels[0].body);
  EXPECT_EQ(ir.find("= vthread"), std::string::npos) << ir;
  auto ref = GenerateReference(w, target);
  ASSERT_TRUE(ref.ok()) << ref.status();
  auto cand = Generate(sch, target);
  ASSERT_TRUE(cand.ok()) << cand.status();
  absl::Status v = worker::RunAndVerify(*cand, *ref, /*seed=*/vm * 10 + vn);
  EXPECT_TRUE(v.ok()) << v << "\n" << cand->code;
#endif
}

INSTANTIATE_TEST_SUITE_P(VThreads, InjectVThreadGpu,
                         ::testing::Combine(::testing::Values(1, 2, 4), ::testing::Values(2, 4),
                                            ::testing::Bool(), ::testing::Bool()));

}  // namespace
}  // namespace tessel::testing
