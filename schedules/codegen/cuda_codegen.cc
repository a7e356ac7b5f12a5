#include "schedules/codegen/cuda_codegen.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <map>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "schedules/codegen/c_printer.h"
#include "schedules/codegen/cuda_printer.h"
#include "schedules/ir/affine.h"
#include "schedules/ir/expr.h"
#include "schedules/ir/simplify.h"
#include "schedules/ir/stmt.h"
#include "schedules/ir/stmt_analysis.h"
#include "schedules/ir/substitute.h"
#include "schedules/ir/tensor_intrin.h"
#include "schedules/ir/thread_intrinsics.h"
#include "schedules/lower/plan_vectorization.h"
#include "schedules/util/check.h"

namespace tessel::schedules {
namespace codegen {
namespace {

// Whether `body` reallocates registers between warpgroups (setmaxnreg), which takes effect only
// under a register cap at entry: __launch_bounds__ with a minimum of 1 block.
bool SetsRegisters(const Stmt& body) {
  return CallsWhere(body, [](std::string_view name) { return name.starts_with(kCallSetmaxnreg); });
}

const char* const kLaneNames[] = {"x", "y", "z", "w"};

// Precedence of C's shifts and bitwise and (c_printer.h's scale).
constexpr int kPrecShift = 11, kPrecBitAnd = 8;

std::string Hex32(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "0x%08xu", v);
  return buf;
}

constexpr codegen::StorageNames kCudaStorage = {
    "int",          "long long",        "half",         "__nv_bfloat16",
    "__half2float", "__bfloat162float", "__float2half", "__float2bfloat16"};

}  // namespace

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

CudaCodeGen::CudaCodeGen(const Program& p, const Target& t)
    : CodeGenC(p.needs_int64_indices, kCudaStorage), program_(p), target_(t) {}

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

void CudaCodeGen::EmitBarrier(const BarrierNode& n) {
  const std::string comment = n.comment.empty() ? "" : "  // " + n.comment;
  if (n.scope == BarrierScope::kBlock) {
    Line("__syncthreads();" + comment);
    return;
  }
  if (n.scope == BarrierScope::kCluster) {
    Line(
        "asm volatile(\"barrier.cluster.arrive.release.aligned;\\n\\t"
        "barrier.cluster.wait.acquire.aligned;\" ::: \"memory\");" +
        comment);
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
  Line(absl::StrCat("tessel_grid_barrier(tessel_grid_sync, ", blocks, "u);", comment));
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
  if (!tensor_calls_.empty()) absl::StrAppend(&code, "\n", TensorCallHelpers(tensor_calls_));
  if (uses_floordiv_ || uses_float_floormod_) {
    absl::StrAppend(&code, "\n",
                    codegen::FloorDivHelpers("__device__ __forceinline__", uses_floordiv_,
                                             uses_float_floormod_));
  }
  absl::StrAppend(&code, kernels);
  out.code = std::move(code);
  return out;
}

absl::Status CudaCodeGen::DeclareShared(const Kernel& k) {
  shared_.clear();
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
        if (slot.buffer) buffer_names_[slot.buffer.get()] = d.name;
        break;
      case SharedSlot::Kind::kClusterScratch:
        d.type = ComputeType(slot.dtype);
        d.name = names_.Temp(absl::StrCat("cluster_red_", DTypeName(slot.dtype)));
        if (slot.buffer) buffer_names_[slot.buffer.get()] = d.name;
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
  // Tensor maps by value in the parameter space, where the copy engine reads them.
  for (size_t i = 0; i < k.launch.tensor_maps.size(); ++i) {
    params.push_back(absl::StrCat("const __grid_constant__ tessel_tensor_map tessel_tmap_", i));
  }
  if (k.launch.cooperative) params.push_back("unsigned int* __restrict__ tessel_grid_sync");
  if (absl::Status st = DeclareShared(k); !st.ok()) return st;
  vectors_.clear();
  for (const VectorLoop& v : k.vectors) vectors_[v.loop.get()] = &v;
  // The kernel's own dynamic shared memory, or the occupancy limit's padding (lowering), if more.
  ks->launch.dynamic_shared_bytes =
      std::max(k.shared.dynamic ? k.shared.bytes : 0, k.launch.dynamic_shared_bytes);

  // Clusters have compile-time dimensions: a plain launch of a multiple of them works.
  // A minimum of 1 block an SM where setmaxnreg needs the cap, and where the grid has no more
  // blocks than the GPU has SMs: no second block would share an SM, so registers cost no
  // occupancy. Without it ptxas keeps to the registers of two resident blocks: a matrix-vector
  // product of 128 blocks of 512 threads got 2-3 of its 16 row loads a step in flight a thread
  // (0.0479 ms on an H200); with it, all 16 (0.0405 ms).
  const int64_t blocks = k.launch.grid[0] * k.launch.grid[1] * k.launch.grid[2];
  const bool one_block_an_sm = SetsRegisters(k.body) || blocks <= target_.sm_count;
  const std::string attrs = absl::StrCat(
      k.launch.cluster > 1 ? absl::StrCat("__cluster_dims__(", k.launch.cluster, ", 1, 1) ") : "",
      "__launch_bounds__(", threads, one_block_an_sm ? ", 1" : "", ") ");
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
    // Aligned as its most aligned slot (plan_shared_memory placed them at aligned offsets).
    int64_t align = 16;
    for (const SharedDecl& s : shared_) align = std::max(align, s.slot->Alignment());
    Line(absl::StrCat("extern __shared__ __align__(", align, ") unsigned char tessel_smem[];"));
    for (const SharedDecl& s : shared_) {
      Line(absl::StrCat(s.type, "* const ", s.name, " = reinterpret_cast<", s.type,
                        "*>(tessel_smem + ", s.slot->offset, ");  // ", s.slot->elements,
                        " elements"));
    }
  } else {
    for (const SharedDecl& s : shared_) {
      Line(absl::StrCat("__shared__ __align__(", s.slot->Alignment(), ") ", s.type, " ", s.name,
                        "[", s.slot->elements, "];"));
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
      if (IsRegister(b)) {
        EmitRegister(n);
        return;
      }
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

void CudaCodeGen::EmitAllReduce(const AllReduceNode& n) {
  Fail(absl::InvalidArgumentError(absl::StrCat(
      "AllReduce over ", ThreadTagName(n.thread), " with extent ", n.extent,
      " has not been expanded; expand it with LowerKernelAllReduces (lowering does)")));
}

namespace {

// Whether `e` is a call of one of the intrinsics printed as asm statements.
bool IsAsmIntrinsic(const Expr& e) {
  const auto* c = As<CallNode>(e);
  return c && (c->name == intrinsic::kMapSharedRank || c->name == intrinsic::kLoadSharedCluster);
}

}  // namespace

void CudaCodeGen::EmitRegister(const AllocateNode& n) {
  const Buffer& b = *n.buffer;
  const std::string name = BindBuffer(&b);
  Stmt first = n.body;
  std::vector<Stmt> rest;
  if (const auto* seq = As<SeqNode>(n.body)) {
    first = seq->stmts[0];
    rest.assign(seq->stmts.begin() + 1, seq->stmts.end());
  }
  const auto* init = As<StoreNode>(first);
  if (init && init->buffer.get() != &b) init = nullptr;
  const std::string type = init ? DeclaredType(b.dtype, init->value) : ComputeType(b.dtype);
  const bool nested = !DeclareInBlock(name);
  if (nested) {
    OpenBlock("");
    DeclareInBlock(name);
  }
  if (init && !IsAsmIntrinsic(init->value)) {
    Line(absl::StrCat(type, " ", name, " = ", StoredValue(b, init->value), ";"));
    EmitStmt(MakeSeq(rest));
  } else {
    Line(absl::StrCat(type, " ", name, ";"));
    EmitStmt(n.body);
  }
  if (nested) CloseBlock();
}

std::string CudaCodeGen::IntrinsicCall(const CallNode& n, int* prec) {
  namespace in = intrinsic;
  const std::vector<Expr>& a = n.args;
  *prec = kPrecPrimary;
  if (IsTensorCall(n.name)) return TensorCall(n);
  auto operand = [&](const Expr& e) { return Operand(e, kPrecPrimary); };
  if (a.empty() && in::IsThreadIndex(n.name)) return n.name;
  int64_t bits = 0;
  if (n.name == in::kLaneMask && a.size() == 1 && IsConstInt(a[0], &bits)) {
    return Hex32(static_cast<uint32_t>(bits));
  }
  if (a.size() == 2 && n.name == in::kShiftLeft) {
    return absl::StrCat("(", operand(a[0]), " << ", operand(a[1]), ")");
  }
  if (a.size() == 2 && n.name == in::kShiftRight) {
    *prec = kPrecShift;
    return absl::StrCat(operand(a[0]), " >> ", operand(a[1]));
  }
  if (a.size() == 2 && n.name == in::kBitwiseAnd) {
    *prec = kPrecBitAnd;
    return absl::StrCat(operand(a[0]), " & ", operand(a[1]));
  }
  if ((a.size() == 3 || a.size() == 4) && n.name == in::kShflXorSync) {
    std::vector<std::string> args;
    for (const Expr& e : a) args.push_back(Print(e));
    return absl::StrCat("__shfl_xor_sync(", absl::StrJoin(args, ", "), ")");
  }
  if (a.size() == 1 && n.name == in::kSharedAddress && As<LoadNode>(a[0])) {
    return absl::StrCat("static_cast<unsigned>(__cvta_generic_to_shared(",
                        BufferName(As<LoadNode>(a[0])->buffer.get()), "))");
  }
  return "";
}

std::string CudaCodeGen::DeclaredType(DType t, const Expr& value) {
  const auto* c = As<CallNode>(value);
  if (c && (c->name == intrinsic::kLaneMask || c->name == intrinsic::kShiftLeft ||
            c->name == intrinsic::kSharedAddress || c->name == intrinsic::kMapSharedRank)) {
    return "unsigned";
  }
  return ComputeType(t);
}

void CudaCodeGen::EmitStore(const StoreNode& n) {
  const auto* c = As<CallNode>(n.value);
  if (!IsAsmIntrinsic(n.value) || !IsRegister(*n.buffer) || c->args.size() != 2) {
    CodeGenC::EmitStore(n);
    return;
  }
  const std::string reg = BufferName(n.buffer.get());
  if (c->name == intrinsic::kMapSharedRank) {
    Line(absl::StrCat("asm volatile(\"mapa.shared::cluster.u32 %0, %1, %2;\" : \"=r\"(", reg,
                      ") : \"r\"(", Print(c->args[0]), "), \"r\"(", Print(c->args[1]), "));"));
    return;
  }
  // load_shared_cluster(address, byte offset).
  const std::string type = ComputeType(n.buffer->dtype);
  const char* ld = type == "float"    ? "ld.shared::cluster.f32 %0, [%1];"
                   : type == "double" ? "ld.shared::cluster.f64 %0, [%1];"
                   : type == "int"    ? "ld.shared::cluster.s32 %0, [%1];"
                                      : "ld.shared::cluster.s64 %0, [%1];";
  const char* constraint = type == "float"    ? "=f"
                           : type == "double" ? "=d"
                           : type == "int"    ? "=r"
                                              : "=l";
  int64_t offset = 0;
  IsConstInt(c->args[1], &offset);
  const std::string address =
      offset == 0 ? Print(c->args[0]) : absl::StrCat(Print(c->args[0]), " + ", offset, "u");
  Line(absl::StrCat("asm volatile(\"", ld, "\" : \"", constraint, "\"(", reg, ") : \"r\"(", address,
                    ") : \"memory\");"));
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
  const int64_t lanes = plan.lanes;
  const CudaVectorType store_vec = *CudaVecType(store.buffer->dtype, lanes);
  OpenGuards(plan.guards);
  Line(absl::StrCat("// vectorized ", v->name, ": ", width / lanes, " x ", store_vec.name,
                    plan.zero_unless ? ", zero where the source is past its extent" : "",
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
    // Conditions the same for all the chunk's lanes, printed at its first lane: the chunk's
    // guards, and where the value is zero instead (a zero-filling copy).
    std::vector<std::string> chunk_guards;
    std::string zero_unless;
    auto at_first = [&](const Expr& cond) {
      return Simplify(Substitute(cond, {{v, n.min + MakeInt(first)}}));
    };
    for (const Expr& g : plan.chunk_guards) {
      chunk_guards.push_back(Operand(at_first(g), kPrecAnd + 1));
    }
    if (plan.zero_unless) zero_unless = Print(at_first(plan.zero_unless));
    if (!chunk_guards.empty()) OpenBlock("if (" + absl::StrJoin(chunk_guards, " && ") + ")");
    if (plan.zero_unless) OpenBlock("if (" + zero_unless + ")");
    EmitVectorChunk(n, plan, store_vec, first, open, close);
    if (plan.zero_unless) {
      ElseBlock();
      Line(absl::StrCat(open, store_vec.name == "unsigned int" ? "0u" : store_vec.name + "{}",
                        close));
      CloseBlock();
    }
    if (!chunk_guards.empty()) CloseBlock();
  }
  UnbindVar(v);
  if (!plan.guards.empty()) CloseBlock();
}

void CudaCodeGen::EmitVectorChunk(const ForNode& n, const VectorLoop& plan,
                                  const CudaVectorType& store_vec, int64_t first,
                                  const std::string& open, const std::string& close) {
  const VarNode* v = n.var.get();
  const auto& store = static_cast<const StoreNode&>(*plan.body);
  const std::vector<Expr>& loads = plan.loads;
  const int64_t lanes = plan.lanes;
  const std::string store_type = StorageType(store.buffer->dtype);
  const bool plain_copy = loads.size() == 1 && store.value.get() == loads[0].get() &&
                          loads[0]->dtype == store.buffer->dtype;
  auto element = [&](const BufferPtr& b, const std::vector<Expr>& idx, int64_t offset) {
    return ElementAddress(b, idx, v, n.min, offset);
  };
  if (plain_copy) {
    const auto& l = static_cast<const LoadNode&>(*loads[0]);
    Line(absl::StrCat(
        open,
        VectorLoad(l.buffer.get(), absl::StrCat("reinterpret_cast<const ", store_vec.name, "*>(",
                                                element(l.buffer, l.indices, first), ")")),
        close));
    return;
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
    lanes_out.push_back(StoredValue(*store.buffer, store.value));
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
    const std::string value = StoredValue(*store.buffer, store.value);
    const Expr at =
        FoldTrailingConstants(Substitute(StorageIndex(*store.buffer, store.indices), {{v, lane}}));
    Line(absl::StrCat(BufferName(store.buffer.get()), "[", StorageOffset(*store.buffer, at),
                      "] = ", value, ";"));
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
      FoldTrailingConstants(Substitute(StorageIndex(*b, idx), {{v, min + MakeInt(offset)}}));
  return absl::StrCat("&", BufferName(b.get()), "[", StorageOffset(*b, at), "]");
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
        lane_values[i].push_back(absl::StrCat(tmp, "[", k, "]"));
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

}  // namespace codegen

absl::StatusOr<GeneratedSource> GenerateCuda(const Program& p, const Target& t) {
  return codegen::CudaCodeGen(p, t).Generate();
}

}  // namespace tessel::schedules
