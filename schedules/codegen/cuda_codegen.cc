#include "schedules/codegen/cuda_codegen.h"

#include <algorithm>
#include <functional>
#include <map>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "schedules/codegen/c_printer.h"
#include "schedules/ir/affine.h"
#include "schedules/ir/expr.h"
#include "schedules/ir/stmt.h"
#include "schedules/ir/stmt_analysis.h"
#include "schedules/ir/substitute.h"
#include "schedules/lower/plan_vectorization.h"
#include "schedules/util/check.h"

namespace tessel::schedules {
namespace {

using codegen::CodeGenC;
using codegen::kPrecAdd;
using codegen::kPrecAnd;

const char* const kLaneNames[] = {"x", "y", "z", "w"};

int ThreadAxis(ThreadTag t) {
  switch (t) {
    case ThreadTag::kBlockX:
    case ThreadTag::kThreadX:
    case ThreadTag::kClusterX:
      return 0;
    case ThreadTag::kBlockY:
    case ThreadTag::kThreadY:
      return 1;
    case ThreadTag::kBlockZ:
    case ThreadTag::kThreadZ:
      return 2;
    default:
      return -1;
  }
}

std::string Hex32(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "0x%08xu", v);
  return buf;
}

constexpr codegen::StorageNames kCudaStorage = {
    "int",          "long long",        "half",         "__nv_bfloat16",
    "__half2float", "__bfloat162float", "__float2half", "__float2bfloat16"};

// A slot of the kernel's shared-memory plan (Kernel::shared) as declared: its C name and
// element type.
struct SharedDecl {
  std::string name;
  std::string type;
  const SharedSlot* slot;
};

class CudaCodeGen final : public CodeGenC {
 public:
  CudaCodeGen(const Program& p, const Target& t)
      : CodeGenC(p.needs_int64_indices, kCudaStorage), program_(p), target_(t) {}

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

  void EmitFor(const ForNode& n) override;
  void EmitAllocate(const AllocateNode& n) override;
  void EmitBarrier(BarrierScope scope) override;
  // Other blocks' writes (a cooperative kernel's written global buffers) are read from L2 (L1 is
  // not coherent across SMs); streamed buffers (Kernel::stream_loads / stream_stores) are read
  // and written with evict-first hints.
  std::string LoadAccess(const LoadNode& n) override {
    const std::string a = Access(n.buffer, n.indices);
    const char* f = LoadIntrinsic(n.buffer.get());
    return f != nullptr ? absl::StrCat(f, "(&", a, ")") : a;
  }
  std::string StoreStatement(const StoreNode& n, const std::string& access,
                             const std::string& value) override {
    return stream_stores_.count(n.buffer.get())
               ? absl::StrCat("__stcs(&", access, ", ", value, ");")
               : CodeGenC::StoreStatement(n, access, value);
  }
  // __ldcg, __ldcs, or nullptr for a plain load of buffer `b`.
  const char* LoadIntrinsic(const Buffer* b) const {
    if (cross_block_.count(b)) return "__ldcg";
    if (stream_loads_.count(b)) return "__ldcs";
    return nullptr;
  }
  // A vector load from `ptr` (a `const vec*` expression) of buffer `b`. A parameter the kernel
  // does not write goes through the read-only data cache (__ldg): nvcc stops inferring that on
  // its own once the alignment hint reassigns the parameter (0.63 against 0.67 of the copy
  // bandwidth for the grid layernorm on an H100, whose bias is read every row).
  std::string VectorLoad(const Buffer* b, const std::string& ptr) const {
    const char* f = LoadIntrinsic(b);
    if (f == nullptr && read_only_.count(b)) f = "__ldg";
    return f != nullptr ? absl::StrCat(f, "(", ptr, ")") : absl::StrCat("*", ptr);
  }
  void EmitAllReduce(const AllReduceNode& n) override;
  // An AllReduce over cluster.x: one value a CTA, combined through distributed shared memory.
  void EmitClusterAllReduce(const AllReduceNode& n);
  // The shuffle mask of this thread's group of `lanes` (a power of two up to 32) lanes along
  // threadIdx.x.
  std::string LaneMask(int64_t lanes) const;
  // The first of this thread's row's `warps` per-warp entries in an all-reduce's scratch, as a
  // prefix of an index ("" for a one-dimensional block).
  std::string WarpRowPrefix(int64_t warps) const;
  // A centred (sum, squares) pair over threadIdx.x (AllReduceNode::centered).
  void EmitCenteredAllReduce(const AllReduceNode& n);

 private:
  absl::Status EmitKernel(const Kernel& k, KernelSource* ks);
  // Checks that every AllReduce of the kernel is one this generator prints.
  absl::Status CheckAllReduces(const Kernel& k);
  // Names the slots of the kernel's shared-memory plan (PlanSharedMemory) and checks its size.
  absl::Status DeclareShared(const Kernel& k);
  // The shared scratch of the plan for values of C type `type` (fails when there is none).
  std::string Scratch(const std::map<std::string, std::string>& scratch, const std::string& type);
  void EmitThreadBinding(const ForNode& n);
  // A vectorized loop as its plan (Kernel::vectors, plan_vectorization.h) says.
  void EmitVectorized(const ForNode& n, const VectorLoop& plan);
  // One vector store a chunk of lanes (VectorLoop::kVectorStore).
  void EmitVectorStore(const ForNode& n, const VectorLoop& plan);
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
  // `min`) as one vector; returns each load's per-lane expressions.
  std::vector<std::vector<std::string>> EmitLaneLoads(const VarNode* v, const Expr& min,
                                                      const std::vector<Expr>& loads, int64_t lanes,
                                                      int64_t first);
  // threadIdx.x + B0 * (threadIdx.y + B1 * threadIdx.z), dropping axes of extent 1.
  std::string LinearThreadIndex() const;
  std::string Combine(ReduceOp op, DType t, const std::string& a, const std::string& b);
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
  // AllReduce scratch array name by compute type.
  std::map<std::string, std::string> red_scratch_;
  std::map<std::string, std::string> cluster_scratch_;  // per type: a CTA's slot (cluster.x)
  // Cooperative kernel: global buffers it writes, which other blocks read after grid barriers.
  std::unordered_set<const Buffer*> cross_block_;
  // Global buffers of the kernel's params that it does not write.
  std::unordered_set<const Buffer*> read_only_;
  std::unordered_set<const Buffer*> stream_loads_, stream_stores_;  // of the current kernel
  bool uses_grid_barrier_ = false;  // some kernel: emit the barrier function
};

namespace {

// The grid barrier of cooperative kernels, over `sync` (LaunchConfig::cooperative): thread 0 of
// each block reads the generation, arrives on the counter (acquire-release), and either is the
// last (resets the counter, then releases the next generation) or polls the generation with
// acquire loads. The block barriers on both sides order the block's other threads. Word 0 is
// back at zero after every barrier, so the pair needs zeroing only once.
std::string GridBarrierFunction() {
  return R"(__device__ __forceinline__ void tessel_grid_barrier(unsigned int* sync,
                                                    unsigned int blocks) {
  __syncthreads();
  if (threadIdx.x == 0 && threadIdx.y == 0 && threadIdx.z == 0) {
    unsigned int gen, old;
    asm volatile("ld.relaxed.gpu.global.u32 %0, [%1];" : "=r"(gen) : "l"(sync + 1) : "memory");
    asm volatile("atom.acq_rel.gpu.global.add.u32 %0, [%1], 1;" : "=r"(old) : "l"(sync)
                 : "memory");
    if (old == blocks - 1) {
      asm volatile("st.relaxed.gpu.global.u32 [%0], 0;" ::"l"(sync) : "memory");
      asm volatile("red.release.gpu.global.add.u32 [%0], 1;" ::"l"(sync + 1) : "memory");
    } else {
      unsigned int cur;
      do {
        asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(cur) : "l"(sync + 1)
                     : "memory");
      } while (cur == gen);
    }
  }
  __syncthreads();
}
)";
}

}  // namespace

void CudaCodeGen::EmitBarrier(BarrierScope scope) {
  if (scope == BarrierScope::kBlock) {
    Line("__syncthreads();");
    return;
  }
  if (!kernel_->launch.cooperative) {
    Fail(absl::InvalidArgumentError(
        WithKernel("has a grid barrier but is not launched cooperatively; set "
                   "LaunchConfig::cooperative (lowering does when a stage writes across blocks)")));
    return;
  }
  uses_grid_barrier_ = true;
  const int64_t blocks =
      kernel_->launch.grid[0] * kernel_->launch.grid[1] * kernel_->launch.grid[2];
  Line(absl::StrCat("tessel_grid_barrier(tessel_grid_sync, ", blocks, "u);"));
}

absl::StatusOr<GeneratedSource> CudaCodeGen::Generate() {
  if (!target_.is_cuda()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "GenerateCuda was given target '", target_.ToString(),
        "'; generate host code with GenerateHost or pass a cuda target (MakeTarget(\"cuda\"))"));
  }
  if (program_.target != TargetKind::kCuda) {
    return absl::InvalidArgumentError(
        absl::StrCat("program '", program_.name,
                     "' was lowered for the host target; lower it for cuda to generate CUDA"));
  }
  GeneratedSource out;
  out.target = TargetKind::kCuda;
  out.buffers = program_.buffers;
  std::string kernels;
  std::unordered_set<std::string> entries;
  for (const Kernel& k : program_.kernels) {
    if (!codegen::IsCIdentifier(k.name) || !entries.insert(k.name).second) {
      return absl::InvalidArgumentError(absl::StrCat(
          "kernel name '", k.name, "' of program '", program_.name,
          "' is not a unique C identifier; name kernels with letters, digits and '_'"));
    }
    KernelSource ks;
    absl::Status st = EmitKernel(k, &ks);
    if (!st.ok()) return st;
    kernels += "\n" + TakeOutput();
    out.kernels.push_back(std::move(ks));
  }
  std::string code = codegen::ProgramHeaderComment(program_, target_.ToString());
  for (const KernelSource& ks : out.kernels) {
    absl::StrAppend(&code, "// Kernel ", ks.entry, ": grid (", absl::StrJoin(ks.launch.grid, ", "),
                    ") block (", absl::StrJoin(ks.launch.block, ", "), ") dynamic shared ",
                    ks.launch.dynamic_shared_bytes, " bytes\n");
  }
  if (uses_f16_) absl::StrAppend(&code, "\n#include <cuda_fp16.h>\n");
  if (uses_bf16_) absl::StrAppend(&code, uses_f16_ ? "" : "\n", "#include <cuda_bf16.h>\n");
  if (uses_grid_barrier_) absl::StrAppend(&code, "\n", GridBarrierFunction());
  if (uses_floordiv_ || uses_float_floormod_) {
    absl::StrAppend(&code, "\n",
                    codegen::FloorDivHelpers("__device__ __forceinline__", uses_floordiv_,
                                             uses_float_floormod_));
  }
  absl::StrAppend(&code, kernels);
  out.code = std::move(code);
  return out;
}

absl::Status CudaCodeGen::CheckAllReduces(const Kernel& k) {
  absl::Status st;
  const auto& block = k.launch.block;
  WalkStmt(k.body, [&](const Stmt& s) {
    if (!st.ok()) return;
    const auto* r = As<AllReduceNode>(s);
    if (r == nullptr) return;
    const std::string what =
        absl::StrCat("AllReduce over ", ThreadTagName(r->thread), " with extent ", r->extent);
    if (r->thread == ThreadTag::kClusterX) {
      if (r->extent != k.launch.cluster) {
        st = absl::InvalidArgumentError(
            WithKernel(absl::StrCat(what, ": the kernel's clusters have ", k.launch.cluster,
                                    " CTAs; the extent must equal the cluster size")));
      } else if (r->value->dtype == DType::kBool) {
        st = absl::InvalidArgumentError(
            WithKernel(what + ": boolean values cannot be reduced; reduce an integer"));
      }
      return;
    }
    if (!IsThreadTag(r->thread)) {
      st = absl::InvalidArgumentError(WithKernel(
          absl::StrCat(what,
                       ": cross-thread reductions combine the threads of threadIdx.x, .y or .z; "
                       "bind the reduction loop to a thread axis")));
      return;
    }
    const int axis = ThreadAxis(r->thread);
    if (r->centered() &&
        (axis != 0 || (r->value->dtype != DType::kFloat32 && r->value->dtype != DType::kFloat64) ||
         r->m2_result->scope != MemScope::kLocal)) {
      st = absl::InvalidArgumentError(
          WithKernel(what + ": a centred (sum, squares) reduction combines f32 or f64 values "
                            "across threadIdx.x into local results; bind its loop to "
                            "threadIdx.x"));
      return;
    }
    if (r->extent != block[axis]) {
      st = absl::InvalidArgumentError(WithKernel(
          absl::StrCat(what, ": the block has ", block[axis],
                       " threads on that axis; the extent must equal the block dimension")));
      return;
    }
    if (r->value->dtype == DType::kBool) {
      st = absl::InvalidArgumentError(
          WithKernel(what + ": boolean values cannot be reduced; reduce an integer"));
      return;
    }
    if (r->result->scope != MemScope::kLocal || r->result->AllocatedElements() < 1) {
      st = absl::InvalidArgumentError(
          WithKernel(absl::StrCat(what, ": its result buffer '", r->result->name,
                                  "' must be a local buffer of at least one element")));
      return;
    }
    const int64_t e = r->extent;
    if (axis == 0) {
      const bool pow2 = e >= 1 && e <= 32 && (e & (e - 1)) == 0;
      if (!pow2 && e % 32 != 0) {
        st = absl::UnimplementedError(WithKernel(absl::StrCat(
            what,
            " is not supported: threadIdx.x reductions need a power of two up to 32 "
            "or a multiple of 32 threads; split the reduction loop so that threadIdx.x "
            "gets such an extent")));
        return;
      }
    }
  });
  return st;
}

absl::Status CudaCodeGen::DeclareShared(const Kernel& k) {
  shared_.clear();
  red_scratch_.clear();
  cluster_scratch_.clear();
  for (const SharedSlot& slot : k.shared.slots) {
    SharedDecl d{"", "", &slot};
    switch (slot.kind) {
      case SharedSlot::Kind::kBuffer:
        d.name = BindBuffer(slot.buffer.get());
        d.type = StorageType(slot.dtype);
        break;
      case SharedSlot::Kind::kReduceScratch:
        d.type = ComputeType(slot.dtype);
        d.name = names_.Temp(absl::StrCat("red_", DTypeName(slot.dtype)));
        red_scratch_[d.type] = d.name;
        break;
      case SharedSlot::Kind::kClusterScratch:
        d.type = ComputeType(slot.dtype);
        d.name = names_.Temp(absl::StrCat("cluster_red_", DTypeName(slot.dtype)));
        cluster_scratch_[d.type] = d.name;
        break;
    }
    shared_.push_back(d);
  }
  if (k.shared.bytes > target_.max_shared_bytes_optin) {
    return absl::InvalidArgumentError(
        WithKernel(absl::StrCat("needs ", k.shared.bytes, " bytes of shared memory, more than the ",
                                target_.max_shared_bytes_optin, " bytes a block can have on ",
                                target_.arch, "; use smaller shared-memory tiles")));
  }
  return absl::OkStatus();
}

std::string CudaCodeGen::Scratch(const std::map<std::string, std::string>& scratch,
                                 const std::string& type) {
  auto it = scratch.find(type);
  if (it != scratch.end()) return it->second;
  Fail(absl::InvalidArgumentError(
      absl::StrCat("an all-reduce of ", type,
                   " values has no scratch in the kernel's shared-memory plan; plan it with "
                   "PlanSharedMemory (lowering does)")));
  return "tessel_missing_scratch";
}

absl::Status CudaCodeGen::EmitKernel(const Kernel& k, KernelSource* ks) {
  ResetKernelState();
  kernel_ = &k;
  ks->entry = k.name;
  ks->launch = k.launch;
  const int64_t threads = k.launch.threads_per_block();
  for (int i = 0; i < 3; ++i) {
    if (k.launch.grid[i] < 1 || k.launch.block[i] < 1) {
      return absl::InvalidArgumentError(
          WithKernel(absl::StrCat("launch grid (", absl::StrJoin(k.launch.grid, ", "), ") block (",
                                  absl::StrJoin(k.launch.block, ", "),
                                  ") has an empty dimension; every one must be >= 1")));
    }
  }
  if (threads > target_.max_threads_per_block) {
    return absl::InvalidArgumentError(WithKernel(absl::StrCat(
        "launches ", threads, " threads per block, more than the limit of ",
        target_.max_threads_per_block, " on ", target_.arch, "; use smaller thread extents")));
  }

  // Buffers the kernel writes (stores, and operands of intrinsic calls, conservatively).
  std::unordered_set<const Buffer*> written;
  CollectWrittenBuffers(k.body, &written);
  stream_loads_.clear();
  stream_stores_.clear();
  for (const BufferPtr& b : k.stream_loads) stream_loads_.insert(b.get());
  for (const BufferPtr& b : k.stream_stores) stream_stores_.insert(b.get());
  cross_block_.clear();
  read_only_.clear();
  if (k.launch.cooperative) {
    for (const Buffer* b : written) {
      if (b->scope == MemScope::kGlobal) cross_block_.insert(b);
    }
  }

  std::vector<std::string> params;
  std::vector<std::string> aligned;  // alignment hints, one per parameter
  std::unordered_set<const Buffer*> param_set;
  for (const BufferPtr& b : k.params) {
    int index = -1;
    for (size_t i = 0; i < program_.buffers.size(); ++i) {
      if (program_.buffers[i].buffer == b) index = static_cast<int>(i);
    }
    if (index < 0 || b->scope != MemScope::kGlobal || !param_set.insert(b.get()).second) {
      return absl::InvalidArgumentError(WithKernel(absl::StrCat(
          "param '", b->name,
          "' is not a distinct global buffer of the program; kernel params must be taken from "
          "Program::buffers")));
    }
    ks->params.push_back(index);
    const std::string name = BindBuffer(b.get());
    const std::string type = StorageType(b->dtype);
    const std::string ptr =
        written.count(b.get()) ? absl::StrCat(type, "*") : absl::StrCat("const ", type, "*");
    params.push_back(absl::StrCat(ptr, " __restrict__ ", name));
    if (!written.count(b.get())) {
      read_only_.insert(b.get());
      aligned.push_back(absl::StrCat(name, " = static_cast<", ptr, ">(__builtin_assume_aligned(",
                                     name, ", 16));"));
    }
  }
  if (k.launch.cooperative) params.push_back("unsigned int* __restrict__ tessel_grid_sync");
  if (absl::Status st = CheckAllReduces(k); !st.ok()) return st;
  if (absl::Status st = DeclareShared(k); !st.ok()) return st;
  vectors_.clear();
  for (const VectorLoop& v : k.vectors) vectors_[v.loop.get()] = &v;
  // The kernel's own dynamic shared memory, or the occupancy limit's padding (lowering), if more.
  ks->launch.dynamic_shared_bytes =
      std::max(k.shared.dynamic ? k.shared.bytes : 0, k.launch.dynamic_shared_bytes);

  // Clusters have compile-time dimensions: a plain launch of a multiple of them works.
  const std::string attrs = absl::StrCat(
      k.launch.cluster > 1 ? absl::StrCat("__cluster_dims__(", k.launch.cluster, ", 1, 1) ") : "",
      "__launch_bounds__(", threads, ") ");
  std::string head = absl::StrCat("extern \"C\" __global__ void ", attrs, k.name, "(",
                                  absl::StrJoin(params, ", "), ")");
  if (head.size() + 2 > 100 && !params.empty()) {
    head = absl::StrCat("extern \"C\" __global__ void ", attrs, k.name, "(\n    ",
                        absl::StrJoin(params, ",\n    "), ")");
  }
  OpenBlock(head);
  // Global buffers are allocated 256-byte aligned (cuMemAlloc): the hint lets the compiler merge
  // adjacent loads of one thread into 16-byte ones. Not for written buffers: merged stores tie up
  // registers (a 4096^3 GEMM went from 127 to 151 registers and lost half its occupancy).
  for (const std::string& a : aligned) Line(a);
  if (k.shared.dynamic) {
    Line(absl::StrCat("// ", k.shared.bytes,
                      " bytes of shared memory: dynamic (the launch must allow more than 48 KiB)"));
    Line("extern __shared__ __align__(16) unsigned char tessel_smem[];");
    for (const SharedDecl& s : shared_) {
      Line(absl::StrCat(s.type, "* const ", s.name, " = reinterpret_cast<", s.type,
                        "*>(tessel_smem + ", s.slot->offset, ");  // ", s.slot->elements,
                        " elements"));
    }
  } else {
    for (const SharedDecl& s : shared_) {
      Line(absl::StrCat("__shared__ __align__(16) ", s.type, " ", s.name, "[", s.slot->elements,
                        "];"));
    }
  }
  EmitStmt(k.body);
  CloseBlock();
  if (failed()) {
    return absl::Status(status().code(), WithKernel(std::string(status().message())));
  }
  return absl::OkStatus();
}

void CudaCodeGen::EmitAllocate(const AllocateNode& n) {
  const Buffer& b = *n.buffer;
  switch (b.scope) {
    case MemScope::kShared:  // hoisted to the top of the kernel (DeclareShared)
      if (std::none_of(shared_.begin(), shared_.end(),
                       [&](const SharedDecl& d) { return d.slot->buffer.get() == &b; })) {
        Fail(absl::InvalidArgumentError(absl::StrCat(
            "shared buffer '", b.name,
            "' has no place in the kernel's shared-memory plan; plan it with PlanSharedMemory "
            "(lowering does)")));
      }
      EmitStmt(n.body);
      return;
    case MemScope::kLocal: {
      const std::string name = BindBuffer(&b);
      const bool nested = !DeclareInBlock(name);
      if (nested) {
        OpenBlock("");
        DeclareInBlock(name);
      }
      Line(absl::StrCat("__align__(16) ", StorageType(b.dtype), " ", name, "[",
                        std::max<int64_t>(1, b.AllocatedElements()), "];"));
      EmitStmt(n.body);
      if (nested) CloseBlock();
      return;
    }
    case MemScope::kGlobal:
      Fail(absl::InvalidArgumentError(absl::StrCat(
          "Allocate of global buffer '", b.name,
          "': global buffers are program buffers passed to kernels; allocate shared or local "
          "buffers only")));
      return;
    case MemScope::kFragment:
      Fail(absl::UnimplementedError(absl::StrCat(
          "fragment buffer '", b.name,
          "': tensor-core fragments need the tensorize lowering, which the CUDA code generator "
          "does not support yet")));
      return;
  }
}

void CudaCodeGen::EmitFor(const ForNode& n) {
  switch (n.kind) {
    case ForKind::kSerial:
      EmitLoop(n, {AnnotationUnrollPragma(n, "#pragma unroll", /*full_needs_count=*/false)});
      return;
    case ForKind::kUnrolled:
      // A vthread loop pushed inward by lowering (inject_vthread.h) is an unrolled loop.
      EmitLoop(n, {"#pragma unroll"}, n.thread == ThreadTag::kVThread ? "  // vthread" : "");
      return;
    case ForKind::kParallel:
      Fail(absl::InvalidArgumentError(
          absl::StrCat("loop '", n.var->name,
                       "' is parallel: parallel loops are for the host target; bind the loop to "
                       "blockIdx/threadIdx instead")));
      return;
    case ForKind::kVectorized: {
      auto it = vectors_.find(&n);
      if (it == vectors_.end()) {
        Fail(absl::InvalidArgumentError(absl::StrCat(
            "vectorized loop '", n.var->name,
            "' has no plan in the kernel; plan it with PlanVectorization (lowering does)")));
        return;
      }
      EmitVectorized(n, *it->second);
      return;
    }
    case ForKind::kThreadBinding:
      EmitThreadBinding(n);
      return;
  }
}

void CudaCodeGen::EmitThreadBinding(const ForNode& n) {
  if (n.thread == ThreadTag::kVThread) {
    EmitLoop(n, {"#pragma unroll"}, "  // vthread");
    return;
  }
  const int axis = ThreadAxis(n.thread);
  if (axis < 0) {
    Fail(absl::InvalidArgumentError(
        absl::StrCat("loop '", n.var->name,
                     "' is a thread binding without a thread axis; bind it to "
                     "blockIdx.x/y/z, threadIdx.x/y/z, vthread or cluster.x")));
    return;
  }
  const bool block_axis = IsBlockTag(n.thread) || n.thread == ThreadTag::kClusterX;
  // With clusters along x, blockIdx.x is cluster * C + rank.
  const int64_t cluster = kernel_->launch.cluster;
  int64_t dim = IsThreadTag(n.thread) ? kernel_->launch.block[axis] : kernel_->launch.grid[axis];
  std::string builtin = ThreadTagName(n.thread);
  if (n.thread == ThreadTag::kClusterX) {
    dim = cluster;
    builtin = absl::StrCat("(blockIdx.x % ", cluster, ")");
  } else if (axis == 0 && block_axis && cluster > 1) {
    dim /= cluster;
    builtin = absl::StrCat("(blockIdx.x / ", cluster, ")");
  }
  int64_t extent = 0;
  if (!IsConstInt(n.extent, &extent)) {
    Fail(absl::InvalidArgumentError(absl::StrCat(
        "loop '", n.var->name, "' bound to ", builtin, " has extent ", ToString(n.extent),
        ", which is not a constant; thread and block extents must be constants")));
    return;
  }
  bool guard = false;
  if (extent != dim) {
    if (extent > dim || ContainsSync(n.body)) {
      Fail(absl::InvalidArgumentError(absl::StrCat(
          "loop '", n.var->name, "' bound to ", builtin, " has extent ", extent, " but the launch ",
          block_axis ? "grid" : "block", " has ", dim, " on that axis",
          extent > dim ? "" : " and the loop body synchronizes threads",
          "; the launch configuration must match the bound extents")));
      return;
    }
    guard = true;
  }
  int64_t min = 0;
  const bool zero_min = IsConstInt(n.min, &min) && min == 0;
  const std::string value =
      zero_min ? builtin : absl::StrCat(builtin, " + ", Operand(n.min, kPrecAdd + 1));
  const std::string name = BindVar(n.var.get(), NonNegative(n.min));
  const bool nested = !DeclareInBlock(name);
  if (nested) {
    OpenBlock("");
    DeclareInBlock(name);
  }
  Line(absl::StrCat("const ", ComputeType(n.var->dtype), " ", name, " = ", value, ";",
                    AnnotationComment(n)));
  if (guard) OpenBlock(absl::StrCat("if (", builtin, " < ", extent, ")"));
  EmitStmt(n.body);
  if (guard) CloseBlock();
  if (nested) CloseBlock();
  UnbindVar(n.var.get());
}

void CudaCodeGen::EmitVectorized(const ForNode& n, const VectorLoop& plan) {
  switch (plan.kind) {
    case VectorLoop::Kind::kScalar:
      EmitLoop(n, {"#pragma unroll"}, "  // vectorized as scalars: " + plan.why);
      return;
    case VectorLoop::Kind::kVectorStore:
      EmitVectorStore(n, plan);
      return;
    case VectorLoop::Kind::kLaneStores:
      EmitLaneStores(n, plan);
      return;
    case VectorLoop::Kind::kReduction:
      EmitVectorizedReduction(n, plan);
      return;
  }
}

void CudaCodeGen::EmitVectorStore(const ForNode& n, const VectorLoop& plan) {
  const VarNode* v = n.var.get();
  int64_t width = 0;
  IsConstInt(n.extent, &width);
  const auto& store = static_cast<const StoreNode&>(*plan.body);
  const std::vector<Expr>& loads = plan.loads;
  const int64_t lanes = plan.lanes;
  const CudaVectorType store_vec = *CudaVecType(store.buffer->dtype, lanes);
  const std::string store_type = StorageType(store.buffer->dtype);
  const bool plain_copy = loads.size() == 1 && store.value.get() == loads[0].get() &&
                          loads[0]->dtype == store.buffer->dtype;
  OpenGuards(plan.guards);
  Line(absl::StrCat("// vectorized ", v->name, ": ", width / lanes, " x ", store_vec.name,
                    AnnotationComment(n)));
  BindVar(v, NonNegative(n.min));
  auto element = [&](const BufferPtr& b, const std::vector<Expr>& idx, int64_t offset) {
    return ElementAddress(b, idx, v, n.min, offset);
  };
  const bool stream = stream_stores_.count(store.buffer.get()) > 0;
  for (int64_t chunk = 0; chunk < width / lanes; ++chunk) {
    const int64_t first = chunk * lanes;
    const std::string ptr = absl::StrCat("reinterpret_cast<", store_vec.name, "*>(",
                                         element(store.buffer, store.indices, first), ")");
    // The store statement is open + value + close.
    const std::string open =
        stream ? absl::StrCat("__stcs(", ptr, ", ") : absl::StrCat("*", ptr, " = ");
    const std::string close = stream ? ");" : ";";
    if (plain_copy) {
      const auto& l = static_cast<const LoadNode&>(*loads[0]);
      Line(absl::StrCat(
          open,
          VectorLoad(l.buffer.get(), absl::StrCat("reinterpret_cast<const ", store_vec.name, "*>(",
                                                  element(l.buffer, l.indices, first), ")")),
          close));
      continue;
    }
    // Temporaries get a scope of their own.
    const bool scoped = !loads.empty() || !store_vec.natural;
    if (scoped) OpenBlock("");
    // Read every contiguous load as one vector.
    const std::vector<std::vector<std::string>> lane_values =
        EmitLaneLoads(v, n.min, loads, lanes, first);
    // Compute each lane with the loop variable and the vector loads substituted.
    std::vector<std::string> lanes_out;
    for (int64_t k = 0; k < lanes; ++k) {
      OverrideLane(v, n.min + MakeInt(first + k), loads, lane_values, k);
      lanes_out.push_back(StoredValue(store.buffer->dtype, store.value));
    }
    ClearLaneOverrides(v, loads);
    if (store_vec.natural) {
      const std::string make = absl::StrCat(open, "make_", store_vec.name, "(");
      const std::string joined = absl::StrJoin(lanes_out, ", ");
      if (make.size() + joined.size() + close.size() + 1 + 2 * indent() <= 100) {
        Line(absl::StrCat(make, joined, ")", close));
      } else {  // one lane per line
        Line(make);
        for (size_t k = 0; k < lanes_out.size(); ++k) {
          Line(absl::StrCat("    ", lanes_out[k],
                            k + 1 < lanes_out.size() ? "," : absl::StrCat(")", close)));
        }
      }
    } else {
      const std::string tmp = names_.Temp("out");
      Line(absl::StrCat("__align__(16) ", store_type, " ", tmp, "[", lanes, "];"));
      for (int64_t k = 0; k < lanes; ++k) {
        Line(absl::StrCat(tmp, "[", k, "] = ", lanes_out[k], ";"));
      }
      Line(absl::StrCat(open, "*reinterpret_cast<const ", store_vec.name, "*>(", tmp, ")", close));
    }
    if (scoped) CloseBlock();
  }
  UnbindVar(v);
  if (!plan.guards.empty()) CloseBlock();
}

void CudaCodeGen::OpenGuards(const std::vector<Expr>& guards) {
  if (guards.empty()) return;
  std::vector<std::string> conds;
  for (const Expr& g : guards) conds.push_back(Operand(g, kPrecAnd + 1));
  OpenBlock("if (" + absl::StrJoin(conds, " && ") + ")");
}

void CudaCodeGen::OverrideLane(const VarNode* v, const Expr& value, const std::vector<Expr>& loads,
                               const std::vector<std::vector<std::string>>& lane_values,
                               int64_t k) {
  int prec = 0;
  const std::string printed = Print(value, &prec);
  var_override_[v] = {printed, prec};
  for (size_t i = 0; i < loads.size(); ++i) load_override_[loads[i].get()] = lane_values[i][k];
}

void CudaCodeGen::ClearLaneOverrides(const VarNode* v, const std::vector<Expr>& loads) {
  var_override_.erase(v);
  for (const Expr& l : loads) load_override_.erase(l.get());
}

void CudaCodeGen::EmitLaneStores(const ForNode& n, const VectorLoop& plan) {
  const VarNode* v = n.var.get();
  int64_t width = 0;
  IsConstInt(n.extent, &width);
  const auto& store = static_cast<const StoreNode&>(*plan.body);
  OpenGuards(plan.guards);
  Line(absl::StrCat("// vectorized ", v->name, ": ", width / plan.lanes, " x ", plan.lanes,
                    "-lane loads, stored lane by lane to registers", AnnotationComment(n)));
  EmitLanes(n, plan.loads, plan.lanes, [&](const Expr& lane) {
    const std::string value = StoredValue(store.buffer->dtype, store.value);
    const Expr at =
        FoldTrailingConstants(Substitute(FlatIndex(*store.buffer, store.indices), {{v, lane}}));
    Line(absl::StrCat(BufferName(store.buffer.get()), "[", Print(at), "] = ", value, ";"));
  });
  if (!plan.guards.empty()) CloseBlock();
}

void CudaCodeGen::EmitLanes(const ForNode& n, const std::vector<Expr>& loads, int64_t lanes,
                            const std::function<void(const Expr&)>& lane) {
  const VarNode* v = n.var.get();
  int64_t width = 0;
  IsConstInt(n.extent, &width);
  BindVar(v, NonNegative(n.min));
  for (int64_t chunk = 0; chunk < width / lanes; ++chunk) {
    const int64_t first = chunk * lanes;
    OpenBlock("");
    const std::vector<std::vector<std::string>> lane_values =
        EmitLaneLoads(v, n.min, loads, lanes, first);
    for (int64_t k = 0; k < lanes; ++k) {
      const Expr value = n.min + MakeInt(first + k);
      OverrideLane(v, value, loads, lane_values, k);
      lane(value);
      ClearLaneOverrides(v, loads);
    }
    CloseBlock();
  }
  UnbindVar(v);
}

std::string CudaCodeGen::ElementAddress(const BufferPtr& b, const std::vector<Expr>& idx,
                                        const VarNode* v, const Expr& min, int64_t offset) {
  const Expr at =
      FoldTrailingConstants(Substitute(FlatIndex(*b, idx), {{v, min + MakeInt(offset)}}));
  return absl::StrCat("&", BufferName(b.get()), "[", Print(at), "]");
}

std::vector<std::vector<std::string>> CudaCodeGen::EmitLaneLoads(const VarNode* v, const Expr& min,
                                                                 const std::vector<Expr>& loads,
                                                                 int64_t lanes, int64_t first) {
  std::vector<std::vector<std::string>> lane_values(loads.size());
  for (size_t i = 0; i < loads.size(); ++i) {
    const auto& l = static_cast<const LoadNode&>(*loads[i]);
    const CudaVectorType vec = *CudaVecType(l.dtype, lanes);
    const std::string tmp = names_.Temp("vec");
    const std::string src = VectorLoad(
        l.buffer.get(), absl::StrCat("reinterpret_cast<const ", vec.name, "*>(",
                                     ElementAddress(l.buffer, l.indices, v, min, first), ")"));
    if (vec.natural) {
      Line(absl::StrCat("const ", vec.name, " ", tmp, " = ", src, ";"));
      for (int64_t k = 0; k < lanes; ++k) lane_values[i].push_back(tmp + "." + kLaneNames[k]);
    } else {
      Line(absl::StrCat("__align__(16) ", StorageType(l.dtype), " ", tmp, "[", lanes, "];"));
      Line(absl::StrCat("*reinterpret_cast<", vec.name, "*>(", tmp, ") = ", src, ";"));
      for (int64_t k = 0; k < lanes; ++k) {
        lane_values[i].push_back(StorageToCompute(l.dtype, absl::StrCat(tmp, "[", k, "]")));
      }
    }
  }
  return lane_values;
}

void CudaCodeGen::EmitVectorizedReduction(const ForNode& n, const VectorLoop& plan) {
  int64_t width = 0;
  IsConstInt(n.extent, &width);
  OpenGuards(plan.guards);
  Line(absl::StrCat(
      "// vectorized ", n.var->name, " (accumulated lane by lane): ", width / plan.lanes, " x ",
      CudaVecType(plan.loads[0]->dtype, plan.lanes)->name, " per load", AnnotationComment(n)));
  const bool scoped_lanes =
      As<StoreNode>(plan.body) == nullptr;  // each lane's lets in a block of their own
  EmitLanes(n, plan.loads, plan.lanes, [&](const Expr&) {
    if (scoped_lanes) OpenBlock("");
    EmitStmt(plan.body);
    if (scoped_lanes) CloseBlock();
  });
  if (!plan.guards.empty()) CloseBlock();
}

std::string CudaCodeGen::LaneMask(int64_t lanes) const {
  if (lanes >= 32) return Hex32(0xffffffffu);
  const auto& block = kernel_->launch.block;
  if (block[1] * block[2] == 1) return Hex32((1u << lanes) - 1);
  return absl::StrCat("(", Hex32((1u << lanes) - 1), " << ((", LinearThreadIndex(), ") & ",
                      32 - lanes, "))");
}

std::string CudaCodeGen::WarpRowPrefix(int64_t warps) const {
  const auto& block = kernel_->launch.block;
  if (block[2] > 1) {
    return absl::StrCat("(threadIdx.y + ", block[1], " * threadIdx.z) * ", warps, " + ");
  }
  if (block[1] > 1) return absl::StrCat("threadIdx.y * ", warps, " + ");
  return "";
}

std::string CudaCodeGen::LinearThreadIndex() const {
  const auto& b = kernel_->launch.block;
  std::string s = "threadIdx.x";
  if (b[1] > 1) absl::StrAppend(&s, " + ", b[0], " * threadIdx.y");
  if (b[2] > 1) absl::StrAppend(&s, " + ", b[0] * b[1], " * threadIdx.z");
  return s;
}

std::string CudaCodeGen::Combine(ReduceOp op, DType t, const std::string& a, const std::string& b) {
  switch (op) {
    case ReduceOp::kSum:
      return a + " + " + b;
    case ReduceOp::kMax:
      return MinMax(true, t, a, b);
    case ReduceOp::kMin:
      return MinMax(false, t, a, b);
  }
  return a;
}

void CudaCodeGen::EmitAllReduce(const AllReduceNode& n) {
  if (n.thread == ThreadTag::kClusterX) {
    EmitClusterAllReduce(n);
    return;
  }
  if (n.centered()) {
    EmitCenteredAllReduce(n);
    return;
  }
  // Checked by CheckAllReduces: a thread axis, extent == block dimension, a supported extent.
  const auto& block = kernel_->launch.block;
  const int axis = ThreadAxis(n.thread);
  const int64_t e = n.extent;
  const DType t = n.value->dtype;
  const std::string type = ComputeType(t);
  const std::string value = Print(n.value);
  const std::string result = absl::StrCat(BufferName(n.result.get()), "[0]");
  const std::string red = "tessel_red";
  auto store_result = [&] { Line(result + " = " + ComputeToStorage(n.result->dtype, red) + ";"); };
  OpenBlock("", absl::StrCat("  // allreduce_", ReduceOpName(n.op), " over ",
                             ThreadTagName(n.thread), " (", e, " threads)"));
  if (axis == 0 && e <= 32) {
    // Butterfly within each group of e lanes: every lane ends with the same value.
    Line(absl::StrCat(type, " ", red, " = ", value, ";"));
    if (e > 1) {
      Line("const unsigned tessel_mask = " + LaneMask(e) + ";");
      for (int64_t off = e / 2; off >= 1; off /= 2) {
        Line(absl::StrCat(red, " = ",
                          Combine(n.op, t, red,
                                  absl::StrCat("__shfl_xor_sync(tessel_mask, ", red, ", ", off,
                                               e == 32 ? "" : absl::StrCat(", ", e), ")")),
                          ";"));
      }
    }
    store_result();
    CloseBlock();
    return;
  }
  const std::string scratch = Scratch(red_scratch_, type);
  if (axis == 0) {
    // Warp butterflies, one partial per warp through shared memory, then every thread combines
    // its row's partials in the same order.
    const int64_t warps = e / 32;
    const std::string row = WarpRowPrefix(warps);
    const std::string warp = row.empty() ? "threadIdx.x >> 5" : "(threadIdx.x >> 5)";
    Line(absl::StrCat(type, " ", red, " = ", value, ";"));
    for (int off = 16; off >= 1; off /= 2) {
      Line(absl::StrCat(
          red, " = ",
          Combine(n.op, t, red, absl::StrCat("__shfl_xor_sync(0xffffffffu, ", red, ", ", off, ")")),
          ";"));
    }
    Line("__syncthreads();  // earlier readers of the scratch are done");
    OpenBlock("if ((threadIdx.x & 31) == 0)");
    Line(absl::StrCat(scratch, "[", row, warp, "] = ", red, ";"));
    CloseBlock();
    Line("__syncthreads();");
    Line(absl::StrCat(red, " = ", scratch, "[", row, "0];"));
    Line("#pragma unroll");
    OpenBlock(absl::StrCat("for (int tessel_w = 1; tessel_w < ", warps, "; ++tessel_w)"));
    Line(absl::StrCat(red, " = ",
                      Combine(n.op, t, red, absl::StrCat(scratch, "[", row, "tessel_w]")), ";"));
    CloseBlock();
    store_result();
    CloseBlock();
    return;
  }
  // threadIdx.y / threadIdx.z: every thread writes its value, then combines its group's values.
  std::string base;
  int64_t stride = 0;
  if (axis == 1) {
    base = block[2] > 1 ? absl::StrCat("threadIdx.x + ", block[0] * block[1], " * threadIdx.z")
                        : "threadIdx.x";
    stride = block[0];
  } else {
    base =
        block[1] > 1 ? absl::StrCat("threadIdx.x + ", block[0], " * threadIdx.y") : "threadIdx.x";
    stride = block[0] * block[1];
  }
  Line("__syncthreads();  // earlier readers of the scratch are done");
  Line(absl::StrCat(scratch, "[", LinearThreadIndex(), "] = ", value, ";"));
  Line("__syncthreads();");
  Line("const int tessel_base = " + base + ";");
  Line(absl::StrCat(type, " ", red, " = ", scratch, "[tessel_base];"));
  OpenBlock(absl::StrCat("for (int tessel_k = 1; tessel_k < ", e, "; ++tessel_k)"));
  Line(absl::StrCat(
      red, " = ",
      Combine(n.op, t, red, absl::StrCat(scratch, "[tessel_base + tessel_k * ", stride, "]")),
      ";"));
  CloseBlock();
  store_result();
  CloseBlock();
}

void CudaCodeGen::EmitCenteredAllReduce(const AllReduceNode& n) {
  // Groups of threads hold (mean, squares about it, count); two groups combine as
  //   n = na + nb, mean = (ma na + mb nb) / n, squares = qa + qb + (mb - ma)^2 na nb / n
  // (Chan et al.), which gives the same bits in both partners of a butterfly. With a constant
  // count every group of a level has the same count: mean = (ma + mb) / 2 and the last term is
  // (mb - ma)^2 n / 2 for groups of n. Then one mean, squares and count per warp go through
  // shared memory, and every thread combines its row's warps in the same order.
  const auto& block = kernel_->launch.block;
  const int64_t e = n.extent;
  const std::string type = ComputeType(n.value->dtype);
  const auto* fixed = As<FloatImmNode>(n.count);
  auto lit = [&](double v) { return codegen::FloatLiteral(v, n.value->dtype); };
  OpenBlock("", absl::StrCat("  // allreduce_centered over threadIdx.x (", e, " threads)"));
  const std::string count = Print(n.count);
  Line(absl::StrCat(type, " tessel_n = ", count, ";"));
  Line(absl::StrCat(type, " tessel_m = tessel_n > ", lit(0), " ? (", Print(n.value),
                    ") / tessel_n : ", lit(0), ";"));
  Line(absl::StrCat(type, " tessel_q = ", Print(n.m2), ";"));
  // One combination of (tessel_m, tessel_q, tessel_n) with (m, q, c); `c_per_group` the count of
  // each group when every group has the same, else 0.
  auto combine = [&](const std::string& m, const std::string& q, const std::string& c,
                     double c_per_group) {
    Line(absl::StrCat("const ", type, " tessel_d = ", m, " - tessel_m;"));
    if (c_per_group > 0) {
      Line(absl::StrCat("tessel_m = ", lit(0.5), " * (tessel_m + ", m, ");"));
      Line(absl::StrCat("tessel_q = tessel_q + ", q, " + tessel_d * tessel_d * ",
                        lit(0.5 * c_per_group), ";"));
      Line(absl::StrCat("tessel_n = tessel_n + ", c, ";"));
      return;
    }
    Line(absl::StrCat("const ", type, " tessel_t = tessel_n + ", c, ";"));
    OpenBlock(absl::StrCat("if (tessel_t > ", lit(0), ")"));
    Line(absl::StrCat("tessel_q = tessel_q + ", q, " + tessel_d * tessel_d * (tessel_n * ", c,
                      " / tessel_t);"));
    Line(absl::StrCat("tessel_m = (tessel_m * tessel_n + ", m, " * ", c, ") / tessel_t;"));
    CloseBlock();
    Line("tessel_n = tessel_t;");
  };
  const int64_t lanes = std::min<int64_t>(e, 32);
  if (lanes > 1) Line("const unsigned tessel_mask = " + LaneMask(lanes) + ";");
  double group = fixed != nullptr ? fixed->value : 0;
  for (int64_t off = 1; off < lanes; off *= 2, group *= 2) {
    OpenBlock("");
    const std::string width = lanes == 32 ? "" : absl::StrCat(", ", lanes);
    for (const char* v : {"m", "q", "n"}) {
      if (fixed != nullptr && std::string(v) == "n") continue;
      Line(absl::StrCat("const ", type, " tessel_", v, "2 = __shfl_xor_sync(tessel_mask, tessel_",
                        v, ", ", off, width, ");"));
    }
    combine("tessel_m2", "tessel_q2", fixed != nullptr ? "tessel_n" : "tessel_n2", group);
    CloseBlock();
  }
  if (e > 32) {
    const std::string scratch = Scratch(red_scratch_, type);
    const int64_t warps = e / 32;
    const std::string row = WarpRowPrefix(warps);
    const int64_t plane = block[1] * block[2] * warps;  // means, then squares, then counts
    auto at = [&](int64_t p, const std::string& w) {
      return absl::StrCat(scratch, "[", p > 0 ? absl::StrCat(p * plane, " + ") : "", row, w, "]");
    };
    Line("__syncthreads();  // earlier readers of the scratch are done");
    OpenBlock("if ((threadIdx.x & 31) == 0)");
    Line(at(0, "(threadIdx.x >> 5)") + " = tessel_m;");
    Line(at(1, "(threadIdx.x >> 5)") + " = tessel_q;");
    if (fixed == nullptr) Line(at(2, "(threadIdx.x >> 5)") + " = tessel_n;");
    CloseBlock();
    Line("__syncthreads();");
    Line("tessel_m = " + at(0, "0") + ";");
    Line("tessel_q = " + at(1, "0") + ";");
    if (fixed == nullptr) {
      Line("tessel_n = " + at(2, "0") + ";");
      Line("#pragma unroll");
      OpenBlock(absl::StrCat("for (int tessel_w = 1; tessel_w < ", warps, "; ++tessel_w)"));
      combine(at(0, "tessel_w"), at(1, "tessel_w"), at(2, "tessel_w"), 0);
      CloseBlock();
    } else {
      // The warps in order, each of `group` elements, with constant weights: after w warps the
      // next one weighs 1 / (w + 1) in the mean and w / (w + 1) * group in the squares.
      for (int64_t w = 1; w < warps; ++w) {
        OpenBlock("");
        const std::string i = absl::StrCat(w);
        Line(absl::StrCat("const ", type, " tessel_d = ", at(0, i), " - tessel_m;"));
        Line(absl::StrCat("tessel_m = tessel_m + tessel_d * ",
                          lit(1.0 / static_cast<double>(w + 1)), ";"));
        Line(absl::StrCat("tessel_q = tessel_q + ", at(1, i), " + tessel_d * tessel_d * ",
                          lit(group * static_cast<double>(w) / static_cast<double>(w + 1)), ";"));
        CloseBlock();
      }
      Line(absl::StrCat("tessel_n = ", lit(group * static_cast<double>(warps)), ";"));
    }
  }
  Line(absl::StrCat(BufferName(n.result.get()),
                    "[0] = ", ComputeToStorage(n.result->dtype, "tessel_m * tessel_n"), ";"));
  Line(absl::StrCat(BufferName(n.m2_result.get()),
                    "[0] = ", ComputeToStorage(n.m2_result->dtype, "tessel_q"), ";"));
  CloseBlock();
}

void CudaCodeGen::EmitClusterAllReduce(const AllReduceNode& n) {
  // Every thread of every CTA runs this (the value is the same in all threads of a CTA): thread
  // 0 publishes the CTA's value in its shared slot, the cluster synchronizes, every thread reads
  // the C slots in rank order through distributed shared memory (so every CTA combines the same
  // values in the same order), and the cluster synchronizes again before a slot may be rewritten
  // or a CTA exit while others still read it.
  const DType t = n.value->dtype;
  const std::string type = ComputeType(t);
  const std::string slot = Scratch(cluster_scratch_, type);
  const std::string red = "tessel_red";
  const char* ld = type == "float"    ? "ld.shared::cluster.f32 %0, [%1];"
                   : type == "double" ? "ld.shared::cluster.f64 %0, [%1];"
                   : type == "int"    ? "ld.shared::cluster.s32 %0, [%1];"
                                      : "ld.shared::cluster.s64 %0, [%1];";
  const char* constraint = type == "float"    ? "=f"
                           : type == "double" ? "=d"
                           : type == "int"    ? "=r"
                                              : "=l";
  const std::string sync =
      "asm volatile(\"barrier.cluster.arrive.release.aligned;\\n\\t"
      "barrier.cluster.wait.acquire.aligned;\" ::: \"memory\");";
  OpenBlock("", absl::StrCat("  // allreduce_", ReduceOpName(n.op), " over cluster.x (", n.extent,
                             " CTAs, distributed shared memory)"));
  OpenBlock(absl::StrCat("if (", LinearThreadIndex(), " == 0)"));
  Line(absl::StrCat(slot, "[0] = ", Print(n.value), ";"));
  CloseBlock();
  Line(sync);
  Line(absl::StrCat("const unsigned tessel_local = static_cast<unsigned>(__cvta_generic_to_shared(",
                    slot, "));"));
  Line(absl::StrCat(type, " ", red, ";"));
  Line("#pragma unroll");
  OpenBlock(absl::StrCat("for (int tessel_r = 0; tessel_r < ", n.extent, "; ++tessel_r)"));
  Line("unsigned tessel_remote;");
  Line(
      "asm volatile(\"mapa.shared::cluster.u32 %0, %1, %2;\" : \"=r\"(tessel_remote) : "
      "\"r\"(tessel_local), \"r\"(tessel_r));");
  Line(absl::StrCat(type, " tessel_v;"));
  Line(absl::StrCat("asm volatile(\"", ld, "\" : \"", constraint,
                    "\"(tessel_v) : \"r\"(tessel_remote) : \"memory\");"));
  Line(absl::StrCat(red, " = tessel_r == 0 ? tessel_v : ", Combine(n.op, t, red, "tessel_v"), ";"));
  CloseBlock();
  Line(sync);
  Line(absl::StrCat(BufferName(n.result.get()), "[0] = ", ComputeToStorage(n.result->dtype, red),
                    ";"));
  CloseBlock();
}

}  // namespace

absl::StatusOr<GeneratedSource> GenerateCuda(const Program& p, const Target& t) {
  return CudaCodeGen(p, t).Generate();
}

}  // namespace tessel::schedules
