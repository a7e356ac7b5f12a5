#include "schedules/ir/simplify.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

#include "schedules/ir/buffer.h"
#include "schedules/ir/expr.h"
#include "schedules/ir/stmt.h"
#include "schedules/ir/structural.h"
#include "schedules/ir/substitute.h"

namespace tessel::schedules {
namespace {

std::string S(const Analyzer& a, const Expr& e) { return ToString(a.Simplify(e)); }
std::string S(const Expr& e) { return ToString(Simplify(e)); }

TEST(IrSimplify, CancelsToConstants) {
  VarPtr bx = MakeVar("bx"), ty = MakeVar("ty");
  Expr hi = Expr(bx) * 64 + Expr(ty) * 4 + 3;
  Expr lo = Expr(bx) * 64 + Expr(ty) * 4;
  EXPECT_EQ(S(hi - lo + 1), "4");
  EXPECT_EQ(S((Expr(bx) + 1) * 8 - Expr(bx) * 8), "8");
  EXPECT_EQ(S(Expr(bx) - Expr(bx)), "0");
  EXPECT_EQ(S(MakeUnary(UnaryOp::kNeg, Expr(ty)) + Expr(ty) * 2 - Expr(ty)), "0");
  // Nested sums and constant multiples.
  EXPECT_EQ(S((Expr(bx) * 2 + 1) * 3 - (Expr(bx) + 1) * 6), "-3");
}

TEST(IrSimplify, CanonicalLinearForm) {
  VarPtr i_o = MakeVar("i_o"), i_i = MakeVar("i_i");
  Expr e = MakeInt(3) + (Expr(i_i) * 4 + Expr(i_o) * 32);
  EXPECT_EQ(S(e), "i_o * 32 + i_i * 4 + 3");
  EXPECT_EQ(S(Expr(i_o) * 2 + Expr(i_i) + Expr(i_o) * 6 - 5), "i_o * 8 + i_i - 5");
  EXPECT_EQ(S(MakeInt(3) - Expr(i_o)), "3 - i_o");
  EXPECT_EQ(S(MakeInt(0) - Expr(i_o) * 4 - 2), "i_o * -4 - 2");
  EXPECT_EQ(S(Expr(i_i) - Expr(i_o) * 4), "i_i - i_o * 4");
  // Already canonical: the same node comes back.
  Expr canonical = Simplify(e);
  EXPECT_EQ(Simplify(canonical), canonical);
}

TEST(IrSimplify, TermOrderIsDeterministic) {
  VarPtr a = MakeVar("a"), b = MakeVar("b"), c = MakeVar("c");
  Expr ab = Expr(a) + Expr(b) * 2 + Expr(c);
  Expr ba = Expr(c) + Expr(b) * 2 + Expr(a);
  EXPECT_EQ(S(ab), S(ab));
  EXPECT_EQ(S(ab), S(ba));
  EXPECT_EQ(S(ab), "b * 2 + a + c");
  EXPECT_EQ(S(Expr(a) + Expr(b)), S(Expr(b) + Expr(a)));
  EXPECT_EQ(S(Expr(a) * Expr(b)), S(Expr(b) * Expr(a)));
  // Products of sums are distributed; terms are ordered by coefficient magnitude, then
  // structurally.
  EXPECT_EQ(S((Expr(a) + 1) * (Expr(b) + 2)), "a * 2 + b + a * b + 2");
  EXPECT_EQ(S((Expr(a) + 1) * (Expr(b) + 2)), S((MakeInt(2) + Expr(b)) * (Expr(a) + 1)));
  EXPECT_TRUE(StructuralEqual(Simplify(ab), Simplify(ba)));
}

TEST(IrSimplify, SplitPatterns) {
  VarPtr o = MakeVar("o"), i = MakeVar("i");
  Analyzer an;
  an.Bind(i, 0, 8);
  Expr f = Expr(o) * 8 + Expr(i);
  EXPECT_EQ(S(an, f / 8), "o");
  EXPECT_EQ(S(an, f % 8), "i");
  // Without a range on i, floor semantics still split off the exact part.
  EXPECT_EQ(S(f / 8), "o + i / 8");
  EXPECT_EQ(S(f % 8), "i % 8");
  // Split of a fused loop by a different factor.
  EXPECT_EQ(S(an, f / 16), "o / 2");
  EXPECT_EQ(S(an, f % 16), "o % 2 * 8 + i");
  EXPECT_EQ(S(an, (Expr(o) * 32 + Expr(i)) / 16), "o * 2");
  EXPECT_EQ(S(an, (Expr(o) * 32 + Expr(i)) % 16), "i");
  // Constants are normalized into [0, c).
  EXPECT_EQ(S(an, (f + 3) / 8), "o + (i + 3) / 8");  // i + 3 may reach 8
  EXPECT_EQ(S(an, (f + 9) / 8), "o + (i + 1) / 8 + 1");
  EXPECT_EQ(S(an, (f + 8) / 8), "o + 1");
  EXPECT_EQ(S(an, (f + 8) % 8), "i");
}

// A row-major linearization of axes fused by fuse_axes, read back through a loop fused over the
// same axes: n * 36 + p * 6 + q with n = x / 36, p = x / 6 % 6, q = x % 6 is x, whatever the
// extents (the remainder's side of the recombination: x / 6 % 6 * 6 + x / 36 * 36 first).
TEST(IrSimplify, RowMajorLinearizationOfFusedAxes) {
  VarPtr x = MakeVar("x");
  Expr n = Expr(x) / 36, p = Expr(x) / 6 % 6, q = Expr(x) % 6;
  EXPECT_EQ(S(n * 36 + p * 6 + q), "x");
  EXPECT_EQ(S((n * 6 + p) * 6 + q), "x");
  EXPECT_EQ(S(p * 6 + n * 36), "x / 6 * 6");
  // Over a fused-and-split loop x = b * 16 + t, as the tensor-core rule's output reads it.
  VarPtr b = MakeVar("b"), t = MakeVar("t");
  Expr y = Expr(b) * 16 + Expr(t);
  Expr lin = (y / 784) * 784 + (y / 28 % 28) * 28 + y % 28;
  Analyzer an;
  an.Bind(b, 0, 3136);
  an.Bind(t, 0, 16);
  EXPECT_EQ(S(an, lin), "b * 16 + t");
  // Coefficients that do not match are left alone.
  EXPECT_EQ(S(n * 35 + p * 6 + q), "x / 36 * 35 + x / 6 % 6 * 6 + x % 6");
}

TEST(IrSimplify, FusePatterns) {
  VarPtr f = MakeVar("f");
  Analyzer an;
  an.Bind(f, 0, 64);
  Expr outer = Expr(f) / 16, inner = Expr(f) % 16;
  EXPECT_EQ(S(an, outer), "f / 16");
  EXPECT_EQ(S(an, inner), "f % 16");
  EXPECT_EQ(S(an, outer * 16 + inner), "f");
  EXPECT_EQ(S(outer * 16 + inner), "f");  // exact without ranges too
  EXPECT_EQ(S(Expr(f) - outer * 16), "f % 16");
  EXPECT_EQ(S(inner * 3 + outer * 48 + 5), "f * 3 + 5");
  // A fused loop split twice: f / 32 * 32 + f % 32 / 4 * 4 + f % 4 is f.
  EXPECT_EQ(S(an, Expr(f) / 32 * 32 + Expr(f) % 32 / 4 * 4 + Expr(f) % 4), "f");
  EXPECT_EQ(S((Expr(f) / 32 * 32 + Expr(f) % 32) / 64), "f / 64");
  EXPECT_EQ(S(an, (Expr(f) / 32 * 32 + Expr(f) % 32) / 64), "0");  // f < 64
  EXPECT_EQ(S(an, (outer * 16 + inner) * 2 + 1), "f * 2 + 1");
  // Fused f = o * 16 + i split again.
  VarPtr o = MakeVar("o"), i = MakeVar("i");
  an.Bind(o, 0, 4);
  an.Bind(i, 0, 16);
  Expr fused = Expr(o) * 16 + Expr(i);
  EXPECT_EQ(S(an, fused / 16), "o");
  EXPECT_EQ(S(an, fused % 16), "i");
  EXPECT_EQ(S(an, (Expr(i) % 16) / 16), "0");
  EXPECT_EQ(S((Expr(f) % 16) / 16), "0");  // no range needed
}

TEST(IrSimplify, DivModWithRanges) {
  VarPtr y = MakeVar("y"), x = MakeVar("x");
  Analyzer an;
  an.Bind(y, 0, 8);
  EXPECT_EQ(S(an, Expr(y) / 8), "0");
  EXPECT_EQ(S(an, Expr(y) % 8), "y");
  EXPECT_EQ(S(an, Expr(y) / 16), "0");
  EXPECT_EQ(S(an, Expr(y) % 4), "y % 4");
  EXPECT_EQ(S(an, (Expr(y) + 8) / 8), "1");
  EXPECT_EQ(S(an, (Expr(y) + 8) % 8), "y");
  EXPECT_EQ(S(an, (Expr(x) * 2) / 4), "x / 2");
  EXPECT_EQ(S(an, (Expr(x) * 6) % 4), "x % 2 * 2");
  EXPECT_EQ(S(an, (Expr(x) * 9 + Expr(y)) % 8), "(x + y) % 8");
  EXPECT_EQ(S(an, (Expr(x) * 9 + Expr(y)) / 8), "x + (x + y) / 8");
  EXPECT_EQ(S(an, (Expr(x) * 3) / 2 * 2 + (Expr(x) * 3) % 2), "x * 3");
  EXPECT_EQ(S(an, (Expr(x) * 8 + Expr(y)) / 8), "x");
  EXPECT_EQ(S(an, MakeInt(7) / MakeInt(2)), "3");
  EXPECT_EQ(S(an, MakeInt(-7) / MakeInt(2)), "-4");
  EXPECT_EQ(S(an, MakeInt(-7) % MakeInt(2)), "1");
}

TEST(IrSimplify, NestedDivAndMod) {
  VarPtr x = MakeVar("x");
  EXPECT_EQ(S(Expr(x) / 4 / 8), "x / 32");
  EXPECT_EQ(S((Expr(x) / 4 + 1) / 2), "(x + 4) / 8");
  EXPECT_EQ(S(Expr(x) % 16 % 4), "x % 4");
  EXPECT_EQ(S(Expr(x) % 4 % 16), "x % 4");
  EXPECT_EQ(S(Expr(x) % 16 / 16), "0");
  EXPECT_EQ(S(Expr(x) / MakeInt(1)), "x");
}

TEST(IrSimplify, MinMax) {
  VarPtr x = MakeVar("x"), y = MakeVar("y"), i = MakeVar("i");
  Analyzer an;
  an.Bind(i, 0, 16);
  EXPECT_EQ(S(MakeMin(Expr(x), Expr(x))), "x");
  EXPECT_EQ(S(MakeMax(Expr(x), Expr(x) + 1)), "x + 1");
  EXPECT_EQ(S(MakeMin(Expr(x) + 3, Expr(x) - 2)), "x - 2");
  EXPECT_EQ(S(an, MakeMin(Expr(i), MakeInt(16))), "i");
  EXPECT_EQ(S(an, MakeMax(Expr(i), MakeInt(0))), "i");
  EXPECT_EQ(S(an, MakeMin(Expr(i) * 4 + 3, MakeInt(100))), "i * 4 + 3");
  EXPECT_EQ(S(an, MakeMin(Expr(i), MakeInt(10))), "min(i, 10)");
  EXPECT_EQ(S(MakeMin(Expr(y), Expr(x))), S(MakeMin(Expr(x), Expr(y))));
  EXPECT_EQ(S(MakeMin(MakeInt(3), MakeInt(5))), "3");
  // min/max inside linear arithmetic.
  EXPECT_EQ(S(an, MakeMin(Expr(i), MakeInt(20)) + 1 - Expr(i)), "1");
}

TEST(IrSimplify, ComparisonsFoldedByRanges) {
  VarPtr i = MakeVar("i"), j = MakeVar("j"), n = MakeVar("n");
  Analyzer an;
  an.Bind(i, 0, 16);
  an.Bind(j, 0, 4);
  EXPECT_EQ(S(an, Expr(i) < 16), "true");
  EXPECT_EQ(S(an, Expr(i) < 15), "i < 15");
  EXPECT_EQ(S(an, Expr(i) >= 0), "true");
  EXPECT_EQ(S(an, Expr(i) * 4 + Expr(j) < 64), "true");
  EXPECT_EQ(S(an, Expr(i) * 4 + Expr(j) < 0), "false");
  EXPECT_EQ(S(an, Expr(i) * 4 + Expr(j) == 64), "false");
  EXPECT_TRUE(an.CanProve(Expr(i) * 4 + Expr(j) < 64));
  EXPECT_FALSE(an.CanProve(Expr(i) * 4 + Expr(j) < 63));
  EXPECT_FALSE(an.CanProve(Expr(n) < 5));
  // Normalized forms.
  EXPECT_EQ(S(Expr(n) + 1 < Expr(i) + 3), "n < i + 2");
  EXPECT_EQ(S(Expr(i) * 4 + 4 < Expr(n) * 4 + 68), "i < n + 16");
  EXPECT_EQ(S(MakeBinary(BinaryOp::kLe, Expr(i) * 4 + 4, Expr(n) * 4 + 67)), "i < n + 16");
  EXPECT_EQ(S(MakeBinary(BinaryOp::kGt, Expr(n), Expr(i))), S(Expr(i) < Expr(n)));
  EXPECT_EQ(S(MakeBinary(BinaryOp::kLe, MakeInt(0), Expr(n))), "n >= 0");
  EXPECT_EQ(S(Expr(n) * 2 == 3), "false");
  EXPECT_EQ(S(Expr(n) * 2 == 4), "n == 2");
  // Logic.
  Expr in_range = MakeAnd(Expr(i) >= 0, Expr(i) < 16);
  EXPECT_EQ(S(an, in_range), "true");
  EXPECT_EQ(S(an, MakeAnd(Expr(n) < 4, Expr(i) < 16)), "n < 4");
  EXPECT_EQ(S(an, MakeBinary(BinaryOp::kOr, Expr(n) < 4, Expr(i) < 16)), "true");
  EXPECT_EQ(S(an, MakeUnary(UnaryOp::kNot, Expr(n) < 4)), "n >= 4");
  EXPECT_EQ(S(MakeAnd(Expr(n) < 4, Expr(n) < 4)), "n < 4");
  // Operands of && and || are simplified under the var-vs-constant facts of the others.
  EXPECT_EQ(S(MakeAnd(Expr(n) < 3, Expr(n) < 5)), "n < 3");
  EXPECT_EQ(S(MakeAnd(Expr(n) < 5, Expr(n) < 3)), "n < 3");
  EXPECT_EQ(S(MakeAnd(Expr(n) < 3, Expr(n) >= 3)), "false");
  EXPECT_EQ(S(MakeBinary(BinaryOp::kOr, Expr(n) < 5, Expr(n) < 3)), "n < 5");
  EXPECT_EQ(S(MakeBinary(BinaryOp::kOr, Expr(n) < 3, Expr(n) >= 3)), "true");
  EXPECT_EQ(S(MakeAnd(Expr(n) < 8, MakeBinary(BinaryOp::kLe, Expr(n), MakeInt(7)))), "n < 8");
  // Integer comparisons come out as <, >=, == or !=.
  EXPECT_EQ(S(MakeBinary(BinaryOp::kLe, Expr(n), MakeInt(7))), "n < 8");
  EXPECT_EQ(S(MakeBinary(BinaryOp::kGt, Expr(n), MakeInt(7))), "n >= 8");
  EXPECT_EQ(S(MakeBinary(BinaryOp::kLe, Expr(n) * 2, Expr(i) + 1)), "n * 2 < i + 2");
  // A guard as lowering builds it: the middle test is implied by the first (j in [0, 4)).
  Expr guard = MakeAnd(MakeAnd(Expr(n) < 8, Expr(j) * 8 + Expr(n) < 64), Expr(n) < 8);
  Analyzer an2;
  an2.Bind(n, 0, 16);
  an2.Bind(j, 0, 8);
  EXPECT_EQ(S(an2, guard), "n < 8");
}

TEST(IrSimplify, SelectAndFloats) {
  VarPtr i = MakeVar("i");
  Analyzer an;
  an.Bind(i, 0, 8);
  EXPECT_EQ(S(an, MakeSelect(Expr(i) < 8, Expr(i) * 2, MakeInt(0))), "i * 2");
  EXPECT_EQ(S(MakeSelect(Expr(i) < 3, Expr(i) + 1, MakeInt(1) + Expr(i))), "i + 1");
  VarPtr x = MakeVar("x", DType::kFloat32);
  // Float structure is kept: no reassociation, only immediates fold.
  Expr fe = (Expr(x) + MakeFloat(1.0)) + MakeFloat(2.0);
  EXPECT_EQ(S(fe), "x + 1.0 + 2.0");
  EXPECT_EQ(S(Expr(x) * (MakeFloat(1.5) + MakeFloat(2.5))), "x * 4.0");
  EXPECT_EQ(S(Expr(x) - Expr(x)), "x - x");
  // Loads and casts get their operands simplified.
  BufferPtr a = MakeBuffer("A", DType::kFloat32, {64});
  Expr load = MakeLoad(a, {(Expr(i) * 8 + 3) / 8 + Expr(i) - Expr(i)});
  EXPECT_EQ(S(an, load), "A[i]");
  EXPECT_EQ(S(an, MakeCast(DType::kFloat32, Expr(i) * 2 - Expr(i))), "f32(i)");
}

TEST(IrSimplify, ConstBounds) {
  VarPtr i = MakeVar("i"), j = MakeVar("j"), n = MakeVar("n");
  Analyzer an;
  an.Bind(i, 0, 16);
  an.Bind(j, 2, 4);  // [2, 6)
  int64_t lo = 0, hi = 0;
  ASSERT_TRUE(an.ConstBounds(Expr(i) * 4 + Expr(j) + 1, &lo, &hi));
  EXPECT_EQ(lo, 3);
  EXPECT_EQ(hi, 66);
  ASSERT_TRUE(an.ConstBounds(MakeInt(10) - Expr(i) * 2, &lo, &hi));
  EXPECT_EQ(lo, -20);
  EXPECT_EQ(hi, 10);
  ASSERT_TRUE(an.ConstBounds(Expr(i) / 4, &lo, &hi));
  EXPECT_EQ(lo, 0);
  EXPECT_EQ(hi, 3);
  ASSERT_TRUE(an.ConstBounds((Expr(i) * 4 + Expr(j)) % 8, &lo, &hi));
  EXPECT_EQ(lo, 0);
  EXPECT_EQ(hi, 7);
  ASSERT_TRUE(an.ConstBounds(Expr(n) % 8, &lo, &hi));  // any n
  EXPECT_EQ(lo, 0);
  EXPECT_EQ(hi, 7);
  ASSERT_TRUE(an.ConstBounds(MakeMin(Expr(i), MakeInt(10)), &lo, &hi));
  EXPECT_EQ(lo, 0);
  EXPECT_EQ(hi, 10);
  // Cancellation happens before bounding: n - n + i is bounded.
  ASSERT_TRUE(an.ConstBounds(Expr(n) - Expr(n) + Expr(i), &lo, &hi));
  EXPECT_EQ(hi, 15);
  EXPECT_FALSE(an.ConstBounds(Expr(n) + Expr(i), &lo, &hi));
  EXPECT_FALSE(an.ConstBounds(Expr(n) / 4, &lo, &hi));
  EXPECT_FALSE(an.ConstBounds(MakeVar("x", DType::kFloat32), &lo, &hi));
  // Region extent as lowering computes it: max - min + 1.
  VarPtr bx = MakeVar("bx");
  Expr min_idx = Expr(bx) * 64 + Expr(i) * 4;
  Expr max_idx = Expr(bx) * 64 + Expr(i) * 4 + 3;
  EXPECT_EQ(S(an, max_idx - min_idx + 1), "4");
}

TEST(IrSimplify, StmtFoldsIfAndBindsLoops) {
  VarPtr i = MakeVar("i"), j = MakeVar("j"), n = MakeVar("n");
  BufferPtr a = MakeBuffer("A", DType::kFloat32, {64});
  Expr idx = (Expr(i) * 8 + Expr(j)) / 8 * 8 + (Expr(i) * 8 + Expr(j)) % 8;
  Stmt store = MakeStore(a, {idx}, MakeFloat(1.0));
  Stmt guarded = MakeIf(Expr(i) * 8 + Expr(j) < 64, store);
  Stmt loops =
      MakeFor(i, MakeInt(0), MakeInt(8), ForKind::kSerial, ThreadTag::kNone,
              MakeFor(j, MakeInt(0), MakeInt(8), ForKind::kSerial, ThreadTag::kNone, guarded));
  Stmt s = Simplify(loops);
  EXPECT_EQ(ToString(s),
            "for i in [0, 8):\n"
            "  for j in [0, 8):\n"
            "    A[i * 8 + j] = 1.0\n");
  // The condition cannot be proved when the loop is longer; the if stays.
  Stmt longer =
      MakeFor(i, MakeInt(0), MakeInt(9), ForKind::kSerial, ThreadTag::kNone,
              MakeFor(j, MakeInt(0), MakeInt(8), ForKind::kSerial, ThreadTag::kNone, guarded));
  EXPECT_EQ(ToString(Simplify(longer)),
            "for i in [0, 9):\n"
            "  for j in [0, 8):\n"
            "    if i * 8 + j < 64:\n"
            "      A[i * 8 + j] = 1.0\n");
  // An if folded to false with no else removes the loop around it.
  Stmt dead = MakeFor(i, MakeInt(0), MakeInt(8), ForKind::kSerial, ThreadTag::kNone,
                      MakeIf(Expr(i) >= 8, store));
  EXPECT_EQ(Simplify(dead), nullptr);
  // Conditions on a var narrow its range inside the branch.
  Stmt narrowed = MakeIf(
      Expr(n) < 4, MakeStore(a, {Expr(n) % 4 + MakeMin(Expr(n), MakeInt(8))}, MakeFloat(0.0)));
  Analyzer an;
  an.Bind(n, 0, 100);
  EXPECT_EQ(ToString(an.Simplify(narrowed)),
            "if n < 4:\n"
            "  A[n * 2] = 0.0\n");
  // Let binds its var to the bounds of its value.
  VarPtr t = MakeVar("t");
  Stmt let = MakeFor(i, MakeInt(0), MakeInt(8), ForKind::kSerial, ThreadTag::kNone,
                     MakeLet(t, Expr(i) * 2, MakeStore(a, {Expr(t) % 16}, MakeFloat(2.0))));
  EXPECT_EQ(ToString(Simplify(let)),
            "for i in [0, 8):\n"
            "  let t = i * 2\n"
            "  A[t] = 2.0\n");
}

// ---- Randomized equivalence: random integer expressions must keep their value under
// simplification at every point of the bound ranges, and their bounds must contain it.

int64_t FloorDivRef(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

int64_t Eval(const Expr& e, const std::unordered_map<const VarNode*, int64_t>& env) {
  if (const auto* i = As<IntImmNode>(e)) return i->value;
  if (const auto* v = As<VarNode>(e)) return env.at(v);
  if (const auto* u = As<UnaryNode>(e)) {
    return u->op == UnaryOp::kNeg ? -Eval(u->a, env) : !Eval(u->a, env);
  }
  if (const auto* s = As<SelectNode>(e)) {
    return Eval(s->cond, env) ? Eval(s->true_value, env) : Eval(s->false_value, env);
  }
  const auto* b = As<BinaryNode>(e);
  if (b == nullptr) ADD_FAILURE() << "cannot evaluate " << ToString(e);
  if (b == nullptr) return 0;
  const int64_t x = Eval(b->a, env), y = Eval(b->b, env);
  switch (b->op) {
    case BinaryOp::kAdd:
      return x + y;
    case BinaryOp::kSub:
      return x - y;
    case BinaryOp::kMul:
      return x * y;
    case BinaryOp::kDiv:
      return FloorDivRef(x, y);
    case BinaryOp::kMod:
      return x - FloorDivRef(x, y) * y;
    case BinaryOp::kMin:
      return std::min(x, y);
    case BinaryOp::kMax:
      return std::max(x, y);
    case BinaryOp::kLt:
      return x < y;
    case BinaryOp::kLe:
      return x <= y;
    case BinaryOp::kGt:
      return x > y;
    case BinaryOp::kGe:
      return x >= y;
    case BinaryOp::kEq:
      return x == y;
    case BinaryOp::kNe:
      return x != y;
    case BinaryOp::kAnd:
      return x && y;
    case BinaryOp::kOr:
      return x || y;
  }
  return 0;
}

class RandomExprs {
 public:
  RandomExprs(uint64_t seed, std::vector<VarPtr> vars) : rng_(seed), vars_(std::move(vars)) {}

  int64_t Uniform(int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng_);
  }

  Expr Int(int depth) {
    const int64_t pick = depth <= 0 ? Uniform(0, 1) : Uniform(0, 13);
    switch (pick) {
      case 0:
        return MakeInt(Uniform(-20, 20));
      case 1:
        return vars_[Uniform(0, vars_.size() - 1)];
      case 2:
      case 3:
        return Int(depth - 1) + Int(depth - 1);
      case 4:
        return Int(depth - 1) - Int(depth - 1);
      case 5:
        return Int(depth - 1) * Uniform(-8, 8);
      case 6:
        return Int(depth - 1) * Int(depth - 2);
      case 7:
        return Int(depth - 1) / Uniform(1, 17);
      case 8:
        return Int(depth - 1) % Uniform(1, 17);
      case 9:
        return MakeMin(Int(depth - 1), Int(depth - 1));
      case 10:
        return MakeMax(Int(depth - 1), Int(depth - 1));
      case 11:
        return MakeSelect(Bool(depth - 1), Int(depth - 1), Int(depth - 1));
      case 12: {
        Expr t = Int(depth - 1);
        const int64_t c = Uniform(1, 9);
        return t / c * c + t % c;
      }
      default: {
        Expr t = Int(depth - 1);
        const int64_t c = Uniform(1, 9);
        return t * 2 - t / c * (c * 2) + Int(depth - 2);
      }
    }
  }

  Expr Bool(int depth) {
    static constexpr BinaryOp kCmp[] = {BinaryOp::kLt, BinaryOp::kLe, BinaryOp::kGt,
                                        BinaryOp::kGe, BinaryOp::kEq, BinaryOp::kNe};
    switch (depth <= 0 ? 0 : Uniform(0, 3)) {
      case 1:
        return MakeBinary(BinaryOp::kAnd, Bool(depth - 1), Bool(depth - 1));
      case 2:
        return MakeBinary(BinaryOp::kOr, Bool(depth - 1), Bool(depth - 1));
      case 3:
        return MakeUnary(UnaryOp::kNot, Bool(depth - 1));
      default:
        return MakeBinary(kCmp[Uniform(0, 5)], Int(depth - 1), Int(depth - 1));
    }
  }

 private:
  std::mt19937_64 rng_;
  std::vector<VarPtr> vars_;
};

TEST(IrSimplify, RandomizedEquivalence) {
  std::vector<VarPtr> vars = {MakeVar("x"), MakeVar("y"), MakeVar("z")};
  Analyzer an;
  an.Bind(vars[0], 0, 8);
  an.Bind(vars[1], -5, 12);
  an.Bind(vars[2], 3, 30);
  const int64_t lo_of[] = {0, -5, 3}, hi_of[] = {7, 6, 32};
  RandomExprs gen(20240601, vars);
  for (int round = 0; round < 3000; ++round) {
    const bool is_bool = round % 4 == 3;
    Expr e = is_bool ? gen.Bool(4) : gen.Int(4);
    Expr s = an.Simplify(e);
    Expr again = an.Simplify(s);
    ASSERT_TRUE(StructuralEqual(again, s))
        << ToString(e) << "\n  -> " << ToString(s) << "\n  -> " << ToString(again);
    int64_t lo = 0, hi = 0;
    const bool bounded = an.ConstBounds(e, &lo, &hi);
    for (int point = 0; point < 20; ++point) {
      std::unordered_map<const VarNode*, int64_t> env;
      for (int v = 0; v < 3; ++v) env[vars[v].get()] = gen.Uniform(lo_of[v], hi_of[v]);
      const int64_t want = Eval(e, env), got = Eval(s, env);
      ASSERT_EQ(want, got) << ToString(e) << "\n  -> " << ToString(s)
                           << "\n  at x=" << env[vars[0].get()] << " y=" << env[vars[1].get()]
                           << " z=" << env[vars[2].get()];
      if (bounded) {
        ASSERT_LE(lo, want) << ToString(e);
        ASSERT_GE(hi, want) << ToString(e);
      }
    }
  }
}

}  // namespace
}  // namespace tessel::schedules
