// Thread-block clusters (sm_90): a loop bound to cluster.x, a reduction across the CTAs of a
// cluster through distributed shared memory, and the softmax template that splits each row over
// a cluster with the row held in registers. What lowering and code generation produce, each
// error, and NVRTC compilation where the toolkit is installed (results on the GPU:
// tests/gpu/e2e_gpu_test.cc, ClusterSoftmaxMatchesReference).

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "schedules/lower/lower.h"
#include "schedules/schedule/schedule.h"
#include "schedules/templates/templates.h"
#include "tests/e2e/e2e_util.h"
#include "tests/schedules/test_workloads.h"
#ifdef TESSEL_HAVE_CUDA
#include "worker/cuda/nvrtc_compiler.h"
#endif

namespace tessel::testing {
namespace {

using schedules::LoopRV;
using schedules::Schedule;
using ::testing::HasSubstr;

schedules::TemplateOptions SmallCluster(int64_t c, int64_t threads) {
  schedules::TemplateOptions o;
  o.row_cluster = c;
  o.row_cluster_threads = threads;
  return o;
}

TEST(ClusterSoftmax, EachRowIsSplitOverAClusterAndHeldInRegisters) {
  const auto t = schedules::CudaTarget("sm_90");
  // 4096 columns over 4 CTAs of 64 threads: 16 a thread, as 4 float4.
  auto s = schedules::HandwrittenSchedule(LoadSpec("softmax(rows=3, cols=4096)"), t,
                                          SmallCluster(4, 64));
  ASSERT_TRUE(s.ok()) << s.status();
  auto p = schedules::Lower(*s, t);
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_EQ(p->kernels.size(), 1u);
  const schedules::Kernel& k = p->kernels[0];
  EXPECT_EQ(k.launch.cluster, 4);
  EXPECT_EQ(k.launch.grid[0], 12);  // 3 rows x 4 CTAs
  EXPECT_EQ(k.launch.block[0], 64);
  // The cache drops both the rank and the thread axes: 4 x 4 elements a thread.
  const auto* x = schedules::test_workloads::FindAllocate(k.body, "X_local");
  ASSERT_NE(x, nullptr);
  EXPECT_EQ(x->buffer->shape, (std::vector<int64_t>{1, 4, 4}));
  const std::string ir = schedules::test_workloads::IrBeforePass(*s, t, "lower_all_reduce");
  EXPECT_THAT(ir, HasSubstr("allreduce_max(row_max_red[0]) over cluster.x x4")) << ir;
  EXPECT_THAT(ir, HasSubstr("allreduce_sum(row_sum_red[0]) over cluster.x x4")) << ir;
  auto src = Generate(*s, t);
  ASSERT_TRUE(src.ok()) << src.status();
  EXPECT_THAT(src->code, HasSubstr("__global__ void __cluster_dims__(4, 1, 1) "
                                   "__launch_bounds__(64, 1) tessel_softmax_Y("));
  EXPECT_THAT(src->code, HasSubstr("const int Y_i = (blockIdx.x / 4);"));
  EXPECT_THAT(src->code, HasSubstr("(blockIdx.x % 4)"));
  EXPECT_THAT(src->code, HasSubstr("mapa.shared::cluster.u32"));
  EXPECT_THAT(src->code, HasSubstr("barrier.cluster.arrive.release.aligned"));
  // X is read once, by the fill of the cache.
  EXPECT_EQ(src->code.find("&X["), src->code.rfind("&X[")) << src->code;
#ifdef TESSEL_HAVE_CUDA
  if (worker::FindCudaIncludeDir().ok()) {
    worker::NvrtcOptions o;
    o.arch = "sm_90";
    auto bin = worker::CompileCuda(*src, o);
    EXPECT_TRUE(bin.ok()) << bin.status() << "\n" << src->code;
  }
#endif
}

TEST(ClusterSoftmax, FallsBackWithoutClustersOrWhenTheRowDoesNotDivide) {
  // sm_80 has no clusters; 4000 columns do not divide over 4 x 64 threads x 4.
  for (const auto& [arch, spec] : std::vector<std::pair<std::string, std::string>>{
           {"sm_80", "softmax(rows=3, cols=4096)"}, {"sm_90", "softmax(rows=3, cols=4000)"}}) {
    const auto t = schedules::CudaTarget(arch);
    auto s = schedules::HandwrittenSchedule(LoadSpec(spec), t, SmallCluster(4, 64));
    ASSERT_TRUE(s.ok()) << s.status();
    auto p = schedules::Lower(*s, t);
    ASSERT_TRUE(p.ok()) << p.status();
    EXPECT_EQ(p->kernels[0].launch.cluster, 1) << arch << " " << spec;
  }
}

// A matmul whose columns are split {c, -1}, the c bound to cluster.x.
Schedule ClusterBoundMatmul(int64_t c) {
  auto s = Schedule::Create(LoadSpec("matmul(M=4, N=64, K=8)"));
  EXPECT_TRUE(s.ok()) << s.status();
  const auto l = s->GetLoops(BlockNamed(&*s, "C"));
  EXPECT_TRUE(l.ok());
  auto p = s->Split((*l)[1], {c, -1});
  EXPECT_TRUE(p.ok()) << p.status();
  EXPECT_TRUE(s->Bind((*l)[0], "blockIdx.x").ok());
  EXPECT_TRUE(s->Bind((*p)[0], "cluster.x").ok());
  EXPECT_TRUE(s->Bind((*p)[1], "threadIdx.x").ok());
  return std::move(*s);
}

TEST(ClusterErrors, ClustersNeedSm90) {
  Schedule s = ClusterBoundMatmul(2);
  auto src = Generate(s, schedules::CudaTarget("sm_80"));
  ASSERT_FALSE(src.ok());
  EXPECT_THAT(std::string(src.status().message()),
              HasSubstr("launches clusters of 2 CTAs, but sm_80 has no thread-block clusters; "
                        "they need sm_90"));
  EXPECT_TRUE(Generate(s, schedules::CudaTarget("sm_90")).ok());
}

TEST(ClusterErrors, AtMostEightCtasACluster) {
  Schedule s = ClusterBoundMatmul(16);
  auto src = Generate(s, schedules::CudaTarget("sm_90"));
  ASSERT_FALSE(src.ok());
  EXPECT_THAT(std::string(src.status().message()),
              HasSubstr("launches clusters of 16 CTAs, over the portable limit of 8 by 8; bind a "
                        "smaller loop to cluster.x"));
}

TEST(ClusterErrors, TheHostHasNoClusters) {
  auto s = Schedule::Create(LoadSpec("matmul(M=4, N=64, K=8)"));
  ASSERT_TRUE(s.ok());
  const auto l = s->GetLoops(BlockNamed(&*s, "C"));
  ASSERT_TRUE(l.ok());
  auto c = s->Split((*l)[1], {2, -1});
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE(s->Bind((*c)[0], "cluster.x").ok());
  auto p = schedules::Lower(*s, schedules::HostTarget());
  ASSERT_FALSE(p.ok());
  EXPECT_THAT(std::string(p.status().message()),
              HasSubstr("to cluster.x, but the host target has no thread axes; use parallel "
                        "instead"));
}

TEST(ClusterErrors, AClusterReductionNeedsAThreadReductionBelowIt) {
  auto s = Schedule::Create(LoadSpec("reduce(rows=4, cols=64, op=max)"));
  ASSERT_TRUE(s.ok());
  const auto l = s->GetLoops(BlockNamed(&*s, "Y"));
  ASSERT_TRUE(l.ok());
  auto p = s->Split((*l)[1], {2, -1});
  ASSERT_TRUE(p.ok());
  ASSERT_TRUE(s->Bind((*l)[0], "blockIdx.x").ok());
  ASSERT_TRUE(s->Bind((*p)[0], "cluster.x").ok());
  auto src = Generate(*s, schedules::CudaTarget("sm_90"));
  ASSERT_FALSE(src.ok());
  EXPECT_THAT(std::string(src.status().message()),
              HasSubstr("across the cluster but no loop across threads; bind another reduction "
                        "loop to threadIdx.x (the cluster combines one value per CTA)"));
}

}  // namespace
}  // namespace tessel::testing
