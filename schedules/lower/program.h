#pragma once

// The lowered form of a scheduled workload: global buffers and an ordered list of kernels, each a
// statement tree with its launch configuration. Code generators (codegen/) print it;
// CheckTargetLimits (check_limits.h) checks it against a target's limits.

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "schedules/ir/buffer.h"
#include "schedules/ir/stmt.h"
#include "schedules/target/target.h"

namespace tessel::schedules {

// A tensor map (the copy engine's description of a global buffer and of the box one bulk tensor
// copy moves, CUtensorMap) that a kernel takes by value after its buffers, as a
// `const __grid_constant__` parameter. The runner makes it on the host with
// cuTensorMapEncodeTiled over the buffer's address, shape and strides (worker/cuda/tensor_map.h).
struct TensorMapSpec {
  int buffer = 0;             // index into Program::buffers (GeneratedSource::buffers)
  std::vector<int64_t> box;   // the box's extent along each of the buffer's axes, outermost first
  int64_t swizzle_bytes = 0;  // the shared layout's swizzle: 0 (none), 32, 64 or 128
  bool operator==(const TensorMapSpec&) const = default;
};

struct LaunchConfig {
  std::array<int64_t, 3> grid{1, 1, 1};
  std::array<int64_t, 3> block{1, 1, 1};
  int64_t dynamic_shared_bytes = 0;
  // CTAs per thread-block cluster along x (1: no cluster). grid[0] counts CTAs, a multiple of it.
  int64_t cluster = 1;
  // The kernel synchronizes its whole grid (a grid barrier, for a loop bound to blockIdx inside an
  // attached stage): every block must be resident at once, so it is launched cooperatively, and
  // it takes one more parameter after its buffers, `unsigned int* tessel_grid_sync`: two words,
  // zero before the first launch, that the barrier leaves with word 0 back at zero (word 1
  // counts barriers). The runner owns that word pair.
  bool cooperative = false;
  // The kernel's tensor maps, in parameter order (after the buffers, before tessel_grid_sync).
  std::vector<TensorMapSpec> tensor_maps;
  int64_t threads_per_block() const { return block[0] * block[1] * block[2]; }
};

// A region of a kernel's shared memory (CUDA), placed by plan_shared_memory
// (plan_shared_memory.h): a shared buffer the body allocates, or the scratch its cross-thread
// reductions combine through.
struct SharedSlot {
  enum class Kind : uint8_t {
    kBuffer,          // `buffer`
    kReduceScratch,   // block all-reduces of values computed in `dtype`
    kClusterScratch,  // cluster all-reduces: one value of `dtype` a CTA
  };
  Kind kind = Kind::kBuffer;
  // kBuffer: the allocated buffer; the scratch kinds: the shared buffer that lower_all_reduce's
  // expansion reads and writes (not allocated in the body; code generation declares it).
  BufferPtr buffer;
  DType dtype = DType::kFloat32;  // the element type
  int64_t elements = 0;
  int64_t bytes = 0;
  int64_t offset = 0;  // from the start of the kernel's shared memory (Alignment() aligned)
  // 16 bytes; a swizzled buffer 1024, its swizzle period (wgmma's descriptors assume it).
  int64_t Alignment() const { return buffer && buffer->swizzle_bytes > 0 ? 1024 : 16; }
};

struct SharedPlan {
  std::vector<SharedSlot> slots;  // shared buffers in body order, then reduce, then cluster scratch
  int64_t bytes = 0;              // all slots, each rounded up to 16 bytes
  bool dynamic = false;           // over the 48 KiB of static shared memory: allocated at launch
};

// How code generation prints one vectorized loop of a CUDA kernel, decided by plan_vectorization
// (plan_vectorization.h). The loop's body is `guards` (conditions free of the loop variable, each
// an IfThenElse without else) around `body`; `loads` are the loads of global or shared memory
// that depend on the loop variable, contiguous in it, each read as `lanes`-wide vectors.
struct VectorLoop {
  enum class Kind : uint8_t {
    kScalar,       // printed as an unrolled scalar loop, for the reason in `why`
    kVectorStore,  // one contiguous store: each chunk of `lanes` stored as one vector
    kLaneStores,   // a store to a local array: vector loads, the lanes stored one by one
    kReduction,  // lets and stores to registers at indices free of the loop variable, lane by lane
  };
  Stmt loop;  // the ForNode (ForKind::kVectorized) of the kernel body this plan is for
  Kind kind = Kind::kScalar;
  int64_t lanes = 0;
  std::vector<Expr> guards;
  // kVectorStore: conditions on the loop variable that hold for all the lanes of a chunk or for
  // none (a tail of whole chunks), each chunk's store guarded by them at its first lane.
  std::vector<Expr> chunk_guards;
  // kVectorStore: the stored value is `body`'s where this holds (at the chunk's first lane, the
  // same for all its lanes), zero elsewhere: a copy that zero-fills past an extent (kPadTile).
  Expr zero_unless;
  Stmt body;
  std::vector<Expr> loads;  // LoadNodes of `body`, in the order they are read
  std::string why;          // kScalar: why no vector form fits, as the CUDA comment says it
};

struct Kernel {
  std::string name;  // entry point
  Stmt body;
  LaunchConfig launch;
  // Global buffers the kernel touches, in Program::buffers order: its parameters.
  std::vector<BufferPtr> params;
  // Global buffers whose loads, or stores, stream past the caches (evict first: read or written
  // once, so they do not push out what is reused), from the stream_loads / stream_stores
  // annotations of the kernel's stages.
  std::vector<BufferPtr> stream_loads, stream_stores;
  // CUDA: the shared scratch of the all-reduces (lower_all_reduce), block scratch then cluster
  // scratch, each by compute type; plan_shared_memory places it after the shared buffers.
  std::vector<SharedSlot> scratch;
  SharedPlan shared;  // CUDA: where each shared buffer and reduction scratch lives
  // CUDA: how each vectorized loop of the body is printed, in body order.
  std::vector<VectorLoop> vectors;
};

enum class BufferRole : uint8_t { kInput, kOutput, kWorkspace };
const char* BufferRoleName(BufferRole r);  // "input", "output", "workspace"

struct ProgramBuffer {
  BufferPtr buffer;
  BufferRole role;
};

struct Program {
  std::string name;  // prefix of the entry points, e.g. "matmul_k3f2a"
  TargetKind target = TargetKind::kHost;
  // Every global buffer: inputs (workload order), then outputs, then workspace (intermediate
  // tensors that are neither inlined nor cached on chip). The host entry receives them in this
  // order; CUDA kernels receive their params.
  std::vector<ProgramBuffer> buffers;
  // Run in order. On the host they form one function.
  std::vector<Kernel> kernels;
  // True when some buffer has 2^31 elements or more: index arithmetic must use 64 bits.
  bool needs_int64_indices = false;
};

// The index of `b` among `buffers` (Program::buffers), or -1.
int ProgramBufferIndex(const std::vector<ProgramBuffer>& buffers, const Buffer* b);
// The index of `spec` among a kernel's tensor maps, appended where no equal map is there yet.
int64_t TensorMapIndex(std::vector<TensorMapSpec>* maps, const TensorMapSpec& spec);

// "grid 64x1x1, block 32x8x2, dynamic shared 98304 bytes[, cooperative][, 2 tensor maps]": a
// launch, for messages.
std::string ToString(const LaunchConfig& l);
// "shared 528 bytes: A_shared at 0, reduce_scratch f32[4] at 512": a kernel's shared memory.
std::string ToString(const SharedPlan& plan);
// "vectorize v: vector store, 4 lanes, loads A, B, 1 guard" or "vectorize v: scalar (why)".
std::string ToString(const VectorLoop& plan);
// Indented IR of every kernel (`tessel lower --emit ir`).
std::string ToString(const Program& p);

}  // namespace tessel::schedules
