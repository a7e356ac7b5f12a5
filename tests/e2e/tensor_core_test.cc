// Tensor cores without a GPU: the tensorize primitive's checks, lower_tensor_intrinsics and
// inject_software_pipeline on a recorded schedule (the calls they leave, the fragments they turn
// into registers, their errors), NVRTC compiling the kernels for sm_80 and sm_90 where the CUDA
// toolkit is installed, and the tensor-core sketch of the design space.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <regex>
#include <set>

#include "costmodel/features.h"
#include "schedules/codegen/cuda_codegen.h"
#include "schedules/lower/lower.h"
#include "schedules/space/space_generator.h"
#include "tests/e2e/e2e_util.h"
#include "tests/schedules/recorded_schedules.h"
#ifdef TESSEL_HAVE_CUDA
#include "worker/cuda/nvrtc_compiler.h"
#endif

namespace tessel::schedules {
namespace {

using recorded_schedules::CudaImplicitGemmConv;
using recorded_schedules::CudaTensorCoreMatmul;
using test_workloads::BlockOf;
using test_workloads::CudaT;
using test_workloads::HostT;
using test_workloads::LoopsOf;
using test_workloads::NewSchedule;
using test_workloads::ValueOrDie;
using ::testing::HasSubstr;
using ::testing::Not;

std::string CudaOf(const Schedule& s, const Target& t = CudaT()) {
  auto p = Lower(s, t);
  if (!p.ok()) return "ERROR: " + std::string(p.status().message());
  auto src = GenerateCuda(*p, t);
  if (!src.ok()) return "ERROR: " + std::string(src.status().message());
  return src->code;
}

TEST(TensorCore, LowersToMmaLdmatrixAndRegisterFragments) {
  auto p = Lower(CudaTensorCoreMatmul(1, /*stages=*/1), CudaT());
  ASSERT_TRUE(p.ok()) << p.status();
  const std::string ir = ToString(*p);
  EXPECT_THAT(ir, HasSubstr("tessel_mma_m16n8k16_f32_f16("));
  EXPECT_THAT(ir, HasSubstr("tessel_ldmatrix_x4("));        // A, k contiguous
  EXPECT_THAT(ir, HasSubstr("tessel_ldmatrix_x2_trans("));  // B [k, n]: n contiguous
  // Every fragment is a register array of its tiles: C 1 x 2 tiles of 4, A one tile of 8 per k
  // step, B 2 tiles of 4.
  EXPECT_THAT(ir, HasSubstr("alloc local f32 C_fragment[8]"));
  EXPECT_THAT(ir, Not(HasSubstr("alloc fragment")));
  EXPECT_EQ(p->kernels[0].launch.block[0], 32);
  const std::string cuda = CudaOf(CudaTensorCoreMatmul(1, 1));
  EXPECT_THAT(cuda, HasSubstr("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"));
  EXPECT_THAT(cuda, HasSubstr("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16"));
}

TEST(TensorCore, PipelinedFetchesAreAsyncCopiesIntoSlots) {
  const std::string cuda = CudaOf(CudaTensorCoreMatmul(1, /*stages=*/3));
  EXPECT_THAT(cuda, HasSubstr("tessel_cp_async_16("));
  EXPECT_THAT(cuda, HasSubstr("cp.async.cg.shared.global"));
  EXPECT_THAT(cuda, HasSubstr("tessel_cp_async_wait_1();"));  // S - 2 groups in flight
  EXPECT_THAT(cuda, HasSubstr("tessel_cp_async_wait_0();"));
  // A guarded fetch skips the copy (a zero fill would still write outside the tile).
  EXPECT_TRUE(std::regex_search(cuda, std::regex(R"(if \([^\n]*\) \{\n\s*tessel_cp_async_16\()")))
      << cuda;
  // Three slots of each shared buffer.
  auto p = Lower(CudaTensorCoreMatmul(1, 3), CudaT());
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_THAT(ToString(*p), HasSubstr("alloc shared f16 A_shared[3, 32, "));
}

// The fetch of a later stage is predicated, not branched around: in the last S - 1 iterations
// its copies zero-fill a slot no one reads, and the loop body stays one block the scheduler can
// interleave (burst and spread alike). A fetch whose copies have a predicate of their own (a
// convolution's padded border) keeps the branch.
TEST(TensorCore, PipelinedFetchOfPlainLoadsIsPredicatedNotBranched) {
  const std::string spec = "matmul(M=64, N=64, K=256, dtype=f16)";
  const std::regex predicated(R"(tessel_cp_async_16\([^\n]*, k\w* < \d+\);)");
  const std::regex branch(R"(if \(k\w* < \d+(\)| &&))");
  for (bool spread : {false, true}) {
    const std::string cuda = CudaOf(CudaTensorCoreMatmul(1, 3, true, spec, spread));
    EXPECT_TRUE(std::regex_search(cuda, predicated)) << cuda;
    EXPECT_FALSE(std::regex_search(cuda, branch)) << cuda;
  }
  auto w = ParseWorkloadSpec(
      "conv2d(N=2, C=32, H=10, W=10, K=32, R=3, S=3, padding=1, layout=nhwc, dtype=f16)");
  ASSERT_TRUE(w.ok()) << w.status();
  auto space = SpaceGenerator::Create(*w, CudaTarget("sm_90"));
  ASSERT_TRUE(space.ok()) << space.status();
  int padded_pipelines = 0;
  for (uint64_t seed = 1; seed <= 24; ++seed) {
    auto c = space->Sample(seed);
    if (!c.ok()) continue;
    const std::string& code = c->source.code;
    // Tensor-core samples (the CUDA-core sketch's short pipelines may fetch every step in the
    // prologue, leaving no fetch in the loop).
    if (code.find("software_pipeline=") == std::string::npos ||
        code.find("tessel_mma_m16n8k16") == std::string::npos ||
        !std::regex_search(code, std::regex(R"(tessel_cp_async_\d+\([^\n]*>= 1)"))) {
      continue;
    }
    ++padded_pipelines;
    EXPECT_TRUE(std::regex_search(code, std::regex(R"(if \(\w+ < \d+(\)| &&))"))) << code;
  }
  EXPECT_GT(padded_pipelines, 0);
}

// A swizzled shared copy's offset keeps the terms that are multiples of the swizzle's period (the
// stage slot, the k step) outside the XOR: the pipelined loop's variable never occurs inside a
// tessel_swizzle call, so the XOR of the rest is loop-invariant (affine.h, SplitByPeriod).
TEST(TensorCore, SwizzledOffsetsKeepThePipelineSlotOutsideTheXor) {
  auto w = ParseWorkloadSpec("matmul(M=512, N=512, K=512, dtype=f16)");
  ASSERT_TRUE(w.ok()) << w.status();
  auto space = SpaceGenerator::Create(*w, CudaTarget("sm_90"));
  ASSERT_TRUE(space.ok()) << space.status();
  const std::regex pipelined(
      R"(for \(int (\w+) = 0; \w+ < \d+; \+\+\w+\) \{  // software_pipeline=[2-9])");
  const std::regex swizzle_call(R"(tessel_swizzle_\d+_\d+\(([^;]*?)\)\])");
  int checked = 0;
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    auto c = space->Sample(seed);
    if (!c.ok()) continue;
    const std::string& code = c->source.code;
    std::smatch loop;
    if (code.find("tessel_swizzle_") == std::string::npos ||
        !std::regex_search(code, loop, pipelined)) {
      continue;
    }
    const std::regex var("\\b" + loop[1].str() + "\\b");
    int slots_outside = 0;
    for (std::sregex_iterator it(code.begin(), code.end(), swizzle_call), end; it != end; ++it) {
      EXPECT_FALSE(std::regex_search((*it)[1].str(), var)) << (*it)[0] << "\n" << code;
      // The slot term stands before the call: "... % <stages> * <slot elements> + tessel_swizzle".
      const size_t at = static_cast<size_t>(it->position());
      const size_t line = code.rfind('\n', at);
      slots_outside += std::regex_search(code.substr(line, at - line), var) ? 1 : 0;
    }
    EXPECT_GT(slots_outside, 0) << code;
    ++checked;
  }
  EXPECT_GT(checked, 2);
}

// pipeline_fetch_spread on the k-step loop: the next stage's copies issue a share per k step,
// inside that loop, and the group is committed once after it.
TEST(TensorCore, SpreadFetchIssuesTheCopiesOverTheKSteps) {
  const std::string spec = "matmul(M=64, N=64, K=256, dtype=f16)";
  int spread_seen = 0;
  for (uint64_t seed = 1; seed <= 8; ++seed) {
    const std::string burst = CudaOf(CudaTensorCoreMatmul(seed, 3, true, spec, false));
    const std::string spread = CudaOf(CudaTensorCoreMatmul(seed, 3, true, spec, true));
    // The same copies either way.
    auto count = [](const std::string& code, const std::string& what) {
      size_t n = 0;
      for (size_t at = code.find(what); at != std::string::npos; at = code.find(what, at + 1)) ++n;
      return n;
    };
    EXPECT_EQ(count(burst, "tessel_cp_async_16("), count(spread, "tessel_cp_async_16("));
    const bool two_steps = spread.find("for (int k_1 = 0; k_1 < 2; ++k_1)") != std::string::npos;
    if (!two_steps) {
      EXPECT_EQ(burst, spread) << "one k step: nothing to spread over";
      continue;
    }
    ++spread_seen;
    const size_t loop = spread.find("for (int k_1 = 0; k_1 < 2; ++k_1)");
    const size_t first = spread.find("k_1 == 0)", loop);
    const size_t second = spread.find("k_1 == 1)", loop);
    const size_t commit = spread.find("tessel_cp_async_commit();", loop);
    ASSERT_NE(first, std::string::npos) << spread;
    ASSERT_NE(second, std::string::npos) << spread;
    EXPECT_LT(second, commit) << "the commit follows the k steps\n" << spread;
    EXPECT_NE(spread.find("tessel_cp_async_16(", first), std::string::npos);
  }
  EXPECT_GT(spread_seen, 0) << "no seed drew two k steps";
}

// pipeline_fragments_across on the k-step loop (3 stages, two k steps): no barrier at the stage's
// start; the last k step waits for the next stage, passes the barrier and loads that stage's
// first fragments before its math; the first stage's fragments are loaded before the loop, and
// the fragments live across it. Burst or spread copies alike. With 2 stages or one k step the
// barrier stays at the stage's start.
TEST(TensorCore, FragmentsAcrossTheStagesAreLoadedInTheLastKStep) {
  const std::string spec = "matmul(M=64, N=64, K=256, dtype=f16)";
  int across_seen = 0;
  for (uint64_t seed = 1; seed <= 8; ++seed) {
    for (bool spread : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "seed " << seed << ", spread " << spread);
      const std::string code = CudaOf(CudaTensorCoreMatmul(seed, 3, true, spec, spread, true));
      const std::string two = CudaOf(CudaTensorCoreMatmul(seed, 2, true, spec, spread, true));
      EXPECT_THAT(two, HasSubstr("tessel_cp_async_wait_0();\n    __syncthreads();")) << "2 stages";
      const size_t inner = code.find("for (int k_1 = 0; k_1 < 2; ++k_1)");
      if (inner == std::string::npos) {
        EXPECT_THAT(code, HasSubstr("tessel_cp_async_wait_1();\n    __syncthreads();"))
            << "one k step\n"
            << code;
        continue;
      }
      ++across_seen;
      const size_t outer = code.find("for (int k_0 = 0; k_0 < 8; ++k_0)");
      ASSERT_NE(outer, std::string::npos) << code;
      // Before the loop: the first stage waited for, then its first fragments.
      const size_t first_barrier = code.rfind("__syncthreads();", outer);
      ASSERT_NE(first_barrier, std::string::npos) << code;
      EXPECT_LT(code.find("tessel_ldmatrix_x", first_barrier), outer) << code;
      EXPECT_LT(code.find("A_shared_fragment["), outer) << "fragments live across the stages";
      // In the loop: the only barrier is in the last k step, before the next stage's fragments.
      const size_t last_step = code.find("if (k_1 == 1) {", inner);
      ASSERT_NE(last_step, std::string::npos) << code;
      EXPECT_EQ(code.find("__syncthreads();", outer), code.find("__syncthreads();", last_step))
          << code;
      const size_t wait = code.find("tessel_cp_async_wait_1();", last_step);
      const size_t barrier = code.find("__syncthreads();", last_step);
      const size_t next = code.find("(k_0 + 1) % 3", last_step);
      EXPECT_LT(wait, barrier) << code;
      EXPECT_LT(barrier, next) << code;
      EXPECT_NE(code.find("if (k_0 < 7)", barrier), std::string::npos) << "no stage after the last";
      if (spread) {
        // The copies spread over the steps before the last, committed there before the wait.
        EXPECT_LT(code.find("tessel_cp_async_commit();", last_step), wait) << code;
        EXPECT_EQ(code.find("tessel_cp_async_16(", last_step), std::string::npos) << code;
      }
#ifdef TESSEL_HAVE_CUDA
      if (across_seen <= 2 && worker::FindCudaIncludeDir().ok()) {
        for (const char* arch : {"sm_80", "sm_90"}) {
          auto p = Lower(CudaTensorCoreMatmul(seed, 3, true, spec, spread, true), CudaTarget(arch));
          ASSERT_TRUE(p.ok()) << p.status();
          auto src = GenerateCuda(*p, CudaTarget(arch));
          ASSERT_TRUE(src.ok()) << src.status();
          worker::NvrtcOptions o;
          o.arch = arch;
          auto bin = worker::CompileCuda(*src, o);
          EXPECT_TRUE(bin.ok()) << arch << ": " << bin.status() << "\n" << src->code;
        }
      }
#endif
    }
  }
  EXPECT_GT(across_seen, 0) << "no seed drew two k steps";
}

TEST(TensorCore, WriteBackIsVectorizedPerLane) {
  const std::string cuda = CudaOf(CudaTensorCoreMatmul(1, 1));
  EXPECT_THAT(cuda, HasSubstr(" % 4 * 2]) = "));
  EXPECT_THAT(cuda, HasSubstr("1 x unsigned int"));  // a lane's two halves of a row as one store
}

// The sketch's write-back nest spans the warp's tiles along n (16 rows by fn * 8 columns): where
// fn is a multiple of 4, each group of four 8-column tiles of a 16-bit output is stored as one
// 16-byte vector a lane (the lanes of a row trading their columns); otherwise each lane stores
// its two adjacent elements of a row.
TEST(TensorCore, SampledWriteBackStoresSixteenBytesALaneWhereTheWarpHasFourTiles) {
  for (const char* arch : {"sm_80", "sm_90"}) {
    SCOPED_TRACE(arch);
    auto space = SpaceGenerator::Create(
        testing::LoadSpec("matmul_bias_gelu(M=512, N=512, K=256, dtype=f16)"), CudaTarget(arch));
    ASSERT_TRUE(space.ok()) << space.status();
    int quad = 0, pairs = 0;
    for (uint64_t seed = 1; seed <= 60 && (quad < 2 || pairs < 1); ++seed) {
      auto c = space->Sample(seed);
      if (!c.ok() || c->source.code.find("tessel_mma_m16n8k16") == std::string::npos) continue;
      const std::string& code = c->source.code;
      if (code.find("tessel_quad_store_f16(&D[") != std::string::npos) {
        ++quad;
        EXPECT_EQ(code.find("*reinterpret_cast<unsigned int*>(&D["), std::string::npos) << code;
        EXPECT_THAT(code, HasSubstr("bias["));
#ifdef TESSEL_HAVE_CUDA
        if (quad == 1 && worker::FindCudaIncludeDir().ok()) {
          worker::NvrtcOptions o;
          o.arch = arch;
          auto bin = worker::CompileCuda(c->source, o);
          EXPECT_TRUE(bin.ok()) << bin.status() << "\n" << code;
        }
#endif
      } else {
        ++pairs;
        EXPECT_THAT(code, HasSubstr("*reinterpret_cast<unsigned int*>(&D["));
      }
    }
    EXPECT_GE(quad, 2);
    EXPECT_GE(pairs, 1);
  }
}

TEST(TensorCore, HostTargetRefusesTensorizedSchedules) {
  auto p = Lower(CudaTensorCoreMatmul(1, 1), HostT());
  ASSERT_FALSE(p.ok());
  EXPECT_THAT(
      std::string(p.status().message()),
      HasSubstr(
          "tensor-core intrinsics (mma_m16n8k16, ldmatrix, mma_accumulator, wgmma_m64nNk16) exist "
          "only on CUDA targets"));
}

TEST(TensorCore, UntensorizedAccessOfAFragmentIsAnError) {
  auto p = Lower(CudaTensorCoreMatmul(1, 1, /*tensorize_store=*/false), CudaT());
  ASSERT_FALSE(p.ok());
  EXPECT_THAT(p.status().message(),
              HasSubstr("fragment C_fragment is accessed outside a tensorized nest"));
  EXPECT_THAT(p.status().message(), HasSubstr("with mma_accumulator"));
}

TEST(TensorCore, BatchedTransposedBf16AndEpilogueLower) {
  for (const char* spec :
       {"matmul(M=64, N=64, K=64, batch=2, dtype=bf16)",
        "matmul(M=64, N=64, K=64, transpose_a=true, transpose_b=true, dtype=f16)",
        "matmul_bias_gelu(M=64, N=64, K=64, dtype=bf16)"}) {
    SCOPED_TRACE(spec);
    auto w = ParseWorkloadSpec(spec);
    ASSERT_TRUE(w.ok()) << w.status();
    auto space = SpaceGenerator::Create(*w, CudaT());
    ASSERT_TRUE(space.ok()) << space.status();
    int tc = 0, valid = 0;
    for (uint64_t seed = 1; seed <= 24; ++seed) {
      auto c = space->Sample(seed);
      if (!c.ok()) continue;
      ++valid;
      tc += c->source.code.find("tessel_mma_m16n8k16") != std::string::npos;
    }
    EXPECT_GE(valid, 22);
    EXPECT_GE(tc, 4);
  }
}

// Block rasterization: the tensor-core sketch runs its blocks as one blockIdx.x in groups of G
// consecutive m tiles per n tile (G sampled: 1 is the plain row-major order). G is drawn among the
// divisors of the m tiles up to 8 in proportion to G (small groups read more operand bytes a k
// step: bench/RESULTS.md, session 9): the sketch's perfect tile of the group says so, and on 4096^3
// (16 or 32 m tiles) most samples draw 8.
TEST(TensorCore, BlocksRunInRasterizedGroups) {
  auto w = ParseWorkloadSpec("matmul(M=4096, N=4096, K=4096, dtype=f16)");
  ASSERT_TRUE(w.ok()) << w.status();
  auto space = SpaceGenerator::Create(*w, CudaT());
  ASSERT_TRUE(space.ok()) << space.status();
  int tc = 0, grouped = 0, eight = 0;
  for (uint64_t seed = 1; seed <= 48; ++seed) {
    auto c = space->Sample(seed);
    if (!c.ok() || c->source.code.find("tessel_mma_m16n8k16") == std::string::npos) continue;
    ++tc;
    const std::string& code = c->source.code;
    EXPECT_TRUE(std::regex_search(code, std::regex(R"(grid \(\d+, 1, 1\))"))) << code;
    EXPECT_EQ(code.find("blockIdx.y"), std::string::npos) << code;
    grouped += std::regex_search(code, std::regex(R"(_f % [248]\b)"));
    int groups = 0;
    for (const schedules::Instruction& inst : c->trace->insts) {
      if (inst.kind != "sample_perfect_tile" || !inst.attrs.contains("innermost_by_size")) continue;
      ++groups;
      eight += inst.decision.back().get<int64_t>() == 8;
    }
    EXPECT_EQ(groups, 1);
  }
  ASSERT_GE(tc, 8);
  EXPECT_GT(grouped, 0) << "no sample drew a group of 2, 4 or 8 m tiles";
  // Drawn uniformly among 1, 2, 4, 8, a quarter would be 8; in proportion, 8 of 15.
  EXPECT_GT(eight, tc * 3 / 8) << eight << " of " << tc;
}

// Samples of a workload's design space on `arch`, seeds 1 to 24: how many are valid, how many run
// on the tensor cores, and how many of those have an asynchronous copy matching `copy` (a zero
// fill whose validity is a bound). The first `compile` tensor-core samples are compiled with NVRTC
// where CUDA is installed.
struct TensorCoreSamples {
  int valid = 0, tc = 0, copies = 0;
};
TensorCoreSamples SampleTensorCore(const std::string& spec, const std::string& arch,
                                   const std::regex& copy, int compile) {
  TensorCoreSamples n;
  auto w = ParseWorkloadSpec(spec);
  EXPECT_TRUE(w.ok()) << w.status();
  if (!w.ok()) return n;
  auto space = SpaceGenerator::Create(*w, CudaTarget(arch));
  EXPECT_TRUE(space.ok()) << space.status();
  if (!space.ok()) return n;
  for (uint64_t seed = 1; seed <= 24; ++seed) {
    auto c = space->Sample(seed);
    if (!c.ok()) continue;
    ++n.valid;
    const std::string& code = c->source.code;
    if (code.find("tessel_mma_m16n8k16") == std::string::npos) continue;
    ++n.tc;
    n.copies += std::regex_search(code, copy);
#ifdef TESSEL_HAVE_CUDA
    if (n.tc <= compile && worker::FindCudaIncludeDir().ok()) {
      worker::NvrtcOptions o;
      o.arch = arch;
      auto bin = worker::CompileCuda(c->source, o);
      EXPECT_TRUE(bin.ok()) << bin.status() << "\n" << code;
    }
#endif
  }
  return n;
}

// Shapes no tile divides (M, N, K not multiples of the tiles, nor of 16) run on tensor cores: they
// compute whole tiles on zero-filled operands (kPadTile) and guard only the output's stores.
TEST(TensorCore, ShapesNoTileDividesRunOnTensorCores) {
  for (const char* spec : {"matmul(M=1000, N=1000, K=1000, dtype=f16)",
                           "matmul(M=77, N=3000, K=824, dtype=bf16, transpose_b=true)"}) {
    SCOPED_TRACE(spec);
    // An asynchronous copy whose validity is a bound (zero fill past the extent), not `true`.
    const TensorCoreSamples n =
        SampleTensorCore(spec, "sm_90", std::regex(R"(tessel_cp_async_\d+\([^\n]*< \d+\);)"), 3);
    EXPECT_GE(n.valid, 22);
    EXPECT_GE(n.tc, 4);
    EXPECT_GT(n.copies, 0);
  }
}

// Convolutions as implicit GEMMs: the tensor-core sketch fuses the output pixels into the GEMM's
// rows and the taps and channels into its k, and gathers each operand into shared memory, the
// padded border as cp.async's zero fill.
TEST(TensorCore, ConvolutionsRunOnTensorCoresAsImplicitGemms) {
  struct Case {
    const char* spec;
    bool padded;
  };
  for (const Case& cs :
       {Case{"conv2d(N=64, C=128, H=28, W=28, K=128, R=3, S=3, padding=1, layout=nhwc, "
             "dtype=f16)",
             true},
        Case{"conv2d(N=32, C=512, H=28, W=28, K=256, R=1, S=1, layout=nhwc, dtype=f16)", false},
        Case{"conv2d(N=8, C=64, H=56, W=56, K=128, R=3, S=3, stride=2, padding=1, "
             "layout=nhwc, dtype=bf16)",
             true},
        // NCHW: the gather runs along the taps (no 16-byte vectors to copy asynchronously).
        Case{"conv2d(N=8, C=64, H=56, W=56, K=64, R=3, S=3, padding=1, layout=nchw, "
             "dtype=f16)",
             false}}) {
    SCOPED_TRACE(cs.spec);
    for (const char* arch : {"sm_80", "sm_90"}) {
      SCOPED_TRACE(arch);
      // An asynchronous copy whose validity is the padded border (h >= 1 ...), not `true`.
      const TensorCoreSamples n =
          SampleTensorCore(cs.spec, arch, std::regex(R"(tessel_cp_async_\d+\([^\n]*>= 1)"), 2);
      EXPECT_GE(n.valid, 22);  // at least 90%
      EXPECT_GE(n.tc, 4);
      if (cs.padded) {
        EXPECT_GT(n.copies, 0);
      }
    }
  }
}

#ifdef TESSEL_HAVE_CUDA
TEST(TensorCore, KernelsCompileWithNvrtcForSm80AndSm90) {
  if (!worker::FindCudaIncludeDir().ok()) GTEST_SKIP() << "no CUDA include directory";
  for (const char* arch : {"sm_80", "sm_90"}) {
    const Target t = CudaTarget(arch);
    for (int64_t stages : {1, 2, 4}) {
      auto p = Lower(CudaTensorCoreMatmul(1, stages), t);
      ASSERT_TRUE(p.ok()) << p.status();
      auto src = GenerateCuda(*p, t);
      ASSERT_TRUE(src.ok()) << src.status();
      worker::NvrtcOptions o;
      o.arch = arch;
      auto bin = worker::CompileCuda(*src, o);
      EXPECT_TRUE(bin.ok()) << arch << ": " << bin.status() << "\n" << src->code;
    }
    // The implicit-GEMM convolution (fuse_axes, reindex, the padded border zero-filled).
    auto p = Lower(CudaImplicitGemmConv(1), t);
    ASSERT_TRUE(p.ok()) << p.status();
    auto src = GenerateCuda(*p, t);
    ASSERT_TRUE(src.ok()) << src.status();
    EXPECT_NE(src->code.find("tessel_mma_m16n8k16"), std::string::npos);
    worker::NvrtcOptions o;
    o.arch = arch;
    auto bin = worker::CompileCuda(*src, o);
    EXPECT_TRUE(bin.ok()) << arch << ": " << bin.status() << "\n" << src->code;
  }
}
#endif

TEST(TensorCore, CostModelFeaturesSeeTensorCoresAndThePipeline) {
  const std::vector<std::string>& names = costmodel::FeatureNames();
  auto at = [&](const std::string& n) {
    return std::find(names.begin(), names.end(), n) - names.begin();
  };
  auto p1 = Lower(CudaTensorCoreMatmul(1, 1), CudaT());
  auto p3 = Lower(CudaTensorCoreMatmul(1, 3), CudaT());
  ASSERT_TRUE(p1.ok() && p3.ok());
  const costmodel::Features f1 = costmodel::ExtractFeatures(*p1, CudaT());
  const costmodel::Features f3 = costmodel::ExtractFeatures(*p3, CudaT());
  EXPECT_GT(f1[at("log2_tensor_core_flops")], 0);
  EXPECT_EQ(f1[at("log2_tensor_core_flops")], f3[at("log2_tensor_core_flops")]);
  EXPECT_EQ(f1[at("log2_async_copy_bytes")], 0);  // one stage: synchronous fetches
  EXPECT_GT(f3[at("log2_async_copy_bytes")], 0);
  EXPECT_EQ(f3[at("pipeline_stages")], 3);
  EXPECT_EQ(f3[at("pipeline_fetch_spread")], 0);
  EXPECT_EQ(f3[at("pipeline_fragments_across")], 0);
  // Spread over two k steps (the seeds that draw them); nothing to spread over one.
  const std::string spec = "matmul(M=64, N=64, K=256, dtype=f16)";
  std::set<double> seen;
  for (uint64_t seed = 1; seed <= 8; ++seed) {
    auto spread = Lower(CudaTensorCoreMatmul(seed, 3, true, spec, true), CudaT());
    ASSERT_TRUE(spread.ok()) << spread.status();
    const bool two_steps = ToString(*spread).find("for k_1 in [0, 2)") != std::string::npos;
    EXPECT_EQ(costmodel::ExtractFeatures(*spread, CudaT())[at("pipeline_fetch_spread")],
              two_steps ? 1 : 0);
    seen.insert(two_steps);
    // The next stage's first fragments loaded in the last k step: the same loop's annotation.
    auto across = Lower(CudaTensorCoreMatmul(seed, 3, true, spec, false, true), CudaT());
    ASSERT_TRUE(across.ok()) << across.status();
    EXPECT_EQ(costmodel::ExtractFeatures(*across, CudaT())[at("pipeline_fragments_across")],
              two_steps ? 1 : 0);
  }
  EXPECT_EQ(seen.size(), 2u);
}

// ---- The primitive's checks.

class TensorizeErrors : public ::testing::Test {
 protected:
  TensorizeErrors() : sch_(NewSchedule(LoadSpec("matmul(M=32, N=32, K=32, dtype=f16)"))) {}
  static Workload LoadSpec(const std::string& spec) { return testing::LoadSpec(spec); }
  Schedule sch_;
};

TEST_F(TensorizeErrors, UnknownIntrinsic) {
  BlockRV c = BlockOf(sch_, "C");
  absl::Status st = sch_.Tensorize(LoopsOf(sch_, c)[0], "wmma");
  EXPECT_EQ(st.message(),
            "tensorize: unknown intrinsic 'wmma'; use one of mma_m16n8k16, ldmatrix, "
            "mma_accumulator, wgmma_m64nNk16");
}

TEST_F(TensorizeErrors, ExtentsOfTheLoops) {
  BlockRV c = BlockOf(sch_, "C");
  absl::Status st = sch_.Tensorize(LoopsOf(sch_, c)[0], "mma_m16n8k16");
  EXPECT_THAT(st.message(), HasSubstr("have extents 32 x 32 x 32; mma_m16n8k16 replaces loops of "
                                      "16 x 8 x 16: split them to those extents"));
}

TEST_F(TensorizeErrors, MmaNeedsAFragmentAccumulator) {
  BlockRV c = BlockOf(sch_, "C");
  std::vector<LoopRV> l = LoopsOf(sch_, c);
  std::vector<LoopRV> i = ValueOrDie(sch_.Split(l[0], {-1, 16}));
  std::vector<LoopRV> j = ValueOrDie(sch_.Split(l[1], {-1, 8}));
  std::vector<LoopRV> k = ValueOrDie(sch_.Split(l[2], {-1, 16}));
  ASSERT_TRUE(sch_.Reorder({i[0], j[0], k[0], i[1], j[1], k[1]}).ok());
  absl::Status st = sch_.Tensorize(i[1], "mma_m16n8k16");
  EXPECT_THAT(st.message(), HasSubstr("stage C writes global memory; mma accumulates in a "
                                      "fragment: cache_write the stage to \"fragment\""));
  st = sch_.Tensorize(j[1], "ldmatrix");
  EXPECT_THAT(st.message(), HasSubstr("is a reduction loop; ldmatrix needs a spatial loop there"));
}

TEST_F(TensorizeErrors, OperandsMustBeFragments) {
  BlockRV c = BlockOf(sch_, "C");
  BlockRV acc = ValueOrDie(sch_.CacheWrite(c, "fragment"));
  std::vector<LoopRV> l = LoopsOf(sch_, acc);
  std::vector<LoopRV> i = ValueOrDie(sch_.Split(l[0], {-1, 16}));
  std::vector<LoopRV> j = ValueOrDie(sch_.Split(l[1], {-1, 8}));
  std::vector<LoopRV> k = ValueOrDie(sch_.Split(l[2], {-1, 16}));
  ASSERT_TRUE(sch_.Reorder({i[0], j[0], k[0], i[1], j[1], k[1]}).ok());
  absl::Status st = sch_.Tensorize(i[1], "mma_m16n8k16");
  EXPECT_THAT(st.message(), HasSubstr("reads operand A from global memory; cache_read it to "
                                      "\"fragment\" first"));
}

TEST_F(TensorizeErrors, LdmatrixCopiesFromShared) {
  BlockRV c = BlockOf(sch_, "C");
  BlockRV fr = ValueOrDie(sch_.CacheRead("A", "fragment", {c}));
  std::vector<LoopRV> l = LoopsOf(sch_, fr);
  std::vector<LoopRV> i = ValueOrDie(sch_.Split(l[0], {-1, 16}));
  std::vector<LoopRV> k = ValueOrDie(sch_.Split(l[1], {-1, 16}));
  ASSERT_TRUE(sch_.Reorder({i[0], k[0], i[1], k[1]}).ok());
  absl::Status st = sch_.Tensorize(i[1], "ldmatrix");
  EXPECT_THAT(st.message(), HasSubstr("is not a copy from shared memory into a fragment"));
}

TEST_F(TensorizeErrors, AccumulatorNestTouchesAFragment) {
  BlockRV c = BlockOf(sch_, "C");
  std::vector<LoopRV> l = LoopsOf(sch_, c);
  std::vector<LoopRV> i = ValueOrDie(sch_.Split(l[0], {-1, 16}));
  std::vector<LoopRV> j = ValueOrDie(sch_.Split(l[1], {-1, 8}));
  ASSERT_TRUE(sch_.Reorder({i[0], j[0], i[1], j[1]}).ok());
  absl::Status st = sch_.Tensorize(i[1], "mma_accumulator");
  EXPECT_THAT(st.message(), HasSubstr("stage C neither reads nor writes a fragment"));
}

TEST(TensorCorePipeline, ALoopWithoutSharedFetchesIsRefused) {
  // Pipelining the accumulator's inner k loop (no shared fetch in its body) is refused.
  Schedule sch = CudaTensorCoreMatmul(1, 1);
  BlockRV acc = BlockOf(sch, "C_fragment");
  std::vector<LoopRV> l = LoopsOf(sch, acc);
  ASSERT_TRUE(sch.Annotate(l[3], "software_pipeline", 2).ok());  // the n tiles (extent 2)
  auto p = Lower(sch, CudaT());
  ASSERT_FALSE(p.ok());
  EXPECT_THAT(p.status().message(), HasSubstr("is annotated software_pipeline but"));
  EXPECT_THAT(p.status().message(), HasSubstr("pipeline a loop whose body fetches shared memory"));
}

}  // namespace
}  // namespace tessel::schedules
