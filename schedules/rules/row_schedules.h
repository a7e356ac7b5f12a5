#pragma once

// Schedules of row computations (softmax, layernorm, row reductions) shared by the design space
// (CrossThreadReduction) and the hand-written templates, so that a tuning job can reach every
// kernel a template writes. Factors may be literals or sampled values (IntRVs).

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "schedules/schedule/schedule.h"

namespace tessel::schedules::rules {

// Spreads the parts of a row split over the kernel: (outer, e, t, v) or (e, t, v), the outer part
// bound to `outer`, e unrolled, t bound to threadIdx.x and v vectorized.
absl::Status BindRowSplit(Schedule* s, std::vector<LoopRV> p, const char* outer);

// The row read once into registers. `consumer` (loops: row, column) and the reductions `reds`
// it reads (stage order, each over the row's columns) split every row the same way, `split` =
// {C, J, T, V} (a cluster of C CTAs a row: col = ((r * J + j) * T + t) * V + v for the CTA of
// rank r) or {J, T, V} (one block a row); the consumer's row loop goes to blockIdx.x and the
// reductions are computed there, in registers (local scope), consumers first. The input `x`
// (the row's operand every one of them reads) is cached in local memory at the row loop, its
// column axis split alike (split_buffer_axis), so that lowering keeps only a thread's J x V
// elements (compact_thread_axes.h).
absl::Status RowInRegisters(Schedule* s, const std::string& consumer,
                            const std::vector<std::string>& reds, const std::string& x,
                            const std::vector<Factor>& split);

// Few long rows in one grid-synchronized kernel. `split` = {G, J, T, V}: each of G blocks takes
// a slice of J x T x V columns of every row (column ((b * J + j) * T + t) * V + v of block b,
// thread t), the rows in turn. The reductions `reds` (over the row, read by `consumer`) become
// one tuple reduction (fuse_reductions: a sum and the sum of squares about its mean become
// Welford's (count, mean, m2)) whose per-block partials (rfactor) are folded in the combiner's
// two passes over the slice and combined across the block in one all-reduce, written across
// blocks; after the grid barrier every block combines the G partials (G at most the block's
// threads). The block's slice of the row operand `x` is cached in registers (split_buffer_axis:
// the block and thread axes are compacted away) and read once, streaming past L2 like the
// consumer's stores; the block's slice of each of `shared_operands` (inputs of the consumer
// indexed by the column alone) is cached in shared memory once.
absl::Status GridRows(Schedule* s, const std::string& consumer,
                      const std::vector<std::string>& reds, const std::string& x,
                      const std::vector<std::string>& shared_operands,
                      const std::vector<Factor>& split);

}  // namespace tessel::schedules::rules
