// Tests of lowering (schedules/lower/lower.h, schedules/schedule/region.h): region inference for
// attached stages, guards, the reference schedules, and the Program's buffers and kernel
// parameters.

#include "schedules/lower/lower.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "schedules/lower/lower_all_reduce.h"
#include "schedules/lower/plan_shared_memory.h"
#include "schedules/schedule/region.h"
#include "schedules/schedule/schedule.h"
#include "tests/schedules/test_workloads.h"

namespace tessel::schedules {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;
using namespace test_workloads;  // NOLINT

void Check(const absl::Status& st) {
  if (!st.ok()) throw std::runtime_error(st.ToString());
}

std::vector<std::string> BufferNames(const std::vector<BufferPtr>& bs) {
  std::vector<std::string> out;
  for (const BufferPtr& b : bs) out.push_back(b->name);
  return out;
}

std::vector<int64_t> LeafExtents(const Stage& s) {
  std::vector<int64_t> out;
  for (int l : s.leaves) out.push_back(s.iters[l].extent);
  return out;
}

// Matmul tiled for CUDA: C's loops i_0 j_0 i_1 j_1 k_0 k_1 (tiles 16 x 16, k in steps of 8),
// blocks and threads bound.
struct Tiled {
  Schedule sch;
  BlockRV c;
  LoopRV i0, j0, i1, j1, k0, k1;
};

Tiled TiledMatmul(int64_t m, int64_t n, int64_t k) {
  Schedule sch = NewSchedule(Matmul(m, n, k));
  BlockRV c = BlockOf(sch, "C");
  std::vector<LoopRV> l = LoopsOf(sch, c);
  std::vector<LoopRV> i = ValueOrDie(sch.Split(l[0], {-1, 16}));
  std::vector<LoopRV> j = ValueOrDie(sch.Split(l[1], {-1, 16}));
  std::vector<LoopRV> kk = ValueOrDie(sch.Split(l[2], {-1, 8}));
  Check(sch.Reorder({i[0], j[0], i[1], j[1], kk[0], kk[1]}));
  Check(sch.Bind(i[0], "blockIdx.y"));
  Check(sch.Bind(j[0], "blockIdx.x"));
  Check(sch.Bind(i[1], "threadIdx.y"));
  Check(sch.Bind(j[1], "threadIdx.x"));
  return Tiled{sch, c, i[0], j[0], i[1], j[1], kk[0], kk[1]};
}

// =============================================================================================
// Region inference.

TEST(LowerRegion, SharedCachesGetTheTileShape) {
  Tiled t = TiledMatmul(64, 64, 64);
  Schedule& sch = t.sch;
  BlockRV as = ValueOrDie(sch.CacheRead("A", "shared", {t.c}));
  BlockRV bs = ValueOrDie(sch.CacheRead("B", "shared", {t.c}));
  TESSEL_ASSERT_OK(sch.ComputeAt(as, t.k0));
  TESSEL_ASSERT_OK(sch.ComputeAt(bs, t.k0));
  // The threads (i_1, j_1) are relaxed for shared memory: the whole block's tile.
  EXPECT_THAT(LeafExtents(sch.GetStage(as)), ElementsAre(16, 8));
  EXPECT_THAT(LeafExtents(sch.GetStage(bs)), ElementsAre(8, 16));

  auto prog = Lower(sch, CudaT());
  TESSEL_ASSERT_OK(prog);
  ASSERT_EQ(prog->kernels.size(), 1u);
  const Kernel& k = prog->kernels[0];
  const std::string ir = ToString(k.body);
  const AllocateNode* a = FindAllocate(k.body, "A_shared");
  const AllocateNode* b = FindAllocate(k.body, "B_shared");
  ASSERT_NE(a, nullptr) << ir;
  ASSERT_NE(b, nullptr) << ir;
  EXPECT_EQ(a->buffer->shape, (std::vector<int64_t>{16, 8}));
  EXPECT_EQ(a->buffer->scope, MemScope::kShared);
  EXPECT_EQ(b->buffer->shape, (std::vector<int64_t>{8, 16}));
  // Reads of the copies are relative to the tile's origin.
  EXPECT_THAT(ir, HasSubstr("A_shared[i_1, k_1] * B_shared[k_1, j_1]"));
  // (B_shared is lowered first and keeps the names ax0, ax1; A_shared's are made distinct.)
  EXPECT_THAT(ir, HasSubstr("B_shared[ax0, ax1] = B[k_0 * 8 + ax0, j_0 * 16 + ax1]"));
  EXPECT_THAT(ir, HasSubstr("A_shared[A_shared_ax0, A_shared_ax1] = "
                            "A[i_0 * 16 + A_shared_ax0, k_0 * 8 + A_shared_ax1]"));
  // One barrier before the copies (previous iteration's readers) and one after.
  EXPECT_EQ(CountOf(ir, "barrier"), 2) << ir;
  EXPECT_EQ(k.launch.grid[0], 4);
  EXPECT_EQ(k.launch.grid[1], 4);
  EXPECT_EQ(k.launch.block[0], 16);
  EXPECT_EQ(k.launch.block[1], 16);
  // Shared copies are not global buffers.
  EXPECT_THAT(BufferNames(k.params), ElementsAre("A", "B", "C"));
  EXPECT_EQ(prog->buffers.size(), 3u);
}

TEST(LowerRegion, LocalCacheCoversOneThread) {
  Tiled t = TiledMatmul(64, 64, 64);
  Schedule& sch = t.sch;
  BlockRV al = ValueOrDie(sch.CacheRead("A", "local", {t.c}));
  TESSEL_ASSERT_OK(sch.ComputeAt(al, t.k0));
  // Threads are not relaxed for local memory: one row of the k tile per thread.
  EXPECT_THAT(LeafExtents(sch.GetStage(al)), ElementsAre(1, 8));
  const std::string ir = LowerText(sch, CudaT());
  EXPECT_THAT(ir, HasSubstr("alloc local f32 A_local[1, 8]"));
  EXPECT_THAT(ir, HasSubstr("A_local[0, k_1]"));
  EXPECT_THAT(ir, Not(HasSubstr("barrier")));
}

TEST(LowerRegion, ProducerAtOuterTile) {
  Schedule sch = NewSchedule(ElementwiseChain(64, 64));
  BlockRV b = BlockOf(sch, "B");
  std::vector<LoopRV> l = LoopsOf(sch, "C");
  std::vector<LoopRV> i = ValueOrDie(sch.Split(l[0], {-1, 16}));
  std::vector<LoopRV> j = ValueOrDie(sch.Split(l[1], {-1, 16}));
  TESSEL_ASSERT_OK(sch.Reorder({i[0], j[0], i[1], j[1]}));
  TESSEL_ASSERT_OK(sch.ComputeAt(b, j[0]));
  EXPECT_THAT(LeafExtents(*sch.FindStage("B")), ElementsAre(16, 16));
  auto prog = Lower(sch, HostT());
  TESSEL_ASSERT_OK(prog);
  ASSERT_EQ(prog->kernels.size(), 1u);
  const std::string ir = ToString(prog->kernels[0].body);
  // B stays global (it is a workspace buffer) and is written at the tile's offset.
  EXPECT_THAT(ir, HasSubstr("B[i_0 * 16 + i, j_0 * 16 + j] = A[i_0 * 16 + i, j_0 * 16 + j] * 2.0"));
  EXPECT_THAT(ir, Not(HasSubstr("if ")));
  EXPECT_THAT(ir, Not(HasSubstr("alloc")));
  ASSERT_EQ(prog->buffers.size(), 3u);
  EXPECT_EQ(prog->buffers[2].buffer->name, "B");
  EXPECT_EQ(prog->buffers[2].role, BufferRole::kWorkspace);
}

TEST(LowerRegion, NonDividingTilesAreGuarded) {
  // 100 x 60 in 32 x 32 tiles: the last tiles overhang both the consumer and the producer's
  // region.
  Schedule sch = NewSchedule(ElementwiseChain(100, 60));
  BlockRV b = BlockOf(sch, "B");
  std::vector<LoopRV> l = LoopsOf(sch, "C");
  std::vector<LoopRV> i = ValueOrDie(sch.Split(l[0], {-1, 32}));
  std::vector<LoopRV> j = ValueOrDie(sch.Split(l[1], {-1, 32}));
  TESSEL_ASSERT_OK(sch.Reorder({i[0], j[0], i[1], j[1]}));
  TESSEL_ASSERT_OK(sch.Bind(i[0], "blockIdx.y"));
  TESSEL_ASSERT_OK(sch.Bind(j[0], "blockIdx.x"));
  TESSEL_ASSERT_OK(sch.Bind(i[1], "threadIdx.y"));
  TESSEL_ASSERT_OK(sch.Bind(j[1], "threadIdx.x"));
  TESSEL_ASSERT_OK(sch.SetScope(b, "shared"));
  TESSEL_ASSERT_OK(sch.ComputeAt(b, j[0]));
  std::vector<LoopRV> bl = LoopsOf(sch, b);
  TESSEL_ASSERT_OK(sch.Bind(bl[0], "threadIdx.y"));
  TESSEL_ASSERT_OK(sch.Bind(bl[1], "threadIdx.x"));
  auto prog = Lower(sch, CudaT());
  TESSEL_ASSERT_OK(prog);
  const Kernel& k = prog->kernels[0];
  EXPECT_EQ(k.launch.grid[0], 2);
  EXPECT_EQ(k.launch.grid[1], 4);
  EXPECT_EQ(k.launch.block[0], 32);
  EXPECT_EQ(k.launch.block[1], 32);
  const std::string ir = ToString(k.body);
  EXPECT_THAT(ir, HasSubstr("alloc shared f32 B[32, 32]"));
  // The producer's region is guarded against the tensor's bounds, the consumer by its extents.
  EXPECT_THAT(ir, HasSubstr("if i_0 * 32 + i < 100 && j_0 * 32 + j < 60:\n"
                            "  B[i, j] = A[i_0 * 32 + i, j_0 * 32 + j] * 2.0"));
  EXPECT_THAT(ir, HasSubstr("if i_0 * 32 + i_1 < 100 && j_0 * 32 + j_1 < 60:\n"
                            "  C[i_0 * 32 + i_1, j_0 * 32 + j_1] = max(B[i_1, j_1], 0.0)"));
  EXPECT_EQ(CountOf(ir, "barrier"), 1) << ir;  // the nest runs once per block
}

TEST(LowerRegion, GlobalProducerOverhangIsGuarded) {
  Schedule sch = NewSchedule(ElementwiseChain(100, 8));
  BlockRV b = BlockOf(sch, "B");
  std::vector<LoopRV> l = LoopsOf(sch, "C");
  std::vector<LoopRV> i = ValueOrDie(sch.Split(l[0], {-1, 32}));
  TESSEL_ASSERT_OK(sch.ComputeAt(b, i[0]));
  EXPECT_THAT(LeafExtents(*sch.FindStage("B")), ElementsAre(32, 8));
  const std::string ir = LowerText(sch, HostT());
  EXPECT_EQ(CountOf(ir, "< 100:"), 2) << ir;  // B's region and C's tail
}

TEST(LowerRegion, StencilRegionCoversBothReads) {
  // B[i] = A[i] * 2 (101 elements); C[i] = B[i] + B[i + 1] (100 elements).
  Workload w;
  w.name = "stencil";
  TensorDef a = InputTensor("A", {101});
  TensorDef b = ComputeTensor("B", {101}, {"i"});
  b.body = Ld(a, {b.axes[0]}) * MakeFloat(2.0);
  TensorDef c = ComputeTensor("C", {100}, {"i"});
  c.body = Ld(b, {c.axes[0]}) + Ld(b, {Expr(c.axes[0]) + 1});
  w.tensors = {a, b, c};
  w.outputs = {"C"};
  Schedule sch = NewSchedule(w);
  BlockRV bb = BlockOf(sch, "B");
  std::vector<LoopRV> p = ValueOrDie(sch.Split(LoopsOf(sch, "C")[0], {-1, 10}));
  TESSEL_ASSERT_OK(sch.ComputeAt(bb, p[0]));
  EXPECT_THAT(LeafExtents(*sch.FindStage("B")), ElementsAre(11));  // 10 + halo of 1
  const std::string ir = LowerText(sch, HostT());
  EXPECT_THAT(ir, HasSubstr("for i in [0, 11):\n    B[i_0 * 10 + i] = A[i_0 * 10 + i] * 2.0"));
  EXPECT_THAT(ir, Not(HasSubstr("if ")));  // the last tile ends at 100 < 101
}

TEST(LowerRegion, ReductionAttachedInsideConsumer) {
  Schedule sch = NewSchedule(Softmax(4, 8));
  TESSEL_ASSERT_OK(sch.ComputeAt(BlockOf(sch, "Mx"), LoopsOf(sch, "E")[0]));
  EXPECT_THAT(LeafExtents(*sch.FindStage("Mx")), ElementsAre(1, 8));
  auto prog = Lower(sch, HostT());
  TESSEL_ASSERT_OK(prog);
  ASSERT_EQ(prog->kernels.size(), 3u);
  const std::string ir = ToString(prog->kernels[0].body);
  EXPECT_EQ(prog->kernels[0].name, "tessel_softmax_E");
  EXPECT_THAT(ir, HasSubstr("for E_i in [0, 4):\n"
                            "  Mx[E_i] = -inf\n"
                            "  for k in [0, 8):\n"
                            "    Mx[E_i] = max(Mx[E_i], X[E_i, k])\n"
                            "  for j in [0, 8):\n"
                            "    E[E_i, j] = exp(X[E_i, j] - Mx[E_i])"));
}

TEST(LowerRegion, NestedCaches) {
  Tiled t = TiledMatmul(64, 64, 64);
  Schedule& sch = t.sch;
  BlockRV as = ValueOrDie(sch.CacheRead("A", "shared", {t.c}));
  BlockRV al = ValueOrDie(sch.CacheRead("A_shared", "local", {t.c}));
  // Inner first: A_shared's reader A_shared_local must be inside C when A_shared is attached.
  const absl::Status early = sch.ComputeAt(as, t.k0);
  EXPECT_EQ(early.code(), absl::StatusCode::kFailedPrecondition) << early;
  EXPECT_THAT(std::string(early.message()),
              HasSubstr("stage A_shared is also read by stage A_shared_local, which is not inside "
                        "stage C"));
  TESSEL_ASSERT_OK(sch.ComputeAt(al, t.k1));
  TESSEL_ASSERT_OK(sch.ComputeAt(as, t.k0));
  EXPECT_THAT(LeafExtents(sch.GetStage(as)), ElementsAre(16, 8));
  EXPECT_THAT(LeafExtents(sch.GetStage(al)), ElementsAre(1, 1));
  const std::string ir = LowerText(sch, CudaT());
  EXPECT_THAT(ir, HasSubstr("alloc shared f32 A_shared[16, 8]"));
  EXPECT_THAT(ir, HasSubstr("alloc local f32 A_shared_local[1, 1]"));
  EXPECT_THAT(ir, HasSubstr("A_shared_local[0, 0] = A_shared[i_1, k_1]"));
  EXPECT_LT(ir.find("for k_1"), ir.find("alloc local"));
}

TEST(LowerRegion, InferBoundsMatchesStageExtents) {
  Tiled t = TiledMatmul(64, 64, 64);
  BlockRV as = ValueOrDie(t.sch.CacheRead("A", "shared", {t.c}));
  TESSEL_ASSERT_OK(t.sch.ComputeAt(as, t.k0));
  std::vector<Stage> stages = t.sch.stages();
  auto bounds = InferBounds(&stages);
  TESSEL_ASSERT_OK(bounds);
  ASSERT_EQ(bounds->size(), 2u);
  EXPECT_EQ((*bounds)[0].root_extent, (std::vector<int64_t>{16, 8}));
  EXPECT_EQ(ToString((*bounds)[0].root_min[0]), "i_0 * 16");
  EXPECT_EQ(ToString((*bounds)[0].root_min[1]), "k_0 * 8");
  EXPECT_EQ((*bounds)[1].root_extent, (std::vector<int64_t>{64, 64, 64}));
  auto ext = InferRootExtents(t.sch.stages(), 0);
  TESSEL_ASSERT_OK(ext);
  EXPECT_EQ(*ext, (std::vector<int64_t>{16, 8}));
}

TEST(LowerRegion, LoweringLeavesTheScheduleUnchanged) {
  Tiled t = TiledMatmul(64, 64, 64);
  BlockRV as = ValueOrDie(t.sch.CacheRead("A", "shared", {t.c}));
  TESSEL_ASSERT_OK(t.sch.ComputeAt(as, t.k0));
  const std::string before = DescribeSchedule(t.sch);
  const std::string first = LowerText(t.sch, CudaT());
  EXPECT_EQ(DescribeSchedule(t.sch), before);
  EXPECT_EQ(LowerText(t.sch, CudaT()), first);
}

// lower.h: bodies are guarded "where a stage uses fewer threads than its kernel launches". Here
// A_shared's ax1 is bound to threadIdx.x with extent 8 in a 16-wide block: threads 8..15 must not
// write A_shared[ax0, 8..15] (past the row of the [16, 8] allocation).
TEST(LowerThreads, FewerThreadsThanLaunchedAreGuarded) {
  Tiled t = TiledMatmul(64, 64, 64);
  Schedule& sch = t.sch;
  BlockRV as = ValueOrDie(sch.CacheRead("A", "shared", {t.c}));
  TESSEL_ASSERT_OK(sch.ComputeAt(as, t.k0));
  std::vector<LoopRV> al = LoopsOf(sch, as);
  TESSEL_ASSERT_OK(sch.Bind(al[0], "threadIdx.y"));  // 16 of 16
  TESSEL_ASSERT_OK(sch.Bind(al[1], "threadIdx.x"));  // 8 of 16
  auto prog = Lower(sch, CudaT());
  TESSEL_ASSERT_OK(prog);
  EXPECT_EQ(prog->kernels[0].launch.block[0], 16);
  const std::string ir = ToString(prog->kernels[0].body);
  EXPECT_THAT(ir, HasSubstr("ax1 = threadIdx.x"));
  EXPECT_THAT(ir,
              HasSubstr("if ax1 < 8:\n    A_shared[ax0, ax1] = A[i_0 * 16 + ax0, k_0 * 8 + ax1]"));
}

TEST(LowerThreads, CooperativeCopyWithAllThreads) {
  Tiled t = TiledMatmul(64, 64, 64);
  Schedule& sch = t.sch;
  BlockRV bs = ValueOrDie(sch.CacheRead("B", "shared", {t.c}));
  TESSEL_ASSERT_OK(sch.ComputeAt(bs, t.k0));
  std::vector<LoopRV> bl = LoopsOf(sch, bs);  // 8 x 16
  LoopRV f = ValueOrDie(sch.Fuse({bl[0], bl[1]}));
  std::vector<LoopRV> p = ValueOrDie(sch.Split(f, {-1, 16}));  // 8 x 16
  TESSEL_ASSERT_OK(sch.Bind(p[0], "threadIdx.y"));
  TESSEL_ASSERT_OK(sch.Bind(p[1], "threadIdx.x"));
  auto prog = Lower(sch, CudaT());
  TESSEL_ASSERT_OK(prog);
  EXPECT_EQ(prog->kernels[0].launch.block[0], 16);
  EXPECT_EQ(prog->kernels[0].launch.block[1], 16);
  const std::string ir = ToString(prog->kernels[0].body);
  // The copy uses 8 of the 16 threadIdx.y rows: the others are masked off.
  EXPECT_THAT(ir, HasSubstr("ax0_ax1_f_0 = threadIdx.y"));
  EXPECT_THAT(ir, HasSubstr("ax0_ax1_f_0 < 8"));
  EXPECT_THAT(ir, HasSubstr("B_shared[ax0_ax1_f_0, ax0_ax1_f_1] = "
                            "B[k_0 * 8 + ax0_ax1_f_0, j_0 * 16 + ax0_ax1_f_1]"));
}

// =============================================================================================
// Reference schedules.

TEST(LowerReference, CudaOneThreadPerOutputElement) {
  auto sch = ReferenceSchedule(Matmul(64, 64, 64), CudaT());
  TESSEL_ASSERT_OK(sch);
  std::vector<std::string> kinds;
  for (const Instruction& i : sch->trace().insts) kinds.push_back(i.kind);
  EXPECT_THAT(kinds, ElementsAre("get_stage", "get_loops", "fuse", "split", "bind", "bind"));
  EXPECT_EQ(sch->trace().insts[3].attrs["factors"], nlohmann::json::parse("[-1, 256]"));
  auto prog = LowerReference(Matmul(64, 64, 64), CudaT());
  TESSEL_ASSERT_OK(prog);
  ASSERT_EQ(prog->kernels.size(), 1u);
  const Kernel& k = prog->kernels[0];
  EXPECT_EQ(k.launch.grid, (std::array<int64_t, 3>{16, 1, 1}));
  EXPECT_EQ(k.launch.block, (std::array<int64_t, 3>{256, 1, 1}));
  const std::string ir = ToString(k.body);
  EXPECT_THAT(ir, HasSubstr("i_j_f_0 = blockIdx.x  // extent 16"));
  EXPECT_THAT(ir, HasSubstr("i_j_f_1 = threadIdx.x  // extent 256"));
  EXPECT_THAT(ir, HasSubstr("for k in [0, 64)"));  // the reduction is serial in the thread
  EXPECT_THAT(ir, Not(HasSubstr("if ")));          // 4096 = 16 x 256
  // The reference accumulates in f64 and rounds once at the store.
  EXPECT_THAT(ir, HasSubstr("alloc local f64 C_acc[1]"));
  EXPECT_THAT(ir, HasSubstr("C_acc[0] = C_acc[0] + f64(A["));
  EXPECT_THAT(ir, HasSubstr("= f32(C_acc[0])"));
  EXPECT_EQ(prog->target, TargetKind::kCuda);
  // An ordinary lowering of the same schedule accumulates in the output's type.
  EXPECT_THAT(ToString(ValueOrDie(Lower(*sch, CudaT())).kernels[0].body), Not(HasSubstr("f64")));
}

TEST(LowerReference, CudaPartialLastBlockIsGuarded) {
  auto prog = LowerReference(VectorAdd(1000), CudaT());
  TESSEL_ASSERT_OK(prog);
  EXPECT_EQ(prog->kernels[0].launch.grid[0], 4);
  EXPECT_EQ(prog->kernels[0].launch.block[0], 256);
  EXPECT_THAT(ToString(prog->kernels[0].body), HasSubstr("i_0 * 256 + i_1 < 1000"));
}

TEST(LowerReference, CudaSmallTensorUsesFewerThreads) {
  auto prog = LowerReference(VectorAdd(100), CudaT());
  TESSEL_ASSERT_OK(prog);
  EXPECT_EQ(prog->kernels[0].launch.grid[0], 1);
  EXPECT_EQ(prog->kernels[0].launch.block[0], 100);
  EXPECT_THAT(ToString(prog->kernels[0].body), Not(HasSubstr("if ")));
}

TEST(LowerReference, CudaEveryStageIsAKernel) {
  auto prog = LowerReference(Softmax(4, 100), CudaT());
  TESSEL_ASSERT_OK(prog);
  std::vector<std::string> names;
  for (const Kernel& k : prog->kernels) {
    names.push_back(k.name);
    EXPECT_THAT(ToString(k.body), HasSubstr("= threadIdx.x")) << k.name;
    EXPECT_THAT(ToString(k.body), HasSubstr("= blockIdx.x")) << k.name;
    EXPECT_LE(k.launch.threads_per_block(), 256);
  }
  EXPECT_THAT(names, ElementsAre("tessel_softmax_Mx", "tessel_softmax_E", "tessel_softmax_Sm",
                                 "tessel_softmax_Y"));
  EXPECT_EQ(prog->kernels[0].launch.block[0], 4);    // 4 rows
  EXPECT_EQ(prog->kernels[1].launch.block[0], 256);  // 400 elements
  EXPECT_EQ(prog->kernels[1].launch.grid[0], 2);
}

TEST(LowerReference, HostHasNoBindings) {
  auto sch = ReferenceSchedule(Matmul(16, 16, 16), HostT());
  TESSEL_ASSERT_OK(sch);
  EXPECT_TRUE(sch->trace().insts.empty());
  auto prog = LowerReference(Matmul(16, 16, 16), HostT());
  TESSEL_ASSERT_OK(prog);
  ASSERT_EQ(prog->kernels.size(), 1u);
  const std::string ir = ToString(prog->kernels[0].body);
  EXPECT_THAT(ir, Not(HasSubstr("Idx")));
  EXPECT_THAT(ir, Not(HasSubstr("parallel")));
  EXPECT_THAT(ir, HasSubstr("for i in [0, 16)"));
  EXPECT_THAT(ir, HasSubstr("for j in [0, 16)"));
  EXPECT_THAT(ir, HasSubstr("for k in [0, 16)"));
  EXPECT_EQ(prog->kernels[0].launch.threads_per_block(), 1);
  EXPECT_EQ(prog->kernels[0].launch.grid, (std::array<int64_t, 3>{1, 1, 1}));
  EXPECT_EQ(prog->target, TargetKind::kHost);
}

TEST(LowerReference, InvalidWorkload) {
  Workload w = Matmul(8, 8, 8);
  w.outputs.clear();
  auto prog = LowerReference(w, CudaT());
  ASSERT_FALSE(prog.ok());
  EXPECT_EQ(prog.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(prog.status().message()), HasSubstr("the workload has no output"));
}

// =============================================================================================
// Program buffers and kernel parameters.

TEST(LowerProgram, BuffersAreInputsOutputsWorkspace) {
  auto prog = LowerReference(Softmax(4, 16), HostT());
  TESSEL_ASSERT_OK(prog);
  EXPECT_EQ(prog->name, "tessel_softmax");
  std::vector<std::string> names;
  std::vector<BufferRole> roles;
  for (const ProgramBuffer& b : prog->buffers) {
    names.push_back(b.buffer->name);
    roles.push_back(b.role);
  }
  EXPECT_THAT(names, ElementsAre("X", "Y", "Mx", "E", "Sm"));
  EXPECT_THAT(roles, ElementsAre(BufferRole::kInput, BufferRole::kOutput, BufferRole::kWorkspace,
                                 BufferRole::kWorkspace, BufferRole::kWorkspace));
  ASSERT_EQ(prog->kernels.size(), 4u);
  // Parameters: the global buffers each kernel touches, in Program::buffers order.
  EXPECT_THAT(BufferNames(prog->kernels[0].params), ElementsAre("X", "Mx"));
  EXPECT_THAT(BufferNames(prog->kernels[1].params), ElementsAre("X", "Mx", "E"));
  EXPECT_THAT(BufferNames(prog->kernels[2].params), ElementsAre("E", "Sm"));
  EXPECT_THAT(BufferNames(prog->kernels[3].params), ElementsAre("Y", "E", "Sm"));
  EXPECT_FALSE(prog->needs_int64_indices);
}

TEST(LowerProgram, BufferObjectsAreTheWorkloadsOwn) {
  Workload w = MatmulRelu(8, 8, 8);
  Schedule sch = NewSchedule(w);
  auto prog = Lower(sch, HostT());
  TESSEL_ASSERT_OK(prog);
  ASSERT_EQ(prog->buffers.size(), 4u);
  EXPECT_EQ(prog->buffers[0].buffer.get(), sch.workload().Find("A")->buffer.get());
  EXPECT_EQ(prog->buffers[1].buffer.get(), sch.workload().Find("B")->buffer.get());
  EXPECT_EQ(prog->buffers[2].buffer.get(), sch.workload().Find("D")->buffer.get());
  EXPECT_EQ(prog->buffers[3].buffer.get(), sch.workload().Find("C")->buffer.get());
  EXPECT_EQ(prog->buffers[2].role, BufferRole::kOutput);
  EXPECT_EQ(prog->buffers[3].role, BufferRole::kWorkspace);
  ASSERT_EQ(prog->kernels.size(), 2u);
  EXPECT_THAT(BufferNames(prog->kernels[0].params), ElementsAre("A", "B", "C"));
  EXPECT_THAT(BufferNames(prog->kernels[1].params), ElementsAre("D", "C"));
  EXPECT_EQ(prog->kernels[0].name, "tessel_matmul_relu_C");
  EXPECT_EQ(prog->kernels[1].name, "tessel_matmul_relu_D");
}

TEST(LowerProgram, OutputsInWorkloadOrder) {
  // B = A * 2; C = max(B, 0); D = B + 1; outputs D then C.
  Workload w;
  w.name = "fanout";
  TensorDef a = InputTensor("A", {8});
  TensorDef b = ComputeTensor("B", {8}, {"i"});
  b.body = Ld(a, {b.axes[0]}) * MakeFloat(2.0);
  TensorDef c = ComputeTensor("C", {8}, {"i"});
  c.body = MakeMax(Ld(b, {c.axes[0]}), MakeFloat(0.0));
  TensorDef d = ComputeTensor("D", {8}, {"i"});
  d.body = Ld(b, {d.axes[0]}) + MakeFloat(1.0);
  w.tensors = {a, b, c, d};
  w.outputs = {"D", "C"};
  auto prog = LowerReference(w, HostT());
  TESSEL_ASSERT_OK(prog);
  std::vector<std::string> names;
  for (const ProgramBuffer& pb : prog->buffers) names.push_back(pb.buffer->name);
  EXPECT_THAT(names, ElementsAre("A", "D", "C", "B"));
  std::vector<std::string> kernels;
  for (const Kernel& k : prog->kernels) kernels.push_back(k.name);
  EXPECT_THAT(kernels, ElementsAre("tessel_fanout_B", "tessel_fanout_C", "tessel_fanout_D"));
}

TEST(LowerProgram, AttachedStagesShareTheKernel) {
  Schedule sch = NewSchedule(MatmulRelu(8, 8, 8));
  BlockRV d = BlockOf(sch, "D");
  TESSEL_ASSERT_OK(sch.ReverseComputeAt(d, LoopsOf(sch, "C")[1]));
  auto prog = Lower(sch, HostT());
  TESSEL_ASSERT_OK(prog);
  ASSERT_EQ(prog->kernels.size(), 1u);
  EXPECT_EQ(prog->kernels[0].name, "tessel_matmul_relu_C");
  EXPECT_THAT(BufferNames(prog->kernels[0].params), ElementsAre("A", "B", "D", "C"));
}

TEST(LowerProgram, InlinedStagesHaveNoBuffer) {
  Schedule sch = NewSchedule(Softmax(4, 16));
  TESSEL_ASSERT_OK(sch.ComputeInline(BlockOf(sch, "E")));
  auto prog = Lower(sch, HostT());
  TESSEL_ASSERT_OK(prog);
  std::vector<std::string> names;
  for (const ProgramBuffer& pb : prog->buffers) names.push_back(pb.buffer->name);
  EXPECT_THAT(names, ElementsAre("X", "Y", "Mx", "Sm"));
  EXPECT_EQ(prog->kernels.size(), 3u);
  EXPECT_THAT(BufferNames(prog->kernels[2].params), ElementsAre("X", "Y", "Mx", "Sm"));
}

TEST(LowerProgram, Int64IndicesForHugeBuffers) {
  auto small = LowerReference(VectorAdd(1024), HostT());
  TESSEL_ASSERT_OK(small);
  EXPECT_FALSE(small->needs_int64_indices);
  auto big = LowerReference(VectorAdd(int64_t{1} << 31), HostT());
  TESSEL_ASSERT_OK(big);
  EXPECT_TRUE(big->needs_int64_indices);
}

// ---- The pass list (pipeline.h).

TEST(LoweringPipeline, RunsEveryPassInOrderAndShowsTheProgramAfterEach) {
  Tiled t = TiledMatmul(64, 64, 64);
  std::vector<std::string> seen;
  std::vector<size_t> kernels;
  std::string last;
  auto p = Lower(t.sch, CudaT(), [&](const LoweringPass& pass, const Program& program) {
    seen.push_back(pass.name);
    kernels.push_back(program.kernels.size());
    last = ToString(program);
  });
  ASSERT_TRUE(p.ok()) << p.status();
  std::vector<std::string> names;
  for (const LoweringPass& pass : LoweringPasses()) names.push_back(pass.name);
  EXPECT_EQ(seen, names);
  EXPECT_EQ(last, ToString(*p));
  // The stage passes leave the program without kernels; build_nests makes the one kernel.
  const auto build = std::find(seen.begin(), seen.end(), "build_nests");
  ASSERT_NE(build, seen.end());
  const size_t at = build - seen.begin();
  for (size_t i = 0; i < kernels.size(); ++i) EXPECT_EQ(kernels[i], i < at ? 0u : 1u) << seen[i];
}

TEST(LoweringPipeline, PassNamesAreDistinctAndSummarized) {
  std::set<std::string> names;
  for (const LoweringPass& pass : LoweringPasses()) {
    EXPECT_TRUE(names.insert(pass.name).second) << pass.name;
    EXPECT_GT(std::string(pass.summary).size(), 10u) << pass.name;
  }
  EXPECT_TRUE(names.count("compact_thread_axes"));
  EXPECT_TRUE(names.count("inject_vthread"));
}

TEST(LoweringPipeline, StopsAtTheFirstFailingPass) {
  // A shared stage that is not attached: check_stages refuses it, and no later pass runs.
  Schedule sch = NewSchedule(Matmul(32, 32, 32));
  ValueOrDie(sch.CacheRead("A", "shared", {BlockOf(sch, "C")}));
  std::vector<std::string> seen;
  auto p = Lower(sch, CudaT(),
                 [&](const LoweringPass& pass, const Program&) { seen.push_back(pass.name); });
  ASSERT_FALSE(p.ok());
  EXPECT_THAT(p.status().message(), HasSubstr("not attached to any loop"));
  EXPECT_THAT(seen, ElementsAre("uniquify_loop_names", "infer_bounds"));
}

// ---- Shared-memory planning (plan_shared_memory.h).

TEST(PlanSharedMemory, PlacesBuffersThenScratchAtAlignedOffsets) {
  BufferPtr tile = MakeBuffer("tile", DType::kFloat32, {10}, MemScope::kShared);
  BufferPtr r32 = MakeBuffer("r32", DType::kFloat32, {1}, MemScope::kLocal);
  BufferPtr r16 = MakeBuffer("r16", DType::kFloat16, {1}, MemScope::kLocal);
  BufferPtr r64 = MakeBuffer("r64", DType::kFloat64, {1}, MemScope::kLocal);
  BufferPtr rc = MakeBuffer("rc", DType::kFloat32, {1}, MemScope::kLocal);
  Kernel k;
  k.launch.block = {128, 1, 1};
  k.launch.cluster = 2;
  k.body = MakeAllocate(
      tile, MakeSeq({MakeAllReduce(ReduceOp::kSum, MakeFloat(1.0), r32, ThreadTag::kThreadX, 128),
                     // f16 reduces in f32: one scratch, for the larger of the two.
                     MakeAllReduce(ReduceOp::kMax, MakeFloat(1.0, DType::kFloat16), r16,
                                   ThreadTag::kThreadX, 128),
                     MakeAllReduce(ReduceOp::kSum, MakeFloat(1.0, DType::kFloat64), r64,
                                   ThreadTag::kThreadX, 128),
                     MakeAllReduce(ReduceOp::kSum, MakeFloat(1.0), rc, ThreadTag::kClusterX, 2)}));
  // lower_all_reduce sizes the scratch (Kernel::scratch); the plan places it.
  TESSEL_ASSERT_OK(LowerKernelAllReduces(&k, /*int64_indices=*/false));
  const SharedPlan plan = PlanSharedMemory(k, /*int64_indices=*/false);
  EXPECT_EQ(ToString(plan),
            "shared 112 bytes: tile at 0, reduce_scratch f64[4] at 48, reduce_scratch f32[4] at "
            "80, cluster_scratch f32[1] at 96");
  EXPECT_FALSE(plan.dynamic);
}

TEST(PlanSharedMemory, LoweringRecordsThePlanOfEachCudaKernel) {
  Tiled t = TiledMatmul(64, 64, 64);
  BlockRV as = ValueOrDie(t.sch.CacheRead("A", "shared", {t.c}));
  TESSEL_ASSERT_OK(t.sch.ComputeAt(as, t.k0));
  auto prog = Lower(t.sch, CudaT());
  TESSEL_ASSERT_OK(prog);
  EXPECT_EQ(ToString(prog->kernels[0].shared), "shared 512 bytes: A_shared at 0");
  EXPECT_THAT(ToString(*prog), HasSubstr("  shared 512 bytes: A_shared at 0\n"));
  // Over 48 KiB the kernel's shared memory is dynamic.
  Kernel big;
  big.body =
      MakeAllocate(MakeBuffer("big", DType::kFloat32, {16384}, MemScope::kShared), MakeSeq({}));
  EXPECT_TRUE(PlanSharedMemory(big, false).dynamic);
}

}  // namespace
}  // namespace tessel::schedules
