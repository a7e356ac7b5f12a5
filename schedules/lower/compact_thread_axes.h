#pragma once

// Thread-axis compaction of local buffers: a lowering pass over a CUDA kernel body.
//
// A local buffer is private to its thread. When every access of it indexes one of its axes with
// exactly a threadIdx variable (the variable of a For bound to threadIdx.x, .y or .z, to the
// CTA's cluster rank cluster.x, or to a block index; the same binding at every access; several
// stages may each bind their own loop to it), each thread only ever touches
// the slot of that axis that equals its own index, so the axis is dropped from the buffer:
//
//   alloc local X_l[16, 1024, 4]                 alloc local X_l[16, 4]
//   for t in threadIdx.x: X_l[j, t, v] = ...  => for t in threadIdx.x: X_l[j, v] = ...
//   for u in threadIdx.x: ... X_l[j, u, v]       for u in threadIdx.x: ... X_l[j, v]
//
// This is how a stage cached in registers outside the threadIdx loops of its consumers (a row
// of softmax held by the threads of a block across three passes, or a row of layernorm held by
// every block of a grid-synchronized kernel) gets one thread's share as its size: the cache's
// layout is split with split_buffer_axis so that the thread-owned part of the index is an axis of
// its own. Buffers with explicit strides (storage_align), AllReduce results, and buffers with any
// other access to such an axis are left alone.
//
// Threads: a pure function over immutable IR; may be called from any thread.

#include "schedules/ir/stmt.h"

namespace tessel::schedules {

Stmt CompactThreadAxes(const Stmt& body);

}  // namespace tessel::schedules
