#pragma once

// Lowering as an ordered list of named passes (passes.h), from a schedule's stages to the final
// kernel IR. Lower() and LowerReference() (lower.h) run them all; a caller may watch the program
// after each (`tessel lower --print-after-all`).

#include <functional>
#include <vector>

#include "absl/status/statusor.h"
#include "schedules/lower/lowering_state.h"

namespace tessel::schedules {

struct LoweringPass {
  const char* name;     // e.g. "inject_vthread"
  const char* summary;  // one line: what the pass does
  absl::Status (*run)(LoweringState* state);
};

// The passes in the order they run.
const std::vector<LoweringPass>& LoweringPasses();

// Called after each pass with the program as it stands (stage passes leave it without kernels).
using AfterPassFn = std::function<void(const LoweringPass& pass, const Program& program)>;

// Runs every pass over `state`; the first failure stops lowering.
absl::StatusOr<Program> RunLoweringPasses(LoweringState* state,
                                          const AfterPassFn& after_pass = nullptr);

}  // namespace tessel::schedules
