#pragma once

// Intrinsics of cross-thread communication (CUDA), as CallNode names. lower_all_reduce
// (schedules/lower/lower_all_reduce.cc) expands all-reduces into them; the CUDA printer prints
// them. The IR has no unsigned type: the values marked "unsigned" are 32-bit integers (kInt32)
// that the printer declares `unsigned`.

#include <string_view>

#include "schedules/ir/expr.h"

namespace tessel::schedules::intrinsic {

// () -> i32: the thread's index in its block along x, y, z.
inline constexpr char kThreadIdxX[] = "threadIdx.x";
inline constexpr char kThreadIdxY[] = "threadIdx.y";
inline constexpr char kThreadIdxZ[] = "threadIdx.z";
// The call of the thread's index along axis 0, 1 or 2 (x, y, z), and whether `name` is one.
inline Expr ThreadIndex(int axis) {
  static const char* const kNames[] = {kThreadIdxX, kThreadIdxY, kThreadIdxZ};
  return MakeCall(kNames[axis], {}, DType::kInt32);
}
inline bool IsThreadIndex(std::string_view name) {
  return name == kThreadIdxX || name == kThreadIdxY || name == kThreadIdxZ;
}
// (bits: an integer immediate) -> unsigned: a lane mask constant, printed 0x0000ffffu.
inline constexpr char kLaneMask[] = "lane_mask";
// (a, b) -> unsigned: a << b, printed in parentheses.
inline constexpr char kShiftLeft[] = "shift_left";
// (a, b): a >> b and a & b (operands that are not primary in parentheses).
inline constexpr char kShiftRight[] = "shift_right";
inline constexpr char kBitwiseAnd[] = "bitwise_and";
// (mask, value, lane_mask[, width]): __shfl_xor_sync, the value of lane (lane ^ lane_mask) of
// the thread's group of `width` lanes (32 when absent).
inline constexpr char kShflXorSync[] = "shfl_xor_sync";
// (load of element 0 of a shared buffer) -> unsigned: the buffer's address in the shared window.
inline constexpr char kSharedAddress[] = "shared_address";
// (address, rank) -> unsigned: the address of the same shared location in CTA `rank` of the
// cluster (mapa). Only as the value stored to a scalar register.
inline constexpr char kMapSharedRank[] = "map_shared_rank";
// (address, byte offset: an integer immediate): the value at address + offset of distributed
// shared memory (ld.shared::cluster). Only as the value stored to a scalar register.
inline constexpr char kLoadSharedCluster[] = "load_shared_cluster";

}  // namespace tessel::schedules::intrinsic
