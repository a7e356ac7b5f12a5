// CUDA in CI (no GPU needed): the hand-written and random schedules of every family lower to
// CUDA C++ that NVRTC compiles for sm_80 and sm_90.

#include <gtest/gtest.h>

#include "schedules/templates/templates.h"
#include "schedules/workload/builtins.h"
#include "tests/e2e/e2e_util.h"
#ifdef TESSEL_HAVE_CUDA
#include "worker/cuda/nvrtc_compiler.h"
#endif

namespace tessel::testing {
namespace {

class CudaCompile : public ::testing::TestWithParam<std::string> {};

TEST_P(CudaCompile, ScheduledKernelsCompileWithNvrtc) {
#ifndef TESSEL_HAVE_CUDA
  GTEST_SKIP() << "built without the CUDA toolkit";
#else
  if (!worker::FindCudaIncludeDir().ok()) GTEST_SKIP() << "no CUDA include directory";
  auto w = schedules::ParseWorkloadSpec(GetParam());
  ASSERT_TRUE(w.ok()) << w.status();
  for (const char* arch : {"sm_80", "sm_90"}) {
    const auto target = schedules::CudaTarget(arch);
    std::vector<schedules::GeneratedSource> sources;
    auto ref = GenerateReference(*w, target);
    ASSERT_TRUE(ref.ok()) << ref.status();
    sources.push_back(*ref);
    auto hand = schedules::HandwrittenSchedule(*w, target);
    ASSERT_TRUE(hand.ok()) << hand.status();
    auto hs = Generate(*hand, target);
    ASSERT_TRUE(hs.ok()) << hs.status();
    sources.push_back(*hs);
    for (uint64_t seed = 1; seed <= 3; ++seed) {
      auto sch = RandomSchedule(*w, target, seed, 10);
      ASSERT_TRUE(sch.ok()) << sch.status();
      auto s = Generate(*sch, target);
      if (s.ok()) sources.push_back(*s);
    }
    for (const auto& src : sources) {
      worker::NvrtcOptions o;
      o.arch = arch;
      auto bin = worker::CompileCuda(src, o);
      EXPECT_TRUE(bin.ok()) << arch << ": " << bin.status() << "\n" << src.code;
    }
  }
#endif
}

INSTANTIATE_TEST_SUITE_P(Families, CudaCompile, ::testing::ValuesIn(SmallFamilySpecs()),
                         SpecTestName);

}  // namespace
}  // namespace tessel::testing
