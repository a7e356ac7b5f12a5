#pragma once

// The CUDA printer behind GenerateCuda (cuda_codegen.h): kernels, loops, vectorized loops as
// planned, and the intrinsics of the expanded all-reduces (lower_all_reduce,
// schedules/ir/thread_intrinsics.h), defined in cuda_codegen.cc. Internal to codegen/.

#include <functional>
#include <map>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "schedules/codegen/c_printer.h"
#include "schedules/codegen/source.h"
#include "schedules/lower/plan_vectorization.h"
#include "schedules/lower/program.h"
#include "schedules/target/target.h"

namespace tessel::schedules::codegen {

// The launch axis of a thread or block tag: 0 for x (and cluster.x), 1 for y, 2 for z, -1 for
// the others.
int ThreadAxis(ThreadTag t);

// A slot of the kernel's shared-memory plan (Kernel::shared) as declared: its C name and
// element type.
struct SharedDecl {
  std::string name;
  std::string type;
  const SharedSlot* slot;
};

// Prints a checked Program as CUDA (GenerateCuda): one use per Program.
class CudaCodeGen final : public CodeGenC {
 public:
  CudaCodeGen(const Program& p, const Target& t);

  absl::StatusOr<GeneratedSource> Generate();

 protected:
  std::string InfLiteral(bool negative, DType t) override {
    if (t == DType::kFloat64) {
      return negative ? "(-__longlong_as_double(0x7ff0000000000000LL))"
                      : "__longlong_as_double(0x7ff0000000000000LL)";
    }
    return negative ? "__int_as_float(0xff800000)" : "__int_as_float(0x7f800000)";
  }
  std::string NanLiteral(DType t) override {
    return t == DType::kFloat64 ? "__longlong_as_double(0x7fffffffffffffffLL)"
                                : "__int_as_float(0x7fffffff)";
  }
  std::string RoundToHalf(DType to, DType from, const std::string& s) override {
    std::string rounded;
    if (from == DType::kFloat64) {  // directly, not through float (one rounding)
      rounded =
          absl::StrCat(to == DType::kFloat16 ? "__double2half(" : "__double2bfloat16(", s, ")");
    } else {
      rounded = ComputeToStorage(to, IsFloat(from) ? s : "static_cast<float>(" + s + ")");
    }
    return StorageToCompute(to, rounded);
  }
  std::string MathCall(const std::string& name, DType t,
                       const std::vector<std::string>& args) override {
    if (args.size() != 1) return "";
    if (IsInt(t) && t != DType::kBool) {
      if (name != "abs") return "";
      return absl::StrCat(ComputeType(t) == "int" ? "abs(" : "llabs(", args[0], ")");
    }
    if (!IsFloat(t)) return "";
    const bool f64 = t == DType::kFloat64;
    std::string fn = name == "abs" ? "fabs" : name;
    return absl::StrCat(fn, f64 ? "" : "f", "(", args[0], ")");
  }
  std::string MinMax(bool is_max, DType t, const std::string& a, const std::string& b) override {
    if (IsFloat(t)) {
      return absl::StrCat(is_max ? "fmax" : "fmin", t == DType::kFloat64 ? "" : "f", "(", a, ", ",
                          b, ")");
    }
    return absl::StrCat(is_max ? "max(" : "min(", a, ", ", b, ")");
  }

  // A swizzled buffer's offset goes through tessel_swizzle_<W>_<element bytes> (a helper).
  std::string StorageOffset(const Buffer& buffer, const Expr& at) override;
  void EmitFor(const ForNode& n) override;
  void EmitAllocate(const AllocateNode& n) override;
  void EmitBarrier(const BarrierNode& n) override;
  // Other blocks' writes (a cooperative kernel's written global buffers) are read from L2 (L1 is
  // not coherent across SMs); streamed buffers (Kernel::stream_loads / stream_stores) are read
  // and written with evict-first hints.
  // In a value stored to global memory, a parameter the kernel does not write is read through the
  // read-only data cache (__ldg, as VectorLoad), but for bool, which __ldg does not take. nvcc
  // does not infer it once the alignment hint reassigns the parameter, and without it the loads
  // of a fused epilogue (a bias) cannot move past the stores between them: on an H100 the bias +
  // GELU wgmma GEMM 2048 x 8192 x 2048 took 0.1172 ms with __ldg against 0.1318 without, and
  // 0.1199 with no bias at all. Loads into registers and shared memory stay plain: in a k loop
  // nvcc merges neighbouring plain loads, and __ldg there made sampled f16 matrix-vector
  // products up to 2x slower.
  std::string LoadAccess(const LoadNode& n) override {
    const std::string a = Access(n.buffer, n.indices);
    const char* f = LoadIntrinsic(n.buffer.get(), GlobalStore() && n.dtype != DType::kBool);
    return f != nullptr ? absl::StrCat(f, "(&", a, ")") : a;
  }
  std::string StoreStatement(const StoreNode& n, const std::string& access,
                             const std::string& value) override {
    return stream_stores_.count(n.buffer.get())
               ? absl::StrCat("__stcs(&", access, ", ", value, ");")
               : CodeGenC::StoreStatement(n, access, value);
  }
  // __ldcg, __ldcs, __ldg (with `read_only_cache`, for a parameter the kernel does not write),
  // or nullptr for a plain load of buffer `b`.
  const char* LoadIntrinsic(const Buffer* b, bool read_only_cache) const {
    if (cross_block_.count(b)) return "__ldcg";
    if (stream_loads_.count(b)) return "__ldcs";
    if (read_only_cache && read_only_.count(b)) return "__ldg";
    return nullptr;
  }
  // A vector load from `ptr` (a `const vec*` expression) of buffer `b`. A parameter the kernel
  // does not write goes through the read-only data cache (__ldg): nvcc stops inferring that on
  // its own once the alignment hint reassigns the parameter (0.63 against 0.67 of the copy
  // bandwidth for the grid layernorm on an H100, whose bias is read every row).
  std::string VectorLoad(const Buffer* b, const std::string& ptr) const {
    const char* f = LoadIntrinsic(b, /*read_only_cache=*/true);
    return f != nullptr ? absl::StrCat(f, "(", ptr, ")") : absl::StrCat("*", ptr);
  }
  // In a value stored as f16 or bf16, 1 + erf(y) and 1 - erf(y) print as erfc(-y) and erfc(y)
  // of narrow_math.h (tessel_erfc_narrow), GELU's k * x * (1 + erf(x / sqrt 2)) (k a constant,
  // or none) as 2k gelu(x) (tessel_gelu_narrow), and the logistic 1 / (1 + exp(y)) (sigmoid's
  // and SiLU's) with the hardware's exp2 and reciprocal (__expf, __fdividef).
  std::string NarrowMath(const BinaryNode& n, int* prec) override;
  // All-reduces are expanded by lowering (lower_all_reduce): one here is an error.
  void EmitAllReduce(const AllReduceNode& n) override;
  // Registers of lowering (IsRegister) are scalars: `float tessel_red = value;` where the first
  // statement of their scope stores to them (not through an asm intrinsic), else `float name;`.
  void EmitRegister(const AllocateNode& n);
  // The intrinsics of schedules/ir/thread_intrinsics.h.
  std::string IntrinsicCall(const CallNode& n, int* prec) override;
  // `unsigned` for the lets of unsigned intrinsics (lane masks, shared addresses).
  std::string DeclaredType(DType t, const Expr& value) override;
  // Stores of asm intrinsics (map_shared_rank, load_shared_cluster) to registers print as asm.
  void EmitStore(const StoreNode& n) override;

 private:
  absl::Status EmitKernel(const Kernel& k, KernelSource* ks);
  // Names the slots of the kernel's shared-memory plan (PlanSharedMemory) and checks its size.
  absl::Status DeclareShared(const Kernel& k);
  void EmitThreadBinding(const ForNode& n);
  // A vectorized loop as its plan (Kernel::vectors, plan_vectorization.h) says.
  void EmitVectorized(const ForNode& n, const VectorLoop& plan);
  // One vector store a chunk of lanes (VectorLoop::kVectorStore).
  void EmitVectorStore(const ForNode& n, const VectorLoop& plan);
  // One chunk of lanes of a vector store (starting at lane `first`): the store `open` value
  // `close`.
  void EmitVectorChunk(const ForNode& n, const VectorLoop& plan, const CudaVectorType& store_vec,
                       int64_t first, const std::string& open, const std::string& close);
  // The lanes of a vectorized loop `n`: per chunk of `lanes` iterations, a block with the vector
  // reads of `loads`, then `lane(value of the loop variable)` for each lane with the loop
  // variable and the loads overridden (OverrideLane).
  void EmitLanes(const ForNode& n, const std::vector<Expr>& loads, int64_t lanes,
                 const std::function<void(const Expr&)>& lane);
  // Opens `if (g1 && g2 ...)` around a vectorized loop's body (nothing when there is no guard);
  // the caller closes it.
  void OpenGuards(const std::vector<Expr>& guards);
  // Lane k of a vectorized loop: the loop variable prints as `value`, each contiguous load as its
  // lane of the vector read for it; ClearLaneOverrides ends that.
  void OverrideLane(const VarNode* v, const Expr& value, const std::vector<Expr>& loads,
                    const std::vector<std::vector<std::string>>& lane_values, int64_t k);
  void ClearLaneOverrides(const VarNode* v, const std::vector<Expr>& loads);
  // A vectorized loop storing to a local array: vector loads, the lanes stored one by one
  // (VectorLoop::kLaneStores).
  void EmitLaneStores(const ForNode& n, const VectorLoop& plan);
  // A vectorized loop that accumulates into registers (VectorLoop::kReduction): each contiguous
  // load is read as vectors, and the body runs once per lane, in the loop's order, so the result
  // is the scalar loop's bit for bit.
  void EmitVectorizedReduction(const ForNode& n, const VectorLoop& plan);
  // "&buffer[flat index]" of `idx` with the loop variable `v` at min + offset.
  std::string ElementAddress(const BufferPtr& b, const std::vector<Expr>& idx, const VarNode* v,
                             const Expr& min, int64_t offset);
  // Reads each load's elements [first, first + lanes) of the loop variable `v` (bound at
  // `min`) as one vector; returns each load's per-lane expressions in its storage type (a half
  // lane as stored; printing the overridden load converts it for arithmetic).
  std::vector<std::vector<std::string>> EmitLaneLoads(const VarNode* v, const Expr& min,
                                                      const std::vector<Expr>& loads, int64_t lanes,
                                                      int64_t first);
  std::string WithKernel(const std::string& msg) const {
    return absl::StrCat("kernel '", kernel_->name, "': ", msg);
  }

  const Program& program_;
  const Target& target_;
  // Current kernel.
  const Kernel* kernel_ = nullptr;
  std::vector<SharedDecl> shared_;
  // The current kernel's vectorized loops' plans, by loop.
  std::unordered_map<const StmtNode*, const VectorLoop*> vectors_;
  // Cooperative kernel: global buffers it writes, which other blocks read after grid barriers.
  std::unordered_set<const Buffer*> cross_block_;
  // Global buffers of the kernel's params that it does not write.
  std::unordered_set<const Buffer*> read_only_;
  std::unordered_set<const Buffer*> stream_loads_, stream_stores_;  // of the current kernel
  bool uses_grid_barrier_ = false;  // some kernel: emit the barrier function
  // Tensor-core calls the program makes: their helper functions are defined before the kernels.
  std::set<std::string> tensor_calls_;
  // A tensor-core call (IntrinsicCall's; cuda_tensor_calls.cc).
  std::string TensorCall(const CallNode& n);
};

// The definitions of the tensor-core helper functions named in `calls` (TensorCall), for the
// top of a CUDA source (cuda_tensor_calls.cc).
std::string TensorCallHelpers(const std::set<std::string>& calls);

}  // namespace tessel::schedules::codegen
