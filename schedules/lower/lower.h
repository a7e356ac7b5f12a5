#pragma once

// Lowering: a schedule becomes a Program (program.h). Each root stage becomes a kernel (on the
// host, a section of the one entry function); stages attached to its loops are nested inside it,
// each computing the region its consumers need (bound.h) in a buffer of its scope. Bodies are
// guarded where a split does not divide, where a region overhangs its tensor, and where a stage
// uses fewer threads than its kernel launches. A reduction loop bound to threadIdx.* becomes a
// cross-thread reduction (an AllReduce statement). Barriers are placed around shared and global
// producers attached inside a kernel: after each, and before each that runs more than once.
// Vthread loops (either target; the host runs them as loops) are then injected
// (inject_vthread.h): what does not depend on the virtual thread runs once, local buffers that
// live across the pieces get one copy per virtual thread.

#include "absl/status/statusor.h"
#include "schedules/lower/program.h"
#include "schedules/schedule/schedule.h"
#include "schedules/target/target.h"

namespace tessel::schedules {

absl::StatusOr<Program> Lower(const Schedule& schedule, const Target& target);

// The untransformed lowering used as the baseline that candidates' results are compared with:
// every tensor in global memory; on CUDA one thread per output element (spatial axes fused, 256
// threads per block), reductions serial in the thread; on the host plain loops. Float reductions
// accumulate in f64 and round once at the store, so that the baseline is more accurate than the
// candidates it judges.
absl::StatusOr<Schedule> ReferenceSchedule(const Workload& workload, const Target& target);
absl::StatusOr<Program> LowerReference(const Workload& workload, const Target& target);

}  // namespace tessel::schedules
