#pragma once

// Lowering as an ordered list of named passes (passes.h), from a schedule's stages to the final
// kernel IR. Lower() and LowerReference() (lower.h) run them all; a caller may watch the program
// after each (`tessel lower --print-after-all`).
//
// Adding a pass: write `absl::Status MyPass(LoweringState* state)` in its own .cc under
// schedules/lower/ (its mutator class in an anonymous namespace there), declare it in passes.h
// with one line on what it does, and add {"my_pass", "one-line summary", MyPass} to the list in
// pipeline.cc at the point where what it reads exists (stage fields before build_nests, kernel
// bodies after). A pass that rewrites each kernel body with a pure Stmt -> Stmt function can be
// listed as RewriteKernelBodies<F>. What code generation needs from it goes into Kernel
// (program.h) and ToString(Program), so that --print-after-all and --emit ir show it.

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
