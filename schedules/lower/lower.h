#pragma once

// Lowering: a schedule becomes a Program (program.h), through the ordered list of named passes of
// pipeline.h (passes.h declares them). Each root stage becomes a kernel (on the host, a section
// of the one entry function); stages attached to its loops are nested inside it, each computing
// the region its consumers need (schedules/schedule/region.h) in a buffer of its scope
// (build_nests). Vthread loops (either target; the host runs them as loops) are then injected
// (inject_vthread.h): what does not depend on the virtual thread runs once, local buffers that live
// across the pieces get one copy per virtual thread. `after_pass`, when given, sees the program
// after every pass.

#include "absl/status/statusor.h"
#include "schedules/lower/pipeline.h"
#include "schedules/lower/program.h"
#include "schedules/schedule/schedule.h"
#include "schedules/target/target.h"

namespace tessel::schedules {

absl::StatusOr<Program> Lower(const Schedule& schedule, const Target& target,
                              const AfterPassFn& after_pass = nullptr);

// The untransformed lowering used as the baseline that candidates' results are compared with:
// every tensor in global memory; on CUDA one thread per output element (spatial axes fused, 256
// threads per block), reductions serial in the thread; on the host plain loops. Float reductions
// accumulate in f64 and round once at the store, so that the baseline is more accurate than the
// candidates it judges.
absl::StatusOr<Schedule> ReferenceSchedule(const Workload& workload, const Target& target);
absl::StatusOr<Program> LowerReference(const Workload& workload, const Target& target,
                                       const AfterPassFn& after_pass = nullptr);

}  // namespace tessel::schedules
