#pragma once

// Combiners: how a reduction folds tuples of values (TVM's CommReducer). A combiner has one
// component per value; it names two tuples of variables, `lhs` and `rhs`, and gives the
// component-wise result of lhs (+) rhs as expressions of them (with shared temporaries, `lets`),
// and the identity tuple. The combination must be associative and commutative up to rounding:
// lowering folds elements in any order, across threads, warps, blocks, clusters and grids.
//
// A plain reduction (sum, max, min) is the one-component combiner of its ReduceOp. Tuple
// reductions compute several reductions of one domain in one pass; two of them remove a
// dependence between reductions (Schedule::FuseReductions):
//   online softmax   (m, s): the maximum and the sum of exp(x - m), rescaled as m grows
//                     (Milakov and Gimelshein);
//   Welford          (n, mean, m2): the count, the mean and the sum of squared deviations from
//                     the mean (Chan et al.'s pairwise combination).
// Each may also give a two-pass form for a batch of tuples held in registers (`steps`): plain
// reductions over the batch, later ones reading earlier results, such as the maximum and then
// the sum of exp(x - max); cheaper than folding element by element where the batch can be read
// twice (Stage annotation "two_pass").

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "schedules/ir/expr.h"

namespace tessel::schedules {

struct Combiner {
  // A step of the two-pass form: with `op`, the reduction over the batch of `term` (an
  // expression of `rhs`, the batch's tuple, and of earlier steps' results); without, a value
  // computed once from earlier steps' results.
  struct Step {
    VarPtr result;
    std::optional<ReduceOp> op;
    Expr term;
  };

  std::string name;  // "sum", "max", "min", "online_softmax", "welford", "tuple(max, sum)"
  std::vector<VarPtr> lhs, rhs;
  std::vector<std::pair<VarPtr, Expr>> lets;  // in order; each may read lhs, rhs, earlier lets
  std::vector<Expr> combine;                  // component i of lhs (+) rhs
  std::vector<Expr> identity;
  std::vector<Step> steps;       // the two-pass form of a batch, or empty
  std::vector<Expr> from_steps;  // the batch's tuple from the steps' results
  std::optional<ReduceOp> op;    // the one-component combiner of a ReduceOp

  size_t size() const { return identity.size(); }
  DType type(size_t i) const { return identity[i]->dtype; }
  bool has_two_pass_form() const { return !steps.empty(); }
};
using CombinerPtr = std::shared_ptr<const Combiner>;

// The one-component combiner of `op` over values of type `t`.
CombinerPtr ReduceCombiner(ReduceOp op, DType t);
// Independent reductions side by side: component i reduced with ops[i].first, of type .second
// (one: the ReduceOp's combiner).
CombinerPtr ComponentwiseCombiner(const std::vector<std::pair<ReduceOp, DType>>& ops);
// (m, s): the running maximum m of x and the sum s of exp(x - m); an element x is (x, 1).
CombinerPtr OnlineSoftmaxCombiner(DType t);
// (n, mean, m2): count, mean and sum of squared deviations from the mean; an element x is
// (1, x, 0).
CombinerPtr WelfordCombiner(DType t);

// An instance of lhs (+) rhs (or of the two-pass form's steps) over given expressions: the
// temporaries to bind in order (fresh variables named after `prefix`), then the values. Float
// multiplications by one and additions of zero that the operands introduce are folded.
struct Combination {
  std::vector<std::pair<VarPtr, Expr>> lets;
  std::vector<Expr> values;
};
Combination Combine(const Combiner& c, const std::vector<Expr>& lhs, const std::vector<Expr>& rhs,
                    const std::string& prefix);
// lhs (+) rhs with the temporaries substituted into the values, simplified: constants fold.
std::vector<Expr> CombineValues(const Combiner& c, const std::vector<Expr>& lhs,
                                const std::vector<Expr>& rhs);
// The components that stay the same constant in every thread of an all-reduce of `values`: those
// whose value is a constant and whose combination reads only such components (a count of
// elements that every thread has alike). The others are null.
std::vector<Expr> UniformComponents(const Combiner& c, const std::vector<Expr>& values);
// The uniform components (UniformComponents) of `count` tuples equal to `values` folded together
// (by doubling), such as the count of elements of a chunk; null for the others.
std::vector<Expr> FoldUniform(const Combiner& c, const std::vector<Expr>& values, int64_t count);
// Whether lhs (+) rhs has a long latency: a division by something that is not a constant or a
// math call (exp), the components of `known` that are set being those constants
// (UniformComponents).
bool CombineIsSlow(const Combiner& c, const std::vector<Expr>& known);
// Substitutes lhs/rhs (and the steps' results) in `e` and folds as Combine does.
Expr Instantiate(const Combiner& c, const Expr& e, const std::vector<Expr>& lhs,
                 const std::vector<Expr>& rhs, const std::vector<Expr>& step_results = {});

// "combiner welford(n, mean, m2) identity (0, 0, 0): n = ..., ..." for IR dumps.
std::string ToString(const Combiner& c);

}  // namespace tessel::schedules
