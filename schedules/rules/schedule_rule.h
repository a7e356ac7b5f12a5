#pragma once

// Schedule rules: the design space (DESIGN.md section 4). A rule looks at one stage of a
// workload's schedule and extends the schedule (and so its trace) with transformation and
// sampling instructions. Sampling instructions (sample_categorical, sample_perfect_tile) leave
// the decisions open: the space generator (schedules/space/space_generator.h) strips the
// decisions the rules happened to sample, and each sample of the space replays the sketch with
// fresh ones.
//
// Threads: rules are immutable after construction; Apply may be called from any thread on
// distinct schedules.

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "schedules/schedule/schedule.h"
#include "schedules/target/target.h"

namespace tessel::schedules {

class ScheduleRule {
 public:
  virtual ~ScheduleRule() = default;
  virtual std::string name() const = 0;
  // The schedules that applying the rule to `stage` leads to: empty when the rule does not apply
  // (the stage is not of its kind, or another rule already scheduled it); one schedule usually;
  // several when the rule forks the space (e.g. with and without the online softmax). An error
  // means a rule's own assumption failed; the generator reports it.
  virtual absl::StatusOr<std::vector<Schedule>> Apply(const Schedule& sch,
                                                      const std::string& stage) const = 0;
};

// Injective stages that are not outputs inlined into their consumers (so epilogues such as bias,
// activation and casts join the contraction's write-back, and prologues the loads).
std::unique_ptr<ScheduleRule> MakeAutoInline();
// Contractions with data reuse (matmul, batch matmul, convolution as an implicit GEMM, and their
// fused epilogues), every tile factor a sample_perfect_tile with a bounded innermost factor.
// CUDA, SSSRRSRS: block / vthread / thread / per-thread tile on the output's GEMM axes (the other
// axes fused on blockIdx.z), the accumulator (registers) at the thread loop with its reduction in
// three levels; the inputs cached in shared memory at R0 or R1 with cooperative fetch at a
// sampled vector width, and in registers further in (both levels sampled compute locations, one
// sketch); a convolution's padding computed by the shared copy; write-back through registers.
// Host, SSRSRS: i/j in four levels, k in two, the outer tiles parallel, the innermost j tile
// vectorized. Where the output has few block tiles for the GPU or k is long, a second sketch
// splits k over blocks (split-K: rfactor, the partials tiled as a batch, an ordered combine).
std::unique_ptr<ScheduleRule> MakeMultiLevelTiling(const Target& target);
// Contractions with few output rows or columns (matrix-vector products, skinny GEMMs, batched or
// not) on CUDA: each output's reduction spread over a sampled number of threads and combined
// across them, the large operand streamed along its contiguous axis (read from its strides: k,
// with vector loads and several outputs a block; or an output axis, with threads along it and k
// over threadIdx.y); where the outputs are few, a second sketch splits k over blocks first
// (rfactor, an ordered combine). Forks the space, leaving an untouched copy for
// MultiLevelTiling; other contractions are left alone (skinny_contraction.cc).
std::unique_ptr<ScheduleRule> MakeSkinnyContraction(const Target& target);
// f16/bf16 contractions on the tensor cores (CUDA; mma.sync, ldmatrix, a software pipeline): forks
// the space, leaving an untouched copy for MultiLevelTiling (multi_level_tiling_tensor_core.cc).
std::unique_ptr<ScheduleRule> MakeMultiLevelTilingTensorCore(const Target& target);
// Row reductions without reuse (softmax, layernorm, reduce) on CUDA: sampled threads per row
// combining through warp shuffles and shared memory, vectorized loads, the reductions computed
// at their consumer's row; rows too few to fill the GPU are split over blocks (rfactor) first;
// reductions that fuse (softmax) fork into separate and tuple (fuse_reductions) sketches.
std::unique_ptr<ScheduleRule> MakeCrossThreadReduction(const Target& target);
// Every stage still unscheduled. CUDA: injective stages fused and bound to blocks and a sampled
// number of threads with a sampled vector width; reductions one output per thread. Host: the
// outer spatial loop parallel, the inner one vectorized.
std::unique_ptr<ScheduleRule> MakeAutoBind(const Target& target);
// Every kernel's stage annotated with a sampled auto_unroll_max_step.
std::unique_ptr<ScheduleRule> MakeUnroll(const Target& target);

// The rules for a target, in the order the generator applies them.
std::vector<std::unique_ptr<ScheduleRule>> DefaultRules(const Target& target);

}  // namespace tessel::schedules
