#pragma once

// Virtual-thread injection: a lowering pass over a kernel body that turns each vthread loop (a
// kThreadBinding For with ThreadTag::kVThread) into loops over the virtual threads pushed inward,
// around only the statements that depend on the virtual thread.
//
//   for v in vthread [0, V):                 for k:
//     alloc local acc[T]:                       barrier; A_sh = A[..k..]; barrier
//       for k:                          =>      unrolled for v in [0, V):  // vthread
//         barrier; A_sh = A[..k..]; barrier       acc[v, ..] += A_sh[..v..] * ..
//         acc[..] += A_sh[..v..] * ..
//
// A statement that does not depend on v is emitted once; the others are wrapped in an unrolled
// loop over v (kUnrolled with ThreadTag::kVThread, so that readers still see a vthread loop),
// consecutive ones in one loop. Sequences are split, and serial/unrolled loops, thread
// bindings, allocations, lets and conditions that do not depend on v are descended into when
// they hold something to emit once (a barrier, a store that does not depend on v). A local
// buffer allocated inside the vthread loop that a v-dependent statement writes ("touched"), and
// whose allocation is split across pieces, gets a leading dimension of extent V indexed by v.
// A statement depends on v when it uses v (or a let/loop variable derived from it) or touches a
// touched buffer. Nested vthread loops are injected innermost first; a vthread loop of extent 1
// becomes its body.
//
// The rewrite reorders work (the pieces of different virtual threads interleave), so it is only
// done when a conservative check proves the result computes what the plain loop computes: the
// pieces emitted once neither read nor write a buffer that a v-dependent piece writes; every
// read of a buffer written by a piece emitted once follows, in the same iteration of the
// enclosing descended loops, a write of it by such a piece; a buffer written by v-dependent
// pieces that is not expanded is accessed by one loop over v only, outside every descended loop.
// Otherwise (and for a barrier under a condition or loop bound that depends on v, a cross-thread
// reduction, a tensor-core intrinsic or a fragment buffer inside the loop, a non-constant
// extent) the vthread loop is kept as it was: a plain loop that codegen emits unrolled.
//
// Threads: a pure function over immutable IR; may be called from any thread.

#include <string>
#include <vector>

#include "schedules/ir/stmt.h"

namespace tessel::schedules {

// Injects every vthread loop of `body`. When `kept` is not null, appends one line per vthread
// loop that was kept as a plain loop: "<var>: <reason>".
Stmt InjectVirtualThreads(const Stmt& body, std::vector<std::string>* kept = nullptr);

}  // namespace tessel::schedules
