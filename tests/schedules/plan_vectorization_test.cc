// Tests of vectorization planning (schedules/lower/plan_vectorization.h): the plan of each
// vectorized loop as `tessel lower --emit ir` prints it, the reason a loop stays scalar (the
// CUDA comment's text), and the plans lowering records in each CUDA kernel.

#include "schedules/lower/plan_vectorization.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "schedules/lower/lower.h"
#include "tests/schedules/test_workloads.h"

namespace tessel::schedules {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;
using namespace test_workloads;  // NOLINT

Stmt Vectorized(const VarPtr& v, int64_t extent, Stmt body) {
  return MakeFor(v, MakeInt(0), MakeInt(extent), ForKind::kVectorized, ThreadTag::kNone,
                 std::move(body));
}

// The printed plan of the one vectorized loop `loop`.
std::string Plan(const Stmt& loop) { return ToString(PlanVectorLoop(loop)); }

struct Buffers {
  BufferPtr a = MakeBuffer("A", DType::kFloat32, {1024});
  BufferPtr b = MakeBuffer("B", DType::kFloat32, {1024});
  BufferPtr h = MakeBuffer("H", DType::kFloat16, {1024});
  BufferPtr c = MakeBuffer("C", DType::kFloat32, {1024});
  BufferPtr r = MakeBuffer("r", DType::kFloat32, {8}, MemScope::kLocal);
  VarPtr tx = MakeVar("tx"), v = MakeVar("v");
  // tx * 8 + v
  Expr At() const { return Expr(tx) * 8 + Expr(v); }
};

TEST(PlanVectorization, AContiguousStoreIsOneVectorStoreAChunk) {
  Buffers t;
  // C[i] = A[i] + B[i] under a guard free of the lane: 8 lanes would need float8, so 4.
  Stmt loop = Vectorized(
      t.v, 8,
      MakeIf(Expr(t.tx) < 100,
             MakeStore(t.c, {t.At()}, MakeLoad(t.a, {t.At()}) + MakeLoad(t.b, {t.At()}))));
  VectorLoop plan = PlanVectorLoop(loop);
  EXPECT_EQ(ToString(plan), "vectorize v: vector store, 4 lanes, loads A, B, 1 guard");
  EXPECT_EQ(plan.kind, VectorLoop::Kind::kVectorStore);
  ASSERT_EQ(plan.guards.size(), 1u);
  EXPECT_EQ(plan.body->kind, StmtKind::kStore);
  // A half load limits nothing at 4 lanes (uint2), and loads free of the lane are not read as
  // vectors.
  EXPECT_EQ(Plan(Vectorized(t.v, 4,
                            MakeStore(t.c, {t.At()},
                                      MakeCast(DType::kFloat32, MakeLoad(t.h, {t.At()})) +
                                          MakeLoad(t.a, {Expr(t.tx)})))),
            "vectorize v: vector store, 4 lanes, loads H");
}

TEST(PlanVectorization, AccumulatingIntoRegistersIsAVectorizedReduction) {
  Buffers t;
  // r[0] = max(r[0], A[i]): the lanes accumulate one after the other.
  Stmt loop = Vectorized(
      t.v, 8,
      MakeStore(t.r, {MakeInt(0)},
                MakeBinary(BinaryOp::kMax, MakeLoad(t.r, {MakeInt(0)}), MakeLoad(t.a, {t.At()}))));
  EXPECT_EQ(Plan(loop), "vectorize v: reduction, 4 lanes, loads A");
  // Storing each lane to a register array: vector loads, lanes stored one by one.
  EXPECT_EQ(Plan(Vectorized(t.v, 8, MakeStore(t.r, {t.v}, MakeLoad(t.a, {t.At()})))),
            "vectorize v: lane stores, 4 lanes, loads A");
}

TEST(PlanVectorization, ALoopStaysScalarWithTheReasonCodeGenerationPrints) {
  Buffers t;
  auto copy = [&](Expr dst, Expr src) {
    return MakeStore(t.c, {std::move(dst)}, MakeLoad(t.a, {std::move(src)}));
  };
  EXPECT_EQ(Plan(Vectorized(t.v, 1, copy(t.At(), t.At()))),
            "vectorize v: scalar (the extent is not a constant of at least 2)");
  EXPECT_EQ(Plan(Vectorized(t.v, 4, MakeIf(Expr(t.v) < 3, copy(t.At(), t.At())))),
            "vectorize v: scalar (the store is guarded by a condition on the loop variable)");
  EXPECT_EQ(Plan(Vectorized(t.v, 4, MakeSeq({copy(t.At(), t.At()), copy(t.At(), t.At())}))),
            "vectorize v: scalar (the body is not a single store)");
  EXPECT_EQ(Plan(Vectorized(t.v, 4, copy(Expr(t.tx) * 8 + Expr(t.v) * 2, t.At()))),
            "vectorize v: scalar (the store is not contiguous in the loop variable)");
  EXPECT_EQ(Plan(Vectorized(t.v, 4, copy(t.At(), Expr(t.v) * 128 + Expr(t.tx)))),
            "vectorize v: scalar (the load of A is not contiguous in the loop variable)");
  EXPECT_EQ(
      Plan(Vectorized(
          t.v, 4,
          MakeStore(t.c, {t.At()},
                    MakeSelect(Expr(t.tx) < 3, MakeLoad(t.a, {t.At()}), MakeFloat(1.0))))),
      "vectorize v: scalar (a load that depends on the loop variable is inside a select branch)");
  EXPECT_EQ(Plan(Vectorized(t.v, 4, copy(t.At() + 1, t.At() + 1))),
            "vectorize v: scalar (no vector type fits the element types, the extent and the "
            "alignment of the accesses)");
  // A register array: the reduction's reason stands when there is nothing to read as vectors;
  // a load's reason comes first when there is.
  EXPECT_EQ(Plan(Vectorized(t.v, 4, MakeStore(t.r, {t.v}, MakeFloat(1.0)))),
            "vectorize v: scalar (the store is to a local array, which stays in registers with "
            "scalar accesses)");
  EXPECT_EQ(Plan(Vectorized(t.v, 4, MakeStore(t.r, {t.v}, MakeLoad(t.a, {Expr(t.v) * 2})))),
            "vectorize v: scalar (the load of A is not contiguous in the loop variable)");
  EXPECT_EQ(Plan(Vectorized(t.v, 4, MakeStore(t.r, {MakeInt(0)}, MakeLoad(t.a, {t.tx})))),
            "vectorize v: scalar (no load of global or shared memory depends on the loop "
            "variable)");
}

TEST(PlanVectorization, ConditionsTheSameOverEachChunkKeepTheVectors) {
  Buffers t;
  auto zero_unless = [&](Expr c) {
    return MakeStore(t.c, {t.At()},
                     MakeSelect(std::move(c), MakeLoad(t.a, {t.At()}), MakeFloat(0.0)));
  };
  // A copy that zero-fills past an extent (a padded tile's shared copy): stored a chunk at a
  // time, zeros where the condition fails; it may depend on the lane where no chunk straddles
  // its bound (i < 100 holds for all four lanes of a chunk or for none; i < 102 for two).
  EXPECT_EQ(Plan(Vectorized(t.v, 8, zero_unless(Expr(t.tx) < 3))),
            "vectorize v: vector store, 4 lanes, loads A, zero-filled");
  VectorLoop plan = PlanVectorLoop(Vectorized(t.v, 8, zero_unless(t.At() < 100)));
  EXPECT_EQ(ToString(plan), "vectorize v: vector store, 4 lanes, loads A, zero-filled");
  ASSERT_NE(plan.zero_unless, nullptr);
  EXPECT_EQ(As<StoreNode>(plan.body)->value->kind, ExprKind::kLoad);
  EXPECT_EQ(Plan(Vectorized(t.v, 8, zero_unless(t.At() < 102))),
            "vectorize v: vector store, 2 lanes, loads A, zero-filled");
  EXPECT_EQ(Plan(Vectorized(t.v, 8, zero_unless(t.At() < 101))),
            "vectorize v: scalar (a load that depends on the loop variable is inside a select "
            "branch)");
  // A guard on the lane (a cooperative fetch's tail of whole chunks) guards each chunk.
  auto copy = MakeStore(t.c, {t.At()}, MakeLoad(t.a, {t.At()}));
  EXPECT_EQ(Plan(Vectorized(t.v, 8, MakeIf(t.At() < 96, copy))),
            "vectorize v: vector store, 4 lanes, loads A, 1 chunk guard");
  EXPECT_EQ(Plan(Vectorized(t.v, 8, MakeIf(Expr(t.tx) < 5, MakeIf(t.At() >= 8, copy)))),
            "vectorize v: vector store, 4 lanes, loads A, 1 guard, 1 chunk guard");
  EXPECT_EQ(Plan(Vectorized(t.v, 8, MakeIf(t.At() < 97, copy))),
            "vectorize v: scalar (the store is guarded by a condition on the loop variable)");
}

TEST(PlanVectorization, LoweringRecordsThePlansOfEachCudaKernel) {
  // C[i] = A[i] + B[i], i split (blocks, 128 threads, 4 lanes) with the lanes vectorized.
  Schedule sch = NewSchedule(VectorAdd(4096));
  std::vector<LoopRV> i = ValueOrDie(sch.Split(LoopsOf(sch, "C")[0], {-1, 128, 4}));
  TESSEL_ASSERT_OK(sch.Bind(i[0], "blockIdx.x"));
  TESSEL_ASSERT_OK(sch.Bind(i[1], "threadIdx.x"));
  TESSEL_ASSERT_OK(sch.Vectorize(i[2]));
  auto prog = Lower(sch, CudaT());
  TESSEL_ASSERT_OK(prog);
  ASSERT_EQ(prog->kernels[0].vectors.size(), 1u);
  EXPECT_EQ(prog->kernels[0].vectors[0].loop->kind, StmtKind::kFor);
  EXPECT_THAT(ToString(*prog), HasSubstr("  vectorize i_2: vector store, 4 lanes, loads A, B\n"));
  // Host kernels are printed without a plan.
  Schedule host_sch = NewSchedule(VectorAdd(4096));
  std::vector<LoopRV> j = ValueOrDie(host_sch.Split(LoopsOf(host_sch, "C")[0], {-1, 4}));
  TESSEL_ASSERT_OK(host_sch.Vectorize(j[1]));
  auto host = Lower(host_sch, HostT());
  TESSEL_ASSERT_OK(host);
  EXPECT_THAT(host->kernels[0].vectors, ElementsAre());
  EXPECT_THAT(ToString(*host), HasSubstr("vectorized for"));
  EXPECT_THAT(ToString(*host), Not(HasSubstr("vectorize i")));
}

}  // namespace
}  // namespace tessel::schedules
