#pragma once

// Variable substitution and variable and load queries over the tensor IR.
//
// Threads: all functions are pure (they read immutable IR nodes and build new ones) and may be
// called from any thread.

#include <functional>
#include <unordered_map>
#include <vector>

#include "schedules/ir/expr.h"
#include "schedules/ir/stmt.h"

namespace tessel::schedules {

// Replaces every occurrence of a variable in `map` by its expression. The replacement is not
// substituted again (a map {x -> x + 1} is applied once). Rebuilt nodes go through the builders,
// so constants fold (x * 4 with x -> 2 gives 8). A replacement must have the variable's type
// (mixing types is a bug that the builders check).
Expr Substitute(const Expr& e, const std::unordered_map<const VarNode*, Expr>& map);

// Rewrites every expression of the statement tree (loop bounds, indices, values, conditions, let
// values). The variables that For and LetStmt nodes bind are not rebound: a mapped loop variable
// keeps its For node, only its uses change. Untouched subtrees are shared with the input.
Stmt Substitute(const Stmt& s, const std::unordered_map<const VarNode*, Expr>& map);

// A buffer's accesses moved to another buffer, their indices mapped by `indices`.
struct BufferRemap {
  BufferPtr to;
  std::function<std::vector<Expr>(const std::vector<Expr>&)> indices;
};
// Rewrites every load and store of a mapped buffer (by pointer), and the Allocate of it, to the
// new buffer with mapped indices. Other buffers (and AllReduce results) are left alone.
Stmt RemapBuffers(const Stmt& s, const std::unordered_map<const Buffer*, BufferRemap>& map);

// Whether `v` occurs in `e` (or in any expression of `s`, loop variables included).
bool UsesVar(const Expr& e, const VarNode* v);
bool UsesVar(const Stmt& s, const VarNode* v);

// Appends the variables of `e` to `out` in order of first occurrence (left to right, depth
// first), skipping those already in `out`.
void CollectVars(const Expr& e, std::vector<const VarNode*>* out);

// The loads in `e`, in order of occurrence (left to right, depth first, a load before the loads
// in its indices); a load that occurs twice is listed twice. A null `e` has none.
std::vector<const LoadNode*> CollectLoads(const Expr& e);
// The loads of `buffer` (by pointer) in `e`, in the same order.
std::vector<const LoadNode*> CollectLoads(const Expr& e, const Buffer* buffer);

}  // namespace tessel::schedules
