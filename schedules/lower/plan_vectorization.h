#pragma once

// Vectorization planning of a CUDA kernel: for every vectorized loop of the body, the form code
// generation prints (Kernel::vectors): one vector store a chunk of lanes, vector loads with the
// lanes stored one by one to registers, a reduction accumulated lane by lane, or a scalar loop
// with the reason no vector form fits (printed as a CUDA comment). Lanes are the widest count
// (16, 8, 4, 2) that divides the extent, has a CUDA vector type for every element type involved
// and keeps every access aligned.

#include <cstdint>
#include <optional>
#include <string>

#include "schedules/lower/program.h"

namespace tessel::schedules {

// A CUDA vector type that holds `lanes` elements of a dtype. Natural vectors (float4, int2, ...)
// are read through .x/.y/.z/.w and built with make_<type>; half types travel as raw words
// (unsigned int, uint2, uint4) through a 16-byte aligned array of half / __nv_bfloat16.
struct CudaVectorType {
  std::string name;
  bool natural = false;
};
std::optional<CudaVectorType> CudaVecType(DType t, int64_t lanes);

// The plan of one loop `loop` (a ForNode of kind kVectorized).
VectorLoop PlanVectorLoop(const Stmt& loop);

// The plans of every vectorized loop of the kernel's body, in body order (each loop once).
std::vector<VectorLoop> PlanVectorization(const Kernel& kernel);

}  // namespace tessel::schedules
