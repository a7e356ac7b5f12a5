// On an H100/H200 (CTest label gpu; skipped without a GPU): the hand-written and random
// schedules of every family, on shapes the tiles do not divide, match the reference kernels on
// random inputs.

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "schedules/templates/templates.h"
#include "schedules/workload/builtins.h"
#include "tests/e2e/e2e_util.h"
#include "tests/schedules/test_workloads.h"
#include "worker/backend.h"
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

#ifdef TESSEL_HAVE_CUDA
// The hand-written schedule of `spec` with options `o` on sm_90 holds X in registers, launches
// clusters of `cluster` CTAs, and matches the reference on random inputs.
void ExpectRegisterCachedTemplateMatches(const std::string& spec,
                                         const schedules::TemplateOptions& o, int64_t cluster) {
  SCOPED_TRACE(spec);
  const auto target = schedules::CudaTarget("sm_90");
  auto w = schedules::ParseWorkloadSpec(spec);
  ASSERT_TRUE(w.ok()) << w.status();
  auto sch = schedules::HandwrittenSchedule(*w, target, o);
  ASSERT_TRUE(sch.ok()) << sch.status();
  ASSERT_NE(sch->FindStage("X_local"), nullptr);
  auto ref = GenerateReference(*w, target);
  ASSERT_TRUE(ref.ok()) << ref.status();
  auto src = Generate(*sch, target);
  ASSERT_TRUE(src.ok()) << src.status();
  ASSERT_EQ(src->kernels[0].launch.cluster, cluster);
  absl::Status v = worker::RunAndVerify(*src, *ref, 9);
  EXPECT_TRUE(v.ok()) << v << "\n" << src->code;
}
#endif

// The softmax template with each thread's share of the row held in registers (split_buffer_axis
// and the thread-axis compaction of the cache), one block a row: 32 elements a thread, and 64
// (the whole register file of the SM at 1024 threads, which spills).
TEST(GpuE2ERegisterCache, RegisterCachedSoftmaxMatchesReference) {
#ifndef TESSEL_HAVE_CUDA
  GTEST_SKIP() << "built without the CUDA toolkit";
#else
  if (!worker::CudaDeviceAvailable()) GTEST_SKIP() << "no CUDA GPU";
  for (const auto& [spec, threads] :
       std::vector<std::pair<std::string, int64_t> >{{"softmax(rows=5, cols=4096)", 128},
                                                     {"softmax(rows=7, cols=2048)", 64},
                                                     {"softmax(rows=3, cols=65536)", 1024}}) {
    schedules::TemplateOptions o;
    o.row_cluster = 0;
    o.row_threads = threads;
    o.row_in_registers = true;
    ExpectRegisterCachedTemplateMatches(spec, o, 1);
  }
#endif
}

// The softmax template on sm_90 with each row split over a thread-block cluster, held in
// registers and reduced through distributed shared memory: clusters of 2, 4 and 8 CTAs, the
// default (4 x 512) on a full-width row included.
TEST(GpuE2ECluster, ClusterSoftmaxMatchesReference) {
#ifndef TESSEL_HAVE_CUDA
  GTEST_SKIP() << "built without the CUDA toolkit";
#else
  if (!worker::CudaDeviceAvailable()) GTEST_SKIP() << "no CUDA GPU";
  struct Case {
    const char* spec;
    int64_t cluster, threads;
  };
  for (const Case& c :
       {Case{"softmax(rows=5, cols=4096)", 4, 64}, Case{"softmax(rows=7, cols=2048)", 2, 128},
        Case{"softmax(rows=3, cols=4096)", 8, 32}, Case{"softmax(rows=3, cols=65536)", 4, 512}}) {
    schedules::TemplateOptions o;
    o.row_cluster = c.cluster;
    o.row_cluster_threads = c.threads;
    ExpectRegisterCachedTemplateMatches(c.spec, o, c.cluster);
  }
#endif
}

// The layernorm template in one grid-synchronized kernel (cooperative launch, a grid barrier a
// row, each block's slice of the row in registers and of the weight in shared memory): small
// grids, and the (16, 4194304) of the benchmark with the default 128 x 512.
TEST(GpuE2EGridSync, GridSynchronizedLayernormMatchesReference) {
#ifndef TESSEL_HAVE_CUDA
  GTEST_SKIP() << "built without the CUDA toolkit";
#else
  if (!worker::CudaDeviceAvailable()) GTEST_SKIP() << "no CUDA GPU";
  const auto target = schedules::CudaTarget("sm_90");
  for (const auto& [spec, threads] :
       std::vector<std::pair<std::string, int64_t> >{{"layernorm(rows=3, cols=8192)", 64},
                                                     {"layernorm(rows=5, cols=65536)", 256},
                                                     {"layernorm(rows=16, cols=4194304)", 512}}) {
    SCOPED_TRACE(spec);
    auto w = schedules::ParseWorkloadSpec(spec);
    ASSERT_TRUE(w.ok()) << w.status();
    schedules::TemplateOptions o;
    o.grid_rows = true;
    o.grid_row_threads = threads;
    auto sch = schedules::HandwrittenSchedule(*w, target, o);
    ASSERT_TRUE(sch.ok()) << sch.status();
    auto ref = GenerateReference(*w, target);
    ASSERT_TRUE(ref.ok()) << ref.status();
    auto src = Generate(*sch, target);
    ASSERT_TRUE(src.ok()) << src.status();
    ASSERT_EQ(src->kernels.size(), 1u);
    ASSERT_TRUE(src->kernels[0].launch.cooperative);
    for (uint64_t seed : {3, 4}) {  // twice: the barrier's word pair is reused
      absl::Status v = worker::RunAndVerify(*src, *ref, seed);
      EXPECT_TRUE(v.ok()) << v << "\n" << src->code;
    }
  }
#endif
}

TEST(GpuE2EFusedLayernormStats, WelfordPartialsMatchReference) {
#ifndef TESSEL_HAVE_CUDA
  GTEST_SKIP() << "built without the CUDA toolkit";
#else
  if (!worker::CudaDeviceAvailable()) GTEST_SKIP() << "no CUDA GPU";
  const auto target = schedules::CudaTarget("sm_90");
  // Equal counts over 4 warps; ragged chunks over 2 warps (every thread counts); 16 lanes.
  struct Case {
    const char* spec;
    int64_t chunk, threads;
  };
  for (const Case& c : {Case{"layernorm(rows=2, cols=4096)", 512, 128},
                        Case{"layernorm(rows=3, cols=1000)", 300, 64},
                        Case{"layernorm(rows=2, cols=300)", 100, 16}}) {
    SCOPED_TRACE(c.spec);
    auto w = schedules::ParseWorkloadSpec(c.spec);
    ASSERT_TRUE(w.ok()) << w.status();
    auto ref = GenerateReference(*w, target);
    ASSERT_TRUE(ref.ok()) << ref.status();
    for (bool two_pass : {false, true}) {
      schedules::Schedule sch =
          schedules::test_workloads::FusedLayernormCuda(*w, c.chunk, c.threads, two_pass);
      auto src = Generate(sch, target);
      ASSERT_TRUE(src.ok()) << src.status();
      absl::Status v = worker::RunAndVerify(*src, *ref, 7);
      EXPECT_TRUE(v.ok()) << v << "\n" << src->code;
    }
  }
#endif
}

}  // namespace
}  // namespace tessel::testing
