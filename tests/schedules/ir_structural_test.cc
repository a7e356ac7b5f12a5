#include "schedules/ir/structural.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "schedules/ir/buffer.h"
#include "schedules/ir/expr.h"
#include "schedules/ir/simplify.h"
#include "schedules/ir/stmt.h"
#include "schedules/ir/substitute.h"

namespace tessel::schedules {
namespace {

Expr Affine(const VarPtr& x, const VarPtr& y, int64_t c) { return Expr(x) * c + Expr(y) + 1; }

TEST(IrStructural, EqualUpToRenaming) {
  VarPtr i = MakeVar("i"), j = MakeVar("j"), p = MakeVar("p"), q = MakeVar("q");
  EXPECT_TRUE(StructuralEqual(Affine(i, j, 4), Affine(p, q, 4)));
  EXPECT_TRUE(StructuralEqual(Affine(i, j, 4), Affine(i, j, 4)));
  // The renaming must be a bijection: i*4 + i + 1 is not p*4 + q + 1, and vice versa.
  EXPECT_FALSE(StructuralEqual(Affine(i, i, 4), Affine(p, q, 4)));
  EXPECT_FALSE(StructuralEqual(Affine(p, q, 4), Affine(i, i, 4)));
  // Var dtypes matter, names do not.
  VarPtr w = MakeVar("i", DType::kInt32);
  EXPECT_FALSE(StructuralEqual(Expr(i), Expr(w)));
  EXPECT_TRUE(StructuralEqual(Expr(i), Expr(j)));
  EXPECT_TRUE(StructuralEqual(Expr(nullptr), Expr(nullptr)));
  EXPECT_FALSE(StructuralEqual(Expr(i), Expr(nullptr)));
}

TEST(IrStructural, DifferentConstantsAndOpsDiffer) {
  VarPtr i = MakeVar("i"), j = MakeVar("j");
  EXPECT_FALSE(StructuralEqual(Affine(i, j, 4), Affine(i, j, 8)));
  EXPECT_NE(StructuralHash(Affine(i, j, 4)), StructuralHash(Affine(i, j, 8)));
  EXPECT_FALSE(StructuralEqual(Expr(i) / 4, Expr(i) % 4));
  EXPECT_NE(StructuralHash(Expr(i) / 4), StructuralHash(Expr(i) % 4));
  EXPECT_FALSE(StructuralEqual(MakeInt(1), MakeInt(1, DType::kInt32)));
  EXPECT_FALSE(StructuralEqual(MakeFloat(0.0), MakeFloat(-0.0)));
  EXPECT_TRUE(StructuralEqual(MakeFloat(0.5), MakeFloat(0.5)));
  EXPECT_FALSE(StructuralEqual(MakeFloat(0.5), MakeFloat(0.5, DType::kFloat64)));
  EXPECT_FALSE(StructuralEqual(MakeCall("exp", {MakeFloat(1.0)}, DType::kFloat32),
                               MakeCall("log", {MakeFloat(1.0)}, DType::kFloat32)));
}

TEST(IrStructural, HashConsistentWithEquality) {
  VarPtr i = MakeVar("i"), j = MakeVar("j"), p = MakeVar("p"), q = MakeVar("q");
  EXPECT_EQ(StructuralHash(Affine(i, j, 4)), StructuralHash(Affine(p, q, 4)));
  EXPECT_NE(StructuralHash(Affine(i, i, 4)), StructuralHash(Affine(p, q, 4)));
  BufferPtr a1 = MakeBuffer("A", DType::kFloat32, {16, 16});
  BufferPtr a2 = MakeBuffer("A", DType::kFloat32, {16, 16});  // another pointer, same value
  BufferPtr b = MakeBuffer("B", DType::kFloat32, {16, 16});
  Expr l1 = MakeLoad(a1, {Expr(i), Expr(j)}), l2 = MakeLoad(a2, {Expr(p), Expr(q)});
  EXPECT_TRUE(StructuralEqual(l1, l2));
  EXPECT_EQ(StructuralHash(l1), StructuralHash(l2));
  Expr l3 = MakeLoad(b, {Expr(i), Expr(j)});
  EXPECT_FALSE(StructuralEqual(l1, l3));
  EXPECT_NE(StructuralHash(l1), StructuralHash(l3));
  BufferPtr shared = MakeBuffer("A", DType::kFloat32, {16, 16}, MemScope::kShared);
  EXPECT_FALSE(StructuralEqual(l1, MakeLoad(shared, {Expr(i), Expr(j)})));
  BufferPtr padded = MakeBuffer("A", DType::kFloat32, {16, 16}, MemScope::kGlobal, {17, 1});
  EXPECT_FALSE(StructuralEqual(l1, MakeLoad(padded, {Expr(i), Expr(j)})));
  // Simplified forms of equal inputs are equal and hash equally.
  Expr s1 = Simplify(Expr(j) + Expr(i) * 4 - Expr(j) + 2);
  Expr s2 = Simplify(Expr(q) * 0 + 2 + Expr(p) * 4);
  EXPECT_TRUE(StructuralEqual(s1, s2));
  EXPECT_EQ(StructuralHash(s1), StructuralHash(s2));
}

TEST(IrStructural, HashIsPinned) {
  // The hash is part of persistent keys: it must not change across runs, machines or
  // refactorings that keep the IR the same. Update this constant only with a deliberate change
  // of the hashed byte stream (documented in structural.h).
  VarPtr i = MakeVar("i"), j = MakeVar("j");
  BufferPtr a = MakeBuffer("A", DType::kFloat16, {64, 32});
  Expr e = MakeSelect(Expr(i) < 8, MakeCast(DType::kFloat32, MakeLoad(a, {Expr(i), Expr(j) % 32})),
                      MakeFloat(0.5));
  EXPECT_EQ(StructuralHash(e), StructuralHash(e));
  EXPECT_EQ(StructuralHash(e), uint64_t{7232791155531987606u});
}

TEST(IrStructural, StmtEqualityWithLoops) {
  auto build = [](const std::string& iname, const std::string& jname, int64_t extent,
                  bool swap_uses) {
    VarPtr i = MakeVar(iname), j = MakeVar(jname);
    BufferPtr c = MakeBuffer("C", DType::kFloat32, {16, 16});
    BufferPtr a = MakeBuffer("A", DType::kFloat32, {16, 16});
    Expr x = swap_uses ? Expr(j) : Expr(i), y = swap_uses ? Expr(i) : Expr(j);
    Stmt body = MakeStore(c, {x, y}, MakeLoad(a, {x, y}) * MakeFloat(2.0));
    return MakeFor(i, MakeInt(0), MakeInt(extent), ForKind::kSerial, ThreadTag::kNone,
                   MakeFor(j, MakeInt(0), MakeInt(16), ForKind::kUnrolled, ThreadTag::kNone, body,
                           {{"unroll_max_step", 4}}));
  };
  Stmt s1 = build("i", "j", 16, false);
  Stmt s2 = build("x", "y", 16, false);
  EXPECT_TRUE(StructuralEqual(s1, s2));
  EXPECT_EQ(StructuralHash(s1), StructuralHash(s2));
  Stmt s3 = build("i", "j", 8, false);  // different extent
  EXPECT_FALSE(StructuralEqual(s1, s3));
  EXPECT_NE(StructuralHash(s1), StructuralHash(s3));
  Stmt s4 = build("i", "j", 16, true);  // loop variables used the other way round
  EXPECT_FALSE(StructuralEqual(s1, s4));
  EXPECT_NE(StructuralHash(s1), StructuralHash(s4));

  VarPtr k = MakeVar("k");
  BufferPtr c = MakeBuffer("C", DType::kFloat32, {16});
  Stmt serial = MakeFor(k, MakeInt(0), MakeInt(16), ForKind::kSerial, ThreadTag::kNone,
                        MakeStore(c, {Expr(k)}, MakeFloat(0.0)));
  Stmt bound = MakeFor(k, MakeInt(0), MakeInt(16), ForKind::kThreadBinding, ThreadTag::kThreadX,
                       MakeStore(c, {Expr(k)}, MakeFloat(0.0)));
  EXPECT_FALSE(StructuralEqual(serial, bound));
  EXPECT_NE(StructuralHash(serial), StructuralHash(bound));
  Stmt seq1 = MakeSeq({serial, MakeBarrier()});
  Stmt seq2 = MakeSeq({serial, MakeBarrier()});
  EXPECT_TRUE(StructuralEqual(seq1, seq2));
  EXPECT_FALSE(StructuralEqual(seq1, serial));
  EXPECT_TRUE(StructuralEqual(MakeIf(Expr(k) < 3, serial), MakeIf(Expr(k) < 3, serial)));
  EXPECT_FALSE(StructuralEqual(MakeIf(Expr(k) < 3, serial), MakeIf(Expr(k) < 3, serial, bound)));
}

TEST(IrSubstitute, ReplacesVarsAndFolds) {
  VarPtr i = MakeVar("i"), j = MakeVar("j"), t = MakeVar("t");
  Expr e = Expr(i) * 4 + Expr(j);
  std::unordered_map<const VarNode*, Expr> map = {{i.get(), MakeInt(2)}, {j.get(), Expr(t) + 1}};
  EXPECT_EQ(ToString(Substitute(e, map)), "8 + (t + 1)");
  EXPECT_EQ(ToString(Simplify(Substitute(e, map))), "t + 9");
  EXPECT_TRUE(UsesVar(e, i.get()));
  EXPECT_FALSE(UsesVar(e, t.get()));
  std::vector<const VarNode*> vars;
  CollectVars(Expr(j) * Expr(i) + Expr(j) + Expr(t), &vars);
  ASSERT_EQ(vars.size(), 3u);
  EXPECT_EQ(vars[0], j.get());
  EXPECT_EQ(vars[1], i.get());
  EXPECT_EQ(vars[2], t.get());

  BufferPtr a = MakeBuffer("A", DType::kFloat32, {64});
  Stmt loop = MakeFor(i, MakeInt(0), MakeInt(8), ForKind::kSerial, ThreadTag::kNone,
                      MakeStore(a, {Expr(i) * 8 + Expr(j)}, MakeFloat(1.0)));
  Stmt s = Substitute(loop, {{j.get(), MakeInt(3)}});
  EXPECT_EQ(ToString(s), "for i in [0, 8):\n  A[i * 8 + 3] = 1.0\n");
  EXPECT_TRUE(UsesVar(loop, j.get()));
  EXPECT_FALSE(UsesVar(s, j.get()));
  EXPECT_TRUE(UsesVar(s, i.get()));
  EXPECT_EQ(Substitute(loop, {{t.get(), MakeInt(0)}}), loop);  // untouched tree is shared
}

}  // namespace
}  // namespace tessel::schedules
