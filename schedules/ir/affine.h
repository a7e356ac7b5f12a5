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
// Where buffer[indices] is stored, before a swizzle's XOR: FlatIndex for plain buffers; for a
// swizzled one (Buffer::swizzle_bytes) the element offset in its atom layout, outer * R * C +
// (c / A * R + r) * A + c % A. The XOR (SwizzledOffset) changes only bits inside a 16-byte chunk's
// index, so contiguity within 16 aligned bytes, and any row that is a multiple of 8, are kept.
Expr StorageIndex(const Buffer& buffer, const std::vector<Expr>& indices);
// The swizzle's XOR on an element offset `o` of StorageIndex, for buffers of `element_bytes`:
// o ^ (((o * element_bytes) / 128 % (W / 16)) * 16 / element_bytes).
int64_t SwizzledOffset(int64_t o, int64_t swizzle_bytes, int64_t element_bytes);
// The period of that XOR in elements, 8 * W / element_bytes: it reads and changes only the bits of
// an offset below this power of two, so SwizzledOffset(o + q * period) ==
// SwizzledOffset(o) + q * period for any integer q.
int64_t SwizzlePeriodElements(int64_t swizzle_bytes, int64_t element_bytes);
// Splits an element offset `o` into outer + inner: outer sums the affine terms whose coefficient
// is a multiple of `period` (a power of two) and the constant's multiple of it; inner the rest.
// So swizzle(o) == outer + swizzle(inner), and a code generator that prints it so leaves the XOR
// on inner, often loop-invariant (a pipeline's stage slot, a k step, a row block are outer).
// outer is null when no term is a multiple; inner is never null.
std::pair<Expr, Expr> SplitByPeriod(const Expr& o, int64_t period);
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
