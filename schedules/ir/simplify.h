#pragma once

// Index-arithmetic simplifier, the workhorse of lowering and code generation.
//
// Integer expressions (i32, i64; Div and Mod are floor division and floor modulo) are brought to
// a canonical linear form: a sum of coefficient x term plus a constant, with like terms
// collected across any nesting of +, -, negation and multiplication (products of sums are
// distributed while small), printed back in a deterministic order: terms with positive
// coefficients first, then by decreasing magnitude of the coefficient, then by a structural
// order of the terms (kind, operator, variable name, ...), the constant last:
//   (bx * 64 + ty * 4 + 3) - (bx * 64 + ty * 4) + 1   ->  4
//   3 + (i_i * 4 + i_o * 32)                          ->  i_o * 32 + i_i * 4 + 3
// Division and modulo by a positive constant c split off the terms whose coefficient is a
// multiple of c and normalize the constant into [0, c) (exact under floor semantics):
//   (x * c + y) / c  ->  x + y / c        (x * c + y) % c  ->  y % c
//   (x + 9) / 8      ->  (x + 1) / 8 + 1      (x * 9 + y) % 8  ->  (x + y) % 8
// and then use the variable ranges of the Analyzer: y / c -> 0 and y % c -> y when 0 <= y < c is
// provable (more generally, any quotient that the bounds pin to one value folds), common factors
// cancel ((i * 2) / 4 -> i / 2), low bits that cannot carry are dropped
// ((o * 8 + i) / 16 -> o / 2 and (o * 8 + i) % 16 -> o % 2 * 8 + i for i in [0, 8)), nested
// quotients merge ((x / a) / b -> x / (a * b)), nested moduli shrink ((x % 8) % 4 -> x % 4),
// and x / c * c + x % c recombines to x (also nested: f / 32 * 32 + f % 32 / 4 * 4 + f % 4 -> f;
// and x - x / c * c -> x % c). min/max fold when the bounds of their difference decide them
// (min(x, x) -> x). Comparisons of integers fold when the bounds of the difference decide them,
// and are otherwise normalized to <, >=, == or !=, common factors divided out, terms with
// positive coefficients on the left, the rest and the constant on the right
// (i * 4 + 4 <= j * 4 + 67  ->  i < j + 16;  0 <= i  ->  i >= 0). && and || chains are
// flattened, constants and duplicates dropped, and each operand is simplified under the
// `var op constant` operands of the chain (their negations for ||):
// x < 8 && y * 8 + x < 64 && x < 8  ->  x < 8  for y in [0, 8). ! inverts integer comparisons;
// select folds a decided condition or equal branches.
//
// Float expressions keep their structure (no reassociation); only immediates fold
// (f32 in single precision, f64 in double; f16/bf16 are not folded). Loads, calls and casts get
// their operands simplified.
//
// Known limits: bounds come from interval arithmetic term by term, so correlated terms lose
// precision (z % 16 <= z + 7 is not proved; x * x is not known to be >= 0); no facts other than
// the bound ranges (and, in Stmt simplification, loop ranges, let values and if conditions of
// the form `var op constant`) are used; division and modulo by negative or non-constant divisors
// are left alone; i32 wrap-around is not modeled (index arithmetic is assumed not to overflow);
// coefficient overflow in int64 makes Simplify return its input unchanged.
//
// Threads: an Analyzer is not synchronized; Bind must not race with other calls. The const
// methods and the free functions may be called concurrently.

#include <cstdint>
#include <unordered_map>
#include <utility>

#include "schedules/ir/expr.h"
#include "schedules/ir/stmt.h"

namespace tessel::schedules {

class Analyzer {
 public:
  // Declares that var v ranges over [min, min + extent) (constants). Binding a var again replaces
  // its range; an extent <= 0 (an empty loop) leaves v unbound. Unbound vars are unknown.
  void Bind(const VarNode* v, int64_t min, int64_t extent);
  void Bind(const VarPtr& v, int64_t min, int64_t extent) { Bind(v.get(), min, extent); }

  // Returns a simplified expression with the same value for every value of the bound vars (and
  // any value of the unbound ones). Returns `e` itself (same pointer) when nothing changed.
  Expr Simplify(const Expr& e) const;

  // Simplifies every expression of the tree. A For binds its var over [min, min + extent) while
  // its body is simplified (over the bounds of min and extent when those are not constant); a
  // LetStmt binds its var to the bounds of its value; an IfThenElse whose condition becomes
  // provable is replaced by the branch taken, and conditions `var op constant` narrow the var
  // inside the branches. Statements left empty (a loop whose body folded away) are removed
  // (the result may be null).
  Stmt Simplify(const Stmt& s) const;

  // Numeric bounds [lo, hi] (inclusive) of an integer or bool expression over the bound var
  // ranges (interval arithmetic over the simplified form: linear terms, div/mod by constants,
  // min/max, select); false if unknown (an unbound var, a load, or a term it cannot bound).
  // Some terms are bounded whatever their operands: x % 8 lies in [0, 7] even for an unbound x.
  bool ConstBounds(const Expr& e, int64_t* lo, int64_t* hi) const;

  // True only when `cond` is provably true for all values of the bound vars.
  bool CanProve(const Expr& cond) const;

 private:
  // Inclusive [lo, hi] of each bound var.
  std::unordered_map<const VarNode*, std::pair<int64_t, int64_t>> ranges_;
};

// Simplification with no ranges.
Expr Simplify(const Expr& e);
Stmt Simplify(const Stmt& s);

}  // namespace tessel::schedules
