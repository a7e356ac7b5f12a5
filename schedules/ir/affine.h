#pragma once

// Affine forms of integer index expressions: the flat element offset of an access, its split into
// coefficient * variable + rest, and alignment checks on the coefficients. Lowering passes and
// code generators use them to decide how a loop vectorizes and how an index is printed. Pure
// functions over immutable IR; may be called from any thread.

#include <cstdint>
#include <utility>
#include <vector>

#include "schedules/ir/buffer.h"
#include "schedules/ir/expr.h"

namespace tessel::schedules {

// The flat element offset of buffer[indices]: sum(index_i * stride_i), folded.
Expr FlatIndex(const Buffer& buffer, const std::vector<Expr>& indices);
// Merges the integer constants at the ends of addition chains: (x + 2) + 2 -> x + 4.
Expr FoldTrailingConstants(const Expr& e);

// e == constant + sum(coeff_i * term_i), where each term is a variable or a sub-expression that is
// not affine (kept whole).
struct AffineForm {
  std::vector<std::pair<Expr, int64_t>> terms;
  int64_t constant = 0;
};
AffineForm ToAffine(const Expr& e);
// Splits `e` into coeff * v + rest. False when `v` occurs inside a non-affine term.
bool SplitAffine(const Expr& e, const VarNode* v, int64_t* coeff, AffineForm* rest);
// True when every coefficient and the constant are multiples of `w`.
bool AllMultiplesOf(const AffineForm& f, int64_t w);

}  // namespace tessel::schedules
