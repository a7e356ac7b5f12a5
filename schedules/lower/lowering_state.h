#pragma once

// What the lowering passes (passes.h) read and write on the way from a schedule's stages to a
// Program: the stages being lowered, their bounds and realized buffers, the launch of each
// kernel, the index analyzer, and the Program being built. The stage passes fill the stage
// fields; build_nests turns the stages into kernels; the kernel passes rewrite
// `program.kernels`. One state per lowering, used by one thread.

#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "schedules/ir/simplify.h"
#include "schedules/lower/program.h"
#include "schedules/schedule/region.h"
#include "schedules/schedule/schedule.h"
#include "schedules/target/target.h"

namespace tessel::schedules {

// A buffer as lowered: the realized buffer and the offset of its origin in the logical tensor.
struct Realized {
  BufferPtr buffer;
  std::vector<Expr> offset;  // empty: no offset
};

struct LoweringState {
  LoweringState(const Schedule& schedule, const Target& target, bool wide_accumulation)
      : schedule(schedule),
        target(target),
        wide_accumulation(wide_accumulation),
        stages(schedule.stages()) {}

  const Schedule& schedule;
  const Target& target;
  // Float reductions whose reduction loops are innermost accumulate in a f64 register and store
  // the rounded result (the reference lowering, the baseline of the numeric comparison, is more
  // accurate than any candidate it judges).
  const bool wide_accumulation;

  std::vector<Stage> stages;
  std::vector<StageBound> bounds;  // per stage (infer_bounds)
  std::unordered_map<const Buffer*, Realized> realized;
  // Loop variables range over their extents, thread indices over the kernel's block size.
  Analyzer analyzer;
  // Loop variables bound to block indices, with their binding; those of attached stages.
  std::unordered_map<const VarNode*, ThreadTag> block_vars;
  std::unordered_set<const VarNode*> attached_block_vars;
  std::vector<LaunchConfig> launches;  // per stage: the launch of the kernel it is the root of
  std::vector<int> kernel_roots;       // per kernel of `program`: its root stage

  Program program;

  // Whether stage `si` is the root of a kernel (not inlined, computed by itself, not attached).
  bool IsKernelRoot(int si) const;
  // The stages of the kernel rooted at stage `root`: root and every stage attached inside it.
  std::vector<int> KernelStages(int root) const;
  // Whether stage `si` is attached and writes global memory from loops bound to block indices:
  // what it writes, other blocks read, after a grid barrier.
  bool WritesAcrossBlocks(int si) const;
};

// The extent of thread axis `t` in `launch` (cluster.x: the cluster size; 1 for others).
int64_t BlockDim(const LaunchConfig& launch, ThreadTag t);

// `s` with every character that may not appear in a C identifier replaced by '_'.
std::string SanitizeName(const std::string& s);

}  // namespace tessel::schedules
