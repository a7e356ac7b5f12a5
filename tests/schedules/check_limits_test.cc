#include "schedules/lower/check_limits.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace tessel::schedules {
namespace {

using ::testing::HasSubstr;

// A kernel with the given launch and a body allocating the given buffers.
Kernel MakeKernel(int64_t threads, std::vector<BufferPtr> allocs, Stmt inner = nullptr) {
  Kernel k;
  k.name = "k";
  k.launch.block = {threads, 1, 1};
  Stmt body = inner ? inner : MakeBarrier();
  for (auto it = allocs.rbegin(); it != allocs.rend(); ++it) body = MakeAllocate(*it, body);
  k.body = body;
  return k;
}

Program MakeProgram(Kernel k) {
  Program p;
  p.name = "p";
  p.target = TargetKind::kCuda;
  p.kernels.push_back(std::move(k));
  return p;
}

TEST(CheckTargetLimits, AcceptsAKernelWithinLimits) {
  Program p =
      MakeProgram(MakeKernel(256, {MakeBuffer("s", DType::kFloat32, {128, 8}, MemScope::kShared),
                                   MakeBuffer("r", DType::kFloat32, {8, 8}, MemScope::kLocal)}));
  EXPECT_TRUE(CheckTargetLimits(p, CudaTarget("sm_90")).ok());
  KernelResources r = EstimateResources(p.kernels[0]);
  EXPECT_EQ(r.threads, 256);
  EXPECT_EQ(r.shared_bytes, 128 * 8 * 4);
  EXPECT_EQ(r.local_elements, 64);
}

TEST(CheckTargetLimits, TooManyThreadsSaysByHowMuch) {
  absl::Status s = CheckTargetLimits(MakeProgram(MakeKernel(1536, {})), CudaTarget("sm_90"));
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("uses 1536 threads per block, over the limit of 1024 by 512"));
}

TEST(CheckTargetLimits, TooMuchSharedMemoryNamesTheArch) {
  Program p = MakeProgram(
      MakeKernel(128, {MakeBuffer("s", DType::kFloat32, {200 * 1024 / 4}, MemScope::kShared)}));
  absl::Status s = CheckTargetLimits(p, CudaTarget("sm_80"));
  EXPECT_THAT(s.message(), HasSubstr("204800 bytes of shared memory per block, over the sm_80 "
                                     "limit of 166912 by 37888"));
  EXPECT_TRUE(CheckTargetLimits(p, CudaTarget("sm_90")).ok());  // 227 KiB on Hopper
}

TEST(CheckTargetLimits, TooManyRegistersPerThread) {
  Program p =
      MakeProgram(MakeKernel(64, {MakeBuffer("r", DType::kFloat32, {16, 16}, MemScope::kLocal)}));
  absl::Status s = CheckTargetLimits(p, CudaTarget("sm_90"));
  EXPECT_THAT(s.message(), HasSubstr("keeps 256 words in local buffers, about 280 registers per "
                                     "thread, over the limit of 255 by 25"));
}

TEST(CheckTargetLimits, TooManyRegistersPerBlock) {
  Program p =
      MakeProgram(MakeKernel(1024, {MakeBuffer("r", DType::kFloat32, {80}, MemScope::kLocal)}));
  absl::Status s = CheckTargetLimits(p, CudaTarget("sm_90"));
  EXPECT_THAT(s.message(),
              HasSubstr("needs about 104 registers per thread for 1024 threads: 106496 per block, "
                        "over the limit of 65536 by 40960; a thread may spill at most 32 words "
                        "over its share of 64: use fewer threads or smaller local buffers"));
}

TEST(CheckTargetLimits, ASmallSpillOverTheBlockBudgetIsAccepted) {
  // 64 words + 24 overhead = 88 registers, 24 over the 64 a thread of 1024 gets.
  Program p =
      MakeProgram(MakeKernel(1024, {MakeBuffer("r", DType::kFloat32, {64}, MemScope::kLocal)}));
  EXPECT_TRUE(CheckTargetLimits(p, CudaTarget("sm_90")).ok());
  // The same buffer and 8 more words is over by 32: still accepted; 9 more is refused.
  Program at_limit =
      MakeProgram(MakeKernel(1024, {MakeBuffer("r", DType::kFloat32, {72}, MemScope::kLocal)}));
  EXPECT_TRUE(CheckTargetLimits(at_limit, CudaTarget("sm_90")).ok());
  Program over =
      MakeProgram(MakeKernel(1024, {MakeBuffer("r", DType::kFloat32, {73}, MemScope::kLocal)}));
  EXPECT_FALSE(CheckTargetLimits(over, CudaTarget("sm_90")).ok());
}

TEST(CheckTargetLimits, VectorWiderThanSixteenBytes) {
  VarPtr v = MakeVar("v");
  BufferPtr out = MakeBuffer("y", DType::kFloat32, {8});
  Stmt loop = MakeFor(v, MakeInt(0), MakeInt(8), ForKind::kVectorized, ThreadTag::kNone,
                      MakeStore(out, {Expr(v)}, MakeFloat(1.0)));
  absl::Status s = CheckTargetLimits(MakeProgram(MakeKernel(32, {}, loop)), CudaTarget("sm_90"));
  EXPECT_THAT(s.message(), HasSubstr("vectorizes 32 bytes per access, over the limit of 16 by 16"));
}

TEST(CheckTargetLimits, VectorWidthCountsMemoryElementsNotRegisters) {
  // Eight f16 lanes loaded from global memory into an f32 register accumulator: one 16-byte
  // access (the accumulator is a register, no access); eight f32 lanes of it are 32 bytes.
  VarPtr v = MakeVar("v");
  BufferPtr acc = MakeBuffer("acc", DType::kFloat32, {1}, MemScope::kLocal);
  for (DType t : {DType::kFloat16, DType::kFloat32}) {
    BufferPtr x = MakeBuffer("x", t, {8});
    Stmt loop = MakeFor(
        v, MakeInt(0), MakeInt(8), ForKind::kVectorized, ThreadTag::kNone,
        MakeStore(acc, {MakeInt(0)},
                  MakeLoad(acc, {MakeInt(0)}) + MakeCast(DType::kFloat32, MakeLoad(x, {Expr(v)}))));
    absl::Status s = CheckTargetLimits(MakeProgram(MakeKernel(32, {}, loop)), CudaTarget("sm_90"));
    if (t == DType::kFloat16) {
      EXPECT_TRUE(s.ok()) << s;
    } else {
      EXPECT_THAT(s.message(),
                  HasSubstr("vectorizes 32 bytes per access, over the limit of 16 by 16"));
    }
  }
}

TEST(CheckTargetLimits, TooManyBlocksAlongY) {
  Kernel k = MakeKernel(32, {});
  k.launch.grid = {1, 70000, 1};
  absl::Status s = CheckTargetLimits(MakeProgram(k), CudaTarget("sm_90"));
  EXPECT_THAT(s.message(), HasSubstr("launches 70000 blocks along y, over the limit of 65535"));
}

TEST(CheckTargetLimits, HostProgramsHaveNoDeviceLimits) {
  Program p = MakeProgram(MakeKernel(4096, {}));
  p.target = TargetKind::kHost;
  EXPECT_TRUE(CheckTargetLimits(p, HostTarget()).ok());
}

TEST(CheckTargetLimits, EmptyProgramIsRejected) {
  Program p;
  p.name = "empty";
  EXPECT_THAT(CheckTargetLimits(p, CudaTarget("sm_90")).message(),
              HasSubstr("program empty has no kernel"));
}

}  // namespace
}  // namespace tessel::schedules
