#pragma once

// Host C++ from a lowered Program, for the system compiler
// (g++ -O3 -march=native -fopenmp -shared -fPIC -std=c++17).
//
// The code defines one entry, `extern "C" void <program name>(void* const* buffers)`, that
// receives every buffer of GeneratedSource::buffers (= Program::buffers) in order and runs the
// kernels one after another. GeneratedSource::kernels holds one KernelSource describing it
// (entry = program name, params = every buffer index).
//
// Conventions of the generated code:
// - f16 and bf16 are stored as uint16_t bits and computed in float (conversions in a prelude;
//   float to f16/bf16 rounds to nearest even).
// - The outermost parallel loop becomes `#pragma omp parallel for`; nested ones run serially.
//   Vectorized loops get `#pragma omp simd` (their iterations must be independent).
// - Shared and local allocations become local arrays (alignas(64)) at their Allocate; ones over
//   64 KiB live on the heap (std::vector). An allocation inside a parallel loop is private to
//   each iteration; one outside is shared by all threads.
// - Barriers are no-ops.

#include "absl/status/statusor.h"
#include "schedules/codegen/source.h"
#include "schedules/lower/program.h"

namespace tessel::schedules {

// Errors (InvalidArgument / Unimplemented) name the construct: thread bindings and AllReduce
// need the cuda target, unsupported intrinsics, ... Thread-safe: may be called from any thread.
absl::StatusOr<GeneratedSource> GenerateHost(const Program& p);

}  // namespace tessel::schedules
