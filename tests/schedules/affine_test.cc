#include "schedules/ir/affine.h"

#include <gtest/gtest.h>

#include <random>
#include <unordered_map>

#include "schedules/ir/substitute.h"

namespace tessel::schedules {
namespace {

int64_t Eval(const Expr& e, const std::unordered_map<const VarNode*, Expr>& at) {
  int64_t v = 0;
  const Expr folded = Substitute(e, at);
  EXPECT_TRUE(IsConstInt(folded, &v)) << ToString(folded);
  return v;
}

// A shared copy's offset as the pipelined tensor-core k loop indexes it: a stage slot, a k step,
// a block of rows, lane terms under division and modulo, and a constant.
TEST(Affine, SplitByPeriodKeepsTheSwizzleAndLeavesTheLoopTermsOutside) {
  const VarPtr k = MakeVar("k"), step = MakeVar("step"), y = MakeVar("y"), lane = MakeVar("lane");
  const Expr col = Expr(y) * 64 + Expr(lane) / 16 * 8;
  const Expr o =
      (Expr(k) + 2) % 3 * 16384 +
      (col / 64 * 64 + Expr(step) * 16 + Expr(lane) / 8 % 2 * 8 + Expr(lane) % 8 + 16) * 64 +
      col % 64 + 2563;
  const auto [outer, inner] = SplitByPeriod(o, SwizzlePeriodElements(128, 2));
  ASSERT_NE(outer, nullptr);
  EXPECT_NE(ToString(outer).find("(k + 2) % 3 * 16384"), std::string::npos) << ToString(outer);
  EXPECT_NE(ToString(outer).find("step * 1024"), std::string::npos) << ToString(outer);
  EXPECT_EQ(ToString(inner).find('k'), std::string::npos) << ToString(inner);
  EXPECT_EQ(ToString(inner).find("step"), std::string::npos) << ToString(inner);

  std::mt19937 rng(7);
  for (int i = 0; i < 2000; ++i) {
    const std::unordered_map<const VarNode*, Expr> at = {{k.get(), MakeInt(rng() % 64)},
                                                         {step.get(), MakeInt(rng() % 4)},
                                                         {y.get(), MakeInt(rng() % 4)},
                                                         {lane.get(), MakeInt(rng() % 32)}};
    for (const auto& [w, bytes] : {std::pair{128, 2}, {64, 2}, {32, 2}, {128, 1}, {128, 4}}) {
      const auto [out, in] = SplitByPeriod(o, SwizzlePeriodElements(w, bytes));
      ASSERT_NE(in, nullptr);
      const int64_t whole = SwizzledOffset(Eval(o, at), w, bytes);
      const int64_t split = (out ? Eval(out, at) : 0) + SwizzledOffset(Eval(in, at), w, bytes);
      ASSERT_EQ(whole, split) << "swizzle " << w << " B, " << bytes << "-byte elements";
    }
  }
}

TEST(Affine, SplitByPeriodOfAnOffsetWithoutMultiplesIsAllInner) {
  const VarPtr lane = MakeVar("lane");
  const auto [outer, inner] = SplitByPeriod(Expr(lane) * 8 + 3, 512);
  EXPECT_EQ(outer, nullptr);
  EXPECT_EQ(ToString(inner), "lane * 8 + 3");
  const auto [outer2, inner2] = SplitByPeriod(MakeInt(1536), 512);
  EXPECT_EQ(ToString(outer2), "1536");
  EXPECT_EQ(ToString(inner2), "0");
  // A negative constant leaves its non-negative remainder inside: -3 = -512 + 509.
  const auto [outer3, inner3] = SplitByPeriod(Expr(lane) * 512 - 3, 512);
  EXPECT_EQ(ToString(outer3), "lane * 512 - 512");
  EXPECT_EQ(ToString(inner3), "509");
}

}  // namespace
}  // namespace tessel::schedules
