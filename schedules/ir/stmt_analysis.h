#pragma once

// Analyses of statement trees that lowering passes and code generators share: which buffers a
// statement writes, whether it synchronizes threads, how many iterations it would unroll into.
// Pure functions over immutable IR; may be called from any thread.

#include <cstdint>
#include <unordered_set>

#include "schedules/ir/buffer.h"
#include "schedules/ir/expr.h"
#include "schedules/ir/stmt.h"

namespace tessel::schedules {

// Whether some store under `s` writes an element whose index does not depend on `v` (an
// accumulator: the iterations of a loop over `v` then depend on each other).
bool StoresIndependentOf(const Stmt& s, const VarNode* v);

// Adds to `out` the buffers that `s` writes: those it stores to, and (conservatively) those
// loaded in the arguments of intrinsic calls evaluated for their effect (a tensor-core call's
// first operand only).
void CollectWrittenBuffers(const Stmt& s, std::unordered_set<const Buffer*>* out);
// True when `s` contains a Barrier or an AllReduce (code every thread of a block must reach).
bool ContainsSync(const Stmt& s);
// Loop iterations `s` would unroll into (constant extents multiplied, sequences added);
// INT64_MAX when some extent is not constant.
int64_t UnrollSteps(const Stmt& s);

}  // namespace tessel::schedules
