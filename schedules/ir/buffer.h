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
  // The tensor cores' XOR swizzle of a shared buffer (0: none; 32, 64 or 128: the swizzle's
  // width in bytes, W). The last two axes (rows R, contiguous columns C) are stored as C / A
  // column atoms of A = W / element-bytes columns each, atom after atom (atom j holds columns
  // [jA, (j+1)A) of every row, R rows of W bytes), and within each 1024-byte span the 16-byte
  // chunk q of a row is stored at chunk q ^ ((byte offset / 128) % (W / 16)): ldmatrix and cp.async
  // then meet no bank conflicts, and wgmma reads the operand through a matrix descriptor of the
  // same swizzle mode. Outer axes are compact. Set by lowering from the stage annotation
  // kStorageSwizzle (schedules/schedule/stage.h); never with explicit strides.
  int64_t swizzle_bytes = 0;

  int64_t NumElements() const;           // product of the shape
  std::vector<int64_t> Strides() const;  // explicit or compact row-major strides
  int64_t AllocatedElements() const;     // elements the allocation spans, padding included
  int64_t AllocatedBytes() const { return AllocatedElements() * DTypeBytes(dtype); }
};
using BufferPtr = std::shared_ptr<const Buffer>;

BufferPtr MakeBuffer(std::string name, DType dtype, std::vector<int64_t> shape,
                     MemScope scope = MemScope::kGlobal, std::vector<int64_t> strides = {});
// `b` with another shape and strides (a pass adding a leading axis), its swizzle kept.
BufferPtr Reshaped(const Buffer& b, std::vector<int64_t> shape, std::vector<int64_t> strides = {});
// Elements a swizzle atom's row holds (W / element bytes); 0 when `b` is not swizzled.
int64_t SwizzleAtomElements(const Buffer& b);

// Variables and buffers that lowering makes for code generation (lower_all_reduce: registers,
// scratch, exchanged values) are named "tessel_..."; code generation prints them as named.
bool IsLoweringTemporary(std::string_view name);
// A scalar register of lowering: a rank-0 local lowering temporary (printed as a C scalar; not
// counted as a local buffer's words by the register estimate).
bool IsRegister(const Buffer& b);

}  // namespace tessel::schedules
