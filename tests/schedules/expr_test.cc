#include "schedules/ir/expr.h"

#include <gtest/gtest.h>

namespace tessel::schedules {
namespace {

TEST(Expr, FoldsConstantsAndPrints) {
  VarPtr i = MakeVar("i");
  Expr e = (Expr(i) * 4 + MakeInt(2) * MakeInt(3)) / 2;
  EXPECT_EQ(ToString(e), "(i * 4 + 6) / 2");
  EXPECT_EQ(ToString(MakeInt(7) / MakeInt(-2)), "-4");  // floor division
  EXPECT_EQ(ToString(MakeInt(-7) % MakeInt(3)), "2");   // floor modulo
}

}  // namespace
}  // namespace tessel::schedules
