#include "schedules/codegen/cuda_codegen.h"

#include <gtest/gtest.h>

#include <array>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "schedules/ir/expr.h"
#include "schedules/ir/stmt.h"
#include "schedules/lower/lower_all_reduce.h"
#include "schedules/lower/plan_shared_memory.h"
#include "schedules/lower/plan_vectorization.h"
#include "schedules/lower/program.h"
#include "schedules/target/target.h"

#ifdef TESSEL_HAVE_CUDA
#include <nvrtc.h>
#endif

namespace tessel::schedules {
namespace {

// ---- Building programs by hand.

Stmt Loop(const VarPtr& v, int64_t extent, Stmt body, ForKind kind = ForKind::kSerial) {
  return MakeFor(v, MakeInt(0), MakeInt(extent), kind, ThreadTag::kNone, std::move(body));
}
Stmt Bind(const VarPtr& v, ThreadTag tag, int64_t extent, Stmt body) {
  return MakeFor(v, MakeInt(0), MakeInt(extent), ForKind::kThreadBinding, tag, std::move(body));
}
Expr Zero() { return MakeInt(0); }

Kernel MakeKernel(std::string name, std::array<int64_t, 3> grid, std::array<int64_t, 3> block,
                  std::vector<BufferPtr> params, Stmt body) {
  Kernel k;
  k.name = std::move(name);
  k.launch.grid = grid;
  k.launch.block = block;
  k.params = std::move(params);
  k.body = std::move(body);
  return k;
}

Program CudaProgram(std::string name, std::vector<ProgramBuffer> buffers,
                    std::vector<Kernel> kernels) {
  Program p;
  p.name = std::move(name);
  p.target = TargetKind::kCuda;
  p.buffers = std::move(buffers);
  p.kernels = std::move(kernels);
  return p;
}

// A program of one kernel whose params are all the program's buffers.
Program OneKernel(std::string name, std::vector<ProgramBuffer> buffers, std::array<int64_t, 3> grid,
                  std::array<int64_t, 3> block, Stmt body) {
  std::vector<BufferPtr> params;
  for (const ProgramBuffer& b : buffers) params.push_back(b.buffer);
  Kernel k = MakeKernel(name + "_kernel0", grid, block, params, std::move(body));
  return CudaProgram(std::move(name), std::move(buffers), {std::move(k)});
}

// ---- Generating and compiling.

// `p` with the shared-memory and vectorization plans of each kernel, as lowering leaves it
// (plan_shared_memory, plan_vectorization).
// The kernels as the last lowering passes leave them: all-reduces expanded, shared memory and
// vectorized loops planned.
Program Planned(Program p) {
  for (Kernel& k : p.kernels) {
    EXPECT_TRUE(LowerKernelAllReduces(&k, p.needs_int64_indices).ok());
    k.shared = PlanSharedMemory(k, p.needs_int64_indices);
    k.vectors = PlanVectorization(k);
  }
  return p;
}

bool Contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// Writes the code and its launch description for reading (or running elsewhere) when
// TESSEL_CODEGEN_DUMP_DIR is set.
void Dump(const Program& p, const GeneratedSource& src) {
  const char* dir = std::getenv("TESSEL_CODEGEN_DUMP_DIR");
  if (dir == nullptr) return;
  std::ofstream(std::string(dir) + "/" + p.name + ".cu") << src.code;
  std::ofstream launch(std::string(dir) + "/" + p.name + ".launch");
  for (const KernelSource& k : src.kernels) {
    launch << k.entry << " grid " << absl::StrJoin(k.launch.grid, ",") << " block "
           << absl::StrJoin(k.launch.block, ",") << " smem " << k.launch.dynamic_shared_bytes
           << " params " << absl::StrJoin(k.params, ",") << "\n";
  }
}

GeneratedSource Generate(const Program& p) {
  absl::StatusOr<GeneratedSource> src = GenerateCuda(Planned(p), CudaTarget("sm_90"));
  EXPECT_TRUE(src.ok()) << src.status();
  if (!src.ok()) return {};
  EXPECT_EQ(src->target, TargetKind::kCuda);
  EXPECT_EQ(src->buffers.size(), p.buffers.size());
  EXPECT_EQ(src->kernels.size(), p.kernels.size());
  Dump(p, *src);
  return *std::move(src);
}

std::string CudaIncludeDir() {
  std::vector<std::string> candidates;
  if (const char* home = std::getenv("CUDA_HOME"))
    candidates.push_back(std::string(home) + "/include");
  candidates.push_back("/usr/local/cuda/include");
  for (const std::string& d : candidates) {
    if (std::filesystem::exists(d + "/cuda_fp16.h")) return d;
  }
  return "";
}

// Compiles the code with NVRTC to PTX for compute_80 and to machine code for sm_80 and sm_90;
// checks that every kernel is an entry of the PTX and that the compiler says nothing (no
// warnings either).
::testing::AssertionResult CompilesWithNvrtc(const GeneratedSource& src) {
#ifdef TESSEL_HAVE_CUDA
  const std::string include = "-I" + CudaIncludeDir();
  for (const char* arch : {"compute_80", "sm_80", "sm_90"}) {
    nvrtcProgram prog;
    if (nvrtcCreateProgram(&prog, src.code.c_str(), "kernel.cu", 0, nullptr, nullptr) !=
        NVRTC_SUCCESS) {
      return ::testing::AssertionFailure() << "nvrtcCreateProgram failed";
    }
    const std::string gpu = std::string("--gpu-architecture=") + arch;
    const char* opts[] = {gpu.c_str(), "--std=c++17", include.c_str()};
    const nvrtcResult r = nvrtcCompileProgram(prog, 3, opts);
    size_t log_size = 0;
    nvrtcGetProgramLogSize(prog, &log_size);
    std::string log(log_size, '\0');
    nvrtcGetProgramLog(prog, log.data());
    while (!log.empty() && (log.back() == '\0' || log.back() == '\n')) log.pop_back();
    std::string ptx;
    if (r == NVRTC_SUCCESS) {
      size_t ptx_size = 0;
      nvrtcGetPTXSize(prog, &ptx_size);
      ptx.resize(ptx_size);
      nvrtcGetPTX(prog, ptx.data());
    }
    nvrtcDestroyProgram(&prog);
    if (r != NVRTC_SUCCESS || !log.empty()) {
      return ::testing::AssertionFailure()
             << "NVRTC (" << arch << "): " << nvrtcGetErrorString(r) << "\n"
             << log << "\n"
             << src.code;
    }
    for (const KernelSource& k : src.kernels) {
      if (!Contains(ptx, ".entry " + k.entry)) {
        return ::testing::AssertionFailure() << "no entry " << k.entry << " in the PTX of\n"
                                             << src.code;
      }
    }
  }
  return ::testing::AssertionSuccess();
#else
  return ::testing::AssertionSuccess();
#endif
}

bool HaveNvrtc() {
#ifdef TESSEL_HAVE_CUDA
  return !CudaIncludeDir().empty();
#else
  (void)&CudaIncludeDir;
  return false;
#endif
}

// Ends a test with the NVRTC compilation of its code, or a skip where NVRTC or the CUDA headers
// are missing.
#define EXPECT_NVRTC_COMPILES(src)                                                     \
  do {                                                                                 \
    if (!HaveNvrtc()) GTEST_SKIP() << "built without the CUDA toolkit or its headers"; \
    EXPECT_TRUE(CompilesWithNvrtc(src));                                               \
  } while (0)

// ---- Programs.

TEST(CodegenCuda, VectorAddWithBlockAndThreadBindings) {
  constexpr int64_t n = 1000;
  BufferPtr a = MakeBuffer("A", DType::kFloat32, {n});
  BufferPtr b = MakeBuffer("B", DType::kFloat32, {n});
  BufferPtr c = MakeBuffer("C", DType::kFloat32, {n});
  VarPtr bx = MakeVar("bx"), tx = MakeVar("tx");
  Expr i = Expr(bx) * 128 + Expr(tx);
  Stmt body =
      Bind(bx, ThreadTag::kBlockX, 8,
           Bind(tx, ThreadTag::kThreadX, 128,
                MakeIf(i < n, MakeStore(c, {i},
                                        MakeLoad(a, {i}) +
                                            MakeLoad(b, {i}) * MakeCall("exp", {MakeLoad(a, {i})},
                                                                        DType::kFloat32)))));
  Program p = OneKernel(
      "vadd", {{a, BufferRole::kInput}, {b, BufferRole::kInput}, {c, BufferRole::kOutput}},
      {8, 1, 1}, {128, 1, 1}, body);
  GeneratedSource src = Generate(p);
  const std::string& code = src.code;
  // Lines longer than 100 columns put one parameter per line. 8 blocks, fewer than the SMs: a
  // minimum of one block an SM.
  EXPECT_TRUE(Contains(code,
                       "extern \"C\" __global__ void __launch_bounds__(128, 1) vadd_kernel0(\n"
                       "    const float* __restrict__ A,\n"
                       "    const float* __restrict__ B,\n"
                       "    float* __restrict__ C) {"))
      << code;
  EXPECT_TRUE(Contains(code, "const int bx = blockIdx.x;")) << code;
  EXPECT_TRUE(Contains(code, "const int tx = threadIdx.x;")) << code;
  EXPECT_TRUE(Contains(code, "expf(__ldg(&A[bx * 128 + tx]))")) << code;
  EXPECT_FALSE(Contains(code, "cuda_fp16.h")) << code;
  ASSERT_EQ(src.kernels.size(), 1u);
  EXPECT_EQ(src.kernels[0].entry, "vadd_kernel0");
  EXPECT_EQ(src.kernels[0].params, (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(src.kernels[0].launch.block[0], 128);
  EXPECT_EQ(src.kernels[0].launch.dynamic_shared_bytes, 0);
  EXPECT_NVRTC_COMPILES(src);
}

TEST(CodegenCuda, GridsOfAtMostOneBlockAnSmAskForOneBlockAnSm) {
  // __launch_bounds__(threads, 1) where the grid has no more blocks than the target has SMs
  // (132 on sm_90), so that ptxas may use the registers of a block an SM; (threads) past that.
  for (const int64_t blocks : {int64_t{1}, int64_t{132}, int64_t{133}, int64_t{4096}}) {
    SCOPED_TRACE(blocks);
    const int64_t n = blocks * 256;
    BufferPtr x = MakeBuffer("X", DType::kFloat32, {n});
    BufferPtr y = MakeBuffer("Y", DType::kFloat32, {n});
    VarPtr bx = MakeVar("bx"), tx = MakeVar("tx");
    const Expr i = Expr(bx) * 256 + Expr(tx);
    Program p = OneKernel("scale", {{x, BufferRole::kInput}, {y, BufferRole::kOutput}},
                          {blocks, 1, 1}, {256, 1, 1},
                          Bind(bx, ThreadTag::kBlockX, blocks,
                               Bind(tx, ThreadTag::kThreadX, 256,
                                    MakeStore(y, {i}, MakeLoad(x, {i}) * MakeFloat(2.0)))));
    const std::string code = Generate(p).code;
    EXPECT_THAT(code,
                ::testing::HasSubstr(blocks <= 132 ? "__launch_bounds__(256, 1) scale_kernel0("
                                                   : "__launch_bounds__(256) scale_kernel0("));
  }
}

TEST(CodegenCuda, KernelParamsFollowKernelOrderAndIndexProgramBuffers) {
  // Two kernels: the first writes a workspace the second reads; each takes a subset of buffers.
  constexpr int64_t n = 256;
  BufferPtr x = MakeBuffer("X", DType::kFloat32, {n});
  BufferPtr y = MakeBuffer("Y", DType::kFloat32, {n});
  BufferPtr ws = MakeBuffer("T", DType::kFloat32, {n});
  VarPtr t0 = MakeVar("t"), t1 = MakeVar("t");
  Kernel k0 = MakeKernel(
      "two_k0", {1, 1, 1}, {256, 1, 1}, {x, ws},
      Bind(t0, ThreadTag::kThreadX, n, MakeStore(ws, {t0}, MakeLoad(x, {t0}) * MakeFloat(2.0))));
  Kernel k1 = MakeKernel(
      "two_k1", {1, 1, 1}, {256, 1, 1}, {ws, y},
      Bind(t1, ThreadTag::kThreadX, n, MakeStore(y, {t1}, MakeLoad(ws, {t1}) + MakeFloat(1.0))));
  Program p = CudaProgram(
      "two", {{x, BufferRole::kInput}, {y, BufferRole::kOutput}, {ws, BufferRole::kWorkspace}},
      {k0, k1});
  GeneratedSource src = Generate(p);
  ASSERT_EQ(src.kernels.size(), 2u);
  EXPECT_EQ(src.kernels[0].params, (std::vector<int>{0, 2}));
  EXPECT_EQ(src.kernels[1].params, (std::vector<int>{2, 1}));
  EXPECT_TRUE(
      Contains(src.code, "two_k0(\n    const float* __restrict__ X,\n    float* __restrict__ T)"))
      << src.code;
  EXPECT_TRUE(
      Contains(src.code, "two_k1(\n    const float* __restrict__ T,\n    float* __restrict__ Y)"))
      << src.code;
  EXPECT_NVRTC_COMPILES(src);
}

// C = A * B with 16x16 tiles staged in shared memory (B's tile padded by storage_align).
Program TiledMatmul() {
  constexpr int64_t size = 64, tile = 16;
  BufferPtr a = MakeBuffer("A", DType::kFloat32, {size, size});
  BufferPtr b = MakeBuffer("B", DType::kFloat32, {size, size});
  BufferPtr c = MakeBuffer("C", DType::kFloat32, {size, size});
  BufferPtr as = MakeBuffer("A_shared", DType::kFloat32, {tile, tile}, MemScope::kShared);
  BufferPtr bs =
      MakeBuffer("B_shared", DType::kFloat32, {tile, tile}, MemScope::kShared, {tile + 1, 1});
  BufferPtr acc = MakeBuffer("acc", DType::kFloat32, {1}, MemScope::kLocal);
  VarPtr by = MakeVar("by"), bx = MakeVar("bx"), ty = MakeVar("ty"), tx = MakeVar("tx");
  VarPtr ko = MakeVar("ko"), ki = MakeVar("ki");
  Stmt stage = MakeSeq(
      {MakeStore(as, {ty, tx},
                 MakeLoad(a, {Expr(by) * tile + Expr(ty), Expr(ko) * tile + Expr(tx)})),
       MakeStore(bs, {ty, tx},
                 MakeLoad(b, {Expr(ko) * tile + Expr(ty), Expr(bx) * tile + Expr(tx)})),
       MakeBarrier(),
       Loop(ki, tile,
            MakeStore(acc, {Zero()},
                      MakeLoad(acc, {Zero()}) + MakeLoad(as, {ty, ki}) * MakeLoad(bs, {ki, tx})),
            ForKind::kUnrolled),
       MakeBarrier()});
  Stmt per_thread = MakeAllocate(
      acc, MakeSeq({MakeStore(acc, {Zero()}, MakeFloat(0.0)), Loop(ko, size / tile, stage),
                    MakeStore(c, {Expr(by) * tile + Expr(ty), Expr(bx) * tile + Expr(tx)},
                              MakeLoad(acc, {Zero()}))}));
  Stmt threads =
      Bind(ty, ThreadTag::kThreadY, tile, Bind(tx, ThreadTag::kThreadX, tile, per_thread));
  Stmt body =
      Bind(by, ThreadTag::kBlockY, size / tile,
           Bind(bx, ThreadTag::kBlockX, size / tile, MakeAllocate(as, MakeAllocate(bs, threads))));
  return OneKernel("matmul_smem",
                   {{a, BufferRole::kInput}, {b, BufferRole::kInput}, {c, BufferRole::kOutput}},
                   {size / tile, size / tile, 1}, {tile, tile, 1}, body);
}

TEST(CodegenCuda, SharedMemoryTilesAndBarriers) {
  GeneratedSource src = Generate(TiledMatmul());
  const std::string& code = src.code;
  EXPECT_TRUE(Contains(code, "__shared__ __align__(16) float A_shared[256];")) << code;
  EXPECT_TRUE(Contains(code, "__shared__ __align__(16) float B_shared[271];")) << code;
  EXPECT_TRUE(Contains(code, "__syncthreads();")) << code;
  EXPECT_TRUE(Contains(code, "B_shared[ki * 17 + tx]")) << code;
  EXPECT_TRUE(Contains(code, "__align__(16) float acc[1];")) << code;
  EXPECT_TRUE(Contains(code, "#pragma unroll")) << code;
  // Shared arrays are declared once, at the top of the kernel.
  EXPECT_LT(code.find("A_shared[256]"), code.find("const int by = blockIdx.y;")) << code;
  EXPECT_EQ(src.kernels[0].launch.dynamic_shared_bytes, 0);
  EXPECT_NVRTC_COMPILES(src);
}

// C[i] = A[i] (and friends) over 4 elements per thread; the innermost loop is vectorized.
Program VectorCopy(const std::string& name, int64_t lanes, int64_t offset, bool transpose) {
  constexpr int64_t threads = 256, blocks = 4;
  const int64_t n = threads * blocks * lanes;
  BufferPtr a = MakeBuffer("A", DType::kFloat32, {n + 8});
  BufferPtr c = MakeBuffer("C", DType::kFloat32, {n + 8});
  VarPtr bx = MakeVar("bx"), tx = MakeVar("tx"), v = MakeVar("v");
  Expr base = (Expr(bx) * threads + Expr(tx)) * lanes;
  Expr src_index = transpose ? Expr(v) * (threads * blocks) + Expr(bx) * threads + Expr(tx)
                             : base + Expr(v) + offset;
  Stmt body =
      Bind(bx, ThreadTag::kBlockX, blocks,
           Bind(tx, ThreadTag::kThreadX, threads,
                Loop(v, lanes, MakeStore(c, {base + Expr(v) + offset}, MakeLoad(a, {src_index})),
                     ForKind::kVectorized)));
  return OneKernel(name, {{a, BufferRole::kInput}, {c, BufferRole::kOutput}}, {blocks, 1, 1},
                   {threads, 1, 1}, body);
}

TEST(CodegenCuda, VectorizedCopyUsesFloat4) {
  GeneratedSource src = Generate(VectorCopy("vcopy", 4, 0, false));
  EXPECT_TRUE(Contains(src.code,
                       "*reinterpret_cast<float4*>(&C[(bx * 256 + tx) * 4]) = "
                       "__ldg(reinterpret_cast<const float4*>(&A[(bx * 256 + tx) * 4]));"))
      << src.code;
  EXPECT_NVRTC_COMPILES(src);
}

TEST(CodegenCuda, VectorizedCopyAtAnAlignedOffsetUsesFloat2) {
  // An offset of 2 elements keeps 8-byte alignment only.
  GeneratedSource src = Generate(VectorCopy("vcopy2", 4, 2, false));
  EXPECT_TRUE(Contains(src.code, "float2")) << src.code;
  EXPECT_FALSE(Contains(src.code, "float4")) << src.code;
  EXPECT_NVRTC_COMPILES(src);
}

TEST(CodegenCuda, MisalignedOrStridedVectorLoopsFallBackToScalars) {
  for (const Program& p :
       {VectorCopy("vcopy_misaligned", 4, 1, false), VectorCopy("vcopy_strided", 4, 0, true)}) {
    GeneratedSource src = Generate(p);
    EXPECT_FALSE(Contains(src.code, "float4")) << src.code;
    EXPECT_FALSE(Contains(src.code, "float2")) << src.code;
    EXPECT_TRUE(Contains(src.code, "vectorized as scalars")) << src.code;
    EXPECT_TRUE(CompilesWithNvrtc(src));
  }
  // A store guarded by a condition on the vectorized variable that splits a chunk of lanes
  // (1021 is odd).
  constexpr int64_t n = 1021;
  BufferPtr a = MakeBuffer("A", DType::kFloat32, {1024});
  BufferPtr c = MakeBuffer("C", DType::kFloat32, {1024});
  VarPtr tx = MakeVar("tx"), v = MakeVar("v");
  Expr i = Expr(tx) * 4 + Expr(v);
  Stmt body =
      Bind(tx, ThreadTag::kThreadX, 256,
           Loop(v, 4, MakeIf(i < n, MakeStore(c, {i}, MakeLoad(a, {i}))), ForKind::kVectorized));
  GeneratedSource src =
      Generate(OneKernel("vcopy_guarded", {{a, BufferRole::kInput}, {c, BufferRole::kOutput}},
                         {1, 1, 1}, {256, 1, 1}, body));
  EXPECT_FALSE(Contains(src.code, "float4")) << src.code;
  EXPECT_TRUE(Contains(src.code, "condition on the loop variable")) << src.code;
  EXPECT_NVRTC_COMPILES(src);
}

TEST(CodegenCuda, ChunkUniformConditionsGuardOrZeroFillWholeVectors) {
  BufferPtr a = MakeBuffer("A", DType::kFloat32, {1024});
  BufferPtr c = MakeBuffer("C", DType::kFloat32, {1024});
  VarPtr tx = MakeVar("tx"), v = MakeVar("v");
  Expr i = Expr(tx) * 4 + Expr(v);
  auto kernel = [&](const std::string& name, Stmt inner) {
    return Generate(OneKernel(
        name, {{a, BufferRole::kInput}, {c, BufferRole::kOutput}}, {1, 1, 1}, {256, 1, 1},
        Bind(tx, ThreadTag::kThreadX, 256, Loop(v, 4, std::move(inner), ForKind::kVectorized))));
  };
  // i < 1022 holds for both lanes of a pair or for neither: float2 chunks, each guarded at its
  // first lane.
  GeneratedSource guarded =
      kernel("vcopy_chunks", MakeIf(i < 1022, MakeStore(c, {i}, MakeLoad(a, {i}))));
  EXPECT_TRUE(Contains(guarded.code, "// vectorized v: 2 x float2")) << guarded.code;
  EXPECT_TRUE(Contains(guarded.code, "if (tx < 255) {")) << guarded.code;  // lanes 2, 3
  EXPECT_NVRTC_COMPILES(guarded);
  // A zero-filling copy (a padded tile's shared copy): a vector of the source where the
  // condition holds, a zero vector where it does not.
  GeneratedSource zero = kernel(
      "vcopy_zero", MakeStore(c, {i}, MakeSelect(i < 1020, MakeLoad(a, {i}), MakeFloat(0.0))));
  EXPECT_TRUE(Contains(zero.code, "1 x float4, zero where the source is past its extent"))
      << zero.code;
  EXPECT_TRUE(Contains(zero.code, "if (tx < 255) {")) << zero.code;
  EXPECT_TRUE(Contains(zero.code, "*reinterpret_cast<float4*>(&C[tx * 4]) = float4{};"))
      << zero.code;
  EXPECT_NVRTC_COMPILES(zero);
}

TEST(CodegenCuda, VectorizedElementwiseComputesPerLane) {
  // D[i] = relu(A[i] * 2 + bias[v]) + f32(H[i]) over 8 lanes: two float4 chunks, with the f16
  // operand read as uint2 and a guard that does not depend on the lane. Then an f16 result from
  // f16 and f32 operands: 4 lanes (uint2 for the halves, float4 for A) twice.
  constexpr int64_t threads = 128;
  BufferPtr a = MakeBuffer("A", DType::kFloat32, {threads * 8});
  BufferPtr bias = MakeBuffer("bias", DType::kFloat32, {8});
  BufferPtr h = MakeBuffer("H", DType::kFloat16, {threads * 8});
  BufferPtr d = MakeBuffer("D", DType::kFloat32, {threads * 8});
  BufferPtr e = MakeBuffer("E", DType::kFloat16, {threads * 8});
  VarPtr tx = MakeVar("tx"), v = MakeVar("v"), w = MakeVar("w");
  Expr i = Expr(tx) * 8 + Expr(v);
  Expr value = MakeMax(MakeLoad(a, {i}) * MakeFloat(2.0) + MakeLoad(bias, {v}), MakeFloat(0.0)) +
               MakeCast(DType::kFloat32, MakeLoad(h, {i}));
  Expr j = Expr(tx) * 8 + Expr(w);
  Stmt body = Bind(
      tx, ThreadTag::kThreadX, threads,
      MakeSeq({Loop(v, 8, MakeIf(Expr(tx) < 120, MakeStore(d, {i}, value)), ForKind::kVectorized),
               Loop(w, 8,
                    MakeStore(e, {j},
                              MakeLoad(h, {j}) * MakeFloat(0.5, DType::kFloat16) +
                                  MakeCast(DType::kFloat16, MakeLoad(a, {j}))),
                    ForKind::kVectorized)}));
  GeneratedSource src = Generate(OneKernel("vec_elementwise",
                                           {{a, BufferRole::kInput},
                                            {bias, BufferRole::kInput},
                                            {h, BufferRole::kInput},
                                            {d, BufferRole::kOutput},
                                            {e, BufferRole::kOutput}},
                                           {1, 1, 1}, {threads, 1, 1}, body));
  const std::string& code = src.code;
  EXPECT_TRUE(Contains(code, "// vectorized v: 2 x float4")) << code;
  EXPECT_TRUE(Contains(code, "make_float4(")) << code;
  EXPECT_TRUE(Contains(code, "uint2")) << code;
  EXPECT_TRUE(Contains(code, "// vectorized w: 2 x uint2")) << code;
  EXPECT_TRUE(Contains(code, "if (tx < 120) {")) << code;
  EXPECT_FALSE(Contains(code, "vectorized as scalars")) << code;
  EXPECT_NVRTC_COMPILES(src);
}

TEST(CodegenCuda, LocalArraysKeepScalarAccessesInVectorizedLoops) {
  // r[v] = A[i] * 2 reads A as a float4 and stores the lanes one by one (r stays a register
  // array); C[i] = r[v] + 1 stores a float4 built from r[0..3].
  BufferPtr a = MakeBuffer("A", DType::kFloat32, {512});
  BufferPtr c = MakeBuffer("C", DType::kFloat32, {512});
  BufferPtr r = MakeBuffer("r", DType::kFloat32, {4}, MemScope::kLocal);
  VarPtr tx = MakeVar("tx"), v = MakeVar("v"), w = MakeVar("w");
  Expr i = Expr(tx) * 4 + Expr(v), j = Expr(tx) * 4 + Expr(w);
  Stmt body =
      Bind(tx, ThreadTag::kThreadX, 128,
           MakeAllocate(r, MakeSeq({Loop(v, 4, MakeStore(r, {v}, MakeLoad(a, {i}) * MakeFloat(2.0)),
                                         ForKind::kVectorized),
                                    Loop(w, 4, MakeStore(c, {j}, MakeLoad(r, {w}) + MakeFloat(1.0)),
                                         ForKind::kVectorized)})));
  GeneratedSource src = Generate(OneKernel(
      "vlocal", {{a, BufferRole::kInput}, {c, BufferRole::kOutput}}, {1, 1, 1}, {128, 1, 1}, body));
  EXPECT_TRUE(Contains(src.code,
                       "// vectorized v: 1 x 4-lane loads, stored lane by lane to "
                       "registers"))
      << src.code;
  EXPECT_TRUE(Contains(src.code,
                       "const float4 tessel_vec = __ldg(reinterpret_cast<const "
                       "float4*>(&A[tx * 4]));"))
      << src.code;
  EXPECT_TRUE(Contains(src.code, "r[3] = tessel_vec.w * 2.0f;")) << src.code;
  EXPECT_TRUE(Contains(src.code, "*reinterpret_cast<float4*>(&C[tx * 4]) = make_float4("))
      << src.code;
  EXPECT_TRUE(Contains(src.code, "\n      r[3] + 1.0f);")) << src.code;
  EXPECT_NVRTC_COMPILES(src);
}

TEST(CodegenCuda, HalfLanesCopiedToRegistersKeepTheirStorageType) {
  // r[v] = A[i] with A and r f16: each lane of the uint4 goes to r as it is stored (no
  // __float2half(__half2float(...)) round trip, two instructions a lane); r[v] = A[i] * 2 still
  // converts for the arithmetic.
  for (const bool scaled : {false, true}) {
    SCOPED_TRACE(scaled);
    BufferPtr a = MakeBuffer("A", DType::kFloat16, {1024});
    BufferPtr c = MakeBuffer("C", DType::kFloat16, {1024});
    BufferPtr r = MakeBuffer("r", DType::kFloat16, {8}, MemScope::kLocal);
    VarPtr tx = MakeVar("tx"), v = MakeVar("v"), w = MakeVar("w");
    Expr i = Expr(tx) * 8 + Expr(v), j = Expr(tx) * 8 + Expr(w);
    Expr value = MakeLoad(a, {i});
    if (scaled)
      value = MakeCast(DType::kFloat16, MakeCast(DType::kFloat32, value) * MakeFloat(2.0));
    Stmt body =
        Bind(tx, ThreadTag::kThreadX, 128,
             MakeAllocate(
                 r, MakeSeq({Loop(v, 8, MakeStore(r, {v}, value), ForKind::kVectorized),
                             Loop(w, 8, MakeStore(c, {j}, MakeLoad(r, {w})), ForKind::kSerial)})));
    GeneratedSource src =
        Generate(OneKernel("hcopy", {{a, BufferRole::kInput}, {c, BufferRole::kOutput}}, {1, 1, 1},
                           {128, 1, 1}, body));
    EXPECT_TRUE(Contains(src.code, "8-lane loads, stored lane by lane to registers")) << src.code;
    if (scaled) {
      EXPECT_TRUE(Contains(src.code, "r[7] = __float2half(__half2float(tessel_vec[7]) * 2.0f);"))
          << src.code;
    } else {
      EXPECT_TRUE(Contains(src.code, "r[7] = tessel_vec[7];")) << src.code;
      EXPECT_FALSE(Contains(src.code, "__half2float")) << src.code;
    }
    EXPECT_NVRTC_COMPILES(src);
  }
}

TEST(CodegenCuda, VectorizedReductionLoadsVectorsAndAccumulatesLanesInOrder) {
  // acc = max(acc, A[tx * 8 + v]) over a vectorized v of 8: two float4 loads, then the eight
  // lanes accumulated one after the other (the scalar loop's order).
  BufferPtr a = MakeBuffer("A", DType::kFloat32, {1024});
  BufferPtr c = MakeBuffer("C", DType::kFloat32, {128});
  BufferPtr acc = MakeBuffer("acc", DType::kFloat32, {1}, MemScope::kLocal);
  VarPtr tx = MakeVar("tx"), v = MakeVar("v");
  Expr i = Expr(tx) * 8 + Expr(v);
  Stmt reduce = Loop(v, 8,
                     MakeStore(acc, {Zero()},
                               MakeBinary(BinaryOp::kMax, MakeLoad(acc, {Zero()}),
                                          MakeCall("exp", {MakeLoad(a, {i})}, DType::kFloat32))),
                     ForKind::kVectorized);
  Stmt body = Bind(tx, ThreadTag::kThreadX, 128,
                   MakeAllocate(acc, MakeSeq({MakeStore(acc, {Zero()}, MakeFloat(0.0)), reduce,
                                              MakeStore(c, {tx}, MakeLoad(acc, {Zero()}))})));
  GeneratedSource src = Generate(OneKernel(
      "vred", {{a, BufferRole::kInput}, {c, BufferRole::kOutput}}, {1, 1, 1}, {128, 1, 1}, body));
  EXPECT_TRUE(Contains(src.code, "// vectorized v (accumulated lane by lane): 2 x float4 per load"))
      << src.code;
  // A is read-only in the kernel: through the read-only data cache.
  EXPECT_TRUE(Contains(src.code, "__ldg(reinterpret_cast<const float4*>(&A[tx * 8]))")) << src.code;
  EXPECT_TRUE(Contains(src.code, "__ldg(reinterpret_cast<const float4*>(&A[tx * 8 + 4]))"))
      << src.code;
  // Lanes in order: .x .y .z .w of the first vector, then of the second.
  const size_t x0 = src.code.find(".x)"), w0 = src.code.find(".w)");
  ASSERT_NE(x0, std::string::npos) << src.code;
  ASSERT_NE(w0, std::string::npos) << src.code;
  EXPECT_LT(x0, w0) << src.code;
  EXPECT_FALSE(Contains(src.code, "A[tx * 8 + v")) << src.code;
  EXPECT_NVRTC_COMPILES(src);
}

TEST(CodegenCuda, VectorizedReductionOverAStridedLoadFallsBackToScalars) {
  BufferPtr a = MakeBuffer("A", DType::kFloat32, {128, 8});
  BufferPtr c = MakeBuffer("C", DType::kFloat32, {128});
  BufferPtr acc = MakeBuffer("acc", DType::kFloat32, {1}, MemScope::kLocal);
  VarPtr tx = MakeVar("tx"), v = MakeVar("v");
  Stmt reduce = Loop(v, 8, MakeStore(acc, {Zero()}, MakeLoad(acc, {Zero()}) + MakeLoad(a, {v, tx})),
                     ForKind::kVectorized);
  Stmt body = Bind(tx, ThreadTag::kThreadX, 128,
                   MakeAllocate(acc, MakeSeq({MakeStore(acc, {Zero()}, MakeFloat(0.0)), reduce,
                                              MakeStore(c, {tx}, MakeLoad(acc, {Zero()}))})));
  GeneratedSource src = Generate(OneKernel(
      "vreds", {{a, BufferRole::kInput}, {c, BufferRole::kOutput}}, {1, 1, 1}, {128, 1, 1}, body));
  EXPECT_TRUE(Contains(
      src.code, "vectorized as scalars: the load of A is not contiguous in the loop variable"))
      << src.code;
  EXPECT_NVRTC_COMPILES(src);
}

TEST(CodegenCuda, LoopAnnotationsBecomeCommentsAndUnrollPragmas) {
  BufferPtr c = MakeBuffer("C", DType::kFloat32, {64, 8});
  VarPtr tx = MakeVar("tx"), k = MakeVar("k"), j = MakeVar("j");
  Stmt body = Bind(tx, ThreadTag::kThreadX, 64,
                   MakeSeq({MakeFor(k, Zero(), MakeInt(8), ForKind::kSerial, ThreadTag::kNone,
                                    MakeStore(c, {tx, k}, MakeFloat(1.0)), {{"pragma_unroll", 4}}),
                            MakeFor(j, Zero(), MakeInt(8), ForKind::kSerial, ThreadTag::kNone,
                                    MakeStore(c, {tx, j}, MakeLoad(c, {tx, j}) * MakeFloat(2.0)),
                                    {{"unroll_max_step", 64}, {"pipeline_depth", 2}})}));
  GeneratedSource src =
      Generate(OneKernel("annotated", {{c, BufferRole::kOutput}}, {1, 1, 1}, {64, 1, 1}, body));
  EXPECT_TRUE(
      Contains(src.code, "#pragma unroll 4\n  for (int k = 0; k < 8; ++k) {  // pragma_unroll=4"))
      << src.code;
  EXPECT_TRUE(Contains(src.code,
                       "#pragma unroll\n  for (int j = 0; j < 8; ++j) {  // unroll_max_step=64, "
                       "pipeline_depth=2"))
      << src.code;
  EXPECT_NVRTC_COMPILES(src);
}

// out[row] = reduce(X[row, :]) with one block per row and the columns over threadIdx.x; also
// the maximum, through a second AllReduce right after the first.
Program RowReduce(const std::string& name, int64_t cols, int64_t rows_per_block) {
  constexpr int64_t blocks = 8;
  const int64_t rows = blocks * rows_per_block;
  BufferPtr x = MakeBuffer("X", DType::kFloat32, {rows, cols});
  BufferPtr sum = MakeBuffer("S", DType::kFloat32, {rows});
  BufferPtr max = MakeBuffer("M", DType::kFloat32, {rows});
  BufferPtr rs = MakeBuffer("red_sum", DType::kFloat32, {1}, MemScope::kLocal);
  BufferPtr rm = MakeBuffer("red_max", DType::kFloat32, {1}, MemScope::kLocal);
  VarPtr bx = MakeVar("bx"), ty = MakeVar("ty"), tx = MakeVar("tx");
  Expr row = Expr(bx) * rows_per_block + Expr(ty);
  Expr value = MakeLoad(x, {row, tx});
  Stmt body =
      MakeSeq({MakeAllReduce(ReduceOp::kSum, value, rs, ThreadTag::kThreadX, cols),
               MakeAllReduce(ReduceOp::kMax, value, rm, ThreadTag::kThreadX, cols),
               MakeIf(Expr(tx) == 0, MakeSeq({MakeStore(sum, {row}, MakeLoad(rs, {Zero()})),
                                              MakeStore(max, {row}, MakeLoad(rm, {Zero()}))}))});
  Stmt inner = Bind(tx, ThreadTag::kThreadX, cols, MakeAllocate(rs, MakeAllocate(rm, body)));
  if (rows_per_block > 1)
    inner = Bind(ty, ThreadTag::kThreadY, rows_per_block, inner);
  else
    inner = MakeLet(ty, Zero(), inner);
  return OneKernel(
      name, {{x, BufferRole::kInput}, {sum, BufferRole::kOutput}, {max, BufferRole::kOutput}},
      {blocks, 1, 1}, {cols, rows_per_block, 1}, Bind(bx, ThreadTag::kBlockX, blocks, inner));
}

TEST(CodegenCuda, AllReduceOver256Threads) {
  GeneratedSource src = Generate(RowReduce("allreduce256", 256, 1));
  const std::string& code = src.code;
  EXPECT_TRUE(Contains(code, "__shfl_xor_sync(0xffffffffu, tessel_red, 16)")) << code;
  EXPECT_TRUE(Contains(code, "__shared__ __align__(16) float tessel_red_f32[8];")) << code;
  EXPECT_TRUE(Contains(code, "fmaxf(")) << code;
  EXPECT_NVRTC_COMPILES(src);
}

TEST(CodegenCuda, AllReduceOverSeveralWarpsPerRow) {
  GeneratedSource src = Generate(RowReduce("allreduce64x4", 64, 4));
  EXPECT_TRUE(Contains(src.code, "tessel_red_f32[8]")) << src.code;  // 4 rows x 2 warps
  EXPECT_NVRTC_COMPILES(src);
}

TEST(CodegenCuda, AllReduceOver16Threads) {
  GeneratedSource src = Generate(RowReduce("allreduce16", 16, 8));
  const std::string& code = src.code;
  EXPECT_TRUE(Contains(code, "__shfl_xor_sync(tessel_mask, tessel_red, 8, 16)")) << code;
  EXPECT_TRUE(Contains(code, "0x0000ffffu << ((threadIdx.x + 16 * threadIdx.y) & 16)")) << code;
  EXPECT_FALSE(Contains(code, "__shared__")) << code;
  EXPECT_NVRTC_COMPILES(src);
}

TEST(CodegenCuda, AllReduceOverThreadIdxY) {
  // Column sums: block (32, 8), the 8 rows of a column combine over threadIdx.y.
  BufferPtr x = MakeBuffer("X", DType::kFloat32, {8, 32});
  BufferPtr s = MakeBuffer("S", DType::kFloat32, {32});
  BufferPtr red = MakeBuffer("red", DType::kFloat32, {1}, MemScope::kLocal);
  VarPtr ty = MakeVar("ty"), tx = MakeVar("tx");
  Stmt body =
      Bind(ty, ThreadTag::kThreadY, 8,
           Bind(tx, ThreadTag::kThreadX, 32,
                MakeAllocate(red, MakeSeq({MakeAllReduce(ReduceOp::kSum, MakeLoad(x, {ty, tx}), red,
                                                         ThreadTag::kThreadY, 8),
                                           MakeIf(Expr(ty) == 0,
                                                  MakeStore(s, {tx}, MakeLoad(red, {Zero()})))}))));
  GeneratedSource src = Generate(OneKernel(
      "colsum", {{x, BufferRole::kInput}, {s, BufferRole::kOutput}}, {1, 1, 1}, {32, 8, 1}, body));
  EXPECT_TRUE(Contains(src.code, "tessel_red_f32[256]")) << src.code;
  EXPECT_NVRTC_COMPILES(src);
}

TEST(CodegenCuda, LargeSharedMemoryBecomesDynamic) {
  // 64 KiB + 1 KiB of shared memory: over the 48 KiB static limit.
  constexpr int64_t big = 16384, small = 256, threads = 256;
  BufferPtr x = MakeBuffer("X", DType::kFloat32, {big});
  BufferPtr y = MakeBuffer("Y", DType::kFloat32, {big});
  BufferPtr s1 = MakeBuffer("stage", DType::kFloat32, {big}, MemScope::kShared);
  BufferPtr s2 = MakeBuffer("extra", DType::kFloat32, {small}, MemScope::kShared);
  VarPtr tx = MakeVar("tx"), k = MakeVar("k");
  Expr i = Expr(k) * threads + Expr(tx);
  Expr rev = MakeInt(big - 1) - i;
  Stmt body = Bind(
      tx, ThreadTag::kThreadX, threads,
      MakeAllocate(
          s1, MakeAllocate(
                  s2, MakeSeq({Loop(k, big / threads, MakeStore(s1, {i}, MakeLoad(x, {i}))),
                               MakeStore(s2, {tx}, MakeCast(DType::kFloat32, tx)), MakeBarrier(),
                               Loop(k, big / threads,
                                    MakeStore(y, {i},
                                              MakeLoad(s1, {rev}) +
                                                  MakeLoad(s2, {(Expr(tx) + 1) % threads})))}))));
  GeneratedSource src =
      Generate(OneKernel("dynsmem", {{x, BufferRole::kInput}, {y, BufferRole::kOutput}}, {1, 1, 1},
                         {threads, 1, 1}, body));
  ASSERT_EQ(src.kernels.size(), 1u);
  EXPECT_EQ(src.kernels[0].launch.dynamic_shared_bytes, (big + small) * 4);
  EXPECT_TRUE(Contains(src.code, "extern __shared__ __align__(16) unsigned char tessel_smem[];"))
      << src.code;
  EXPECT_TRUE(
      Contains(src.code, "float* const extra = reinterpret_cast<float*>(tessel_smem + 65536);"))
      << src.code;
  EXPECT_NVRTC_COMPILES(src);
}

TEST(CodegenCuda, HalfAndBFloat16LoadsComputeInFloat) {
  constexpr int64_t n = 512;
  BufferPtr a = MakeBuffer("A", DType::kFloat16, {n});
  BufferPtr b = MakeBuffer("B", DType::kBFloat16, {n});
  BufferPtr c = MakeBuffer("C", DType::kFloat32, {n});
  BufferPtr d = MakeBuffer("D", DType::kFloat16, {n});
  VarPtr tx = MakeVar("tx"), bx = MakeVar("bx");
  Expr i = Expr(bx) * 128 + Expr(tx);
  Expr sum =
      MakeCast(DType::kFloat32, MakeLoad(a, {i})) + MakeCast(DType::kFloat32, MakeLoad(b, {i}));
  Stmt body =
      Bind(bx, ThreadTag::kBlockX, 4,
           Bind(tx, ThreadTag::kThreadX, 128,
                MakeSeq({MakeStore(c, {i}, MakeCall("tanh", {sum}, DType::kFloat32)),
                         MakeStore(d, {i},
                                   MakeCast(DType::kFloat16,
                                            MakeCast(DType::kBFloat16, sum) * MakeFloat(0.5)))})));
  GeneratedSource src = Generate(OneKernel("halves",
                                           {{a, BufferRole::kInput},
                                            {b, BufferRole::kInput},
                                            {c, BufferRole::kOutput},
                                            {d, BufferRole::kOutput}},
                                           {4, 1, 1}, {128, 1, 1}, body));
  const std::string& code = src.code;
  EXPECT_TRUE(Contains(code, "#include <cuda_fp16.h>")) << code;
  EXPECT_TRUE(Contains(code, "#include <cuda_bf16.h>")) << code;
  EXPECT_TRUE(Contains(code, "const half* __restrict__ A")) << code;
  EXPECT_TRUE(Contains(code, "const __nv_bfloat16* __restrict__ B")) << code;
  EXPECT_TRUE(Contains(code, "__half2float(__ldg(&A[bx * 128 + tx]))")) << code;
  EXPECT_TRUE(Contains(code, "__bfloat162float(__ldg(&B[bx * 128 + tx]))")) << code;
  EXPECT_TRUE(Contains(code, "D[bx * 128 + tx] = __float2half(")) << code;
  EXPECT_TRUE(Contains(code, "tanhf(")) << code;
  EXPECT_NVRTC_COMPILES(src);
}

// A value stored as f16 or bf16 takes 1 + erf(y) and 1 - erf(y) as the narrow erfc
// (narrow_math.h); one stored as f32 keeps erff. Inputs the kernel only reads go through __ldg,
// but for bool.
TEST(CodegenCuda, SixteenBitStoresTakeTheNarrowErfcAndReadOnlyInputsTheReadOnlyCache) {
  constexpr int64_t n = 256;
  BufferPtr x = MakeBuffer("X", DType::kFloat16, {n});
  BufferPtr keep = MakeBuffer("Keep", DType::kBool, {n});
  BufferPtr h = MakeBuffer("H", DType::kFloat16, {n});
  BufferPtr b = MakeBuffer("Bf", DType::kBFloat16, {n});
  BufferPtr f = MakeBuffer("F", DType::kFloat32, {n});
  VarPtr tx = MakeVar("tx");
  Expr v = MakeCast(DType::kFloat32, MakeLoad(x, {Expr(tx)}));
  auto erf = [&](double c) { return MakeCall("erf", {v * MakeFloat(c)}, DType::kFloat32); };
  Expr gelu = MakeFloat(0.5) * v * (MakeFloat(1.0) + erf(0.70710678118654752));
  Expr kept = MakeSelect(MakeLoad(keep, {Expr(tx)}), gelu, MakeFloat(0.0));
  // GELU's product in other orders and multiples, and products that are not GELU's: another
  // scale, another operand.
  Expr w = MakeCast(DType::kFloat32, MakeLoad(h, {Expr(tx)}));
  Expr others = (MakeFloat(1.0) + erf(0.70710678118654752)) * v +
                MakeFloat(3.0) * v * (MakeFloat(1.0) + erf(2.0)) +
                w * (MakeFloat(1.0) + erf(0.70710678118654752));
  // SiLU as the parser expands it, x / (1 + exp(-x)) as x * (1 / (1 + exp(-x))); a bare exp.
  Expr exp = MakeCall("exp", {MakeUnary(UnaryOp::kNeg, v)}, DType::kFloat32);
  Expr silu = v * (MakeFloat(1.0) / (MakeFloat(1.0) + exp));
  Expr e1 = MakeCall("exp", {v}, DType::kFloat32) - MakeFloat(1.0);
  Stmt body =
      Bind(tx, ThreadTag::kThreadX, n,
           MakeSeq({MakeStore(h, {Expr(tx)}, MakeCast(DType::kFloat16, kept)),
                    MakeStore(b, {Expr(tx)}, MakeCast(DType::kBFloat16, MakeFloat(1.0) - erf(2.0))),
                    MakeStore(b, {Expr(tx)}, MakeCast(DType::kBFloat16, others)),
                    MakeStore(h, {Expr(tx)}, MakeCast(DType::kFloat16, silu + e1)),
                    MakeStore(f, {Expr(tx)}, gelu + silu)}));
  GeneratedSource src = Generate(OneKernel("narrow",
                                           {{x, BufferRole::kInput},
                                            {keep, BufferRole::kInput},
                                            {h, BufferRole::kOutput},
                                            {b, BufferRole::kOutput},
                                            {f, BufferRole::kOutput}},
                                           {1, 1, 1}, {n, 1, 1}, body));
  const std::string& code = src.code;
  EXPECT_TRUE(Contains(code, "__device__ __forceinline__ float tessel_erfc_narrow(float z)"))
      << code;
  EXPECT_TRUE(Contains(code, "__device__ __forceinline__ float tessel_gelu_narrow(float x)"))
      << code;
  EXPECT_TRUE(Contains(code,
                       "H[tx] = __float2half(Keep[tx] ? "
                       "tessel_gelu_narrow(__half2float(__ldg(&X[tx]))) : 0.0f);"))
      << code;
  EXPECT_TRUE(Contains(code,
                       "Bf[tx] = __float2bfloat16(tessel_erfc_narrow("
                       "__half2float(__ldg(&X[tx])) * 2.0f));"))
      << code;
  EXPECT_TRUE(Contains(code,
                       "Bf[tx] = __float2bfloat16(2.0f * tessel_gelu_narrow(__half2float(__ldg("
                       "&X[tx]))) + 3.0f * __half2float(__ldg(&X[tx])) * tessel_erfc_narrow(-("
                       "__half2float(__ldg(&X[tx])) * 2.0f)) + __half2float(H[tx]) * "
                       "tessel_erfc_narrow(-(__half2float(__ldg(&X[tx])) * 0.707106781f)));"))
      << code;
  EXPECT_TRUE(Contains(code,
                       "H[tx] = __float2half(__half2float(__ldg(&X[tx])) * __fdividef(1.0f, 1.0f + "
                       "__expf(-__half2float(__ldg(&X[tx])))) + (expf(__half2float(__ldg(&X[tx]))) "
                       "- 1.0f));"))
      << code;
  EXPECT_TRUE(Contains(code, "F[tx] = 0.5f * __half2float(__ldg(&X[tx])) * (1.0f + erff(")) << code;
  EXPECT_TRUE(Contains(code, "(1.0f / (1.0f + expf(-__half2float(__ldg(&X[tx])))))")) << code;
  EXPECT_NVRTC_COMPILES(src);
}

TEST(CodegenCuda, FloorDivisionSpecialValuesAndWideIndices) {
  constexpr int64_t n = 256;
  BufferPtr a = MakeBuffer("A", DType::kFloat32, {n});
  BufferPtr c = MakeBuffer("C", DType::kFloat32, {n});
  VarPtr tx = MakeVar("tx");
  Expr shifted = Expr(tx) - 100;
  Expr value = MakeSelect(shifted >= 0, MakeLoad(a, {shifted / 3 + shifted % 3}),
                          MakeFloat(-std::numeric_limits<double>::infinity())) +
               MakeLoad(a, {Expr(tx) / 2}) +
               MakeCast(DType::kFloat32, MakeCast(DType::kInt32, shifted / 7));
  Stmt body = Bind(tx, ThreadTag::kThreadX, n, MakeStore(c, {tx}, value));
  Program p = OneKernel("floordiv", {{a, BufferRole::kInput}, {c, BufferRole::kOutput}}, {1, 1, 1},
                        {n, 1, 1}, body);
  GeneratedSource src = Generate(p);
  EXPECT_TRUE(Contains(src.code, "tessel_floordiv<int>(tx - 100, 7)")) << src.code;
  EXPECT_TRUE(Contains(src.code, "A[tx / 2]")) << src.code;
  EXPECT_TRUE(Contains(src.code, "__int_as_float(0xff800000)")) << src.code;
  p.needs_int64_indices = true;
  GeneratedSource wide = Generate(p);
  EXPECT_TRUE(Contains(wide.code, "const long long tx = threadIdx.x;")) << wide.code;
  EXPECT_TRUE(Contains(wide.code, "tessel_floordiv<long long>(tx - 100, 7)")) << wide.code;
  EXPECT_NVRTC_COMPILES(src);
  EXPECT_TRUE(CompilesWithNvrtc(wide));
}

// ---- Errors.

TEST(CodegenCuda, ParallelLoopIsAnError) {
  BufferPtr c = MakeBuffer("C", DType::kFloat32, {64});
  VarPtr i = MakeVar("i");
  Program p = OneKernel("par", {{c, BufferRole::kOutput}}, {1, 1, 1}, {1, 1, 1},
                        Loop(i, 64, MakeStore(c, {i}, MakeFloat(1.0)), ForKind::kParallel));
  absl::StatusOr<GeneratedSource> src = GenerateCuda(Planned(p), CudaTarget("sm_90"));
  ASSERT_FALSE(src.ok());
  EXPECT_EQ(src.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(Contains(std::string(src.status().message()),
                       "parallel loops are for the host target; bind the loop to "
                       "blockIdx/threadIdx instead"))
      << src.status();
  EXPECT_TRUE(Contains(std::string(src.status().message()), "kernel 'par_kernel0'"))
      << src.status();
}

TEST(CodegenCuda, UnsupportedAllReduceExtentIsAnError) {
  BufferPtr c = MakeBuffer("C", DType::kFloat32, {1});
  BufferPtr red = MakeBuffer("red", DType::kFloat32, {1}, MemScope::kLocal);
  VarPtr tx = MakeVar("tx");
  Stmt body = Bind(
      tx, ThreadTag::kThreadX, 48,
      MakeAllocate(
          red, MakeSeq({MakeAllReduce(ReduceOp::kSum, MakeFloat(1.0), red, ThreadTag::kThreadX, 48),
                        MakeStore(c, {Zero()}, MakeLoad(red, {Zero()}))})));
  // Checked where all-reduces are expanded (lower_all_reduce).
  Program p = OneKernel("red48", {{c, BufferRole::kOutput}}, {1, 1, 1}, {48, 1, 1}, body);
  Kernel k = p.kernels[0];
  absl::Status st = LowerKernelAllReduces(&k, false);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), absl::StatusCode::kUnimplemented);
  EXPECT_TRUE(Contains(std::string(st.message()), "extent 48 is not supported")) << st;
  EXPECT_TRUE(Contains(std::string(st.message()), "kernel 'red48_kernel0'")) << st;

  // An extent that differs from the block dimension.
  k = p.kernels[0];
  k.launch.block = {64, 1, 1};
  st = LowerKernelAllReduces(&k, false);
  ASSERT_FALSE(st.ok());
  EXPECT_TRUE(Contains(std::string(st.message()),
                       "the block has 64 threads on that axis; the extent must equal the block "
                       "dimension"))
      << st;

  // Code generation prints expanded all-reduces only.
  absl::StatusOr<GeneratedSource> src = GenerateCuda(p, CudaTarget("sm_90"));
  ASSERT_FALSE(src.ok());
  EXPECT_TRUE(Contains(std::string(src.status().message()),
                       "has not been expanded; expand it with LowerKernelAllReduces"))
      << src.status();
}

TEST(CodegenCuda, TooMuchSharedMemoryIsAnError) {
  BufferPtr c = MakeBuffer("C", DType::kFloat32, {1});
  BufferPtr s = MakeBuffer("huge", DType::kFloat32, {64 * 1024}, MemScope::kShared);
  Stmt body = MakeAllocate(s, MakeSeq({MakeStore(s, {Zero()}, MakeFloat(1.0)),
                                       MakeStore(c, {Zero()}, MakeLoad(s, {Zero()}))}));
  Program p = OneKernel("huge", {{c, BufferRole::kOutput}}, {1, 1, 1}, {1, 1, 1}, body);
  absl::StatusOr<GeneratedSource> src = GenerateCuda(Planned(p), CudaTarget("sm_90"));
  ASSERT_FALSE(src.ok());
  EXPECT_TRUE(Contains(std::string(src.status().message()),
                       "needs 262144 bytes of shared memory, more than the 232448 bytes"))
      << src.status();
}

TEST(CodegenCuda, SharedBufferWithoutAPlanIsAnError) {
  BufferPtr c = MakeBuffer("C", DType::kFloat32, {1});
  BufferPtr s = MakeBuffer("tile", DType::kFloat32, {64}, MemScope::kShared);
  Stmt body = MakeAllocate(s, MakeSeq({MakeStore(s, {Zero()}, MakeFloat(1.0)),
                                       MakeStore(c, {Zero()}, MakeLoad(s, {Zero()}))}));
  Program p = OneKernel("unplanned", {{c, BufferRole::kOutput}}, {1, 1, 1}, {1, 1, 1}, body);
  absl::StatusOr<GeneratedSource> src = GenerateCuda(p, CudaTarget("sm_90"));
  ASSERT_FALSE(src.ok());
  EXPECT_TRUE(Contains(std::string(src.status().message()),
                       "shared buffer 'tile' has no place in the kernel's shared-memory plan"))
      << src.status();
  EXPECT_TRUE(GenerateCuda(Planned(p), CudaTarget("sm_90")).ok());
}

TEST(CodegenCuda, VectorizedLoopWithoutAPlanIsAnError) {
  Program p = VectorCopy("vunplanned", 4, 0, false);
  for (Kernel& k : p.kernels) k.shared = PlanSharedMemory(k, p.needs_int64_indices);
  absl::StatusOr<GeneratedSource> src = GenerateCuda(p, CudaTarget("sm_90"));
  ASSERT_FALSE(src.ok());
  EXPECT_TRUE(Contains(std::string(src.status().message()),
                       "vectorized loop 'v' has no plan in the kernel; plan it with "
                       "PlanVectorization (lowering does)"))
      << src.status();
  EXPECT_TRUE(GenerateCuda(Planned(p), CudaTarget("sm_90")).ok());
}

TEST(CodegenCuda, BufferOutsideKernelParamsIsAnError) {
  BufferPtr a = MakeBuffer("A", DType::kFloat32, {4});
  BufferPtr c = MakeBuffer("C", DType::kFloat32, {4});
  VarPtr tx = MakeVar("tx");
  Kernel k = MakeKernel("k", {1, 1, 1}, {4, 1, 1}, {c},
                        Bind(tx, ThreadTag::kThreadX, 4, MakeStore(c, {tx}, MakeLoad(a, {tx}))));
  Program p = CudaProgram("missing", {{a, BufferRole::kInput}, {c, BufferRole::kOutput}}, {k});
  absl::StatusOr<GeneratedSource> src = GenerateCuda(Planned(p), CudaTarget("sm_90"));
  ASSERT_FALSE(src.ok());
  EXPECT_TRUE(Contains(std::string(src.status().message()),
                       "global buffer 'A' is used where it is not declared"))
      << src.status();
}

TEST(CodegenCuda, HostTargetIsRejected) {
  BufferPtr c = MakeBuffer("C", DType::kFloat32, {4});
  VarPtr tx = MakeVar("tx");
  Program p = OneKernel("p", {{c, BufferRole::kOutput}}, {1, 1, 1}, {4, 1, 1},
                        Bind(tx, ThreadTag::kThreadX, 4, MakeStore(c, {tx}, MakeFloat(0.0))));
  absl::StatusOr<GeneratedSource> src = GenerateCuda(Planned(p), HostTarget());
  ASSERT_FALSE(src.ok());
  EXPECT_TRUE(Contains(std::string(src.status().message()), "GenerateHost")) << src.status();
}

}  // namespace
}  // namespace tessel::schedules
