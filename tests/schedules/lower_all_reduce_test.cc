// lower_all_reduce (schedules/lower/lower_all_reduce.h): the expansion of all-reduces into
// shuffles, scratch and barriers, and the all-reduces it refuses.

#include "schedules/lower/lower_all_reduce.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <array>
#include <string>
#include <vector>

#include "schedules/ir/combiner.h"
#include "schedules/ir/stmt.h"
#include "schedules/lower/program.h"

namespace tessel::schedules {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// A kernel `red` whose body is `reduce` (an all-reduce into the local buffer `r`) inside the
// bindings of a block of `block` threads.
Kernel OneReduction(std::array<int64_t, 3> block, Stmt reduce, const BufferPtr& r,
                    int64_t cluster = 1) {
  Kernel k;
  k.name = "red";
  k.launch.block = block;
  k.launch.cluster = cluster;
  k.body = MakeAllocate(r, std::move(reduce));
  return k;
}

BufferPtr Local(const std::string& name, DType t = DType::kFloat32) {
  return MakeBuffer(name, t, {1}, MemScope::kLocal);
}

// A value that differs between threads (a constant is folded, not exchanged).
Expr Value() { return MakeLoad(MakeBuffer("X", DType::kFloat32, {1}), {MakeInt(0)}); }

TEST(LowerAllReduce, WarpReductionIsButterfliesInRegisters) {
  BufferPtr r = Local("r");
  Kernel k = OneReduction({16, 1, 1},
                          MakeAllReduce(ReduceOp::kSum, Value(), r, ThreadTag::kThreadX, 16), r);
  ASSERT_TRUE(LowerKernelAllReduces(&k, false).ok());
  EXPECT_EQ(ToString(k.body),
            "alloc local f32 r[1]\n"
            "{  // allreduce_sum over threadIdx.x (16 threads)\n"
            "  alloc local f32 tessel_red[]\n"
            "  tessel_red[] = X[0]\n"
            "  let tessel_mask = lane_mask(65535)\n"
            "  tessel_red[] = tessel_red[] + shfl_xor_sync(tessel_mask, tessel_red[], 8, 16)\n"
            "  tessel_red[] = tessel_red[] + shfl_xor_sync(tessel_mask, tessel_red[], 4, 16)\n"
            "  tessel_red[] = tessel_red[] + shfl_xor_sync(tessel_mask, tessel_red[], 2, 16)\n"
            "  tessel_red[] = tessel_red[] + shfl_xor_sync(tessel_mask, tessel_red[], 1, 16)\n"
            "  r[0] = tessel_red[]\n"
            "}\n");
  EXPECT_TRUE(k.scratch.empty());
}

TEST(LowerAllReduce, BlockReductionGoesThroughTheScratchItSizes) {
  BufferPtr r = Local("r");
  Kernel k = OneReduction({256, 2, 1},
                          MakeAllReduce(ReduceOp::kMax, Value(), r, ThreadTag::kThreadX, 256), r);
  ASSERT_TRUE(LowerKernelAllReduces(&k, false).ok());
  const std::string ir = ToString(k.body);
  EXPECT_THAT(ir, HasSubstr("barrier  // earlier readers of the scratch are done\n"));
  EXPECT_THAT(ir, HasSubstr("if bitwise_and(threadIdx.x(), 31) == 0:\n"));
  EXPECT_THAT(ir, HasSubstr("tessel_red_f32[threadIdx.y() * 8 + shift_right(threadIdx.x(), 5)] = "
                            "tessel_red[]\n"));
  EXPECT_THAT(ir, HasSubstr("unrolled for tessel_w in [1, 8):\n"));
  // Two rows of 8 warps: one partial each.
  ASSERT_EQ(k.scratch.size(), 1u);
  EXPECT_EQ(k.scratch[0].kind, SharedSlot::Kind::kReduceScratch);
  EXPECT_EQ(k.scratch[0].elements, 16);
  EXPECT_EQ(k.scratch[0].buffer->name, "tessel_red_f32");
}

TEST(LowerAllReduce, UniformComponentsAreFoldedNotExchanged) {
  // Welford over 4 lanes of elements (1, x, 0): the count is 4 in every lane, never shuffled.
  BufferPtr n = Local("n"), mean = Local("mean"), m2 = Local("m2");
  Stmt reduce =
      MakeAllReduce(WelfordCombiner(DType::kFloat32), {MakeFloat(1.0), Value(), MakeFloat(0.0)},
                    {n, mean, m2}, ThreadTag::kThreadX, 4);
  Kernel k = OneReduction({4, 1, 1}, MakeAllocate(mean, MakeAllocate(m2, reduce)), n);
  ASSERT_TRUE(LowerKernelAllReduces(&k, false).ok());
  const std::string ir = ToString(k.body);
  EXPECT_THAT(ir, HasSubstr("n[0] = 4.0\n")) << ir;
  EXPECT_THAT(ir, Not(HasSubstr("tessel_red0"))) << ir;
  EXPECT_THAT(ir, HasSubstr("let tessel_o1 = shfl_xor_sync(tessel_mask, tessel_red1[], 2, 4)"))
      << ir;
}

TEST(LowerAllReduce, ClusterReductionReadsEveryRankThroughDistributedSharedMemory) {
  BufferPtr r = Local("r");
  Kernel k = OneReduction({64, 1, 1},
                          MakeAllReduce(ReduceOp::kSum, Value(), r, ThreadTag::kClusterX, 4), r, 4);
  ASSERT_TRUE(LowerKernelAllReduces(&k, false).ok());
  const std::string ir = ToString(k.body);
  EXPECT_THAT(ir, HasSubstr("cluster_barrier\n"));
  EXPECT_THAT(ir, HasSubstr("let tessel_local = shared_address(tessel_cluster_red_f32[0])"));
  EXPECT_THAT(ir, HasSubstr("tessel_remote[] = map_shared_rank(tessel_local, tessel_r)"));
  ASSERT_EQ(k.scratch.size(), 1u);
  EXPECT_EQ(k.scratch[0].kind, SharedSlot::Kind::kClusterScratch);
}

// ---- Errors: the all-reduces the expansion does not support.

std::string ErrorOf(Kernel k) {
  absl::Status st = LowerKernelAllReduces(&k, false);
  EXPECT_FALSE(st.ok());
  return std::string(st.message());
}

TEST(LowerAllReduce, ComponentsOfDifferentTypesAreAnError) {
  BufferPtr a = Local("a"), b = Local("b", DType::kFloat64);
  Stmt reduce = MakeAllReduce(
      ComponentwiseCombiner({{ReduceOp::kSum, DType::kFloat32}, {ReduceOp::kSum, DType::kFloat64}}),
      {MakeFloat(1.0), MakeFloat(1.0, DType::kFloat64)}, {a, b}, ThreadTag::kThreadX, 32);
  EXPECT_THAT(ErrorOf(OneReduction({32, 1, 1}, MakeAllocate(b, reduce), a)),
              HasSubstr("kernel 'red': AllReduce over threadIdx.x with extent 32: the components "
                        "of one all-reduce must be computed in one type"));
}

TEST(LowerAllReduce, ClusterExtentOtherThanTheClusterIsAnError) {
  BufferPtr r = Local("r");
  EXPECT_THAT(ErrorOf(OneReduction(
                  {32, 1, 1},
                  MakeAllReduce(ReduceOp::kSum, MakeFloat(1.0), r, ThreadTag::kClusterX, 4), r, 2)),
              HasSubstr("the kernel's clusters have 2 CTAs; the extent must equal the cluster "
                        "size"));
}

TEST(LowerAllReduce, BooleansAreAnError) {
  BufferPtr r = Local("r", DType::kBool);
  EXPECT_THAT(ErrorOf(OneReduction(
                  {32, 1, 1},
                  MakeAllReduce(ReduceOp::kMax, MakeBool(true), r, ThreadTag::kThreadX, 32), r)),
              HasSubstr("boolean values cannot be reduced; reduce an integer"));
}

TEST(LowerAllReduce, ReductionOverABlockAxisIsAnError) {
  BufferPtr r = Local("r");
  EXPECT_THAT(
      ErrorOf(OneReduction(
          {32, 1, 1}, MakeAllReduce(ReduceOp::kSum, MakeFloat(1.0), r, ThreadTag::kBlockX, 4), r)),
      HasSubstr("cross-thread reductions combine the threads of threadIdx.x, .y or .z; "
                "bind the reduction loop to a thread axis"));
}

TEST(LowerAllReduce, SharedResultBufferIsAnError) {
  BufferPtr r = MakeBuffer("r", DType::kFloat32, {1}, MemScope::kShared);
  EXPECT_THAT(ErrorOf(OneReduction(
                  {32, 1, 1},
                  MakeAllReduce(ReduceOp::kSum, MakeFloat(1.0), r, ThreadTag::kThreadX, 32), r)),
              HasSubstr("its result buffer 'r' must be a local buffer of at least one element"));
}

}  // namespace
}  // namespace tessel::schedules
