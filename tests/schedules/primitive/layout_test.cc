// Tests of the layout (set_scope, storage_align, split_buffer_axis, fuse_axes, pad_axis) primitives
// (schedules/schedule/primitive/layout.cc): what each does to the stage state and to the lowered
// IR, and each of its errors (code and message), with the state left unchanged by a failed
// primitive.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "schedules/lower/lower.h"
#include "schedules/schedule/schedule.h"
#include "schedules/workload/builtins.h"
#include "tests/schedules/primitive/primitive_test_util.h"
#include "tests/schedules/test_workloads.h"

namespace tessel::schedules {
namespace {

using ::testing::HasSubstr;
using namespace test_workloads;  // NOLINT
using namespace primitive_test;  // NOLINT

// =============================================================================================
// set_scope, storage_align

TEST(ScheduleSetScope, ChangesTheBufferEverywhere) {
  Schedule sch = NewSchedule(ElementwiseChain(8, 32));
  BlockRV b = BlockOf(sch, "B");
  TESSEL_ASSERT_OK(sch.SetScope(b, "shared"));
  EXPECT_EQ(StageNamed(sch, "B").buffer->scope, MemScope::kShared);
  EXPECT_EQ(sch.trace().insts.back().attrs["scope"], "shared");
  // The reader's load refers to the new buffer.
  const Stage& c = StageNamed(sch, "C");
  EXPECT_EQ(ToString(c.body), "max(B[i, j], 0.0)");
  EXPECT_THAT(LowerText(sch, CudaT()),
              HasSubstr("stage B is in shared memory but not attached to any loop"));
  std::vector<LoopRV> cl = LoopsOf(sch, "C");
  TESSEL_ASSERT_OK(sch.Bind(cl[0], "blockIdx.x"));
  TESSEL_ASSERT_OK(sch.Bind(cl[1], "threadIdx.x"));
  TESSEL_ASSERT_OK(sch.ComputeAt(b, cl[0]));
  auto prog = Lower(sch, CudaT());
  TESSEL_ASSERT_OK(prog);
  const std::string ir = ToString(prog->kernels[0].body);
  // Threads are relaxed for a shared buffer: one row of 32 per block.
  EXPECT_THAT(ir, HasSubstr("alloc shared f32 B[1, 32]"));
  EXPECT_THAT(ir, HasSubstr("barrier"));
  // B is not a global buffer any more.
  for (const ProgramBuffer& pb : prog->buffers) EXPECT_NE(pb.buffer->name, "B");
}

TEST(ScheduleErrors, SetScopeUnknown) {
  Schedule sch = NewSchedule(ElementwiseChain(8, 8));
  BlockRV b = BlockOf(sch, "B");
  ExpectFails(
      sch, [&] { return sch.SetScope(b, "texture"); }, kInvalid,
      "set_scope: unknown scope 'texture'; use global, shared, local or fragment");
}

TEST(ScheduleErrors, SetScopeOutput) {
  Schedule sch = NewSchedule(ElementwiseChain(8, 8));
  BlockRV c = BlockOf(sch, "C");
  ExpectFails(
      sch, [&] { return sch.SetScope(c, "local"); }, kPrecondition,
      "set_scope: stage C is an output and must stay in global memory");
}

TEST(ScheduleStorageAlign, PadsRealizedStrides) {
  TiledMatmul t = MakeTiledMatmul(64, 64, 64);
  Schedule& sch = t.sch;
  BlockRV as = ValueOrDie(sch.CacheRead("A", "shared", {t.c}));
  TESSEL_ASSERT_OK(sch.ComputeAt(as, t.k0));
  TESSEL_ASSERT_OK(sch.StorageAlign(as, 0, 32, 1));
  const Stage& a = StageNamed(sch, "A_shared");
  ASSERT_EQ(a.aligns.size(), 1u);
  EXPECT_EQ(a.aligns[0].axis, 0);
  EXPECT_EQ(a.aligns[0].factor, 32);
  EXPECT_EQ(a.aligns[0].offset, 1);
  const Instruction& inst = sch.trace().insts.back();
  EXPECT_EQ(inst.kind, "storage_align");
  EXPECT_EQ(inst.attrs, nlohmann::json::parse(R"({"axis": 0, "factor": 32, "offset": 1})"));
  auto prog = Lower(sch, CudaT());
  TESSEL_ASSERT_OK(prog);
  const AllocateNode* alloc = FindAllocate(prog->kernels[0].body, "A_shared");
  ASSERT_NE(alloc, nullptr);
  EXPECT_EQ(alloc->buffer->shape, (std::vector<int64_t>{16, 8}));
  // Row stride 8 padded to 33 (33 % 32 == 1).
  EXPECT_EQ(alloc->buffer->strides, (std::vector<int64_t>{33, 1}));
  EXPECT_EQ(alloc->buffer->AllocatedElements(), 15 * 33 + 8);
}

TEST(ScheduleStorageAlign, AlreadyAlignedStrideUnchanged) {
  TiledMatmul t = MakeTiledMatmul(64, 64, 64);
  Schedule& sch = t.sch;
  BlockRV as = ValueOrDie(sch.CacheRead("A", "shared", {t.c}));
  TESSEL_ASSERT_OK(sch.ComputeAt(as, t.k0));
  TESSEL_ASSERT_OK(sch.StorageAlign(as, 0, 4, 0));  // 8 % 4 == 0 already
  auto prog = Lower(sch, CudaT());
  TESSEL_ASSERT_OK(prog);
  const AllocateNode* alloc = FindAllocate(prog->kernels[0].body, "A_shared");
  ASSERT_NE(alloc, nullptr);
  EXPECT_EQ(alloc->buffer->Strides(), (std::vector<int64_t>{8, 1}));
}

TEST(ScheduleErrors, StorageAlignBadAxis) {
  Schedule sch = NewSchedule(Matmul(8, 8, 8));
  BlockRV c = BlockOf(sch, "C");
  BlockRV as = ValueOrDie(sch.CacheRead("A", "shared", {c}));
  ExpectFails(
      sch, [&] { return sch.StorageAlign(as, 1, 32, 1); }, kInvalid,
      "storage_align: axis 1 of stage A_shared (rank 2) must be an outer axis in [0, 1): "
      "the innermost stride is always 1");
  ExpectFails(
      sch, [&] { return sch.StorageAlign(as, -1, 32, 1); }, kInvalid,
      "axis -1 of stage A_shared (rank 2) must be an outer axis");
}

TEST(ScheduleErrors, StorageAlignBadFactorOrOffset) {
  Schedule sch = NewSchedule(Matmul(8, 8, 8));
  BlockRV c = BlockOf(sch, "C");
  BlockRV as = ValueOrDie(sch.CacheRead("A", "shared", {c}));
  ExpectFails(
      sch, [&] { return sch.StorageAlign(as, 0, 0, 0); }, kInvalid,
      "storage_align: needs factor > 0 and 0 <= offset < factor, got factor 0 offset 0");
  ExpectFails(
      sch, [&] { return sch.StorageAlign(as, 0, 32, 32); }, kInvalid, "got factor 32 offset 32");
  ExpectFails(
      sch, [&] { return sch.StorageAlign(as, 0, 32, -1); }, kInvalid, "got factor 32 offset -1");
}

TEST(ScheduleErrors, StorageAlignGlobal) {
  Schedule sch = NewSchedule(MatmulRelu(8, 8, 8));
  BlockRV c = BlockOf(sch, "C");
  ExpectFails(
      sch, [&] { return sch.StorageAlign(c, 0, 32, 1); }, kPrecondition,
      "storage_align: stage C is in global memory; storage_align pads buffers the kernel "
      "allocates (shared, local)");
}

// =============================================================================================
// fuse_axes

Workload Conv3x3() {
  auto w = ParseWorkloadSpec(
      "conv2d(N=2, C=16, H=6, W=6, K=16, R=3, S=3, padding=1, layout=nhwc, dtype=f16)");
  EXPECT_TRUE(w.ok()) << w.status();
  return *w;
}

TEST(ScheduleFuseAxes, FusesSpatialAxesIntoOneAndRewritesTheReaders) {
  Schedule sch = NewSchedule(Conv3x3());
  BlockRV conv = BlockOf(sch, "conv");
  TESSEL_ASSERT_OK(sch.FuseAxes(conv, {0, 1, 2}));
  const Stage& c = StageNamed(sch, "conv");
  EXPECT_EQ(c.buffer->shape, (std::vector<int64_t>{72, 16}));
  ASSERT_EQ(c.axes.size(), 2u);
  EXPECT_EQ(c.axes[0]->name, "n_p_q");
  EXPECT_EQ(LeafExtents(c), (std::vector<int64_t>{72, 16, 3, 3, 16}));
  // The body reads the padded input at the fused variable's parts.
  EXPECT_THAT(ToString(c.body),
              HasSubstr("padded[n_p_q / 36, n_p_q / 6 % 6 + r, n_p_q % 6 + s, c]"));
  // The output reads the fused buffer at the row-major linearization of its own axes.
  EXPECT_THAT(ToString(StageNamed(sch, "out").body), HasSubstr("conv[n * 36 + p * 6 + q, k]"));
  EXPECT_EQ(sch.trace().insts.back().kind, "fuse_axes");
  // Reduction axes: only the domain changes.
  TESSEL_ASSERT_OK(sch.FuseAxes(conv, {2, 3, 4}));
  EXPECT_EQ(StageNamed(sch, "conv").buffer->shape, (std::vector<int64_t>{72, 16}));
  EXPECT_EQ(LeafExtents(StageNamed(sch, "conv")), (std::vector<int64_t>{72, 16, 144}));
  EXPECT_THAT(ToString(StageNamed(sch, "conv").body),
              HasSubstr("weight[k, r_s_c / 48, r_s_c / 16 % 3, r_s_c % 16]"));
  // The fused schedule lowers: the reference loops over the fused domain.
  EXPECT_THAT(LowerText(sch, HostT()), HasSubstr("for r_s_c in [0, 144)"));
}

TEST(ScheduleErrors, FuseAxesArguments) {
  Schedule sch = NewSchedule(Conv3x3());
  BlockRV conv = BlockOf(sch, "conv");
  ExpectFails(
      sch, [&] { return sch.FuseAxes(conv, {1}); }, kInvalid,
      "fuse_axes: needs at least two axes of stage conv to fuse, got 1");
  ExpectFails(
      sch,
      [&] {
        return sch.FuseAxes(conv, {0, 9});
      },
      kInvalid,
      "fuse_axes: axis 9 of stage conv must be in [0, 7): its spatial axes, then its reduction "
      "axes");
  ExpectFails(
      sch,
      [&] {
        return sch.FuseAxes(conv, {1, 1});
      },
      kInvalid, "fuse_axes: axis 1 of stage conv is listed twice; list each axis once");
  ExpectFails(
      sch,
      [&] {
        return sch.FuseAxes(conv, {2, 4});
      },
      kInvalid,
      "fuse_axes: axes [2, 4] of stage conv mix spatial and reduction axes; fuse each kind apart");
  BlockRV out = BlockOf(sch, "out");
  ExpectFails(
      sch,
      [&] {
        return sch.FuseAxes(out, {0, 1});
      },
      kPrecondition, "fuse_axes: stage out is an output; its layout is the workload's");
  std::vector<LoopRV> cl = LoopsOf(sch, "conv");
  TESSEL_ASSERT_OK(sch.Split(cl[0], {-1, 2}).status());
  ExpectFails(
      sch,
      [&] {
        return sch.FuseAxes(conv, {4, 5});
      },
      kPrecondition,
      "fuse_axes: stage conv has transformed, attached or inlined loops; fuse_axes must come "
      "first");
}

// =============================================================================================
// pad_axis

TEST(SchedulePadAxis, GrowsTheAxisWithZerosAndKeepsTheReaders) {
  Schedule sch = NewSchedule(Matmul(8, 12, 15));
  BlockRV copy = ValueOrDie(sch.ReIndex(BlockOf(sch, "C"), "A", "global"));
  const std::string name = sch.GetStage(copy).name;
  TESSEL_ASSERT_OK(sch.PadAxis(copy, 1, 4));
  const Stage& c = StageNamed(sch, name);
  EXPECT_EQ(c.buffer->shape, (std::vector<int64_t>{8, 16}));
  EXPECT_EQ(LeafExtents(c), (std::vector<int64_t>{8, 16}));
  EXPECT_THAT(ToString(c.body), HasSubstr("select(ax1 < 15, A[ax0, ax1], 0"));
  // The reader still reads k below 15, from the padded copy.
  EXPECT_THAT(ToString(StageNamed(sch, "C").body), HasSubstr(name + "[i, k]"));
  EXPECT_EQ(sch.trace().insts.back().kind, "pad_axis");
  // An axis already a multiple is left as it is (and recorded).
  TESSEL_ASSERT_OK(sch.PadAxis(copy, 0, 4));
  EXPECT_EQ(StageNamed(sch, name).buffer->shape, (std::vector<int64_t>{8, 16}));
  // The lowered program allocates the padded workspace and computes it in its own loop nest.
  const std::string ir = LowerText(sch, HostT());
  EXPECT_THAT(ir, HasSubstr("ax1 in [0, 16)"));
}

TEST(ScheduleErrors, PadAxisArguments) {
  Schedule sch = NewSchedule(Matmul(8, 12, 15));
  BlockRV copy = ValueOrDie(sch.ReIndex(BlockOf(sch, "C"), "A", "global"));
  const std::string name = sch.GetStage(copy).name;
  ExpectFails(
      sch, [&] { return sch.PadAxis(copy, 2, 4); }, kInvalid,
      "pad_axis: axis 2 of stage " + name + " (rank 2) must be in [0, 2)");
  ExpectFails(
      sch, [&] { return sch.PadAxis(copy, 1, 0); }, kInvalid,
      "pad_axis: the multiple to pad axis 1 of stage " + name + " to must be at least 1, got 0");
  BlockRV c = BlockOf(sch, "C");
  ExpectFails(
      sch, [&] { return sch.PadAxis(c, 0, 4); }, kPrecondition,
      "pad_axis: stage C is an output; its shape is the workload's");
  std::vector<LoopRV> l = LoopsOf(sch, name);
  TESSEL_ASSERT_OK(sch.Split(l[1], {-1, 5}).status());
  ExpectFails(
      sch, [&] { return sch.PadAxis(copy, 1, 4); }, kPrecondition,
      "pad_axis: stage " + name +
          " has transformed, attached or inlined loops; pad_axis must come first");
}

TEST(ScheduleErrors, PadAxisOfAReduction) {
  Schedule sch = NewSchedule(MatmulRelu(8, 12, 15));
  BlockRV c = BlockOf(sch, "C");
  ExpectFails(
      sch, [&] { return sch.PadAxis(c, 0, 4); }, kPrecondition,
      "pad_axis: stage C is a reduction; pad a stage that computes each element on its own (a "
      "copy)");
}

// =============================================================================================
// permute_axes

TEST(SchedulePermuteAxes, StoresTheCopyTransposedAndRewritesItsReaders) {
  Schedule sch = NewSchedule(Matmul(8, 12, 15));
  BlockRV copy = ValueOrDie(sch.ReIndex(BlockOf(sch, "C"), "A", "global"));
  const std::string name = sch.GetStage(copy).name;
  TESSEL_ASSERT_OK(sch.PermuteAxes(copy, {1, 0}));
  const Stage& c = StageNamed(sch, name);
  EXPECT_EQ(c.buffer->shape, (std::vector<int64_t>{15, 8}));
  EXPECT_EQ(LeafExtents(c), (std::vector<int64_t>{15, 8}));
  EXPECT_EQ(ToString(c.body), "A[ax0, ax1]");  // the same values, over loops [ax1, ax0]
  EXPECT_THAT(ToString(StageNamed(sch, "C").body), HasSubstr(name + "[k, i]"));
  EXPECT_EQ(sch.trace().insts.back().kind, "permute_axes");
  // The identity leaves it as it is (and is recorded).
  TESSEL_ASSERT_OK(sch.PermuteAxes(copy, {0, 1}));
  EXPECT_EQ(StageNamed(sch, name).buffer->shape, (std::vector<int64_t>{15, 8}));
  EXPECT_THAT(LowerText(sch, HostT()), HasSubstr(name + "[ax1, ax0] = A[ax0, ax1]"));
}

TEST(ScheduleErrors, PermuteAxesArguments) {
  Schedule sch = NewSchedule(Matmul(8, 12, 15));
  BlockRV copy = ValueOrDie(sch.ReIndex(BlockOf(sch, "C"), "A", "global"));
  const std::string name = sch.GetStage(copy).name;
  ExpectFails(
      sch,
      [&] {
        return sch.PermuteAxes(copy, {1, 1});
      },
      kInvalid,
      "permute_axes: order [1, 1] of stage " + name +
          " must list each of its 2 axes once (0 to 1)");
  ExpectFails(
      sch,
      [&] {
        return sch.PermuteAxes(copy, {1, 0, 2});
      },
      kInvalid,
      "permute_axes: order [1, 0, 2] of stage " + name +
          " must list each of its 2 axes once (0 to 1)");
  BlockRV c = BlockOf(sch, "C");
  ExpectFails(
      sch,
      [&] {
        return sch.PermuteAxes(c, {1, 0});
      },
      kPrecondition, "permute_axes: stage C is an output; its layout is the workload's");
  Schedule shared = NewSchedule(Matmul(8, 12, 15));
  BlockRV sh = ValueOrDie(shared.ReIndex(BlockOf(shared, "C"), "A", "shared"));
  TESSEL_ASSERT_OK(shared.StorageAlign(sh, 0, 8, 4));
  ExpectFails(
      shared,
      [&] {
        return shared.PermuteAxes(sh, {1, 0});
      },
      kPrecondition,
      "permute_axes: stage " + shared.GetStage(sh).name +
          " is padded with storage_align; permute its axes before storage_align");
  std::vector<LoopRV> l = LoopsOf(sch, name);
  TESSEL_ASSERT_OK(sch.Split(l[1], {-1, 5}).status());
  ExpectFails(
      sch,
      [&] {
        return sch.PermuteAxes(copy, {1, 0});
      },
      kPrecondition,
      "permute_axes: stage " + name +
          " has transformed, attached or inlined loops; permute_axes must come first");
}

}  // namespace
}  // namespace tessel::schedules
