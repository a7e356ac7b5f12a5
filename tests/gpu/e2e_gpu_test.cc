// On an H100/H200 (CTest label gpu; skipped without a GPU): the hand-written and random
// schedules of every family, on shapes the tiles do not divide, match the reference kernels on
// random inputs.

#include <gtest/gtest.h>

#include "schedules/templates/templates.h"
#include "schedules/workload/builtins.h"
#include "tests/e2e/e2e_util.h"
#include "worker/verify_run.h"
#ifdef TESSEL_HAVE_CUDA
#include "worker/cuda/cuda_runner.h"
#endif

namespace tessel::testing {
namespace {

class GpuE2E : public ::testing::TestWithParam<std::string> {};

TEST_P(GpuE2E, ScheduledKernelsMatchReference) {
#ifndef TESSEL_HAVE_CUDA
  GTEST_SKIP() << "built without the CUDA toolkit";
#else
  if (!worker::CudaDeviceAvailable()) GTEST_SKIP() << "no CUDA GPU";
  auto w = schedules::ParseWorkloadSpec(GetParam());
  ASSERT_TRUE(w.ok()) << w.status();
  const auto target = schedules::CudaTarget("sm_90");
  auto ref = GenerateReference(*w, target);
  ASSERT_TRUE(ref.ok()) << ref.status();
  auto hand = schedules::HandwrittenSchedule(*w, target);
  ASSERT_TRUE(hand.ok()) << hand.status();
  auto hs = Generate(*hand, target);
  ASSERT_TRUE(hs.ok()) << hs.status();
  absl::Status v = worker::RunAndVerify(*hs, *ref, 11);
  EXPECT_TRUE(v.ok()) << "hand-written: " << v << "\n" << hs->code;
  for (uint64_t seed = 1; seed <= 6; ++seed) {
    auto sch = RandomSchedule(*w, target, seed, 10);
    ASSERT_TRUE(sch.ok()) << sch.status();
    auto s = Generate(*sch, target);
    if (!s.ok()) continue;
    absl::Status rv = worker::RunAndVerify(*s, *ref, seed);
    EXPECT_TRUE(rv.ok()) << "seed " << seed << ": " << rv << "\n"
                         << sch->trace().ToJsonString() << "\n"
                         << s->code;
  }
#endif
}

INSTANTIATE_TEST_SUITE_P(Families, GpuE2E, ::testing::ValuesIn(SmallFamilySpecs()), SpecTestName);

// The softmax template with each thread's share of the row held in registers (split_buffer_axis
// and the thread-axis compaction of the cache): 32 elements a thread, and 64 (the whole register
// file of the SM at 1024 threads, which spills).
TEST(GpuE2ERegisterCache, RegisterCachedSoftmaxMatchesReference) {
#ifndef TESSEL_HAVE_CUDA
  GTEST_SKIP() << "built without the CUDA toolkit";
#else
  if (!worker::CudaDeviceAvailable()) GTEST_SKIP() << "no CUDA GPU";
  const auto target = schedules::CudaTarget("sm_90");
  struct Case {
    const char* spec;
    int64_t threads;
  };
  for (const Case& c :
       {Case{"softmax(rows=5, cols=4096)", 128}, Case{"softmax(rows=7, cols=2048)", 64},
        Case{"softmax(rows=3, cols=65536)", 1024}}) {
    auto w = schedules::ParseWorkloadSpec(c.spec);
    ASSERT_TRUE(w.ok()) << w.status();
    schedules::TemplateOptions o;
    o.row_threads = c.threads;
    o.row_in_registers = true;
    auto sch = schedules::HandwrittenSchedule(*w, target, o);
    ASSERT_TRUE(sch.ok()) << sch.status();
    ASSERT_NE(sch->FindStage("X_local"), nullptr) << c.spec;
    auto ref = GenerateReference(*w, target);
    ASSERT_TRUE(ref.ok()) << ref.status();
    auto src = Generate(*sch, target);
    ASSERT_TRUE(src.ok()) << src.status();
    absl::Status v = worker::RunAndVerify(*src, *ref, 5);
    EXPECT_TRUE(v.ok()) << c.spec << ": " << v << "\n" << src->code;
  }
#endif
}

}  // namespace
}  // namespace tessel::testing
