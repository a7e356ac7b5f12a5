#pragma once

// Hand-written schedule templates, one per built-in workload family and target: the expert
// schedules that `make tune` starts from, that the GPU benchmarks measure (their traces are
// stored under tests/data/), and that the tests run on shapes the tiles do not divide. Each
// template is a plain sequence of schedule primitives, so its result is a trace like any other.
// The design space (schedule rules with sampled decisions) generalizes these.

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "schedules/schedule/schedule.h"
#include "schedules/target/target.h"
#include "schedules/workload/workload.h"

namespace tessel::schedules {

struct TemplateOptions {
  // Contractions on CUDA: block tile bm x bn, reduction step bk, thread tile tm x tn.
  int64_t bm = 128, bn = 128, bk = 8, tm = 8, tn = 8;
  // Row reductions on CUDA: threads per row; layernorm: elements per partial-sum block.
  int64_t row_threads = 1024;
  // Softmax: when > 0, a persistent grid of `row_grid` blocks (or sm_count * row_blocks_per_sm),
  // each block taking rows in turn (fewer rows in flight, so the re-reads of a row hit L2); 0: one
  // block per row.
  int64_t row_blocks_per_sm = 0;
  int64_t row_grid = 0;
  int64_t partial_chunk = 8192;
  // Layernorm: the sum and the squares about the mean as one tuple reduction (fuse_reductions:
  // Welford), so that the statistics of a chunk come from one kernel and one read of the input.
  bool center_variance = true;
  // Row reductions: 16-byte loads each thread keeps in flight (16: softmax (4096, 65536) at 0.69
  // of the copy bandwidth on an H200, against 0.675 with 4 and 0.60 with 2).
  int64_t reduce_unroll = 16;
  // Softmax: the row maximum and the sum of exponentials in one pass (fuse_reductions: online
  // softmax), so each
  // row is read twice instead of three times. Off: on an H200, softmax (4096, 65536) ran at 0.65
  // of the copy bandwidth with it against 0.69 without (its 32 registers let two 1024-thread
  // blocks share an SM, and 264 rows in flight overflow L2; see bench/RESULTS.md).
  bool online_softmax = false;
  // Softmax: each thread's share of the row read once into registers (a local cache of X
  // computed at the row loop, split_buffer_axis so the thread-owned part is an axis that
  // lowering drops), and the three passes read the registers. Taken when a thread's share is at
  // most `row_register_elements`. Off: a (65536)-column row is the whole register file of an
  // SM, so ptxas spills 250-330 bytes per thread and softmax (4096, 65536) fell from 0.615 to
  // 0.597 of copy on an H100 (0.670 with 512 threads; bench/RESULTS.md). It pays where a
  // thread's share leaves room, i.e. with the row split over a thread-block cluster.
  bool row_in_registers = false;
  int64_t row_register_elements = 64;
  // Softmax on sm_90: each row split over a thread-block cluster of `row_cluster` CTAs (0: none)
  // of `row_cluster_threads` threads, the row held in registers (row_register_elements at most a
  // thread) and the row's maximum and sum combined across the cluster through distributed
  // shared memory: X is read once and nothing spills. Falls back to one block a row when the row
  // does not divide that way. softmax (4096, 65536) on an H100: 0.895 of the copy bandwidth with
  // 4 x 512 (0.844 with 2 x 1024, 0.897 with 8 x 256), against 0.614 for one block a row.
  int64_t row_cluster = 4;
  int64_t row_cluster_threads = 512;
  // Layernorm over few long rows: one grid-synchronized kernel of `grid_row_threads`-thread
  // blocks, as many as the SMs allow (one a block's slice), in which each block keeps its slice
  // of the current row in registers (row_register_elements at most a thread) and its slice of
  // the weight in shared memory; per row, each block's (count, mean, squares) partial of its slice
  // comes from two passes over the registers and one all-reduce (a Welford tuple reduction), and
  // the blocks' partials meet after a grid barrier. X is read once. Taken when the row divides that
  // way, the slice of the weight fits in shared memory and the rows are fewer than the blocks; else
  // two passes. Layernorm (16, 4194304) on an H100: 0.714 of the copy bandwidth (0.703 with 1024
  // threads) against 0.624 for the two passes (bench/RESULTS.md).
  bool grid_rows = true;
  int64_t grid_row_threads = 512;
  // CUDA row reductions: at most this many blocks per SM (0: no limit), see max_blocks_per_sm.
  int64_t row_blocks_per_sm_limit = 0;
  // Host: tile sizes of the contraction.
  int64_t host_tile_i = 32, host_tile_j = 64, host_tile_k = 64;
};

// The hand-written schedule for `workload` (dispatched on Workload::name; "custom" workloads get
// a generic schedule: injective stages auto-bound, reductions one output per thread).
absl::StatusOr<Schedule> HandwrittenSchedule(const Workload& workload, const Target& target,
                                             const TemplateOptions& options = {});

}  // namespace tessel::schedules
