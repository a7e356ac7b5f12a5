// Grid-synchronized kernels: an attached stage's loop bound to the kernel's block index (each
// block takes its own iteration), a grid barrier after a stage written across blocks, the
// cooperative launch, and the layernorm template that keeps each block's slice of a row in
// registers and of the weight in shared memory. What lowering and code generation produce, each
// error, and NVRTC compilation where the toolkit is installed (results on the GPU:
// tests/gpu/e2e_gpu_test.cc, GridSynchronizedLayernormMatchesReference).

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "schedules/lower/lower.h"
#include "schedules/schedule/schedule.h"
#include "schedules/space/candidate.h"
#include "schedules/templates/templates.h"
#include "tests/e2e/e2e_util.h"
#include "tests/schedules/test_workloads.h"
#ifdef TESSEL_HAVE_CUDA
#include "worker/cuda/nvrtc_compiler.h"
#endif

namespace tessel::testing {
namespace {

using schedules::Schedule;
using ::testing::HasSubstr;

int Count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t p = text.find(what); p != std::string::npos; p = text.find(what, p + 1)) ++n;
  return n;
}

schedules::TemplateOptions GridThreads(int64_t threads) {
  schedules::TemplateOptions o;
  o.grid_rows = true;
  o.grid_row_threads = threads;
  return o;
}

TEST(GridLayernorm, OneKernelOneGridBarrierARow) {
  const auto t = schedules::CudaTarget("sm_90");
  // 8192 columns over blocks of 64 threads x float4: 32 blocks (at most one an SM), 4 a thread.
  auto s =
      schedules::HandwrittenSchedule(LoadSpec("layernorm(rows=3, cols=8192)"), t, GridThreads(64));
  ASSERT_TRUE(s.ok()) << s.status();
  auto p = schedules::Lower(*s, t);
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_EQ(p->kernels.size(), 1u);
  const schedules::Kernel& k = p->kernels[0];
  EXPECT_TRUE(k.launch.cooperative);
  EXPECT_EQ(k.launch.grid[0], 32);
  EXPECT_EQ(k.launch.block[0], 64);
  // The row's slice in registers: the block and thread axes compacted away.
  const auto* x = schedules::test_workloads::FindAllocate(k.body, "X_local");
  ASSERT_NE(x, nullptr);
  EXPECT_EQ(x->buffer->shape, (std::vector<int64_t>{1, 1, 4}));
  const auto* w = schedules::test_workloads::FindAllocate(k.body, "weight_shared");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->buffer->shape, (std::vector<int64_t>{256}));
  // As lowering has it before the all-reduces are expanded (lower_all_reduce).
  const std::string ir = schedules::test_workloads::IrBeforePass(*s, t, "lower_all_reduce");
  // The block's (count, mean, squares) partial comes from one all-reduce of the Welford tuple,
  // its count a constant (every block has as many elements): only the mean and the squares are
  // exchanged and stored. The partials of all blocks meet after the one grid barrier of each row,
  // in two passes (the sum, then the squares about the mean: an all-reduce each; the count is
  // the row's length). The only block barrier follows the weight's copy to shared memory:
  // nothing at the top of each row.
  EXPECT_EQ(Count(ir, "allreduce_welford(4.0, "), 1) << ir;
  EXPECT_EQ(Count(ir, "allreduce_sum("), 2) << ir;
  EXPECT_EQ(Count(ir, "x_sum_cnt[0] = 8192.0"), 1) << ir;
  EXPECT_EQ(ir.find("x_sum_rf_n"), std::string::npos) << ir;
  EXPECT_EQ(Count(ir, "grid_barrier"), 1) << ir;
  EXPECT_EQ(Count(ir, " barrier\n"), 1) << ir;
  EXPECT_LT(ir.find(" barrier\n"), ir.find("for Y_i in")) << ir;
  for (const char* partial :
       {"x_sum_rf[Y_i, j_0] = x_sum_rf_red_mean", "x_sum_rf_m2[Y_i, j_0] = "}) {
    EXPECT_LT(ir.find(partial), ir.find("grid_barrier")) << partial << "\n" << ir;
  }
  EXPECT_LT(ir.find("grid_barrier"), ir.find("x_sum_sum[0] + 2048.0 * x_sum_rf[")) << ir;
  auto src = Generate(*s, t);
  ASSERT_TRUE(src.ok()) << src.status();
  EXPECT_TRUE(src->kernels[0].launch.cooperative);
  EXPECT_THAT(src->code, HasSubstr("unsigned int* __restrict__ tessel_grid_sync)"));
  EXPECT_THAT(src->code, HasSubstr("tessel_grid_barrier(tessel_grid_sync, 32u);"));
  EXPECT_THAT(src->code, HasSubstr("atom.acq_rel.gpu.global.add.u32"));
  // Other blocks' partials are read from L2; X is read once, by the fill of the cache.
  EXPECT_THAT(src->code, HasSubstr("__ldcg(&x_sum_rf["));
  EXPECT_THAT(src->code, HasSubstr("__ldcg(&x_sum_rf_m2["));
  EXPECT_EQ(src->code.find("&X["), src->code.rfind("&X[")) << src->code;
  // The candidate file keeps the cooperative launch.
  auto cand = schedules::BuildCandidate(*s, t);
  ASSERT_TRUE(cand.ok()) << cand.status();
  auto path = schedules::WriteCandidateFiles(*cand, ::testing::TempDir(), "grid_layernorm");
  ASSERT_TRUE(path.ok()) << path.status();
  auto back = schedules::ReadCandidateFile(*path);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(back->source.kernels[0].launch.cooperative);
#ifdef TESSEL_HAVE_CUDA
  if (worker::FindCudaIncludeDir().ok()) {
    for (const char* arch : {"sm_80", "sm_90"}) {
      worker::NvrtcOptions o;
      o.arch = arch;
      auto bin = worker::CompileCuda(*src, o);
      EXPECT_TRUE(bin.ok()) << arch << ": " << bin.status() << "\n" << src->code;
    }
  }
#endif
}

TEST(GridLayernorm, CopiesOfWhatOtherBlocksWroteReadL2) {
  // A register copy of all blocks' partials (a scalar copy statement) reads them with __ldcg
  // like any other load: L1 is not coherent across SMs.
  const auto t = schedules::CudaTarget("sm_90");
  auto s =
      schedules::HandwrittenSchedule(LoadSpec("layernorm(rows=3, cols=8192)"), t, GridThreads(64));
  ASSERT_TRUE(s.ok()) << s.status();
  auto copy = s->CacheRead("x_sum_rf", "local", {BlockNamed(&*s, "x_sum")});
  ASSERT_TRUE(copy.ok()) << copy.status();
  auto rows = s->GetLoops(BlockNamed(&*s, "Y"));
  ASSERT_TRUE(rows.ok());
  ASSERT_TRUE(s->ComputeAt(*copy, (*rows)[1]).ok());
  auto loops = s->GetLoops(*copy);
  auto parts = s->Split(loops->back(), {-1, 32});
  ASSERT_TRUE(parts.ok()) << parts.status();
  ASSERT_TRUE(s->Bind((*parts)[1], "threadIdx.x").ok());
  auto src = Generate(*s, t);
  ASSERT_TRUE(src.ok()) << src.status();
  EXPECT_THAT(src->code, HasSubstr("x_sum_rf_local[0] = __ldcg(&x_sum_rf[")) << src->code;
}

TEST(GridLayernorm, FallsBackToTwoPassesWhenTheRowsDoNotFit) {
  // As many rows as blocks; a row that does not divide into float4s of the blocks; switched off.
  struct Case {
    const char* spec;
    bool grid_rows;
  };
  for (const Case& c :
       {Case{"layernorm(rows=64, cols=8192)", true}, Case{"layernorm(rows=3, cols=8190)", true},
        Case{"layernorm(rows=3, cols=8192)", false}}) {  // the default
    const auto t = schedules::CudaTarget("sm_90");
    schedules::TemplateOptions o = GridThreads(64);
    o.grid_rows = c.grid_rows;
    auto s = schedules::HandwrittenSchedule(LoadSpec(c.spec), t, o);
    ASSERT_TRUE(s.ok()) << s.status();
    auto p = schedules::Lower(*s, t);
    ASSERT_TRUE(p.ok()) << p.status();
    EXPECT_GT(p->kernels.size(), 1u) << c.spec;
    for (const schedules::Kernel& k : p->kernels) EXPECT_FALSE(k.launch.cooperative) << c.spec;
  }
}

// reduce(rows=4, cols=64, op=sum) with the row split in 4 chunks of 16 and rfactored: Y's rows
// bound to blockIdx.x (extent 4), the partials (in `scope`) computed at Y's row. Returns the
// partials' loops (row, chunk, element).
struct Partials {
  Schedule s;
  std::vector<schedules::LoopRV> loops;
};
Partials RowPartials(const char* scope) {
  auto s = Schedule::Create(LoadSpec("reduce(rows=4, cols=64, op=sum)"));
  EXPECT_TRUE(s.ok()) << s.status();
  const auto y = BlockNamed(&*s, "Y");
  const auto yl = s->GetLoops(y);
  EXPECT_TRUE(yl.ok());
  auto ks = s->Split((*yl)[1], {4, 16});
  EXPECT_TRUE(ks.ok()) << ks.status();
  auto rf = s->RFactor((*ks)[0]);
  EXPECT_TRUE(rf.ok()) << rf.status();
  const auto row = s->GetLoops(y);  // Y now reduces over the chunks
  EXPECT_TRUE(row.ok());
  EXPECT_TRUE(s->Bind((*row)[0], "blockIdx.x").ok());
  if (std::string(scope) != "global") {
    EXPECT_TRUE(s->SetScope(*rf, scope).ok());
  }
  EXPECT_TRUE(s->ComputeAt(*rf, (*row)[0]).ok());
  auto rl = s->GetLoops(*rf);
  EXPECT_TRUE(rl.ok());
  return {std::move(*s), *rl};
}

std::string LowerError(const Schedule& s) {
  auto low = schedules::Lower(s, schedules::CudaTarget("sm_90"));
  return low.ok() ? "lowered" : std::string(low.status().message());
}

TEST(GridSync, PartialsWrittenAcrossBlocksThenAGridBarrier) {
  Partials p = RowPartials("global");
  ASSERT_TRUE(p.s.Bind(p.loops[1], "blockIdx.x").ok());
  auto low = schedules::Lower(p.s, schedules::CudaTarget("sm_90"));
  ASSERT_TRUE(low.ok()) << low.status();
  ASSERT_EQ(low->kernels.size(), 1u);
  EXPECT_TRUE(low->kernels[0].launch.cooperative);
  EXPECT_EQ(low->kernels[0].launch.grid[0], 4);
  const std::string ir = schedules::ToString(*low);
  EXPECT_EQ(Count(ir, "grid_barrier"), 1) << ir;
  // Unbound, every block computes all four partials itself: no grid barrier.
  Partials q = RowPartials("global");
  auto plain = schedules::Lower(q.s, schedules::CudaTarget("sm_90"));
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_FALSE(plain->kernels[0].launch.cooperative);
  EXPECT_EQ(Count(schedules::ToString(*plain), "grid_barrier"), 0);
}

TEST(GridErrors, AnAttachedBlockLoopHasTheKernelsExtent) {
  Partials p = RowPartials("global");
  auto c = p.s.Split(p.loops[1], {2, -1});
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_TRUE(p.s.Bind((*c)[0], "blockIdx.x").ok());
  EXPECT_THAT(LowerError(p.s),
              HasSubstr("(extent 2) to blockIdx.x inside stage Y, whose blockIdx.x has extent 4; "
                        "an attached stage may bind a block index only to split its work over "
                        "the kernel's blocks: bind a loop of Y to it with the same extent"));
}

TEST(GridErrors, ALocalStageSplitOverBlocksIsReadOnlyAtItsBlock) {
  // The partials in registers, each block computing its chunk, but Y sums all four chunks.
  Partials p = RowPartials("local");
  ASSERT_TRUE(p.s.Bind(p.loops[1], "blockIdx.x").ok());
  EXPECT_THAT(LowerError(p.s),
              HasSubstr("is written from a loop bound to a block index, so each block holds only "
                        "its own part, but it is also read at other blocks' parts; bind the "
                        "readers' loop over that axis to the same block index, or keep the "
                        "writer's loop serial"));
}

TEST(GridErrors, NotInSharedMemory) {
  Partials p = RowPartials("shared");
  ASSERT_TRUE(p.s.Bind(p.loops[1], "blockIdx.x").ok());
  EXPECT_THAT(LowerError(p.s),
              HasSubstr("is in shared memory, of which each block has its own: the other "
                        "blocks' parts would stay unwritten; use local or global memory"));
}

TEST(GridErrors, NoGridBarrierWithClusters) {
  Partials p = RowPartials("global");
  ASSERT_TRUE(p.s.Bind(p.loops[1], "blockIdx.x").ok());
  auto e = p.s.Split(p.loops[2], {2, -1});
  ASSERT_TRUE(e.ok()) << e.status();
  ASSERT_TRUE(p.s.Bind((*e)[0], "cluster.x").ok());
  ASSERT_TRUE(p.s.Bind((*e)[1], "threadIdx.x").ok());
  EXPECT_THAT(LowerError(p.s),
              HasSubstr("which needs a grid barrier, and the kernel uses thread-block clusters; "
                        "the two do not combine"));
}

}  // namespace
}  // namespace tessel::testing
