// Hopper's warpgroup MMA without a GPU: the swizzled shared layout, the wgmma sketch of the design
// space on sm_90a (validity, what the kernels contain: descriptors, fences, waits, the async-proxy
// fence), NVRTC compiling them for sm_90a where the CUDA toolkit is installed, the cost model's
// view, and the errors: wgmma on a target without it, an unswizzled operand, a bad swizzle, the
// tensorize checks. GPU runs: tests/gpu/tensor_core_gpu_test.cc (WgmmaSpaceGpu).

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "schedules/ir/affine.h"
#include "schedules/ir/tensor_intrin.h"
#include "schedules/lower/check_limits.h"
#include "schedules/lower/lower.h"
#include "schedules/space/space_generator.h"
#include "schedules/util/status_macros.h"
#include "tests/e2e/e2e_util.h"
#include "tests/schedules/test_workloads.h"
#ifdef TESSEL_HAVE_CUDA
#include "worker/cuda/nvrtc_compiler.h"
#endif

namespace tessel::schedules {
namespace {

using tessel::testing::FeatureOf;
using test_workloads::BlockOf;
using test_workloads::LoopsOf;
using test_workloads::NewSchedule;
using test_workloads::ValueOrDie;
using ::testing::HasSubstr;

bool IsWgmmaSample(const Candidate& c) {
  return c.source.code.find("wgmma.mma_async") != std::string::npos;
}

// The first sample of `spec`'s sm_90a space (seeds 1 to 64) that runs wgmma and `keep` accepts.
std::optional<Candidate> WgmmaSample(const std::string& spec,
                                     const std::function<bool(const Candidate&)>& keep = nullptr) {
  auto space = SpaceGenerator::Create(testing::LoadSpec(spec), CudaTarget("sm_90a"));
  EXPECT_TRUE(space.ok()) << space.status();
  if (!space.ok()) return std::nullopt;
  for (uint64_t seed = 1; seed <= 64; ++seed) {
    auto c = space->Sample(seed);
    if (c.ok() && IsWgmmaSample(*c) && (!keep || keep(*c))) return *std::move(c);
  }
  ADD_FAILURE() << "no wgmma sample of " << spec;
  return std::nullopt;
}

// The trace's annotation `key` on stages set to `value` (every occurrence).
Trace WithStageAnnotation(Trace t, const std::string& key, int64_t value) {
  for (Instruction& i : t.insts) {
    if (i.kind == "annotate_stage" && i.attrs.value("key", "") == key) i.attrs["value"] = value;
  }
  return t;
}

TEST(Swizzle, XorsTheChunkOfEachLineWithinItsPeriod) {
  // 128 bytes: the 16-byte chunk q of 128-byte line r is stored at chunk q ^ (r % 8).
  EXPECT_EQ(SwizzledOffset(0, 128, 2), 0);
  EXPECT_EQ(SwizzledOffset(64 + 3, 128, 2), 64 + 8 + 3);              // line 1, chunk 0 -> 1
  EXPECT_EQ(SwizzledOffset(7 * 64 + 8 * 2, 128, 2), 7 * 64 + 8 * 5);  // line 7, chunk 2 -> 5
  EXPECT_EQ(SwizzledOffset(8 * 64 + 8, 128, 2), 8 * 64 + 8);          // line 8: a new period
  // 64 bytes: chunk q of line r (two 64-byte rows a line) at q ^ (r % 4).
  EXPECT_EQ(SwizzledOffset(3 * 64, 64, 2), 3 * 64 + 3 * 8);
  // A bijection on every 1024-byte period, for each width and element size.
  for (int64_t width : {32, 64, 128}) {
    for (int64_t bytes : {1, 2, 4}) {
      std::set<int64_t> seen;
      const int64_t n = 1024 / bytes;
      for (int64_t o = 0; o < n; ++o) {
        const int64_t s = SwizzledOffset(o, width, bytes);
        EXPECT_LT(s, n);
        EXPECT_EQ(s % (16 / bytes), o % (16 / bytes)) << "a 16-byte chunk stays whole";
        seen.insert(s);
      }
      EXPECT_EQ(static_cast<int64_t>(seen.size()), n) << width << " " << bytes;
    }
  }
}

TEST(Swizzle, StorageIndexStacksTheColumnAtoms) {
  // f16 [slot 2][rows 16][cols 128], 128-byte swizzle: atoms of 64 columns, one after the other.
  auto b =
      std::make_shared<Buffer>(*MakeBuffer("S", DType::kFloat16, {2, 16, 128}, MemScope::kShared));
  b->swizzle_bytes = 128;
  auto at = [&](int64_t s, int64_t r, int64_t c) {
    int64_t v = 0;
    EXPECT_TRUE(IsConstInt(
        Analyzer().Simplify(StorageIndex(*b, {MakeInt(s), MakeInt(r), MakeInt(c)})), &v));
    return v;
  };
  EXPECT_EQ(at(0, 0, 0), 0);
  EXPECT_EQ(at(0, 1, 5), 64 + 5);
  EXPECT_EQ(at(0, 3, 64 + 2), 16 * 64 + 3 * 64 + 2);  // the second atom follows all 16 rows
  EXPECT_EQ(at(1, 0, 0), 16 * 128);                   // slots are whole layouts
}

// The sm_90a space has the warpgroup sketch beside mma.sync's and the CUDA cores': most samples
// are valid on every family, wgmma samples appear, and the first ones compile.
TEST(Wgmma, Sm90aSamplesAreValidAndCompile) {
  for (const char* spec : {"matmul(M=4096, N=4096, K=4096, dtype=f16)",
                           "matmul(M=512, N=384, K=320, dtype=bf16, transpose_a=true)",
                           "matmul(M=256, N=256, K=256, dtype=f16, transpose_b=true)",
                           "matmul(M=128, N=256, K=128, batch=2, dtype=bf16)",
                           "matmul_bias_gelu(M=2048, N=8192, K=2048, dtype=f16)",
                           "matmul(M=1000, N=1000, K=1000, dtype=f16)",
                           "conv2d(N=64, C=128, H=28, W=28, K=128, R=3, S=3, padding=1, "
                           "layout=nhwc, dtype=f16)"}) {
    SCOPED_TRACE(spec);
    auto space = SpaceGenerator::Create(testing::LoadSpec(spec), CudaTarget("sm_90a"));
    ASSERT_TRUE(space.ok()) << space.status();
    int valid = 0, wgmma = 0;
    constexpr int kSamples = 80;
    for (uint64_t seed = 1; seed <= kSamples; ++seed) {
      auto c = space->Sample(seed);
      if (!c.ok()) continue;
      ++valid;
      if (!IsWgmmaSample(*c)) continue;
      ++wgmma;
#ifdef TESSEL_HAVE_CUDA
      if (wgmma <= 2 && worker::FindCudaIncludeDir().ok()) {
        worker::NvrtcOptions o;
        o.arch = "sm_90a";
        auto bin = worker::CompileCuda(c->source, o);
        EXPECT_TRUE(bin.ok()) << bin.status() << "\n" << c->source.code;
      }
#endif
    }
    // At least 85% (about 89% over 300 samples of the large GEMMs): the rest are over the
    // register or shared-memory limits.
    EXPECT_GE(valid, kSamples * 85 / 100);
    EXPECT_GE(wgmma, 4);
  }
  // sm_90 has no wgmma sketch.
  auto space = SpaceGenerator::Create(testing::LoadSpec("matmul(M=256, N=256, K=256, dtype=f16)"),
                                      CudaTarget("sm_90"));
  ASSERT_TRUE(space.ok());
  for (uint64_t seed = 1; seed <= 16; ++seed) {
    auto c = space->Sample(seed);
    if (c.ok()) {
      EXPECT_FALSE(IsWgmmaSample(*c)) << seed;
    }
  }
}

void ExpectCompilesForSm90a(const GeneratedSource& source) {
#ifdef TESSEL_HAVE_CUDA
  if (!worker::FindCudaIncludeDir().ok()) return;
  worker::NvrtcOptions o;
  o.arch = "sm_90a";
  auto bin = worker::CompileCuda(source, o);
  EXPECT_TRUE(bin.ok()) << bin.status();
#else
  (void)source;
#endif
}

// The write-back of a wgmma accumulator: its nest spans the warp's N columns, and each group of
// four 8-column tiles is one 16-byte store a lane (tessel_quad_store: the four lanes of a row
// trade their columns by two rounds of shuffles). Where tiles pass the extents, each value is
// computed under its own element's conditions and the store under its vector's; an epilogue's
// loads (bias) are among the values. (A write-back through bulk tensor stores is the other form:
// BulkCopy.WriteBacksThroughBulkTensorStores.)
TEST(Wgmma, TheWriteBackStoresSixteenBytesALane) {
  for (const char* spec :
       {"matmul(M=512, N=512, K=256, dtype=f16)", "matmul(M=200, N=136, K=168, dtype=f16)",
        "matmul_bias_gelu(M=256, N=256, K=128, dtype=bf16)"}) {
    SCOPED_TRACE(spec);
    std::optional<Candidate> c = WgmmaSample(spec, [](const Candidate& x) {
      return x.source.code.find("tessel_tma_store_") == std::string::npos;
    });
    ASSERT_TRUE(c.has_value());
    const std::string& code = c->source.code;
    const bool bf16 = std::string(spec).find("bf16") != std::string::npos;
    const std::string call = bf16 ? "tessel_quad_store_bf16(" : "tessel_quad_store_f16(";
    EXPECT_TRUE(code.find(call + "&D[") != std::string::npos) << call;
    EXPECT_TRUE(code.find("__shfl_xor_sync(0xffffffffu, hi ? a_lo : b_lo, 2)") !=
                std::string::npos);
    EXPECT_TRUE(code.find("*reinterpret_cast<uint4*>(dst) = make_uint4(") != std::string::npos);
    // No element-wise store of D is left.
    EXPECT_EQ(code.find("*reinterpret_cast<unsigned int*>(&D["), std::string::npos);
    if (std::string(spec).find("N=136") != std::string::npos) {
      EXPECT_TRUE(code.find(" : 0.0f, ") != std::string::npos) << "values under their conditions";
    }
    if (std::string(spec).find("bias") != std::string::npos) {
      EXPECT_TRUE(code.find("bias[") != std::string::npos);
    }
    ExpectCompilesForSm90a(c->source);
    // The cost model counts the 16 bytes a lane writes to D, not a read of D.
    EXPECT_GT(FeatureOf(c->program, c->target, "log2_global_write_bytes"), 0);
  }
}

// What a wgmma kernel is made of: swizzled operands on their 1024-byte period, descriptors with
// the layout's byte offsets, a fence before each stage's run of wgmma and a commit after it, one
// group left in flight across the barrier (3 stages or more) and all waited for after the loop, and
// the async-proxy fence of the copies before the barrier.
TEST(Wgmma, KernelsFenceCommitAndWaitAroundTheWarpgroupMma) {
  auto c = WgmmaSample("matmul(M=512, N=512, K=512, dtype=f16)", [](const Candidate& c) {
    return c.source.code.find("software_pipeline=4") != std::string::npos &&
           c.source.code.find("cp.async.bulk.tensor") == std::string::npos;  // threads fetch
  });
  ASSERT_TRUE(c.has_value());
  const std::string& code = c->source.code;
  EXPECT_THAT(code, HasSubstr("__align__(1024) unsigned char tessel_smem[]"));
  EXPECT_THAT(code, HasSubstr("tessel_swizzle_128_2("));
  EXPECT_THAT(code, HasSubstr("return o ^ (((o >> 6) & 7) << 3);"));
  EXPECT_THAT(code, HasSubstr("k16.f32.f16.f16 {%0, %1,"));
  EXPECT_THAT(code, HasSubstr("p, 1, 1, 0, 1;"));  // A K-major, B N-major ([k, n], n contiguous)
  EXPECT_THAT(code, HasSubstr("tessel_wgmma_descriptor(a, a_lbo, a_sbo, a_mode)"));
  EXPECT_THAT(code, HasSubstr("tessel_cp_async_wait_1();\n    tessel_fence_proxy_async();\n"
                              "    __syncthreads();"));
  const size_t fence = code.find("tessel_wgmma_fence();\n");
  const size_t call = code.find("tessel_wgmma_m64n", fence);
  const size_t commit = code.find("tessel_wgmma_commit();\n", call);
  const size_t wait1 = code.find("tessel_wgmma_wait_1();\n", commit);
  const size_t wait0 = code.find("tessel_wgmma_wait_0();\n", wait1);
  EXPECT_NE(fence, std::string::npos);
  EXPECT_NE(call, std::string::npos);
  EXPECT_NE(commit, std::string::npos);
  EXPECT_NE(wait1, std::string::npos);
  EXPECT_NE(wait0, std::string::npos) << "every group is waited for after the loop";
  // A: 128-byte rows, 8 rows a swizzle period: SBO 1024, LBO unused (16); mode 1 (128 bytes).
  EXPECT_THAT(code, HasSubstr(", 16, 1024, 1, "));
}

TEST(Wgmma, CostModelSeesWgmmaFlops) {
  auto c = WgmmaSample("matmul(M=512, N=512, K=512, dtype=f16)");
  ASSERT_TRUE(c.has_value());
  auto feature = [&](const std::string& n) { return FeatureOf(c->program, c->target, n); };
  EXPECT_GT(feature("log2_wgmma_flops"), 0);
  EXPECT_EQ(feature("log2_wgmma_flops"), feature("log2_tensor_core_flops"));
  EXPECT_GE(feature("pipeline_stages"), 2);
}

// wgmma's accumulators are its operands and cannot spill: a kernel whose accumulators leave no
// room in a thread's register share is refused before it is compiled (ptxas would refuse it).
TEST(Wgmma, AccumulatorsMustFitTheRegisterShare) {
  auto c = WgmmaSample("matmul(M=512, N=512, K=512, dtype=f16)");
  ASSERT_TRUE(c.has_value());
  ASSERT_TRUE(CheckTargetLimits(c->program, c->target).ok());
  Target small = c->target;
  small.registers_per_block = 16 * c->program.kernels[0].launch.threads_per_block();
  const absl::Status st = CheckTargetLimits(c->program, small);
  ASSERT_FALSE(st.ok());
  EXPECT_THAT(st.message(), HasSubstr("a thread may spill at most 0 words over its share of 16 "
                                      "(wgmma's accumulators cannot spill): use fewer threads or "
                                      "smaller local buffers"));
}

// A from registers (wgmma's register-A form): A's shared copy loaded into each warp's fragment
// by ldmatrix at the pipelined k step, the call passing the warp's four registers a 16 x 16 tile
// and B's descriptor; the pipeline then leaves no wgmma group in flight across its steps (the
// next step's ldmatrix would overwrite registers a group still reads); NVRTC compiles it.
TEST(Wgmma, AFromRegisters) {
  auto c = WgmmaSample("matmul(M=256, N=256, K=512, dtype=f16)", [](const Candidate& c) {
    return c.source.code.find("cp.async.bulk") == std::string::npos &&
           c.source.code.find("tessel_wgmma_wait_1();") != std::string::npos;
  });
  ASSERT_TRUE(c.has_value());
  auto s = testing::WgmmaWithRegisterOperand(*c);
  ASSERT_TRUE(s.ok()) << s.status();
  auto source = testing::Generate(*s, CudaTarget("sm_90a"));
  ASSERT_TRUE(source.ok()) << source.status();
  const std::string& code = source->code;
  EXPECT_THAT(code, HasSubstr("tessel_ldmatrix_x4(&A_shared_fragment["));
  EXPECT_THAT(code, HasSubstr("const unsigned* ar = static_cast<const unsigned*>(a);"));
  EXPECT_THAT(code, ::testing::ContainsRegex("tessel_wgmma_m64n[0-9]+k16_f32_f16_r[01]\\(&"));
  EXPECT_THAT(code, ::testing::Not(HasSubstr("tessel_wgmma_wait_1();")));
  EXPECT_THAT(code, HasSubstr("tessel_wgmma_fence();"));
  ExpectCompilesForSm90a(*source);
  // wgmma has no register form for B.
  auto b = testing::WgmmaWithRegisterOperand(*c, "B");
  ASSERT_TRUE(b.ok()) << b.status();
  auto p = Lower(*b, CudaTarget("sm_90a"));
  ASSERT_FALSE(p.ok());
  EXPECT_THAT(p.status().message(),
              HasSubstr(" in fragment memory; wgmma reads B from shared memory (cache_read "
                        "\"shared\") and A from shared memory or a fragment"));
}

TEST(Wgmma, ATargetWithoutWgmmaRefusesIt) {
  auto c = WgmmaSample("matmul(M=256, N=256, K=256, dtype=f16)");
  ASSERT_TRUE(c.has_value());
  auto s = Replay(c->workload, *c->trace);
  ASSERT_TRUE(s.ok()) << s.status();
  auto p = Lower(*s, CudaTarget("sm_90"));
  ASSERT_FALSE(p.ok());
  EXPECT_THAT(p.status().message(),
              HasSubstr("tensorizes with wgmma_m64nNk16, which the target cuda -arch=sm_90 does "
                        "not have; wgmma needs cuda -arch=sm_90a"));
}

TEST(Wgmma, OperandsMustBeSwizzled) {
  auto c = WgmmaSample("matmul(M=256, N=256, K=256, dtype=f16)");
  ASSERT_TRUE(c.has_value());
  auto s = Replay(c->workload, WithStageAnnotation(*c->trace, kStorageSwizzle, 0));
  ASSERT_TRUE(s.ok()) << s.status();
  auto p = Lower(*s, CudaTarget("sm_90a"));
  ASSERT_FALSE(p.ok());
  EXPECT_THAT(p.status().message(), HasSubstr(", which is not swizzled; wgmma reads swizzled "
                                              "shared operands (annotate the copy "
                                              "storage_swizzle)"));
}

TEST(Wgmma, SwizzleWidthsAreTheTensorCoresOnes) {
  auto c = WgmmaSample("matmul(M=256, N=256, K=256, dtype=f16)");
  ASSERT_TRUE(c.has_value());
  auto s = Replay(c->workload, WithStageAnnotation(*c->trace, kStorageSwizzle, 48));
  ASSERT_TRUE(s.ok()) << s.status();
  auto p = Lower(*s, CudaTarget("sm_90a"));
  ASSERT_FALSE(p.ok());
  EXPECT_THAT(p.status().message(),
              HasSubstr("is annotated storage_swizzle = 48, but the tensor cores' swizzle widths "
                        "are 32, 64 and 128 bytes"));
}

// B of `spec` cached into `scope` memory (computed at C's first loop, bound to blockIdx.x on
// CUDA, or for "local" at its second), rows padded 4 past a multiple of 32 when `pad`, annotated
// storage_swizzle = `swizzle`, lowered for `target`.
absl::StatusOr<Program> LowerSwizzledCopyOfB(const std::string& spec, const std::string& scope,
                                             int64_t swizzle, const Target& target,
                                             bool pad = false) {
  Schedule sch = NewSchedule(testing::LoadSpec(spec));
  BlockRV c = BlockOf(sch, "C");
  TESSEL_ASSIGN_OR_RETURN(BlockRV b, sch.CacheRead("B", scope, {c}));
  std::vector<LoopRV> l = LoopsOf(sch, c);
  if (target.is_cuda()) TESSEL_RETURN_IF_ERROR(sch.Bind(l[0], "blockIdx.x"));
  TESSEL_RETURN_IF_ERROR(sch.ComputeAt(b, l[scope == "local" ? 1 : 0]));
  if (pad) TESSEL_RETURN_IF_ERROR(sch.StorageAlign(b, 0, 32, 4));
  TESSEL_RETURN_IF_ERROR(sch.Annotate(b, kStorageSwizzle, swizzle));
  return Lower(sch, target);
}

TEST(Wgmma, SwizzleNeedsWholeRowsOfTheWidth) {
  // A shared copy 8 elements wide cannot hold 64-element (128-byte) swizzle rows.
  auto p = LowerSwizzledCopyOfB("matmul(M=64, N=8, K=64, dtype=f16)", "shared", 128,
                                CudaTarget("sm_90a"));
  ASSERT_FALSE(p.ok());
  EXPECT_THAT(p.status().message(),
              HasSubstr("its region's contiguous extent (8) is no multiple of the 64 elements of "
                        "a swizzle row"));
  // The host has no shared memory to swizzle.
  auto host =
      LowerSwizzledCopyOfB("matmul(M=64, N=64, K=64, dtype=f16)", "shared", 128, HostTarget());
  ASSERT_FALSE(host.ok());
  EXPECT_THAT(host.status().message(),
              HasSubstr("the swizzle is a layout of CUDA shared memory; drop it on the host"));
}

// kSwizzleWidest: the widest swizzle whose rows the copy's contiguous extent holds, in place of
// its storage_align padding; where none fits, the padding stays. f16 copies of B 8, 16, 32, 64
// and 192 columns wide (16 to 384 bytes a row).
TEST(Wgmma, WidestSwizzleReplacesThePaddingWhereARowFits) {
  const std::vector<std::pair<int64_t, int64_t>> width_of_columns = {
      {8, 0}, {16, 32}, {32, 64}, {64, 128}, {192, 128}};
  for (const auto& [n, want] : width_of_columns) {
    SCOPED_TRACE(n);
    auto p = LowerSwizzledCopyOfB(absl::StrCat("matmul(M=64, N=", n, ", K=64, dtype=f16)"),
                                  "shared", kSwizzleWidest, CudaTarget("sm_80"), /*pad=*/true);
    ASSERT_TRUE(p.ok()) << p.status();
    const AllocateNode* alloc = test_workloads::FindAllocate(p->kernels[0].body, "B_shared");
    ASSERT_NE(alloc, nullptr);
    EXPECT_EQ(alloc->buffer->swizzle_bytes, want);
    if (want == 0) {
      // Padded: rows of 8 elements at a stride of 4 past a multiple of 32.
      EXPECT_EQ(alloc->buffer->Strides(), (std::vector<int64_t>{36, 1}));
    } else {
      EXPECT_TRUE(alloc->buffer->strides.empty());
      EXPECT_EQ(alloc->buffer->AllocatedElements(), 64 * n);
    }
  }
}

// The widest swizzle is still a layout of CUDA shared memory.
TEST(Wgmma, WidestSwizzleIsForSharedMemoryOnCuda) {
  auto p = LowerSwizzledCopyOfB("matmul(M=64, N=64, K=64, dtype=f16)", "local", kSwizzleWidest,
                                CudaTarget("sm_80"));
  ASSERT_FALSE(p.ok());
  EXPECT_THAT(p.status().message(),
              HasSubstr("is annotated storage_swizzle = 1, but it is in local memory; only shared "
                        "buffers are swizzled"));
  auto host = LowerSwizzledCopyOfB("matmul(M=64, N=64, K=64, dtype=f16)", "shared", kSwizzleWidest,
                                   HostTarget());
  ASSERT_FALSE(host.ok());
  EXPECT_THAT(host.status().message(),
              HasSubstr("is annotated storage_swizzle = 1, but the swizzle is a layout of CUDA "
                        "shared memory; drop it on the host"));
}

TEST(Wgmma, TensorizeChecksTheStage) {
  Schedule sch = NewSchedule(testing::LoadSpec("matmul(M=64, N=64, K=32, dtype=f16)"));
  BlockRV c = BlockOf(sch, "C");
  BlockRV acc = ValueOrDie(sch.CacheWrite(c, "fragment"));
  std::vector<LoopRV> l = LoopsOf(sch, acc);
  std::vector<LoopRV> i = ValueOrDie(sch.Split(l[0], {-1, 16}));
  std::vector<LoopRV> k = ValueOrDie(sch.Split(l[2], {-1, 16}));
  ASSERT_TRUE(sch.Reorder({i[0], k[0], i[1], l[1], k[1]}).ok());
  absl::Status st = sch.Tensorize(i[1], "wgmma_m64nNk16");
  EXPECT_THAT(st.message(), HasSubstr("reads operand A from global memory; cache_read it to "
                                      "\"shared\" first"));
  ASSERT_TRUE(sch.Reorder({i[0], k[0], l[1], i[1], k[1]}).ok());
  st = sch.Tensorize(l[1], "wgmma_m64nNk16");
  EXPECT_THAT(st.message(), HasSubstr("have extents 64 x 16 x 16; wgmma_m64nNk16 replaces loops of "
                                      "16 x N x 16 (N = 8, 16, ..., 256)"));
  Schedule plain = NewSchedule(testing::LoadSpec("matmul(M=64, N=64, K=32, dtype=f16)"));
  BlockRV pc = BlockOf(plain, "C");
  std::vector<LoopRV> pl = LoopsOf(plain, pc);
  std::vector<LoopRV> pi = ValueOrDie(plain.Split(pl[0], {-1, 16}));
  std::vector<LoopRV> pk = ValueOrDie(plain.Split(pl[2], {-1, 16}));
  ASSERT_TRUE(plain.Reorder({pi[0], pk[0], pi[1], pl[1], pk[1]}).ok());
  st = plain.Tensorize(pi[1], "wgmma_m64nNk16");
  EXPECT_THAT(st.message(), HasSubstr("writes global memory; wgmma accumulates in a fragment: "
                                      "cache_write the stage to \"fragment\""));
}

}  // namespace
}  // namespace tessel::schedules
