#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "schedules/ir/dtype.h"

namespace tessel::schedules {

// Where a buffer lives. Global buffers are kernel parameters (inputs, outputs, workspace); shared
// and local buffers are allocated by the generated code (on the host both become stack arrays).
// Room for tensor-core storage (kFragment: an mma/wgmma accumulator or operand fragment held in
// registers and addressed only through intrinsic calls) is reserved for the tensorize primitive.
enum class MemScope : uint8_t { kGlobal, kShared, kLocal, kFragment };

// Registers of one thread (local) or of a warp's lanes (fragment): no other thread reads them.
inline bool IsRegisterScope(MemScope s) {
  return s == MemScope::kLocal || s == MemScope::kFragment;
}

const char* MemScopeName(MemScope s);  // "global", "shared", "local", "fragment"
bool ParseMemScope(std::string_view name, MemScope* out);

// A multi-dimensional array. Immutable once built; shared by the IR nodes that refer to it.
// Identity is by pointer: two buffers with the same name are different buffers.
struct Buffer {
  std::string name;
  DType dtype = DType::kFloat32;
  std::vector<int64_t> shape;
  MemScope scope = MemScope::kGlobal;
  // Element stride of each dimension. Empty means compact row-major. storage_align pads rows by
  // giving a dimension a larger stride than the compact one.
  std::vector<int64_t> strides;

  int64_t NumElements() const;           // product of the shape
  std::vector<int64_t> Strides() const;  // explicit or compact row-major strides
  int64_t AllocatedElements() const;     // elements the allocation spans, padding included
  int64_t AllocatedBytes() const { return AllocatedElements() * DTypeBytes(dtype); }
};
using BufferPtr = std::shared_ptr<const Buffer>;

BufferPtr MakeBuffer(std::string name, DType dtype, std::vector<int64_t> shape,
                     MemScope scope = MemScope::kGlobal, std::vector<int64_t> strides = {});

// Variables and buffers that lowering makes for code generation (lower_all_reduce: registers,
// scratch, exchanged values) are named "tessel_..."; code generation prints them as named.
bool IsLoweringTemporary(std::string_view name);
// A scalar register of lowering: a rank-0 local lowering temporary (printed as a C scalar; not
// counted as a local buffer's words by the register estimate).
bool IsRegister(const Buffer& b);

}  // namespace tessel::schedules
