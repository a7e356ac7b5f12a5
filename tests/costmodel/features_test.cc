// Cost-model features of real lowered programs: fixed length, deterministic, sensitive to the
// schedule, defined for every workload family on the host and on CUDA, and cheap to compute.

#include "costmodel/features.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <iostream>
#include <set>

#include "schedules/lower/lower.h"
#include "schedules/space/candidate.h"
#include "tests/costmodel/costmodel_test_util.h"
#include "tests/e2e/e2e_util.h"

namespace tessel::testing {
namespace {

using costmodel::ExtractFeatures;
using costmodel::FeatureNames;
using costmodel::Features;

int Slot(const std::string& name) {
  const auto& names = FeatureNames();
  auto it = std::find(names.begin(), names.end(), name);
  EXPECT_NE(it, names.end()) << name;
  return static_cast<int>(it - names.begin());
}

float Log2p(double x) { return static_cast<float>(std::log2(1.0 + x)); }

TEST(CostModelFeatures, NamesAreUniqueAndMatchTheVectorLength) {
  const auto& names = FeatureNames();
  EXPECT_EQ(std::set<std::string>(names.begin(), names.end()).size(), names.size());
  EXPECT_GE(names.size(), 60u);
  auto c = SampleCandidates("matmul(M=32, N=32, K=32)", schedules::HostTarget(), 1);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(ExtractFeatures(c[0].program, c[0].target).size(), names.size());
}

TEST(CostModelFeatures, DeterministicAcrossRebuildsOfOneTrace) {
  for (const schedules::Target& t : {schedules::HostTarget(), schedules::CudaTarget("sm_90")}) {
    auto cs = SampleCandidates("matmul(M=64, N=64, K=64)", t, 4);
    ASSERT_EQ(cs.size(), 4u);
    for (const auto& c : cs) {
      const Features a = ExtractFeatures(c.program, t);
      EXPECT_EQ(a, ExtractFeatures(c.program, t));
      // The same trace replayed again: new IR objects at new addresses, the same features.
      auto again = schedules::BuildCandidate(c.workload, t, c.trace);
      ASSERT_TRUE(again.ok()) << again.status();
      EXPECT_EQ(a, ExtractFeatures(again->program, t));
    }
  }
}

// A split-K's partials are its workspace: log2_workspace_per_output is log2(1 + the number of
// chunks); 0 for a program without one.
TEST(CostModelFeatures, WorkspacePerOutputIsTheSplitKFactor) {
  const int slot = Slot("log2_workspace_per_output");
  for (const schedules::Target& t : {schedules::HostTarget(), schedules::CudaTarget("sm_90")}) {
    int split = 0, plain = 0;
    for (const auto& c : SampleCandidates("matmul(M=64, N=1, K=4096)", t, 24)) {
      bool rfactor = false;
      for (const auto& inst : c.trace->insts) rfactor = rfactor || inst.kind == "rfactor";
      const float f = ExtractFeatures(c.program, t)[slot];
      if (rfactor) {
        ++split;
        EXPECT_EQ(f, Log2p(static_cast<double>(SplitKFactor(*c.trace))));
      } else {
        ++plain;
        EXPECT_EQ(f, 0.0f);
      }
    }
    EXPECT_GT(split, 0) << t.ToString();
    EXPECT_GT(plain, 0) << t.ToString();
  }
}

// A shape no tile divides, tiled as if padded: the work past the extents is counted, so the cost
// model sees the padding's cost (the multiplications of the padded box M' x N x K' instead of
// M x N x K; 97 = N is not padded, no multiple of 16 is within 1/8 of it).
TEST(CostModelFeatures, PaddedTilesCountTheWorkPastTheExtents) {
  const int slot = Slot("log2_float_mul");
  for (const schedules::Target& t : {schedules::HostTarget(), schedules::CudaTarget("sm_90")}) {
    int padded = 0;
    for (const auto& c : SampleCandidates("matmul(M=131, N=97, K=67)", t, 24)) {
      // The padded extents of m and k, in the order they are sampled.
      std::vector<int64_t> extents;
      for (const auto& tile : c.trace->insts) {
        if (tile.kind != "sample_perfect_tile" || tile.inputs.size() != 2) continue;
        for (const auto& cat : c.trace->insts) {
          if (cat.kind == "sample_categorical" && cat.outputs[0] == tile.inputs[1]) {
            extents.push_back(cat.attrs["candidates"][cat.decision.get<int64_t>()].get<int64_t>());
          }
        }
      }
      ASSERT_EQ(extents.size(), 2u) << t.ToString();
      const float f = ExtractFeatures(c.program, t)[slot];
      EXPECT_FLOAT_EQ(f, Log2p(static_cast<double>(extents[0] * 97 * extents[1]))) << t.ToString();
      if (PaddedLoops(*c.trace) > 0) ++padded;
    }
    EXPECT_GT(padded, 0) << t.ToString();
  }
}

// log2_shared_swizzle_bytes is the widest XOR swizzle of a shared copy: the mma.sync sketch
// samples its copies padded (0) or swizzled as widely as the tiles allow.
TEST(CostModelFeatures, SharedSwizzleIsTheWidestSwizzledCopy) {
  const int slot = Slot("log2_shared_swizzle_bytes");
  const schedules::Target t = schedules::CudaTarget("sm_80");
  int swizzled = 0, padded = 0;
  for (const auto& c : SampleCandidates("matmul(M=256, N=256, K=256, dtype=f16)", t, 48)) {
    if (c.source.code.find("tessel_mma_m16n8k16") == std::string::npos) continue;
    int64_t widest = 0;
    for (int64_t w : {32, 64, 128}) {
      if (c.source.code.find("tessel_swizzle_" + std::to_string(w) + "_2(") != std::string::npos) {
        widest = w;
      }
    }
    EXPECT_EQ(ExtractFeatures(c.program, t)[slot], Log2p(static_cast<double>(widest)));
    ++(widest > 0 ? swizzled : padded);
  }
  EXPECT_GT(swizzled, 0);
  EXPECT_GT(padded, 0);
}

// global_frac_streamed is the share of global bytes with evict-first hints: skinny_contraction's
// one-kernel "columns" sketch samples streaming loads of the matrix (__ldcs) or plain ones; the
// square-GEMM sketches stream nothing.
TEST(CostModelFeatures, StreamedFractionIsTheShareOfEvictFirstBytes) {
  const int slot = Slot("global_frac_streamed");
  const schedules::Target t = schedules::CudaTarget("sm_90");
  int streamed = 0, plain = 0;
  for (const auto& c : SampleCandidates("matmul(M=1, N=1024, K=2048, dtype=f16)", t, 96)) {
    const float f = ExtractFeatures(c.program, t)[slot];
    if (c.source.code.find("__ldcs(") == std::string::npos) {
      ++plain;
      EXPECT_EQ(f, 0.0f);
      continue;
    }
    ++streamed;
    // B's bytes: about half of those touched, since the vector's element is counted at each of
    // the 8 lanes it multiplies (features count executed accesses).
    EXPECT_GT(f, 0.45f);
    EXPECT_LE(f, 1.0f);
  }
  EXPECT_GT(streamed, 0);
  EXPECT_GT(plain, 0);
}

TEST(CostModelFeatures, HostFeaturesDoNotDependOnTheMachine) {
  schedules::Target small = schedules::HostTarget(), big = small;
  small.cores = 2;
  big.cores = 96;
  big.device_name = "another CPU";
  for (const auto& c : SampleCandidates("matmul(M=64, N=64, K=64)", small, 8)) {
    EXPECT_EQ(ExtractFeatures(c.program, small), ExtractFeatures(c.program, big));
  }
}

TEST(CostModelFeatures, DifferentSchedulesGiveDifferentFeatures) {
  for (const schedules::Target& t : {schedules::HostTarget(), schedules::CudaTarget("sm_90")}) {
    auto cs = SampleCandidates("matmul(M=128, N=128, K=128)", t, 24);
    ASSERT_GE(cs.size(), 20u);
    std::set<std::string> sources;
    std::set<Features> features;
    for (const auto& c : cs) {
      sources.insert(c.source.code);
      features.insert(ExtractFeatures(c.program, t));
    }
    // Nearly every distinct kernel has its own feature vector.
    EXPECT_GE(features.size() * 10, sources.size() * 9)
        << features.size() << " feature vectors for " << sources.size() << " sources on "
        << t.ToString();
    // And a tuned schedule differs from the reference lowering.
    auto ref = schedules::BuildCandidate(cs[0].workload, t, std::nullopt);
    ASSERT_TRUE(ref.ok()) << ref.status();
    EXPECT_EQ(features.count(ExtractFeatures(ref->program, t)), 0u);
  }
}

TEST(CostModelFeatures, ReferenceMatmulOnTheHostCountsItsWork) {
  // Plain loops: M*N*K multiply-adds, A and B read once per multiply-add.
  auto w = schedules::ParseWorkloadSpec("matmul(M=16, N=32, K=8)");
  ASSERT_TRUE(w.ok());
  const schedules::Target t = schedules::HostTarget();
  auto c = schedules::BuildCandidate(*w, t, std::nullopt);
  ASSERT_TRUE(c.ok()) << c.status();
  const Features f = ExtractFeatures(c->program, t);
  const double mnk = 16.0 * 32 * 8;
  EXPECT_FLOAT_EQ(f[Slot("log2_float_mul")], Log2p(mnk));
  EXPECT_GE(f[Slot("log2_float_addsub")], Log2p(mnk));
  EXPECT_FLOAT_EQ(f[Slot("log2_global_read_bytes")], Log2p(2 * 4 * mnk));
  EXPECT_FLOAT_EQ(f[Slot("log2_global_unique_bytes")], Log2p(4.0 * (16 * 8 + 8 * 32 + 16 * 32)));
  EXPECT_FLOAT_EQ(f[Slot("log2_flops_vectorized")], 0);
  EXPECT_FLOAT_EQ(f[Slot("kernels")], 1);
  EXPECT_FLOAT_EQ(f[Slot("log2_barriers_static")], 0);
  // The innermost loop is k: B[k, n] strides by N = 32 elements, A[m, k] is contiguous.
  EXPECT_GT(f[Slot("global_frac_strided")], 0);
  EXPECT_GT(f[Slot("global_frac_stride1")], 0);
}

TEST(CostModelFeatures, CudaLaunchAndOnChipStorage) {
  const schedules::Target t = schedules::CudaTarget("sm_90");
  auto cs = SampleCandidates("matmul(M=256, N=256, K=256)", t, 16);
  ASSERT_GE(cs.size(), 8u);
  int with_shared = 0;
  for (const auto& c : cs) {
    const Features f = ExtractFeatures(c.program, t);
    const auto& l = c.program.kernels[0].launch;
    EXPECT_FLOAT_EQ(f[Slot("log2_thread_x")], Log2p(static_cast<double>(l.block[0])));
    EXPECT_FLOAT_EQ(f[Slot("log2_block_x")], Log2p(static_cast<double>(l.grid[0])));
    EXPECT_FLOAT_EQ(f[Slot("log2_threads_per_block")],
                    Log2p(static_cast<double>(l.threads_per_block())));
    EXPECT_GT(f[Slot("warp_efficiency")], 0);
    EXPECT_LE(f[Slot("warp_efficiency")], 1);
    EXPECT_GT(f[Slot("log2_flops_bound")], 0);  // all work runs under thread bindings
    EXPECT_FLOAT_EQ(f[Slot("log2_flops_bound")], f[Slot("log2_flops")]);
    if (f[Slot("log2_shared_alloc_bytes")] > 0) {
      ++with_shared;
      // Stores, or cp.async copies in a pipelined sample.
      EXPECT_GT(f[Slot("log2_shared_write_bytes")] + f[Slot("log2_async_copy_bytes")], 0);
      EXPECT_GT(f[Slot("log2_barriers_static")], 0);
    }
  }
  EXPECT_GT(with_shared, 0) << "no sampled matmul stages its inputs in shared memory";
}

TEST(CostModelFeatures, EveryWorkloadFamilyOnHostAndCuda) {
  const std::vector<std::string> specs = {
      "matmul(M=64, N=48, K=32)",
      "matmul(M=32, N=32, K=32, batch=2, transpose_b=true, dtype=f16)",
      "matmul_bias_gelu(M=32, N=64, K=16)",
      "conv2d(N=1, C=8, H=10, W=10, K=8, R=3, S=3, padding=1)",
      "conv2d_bias_relu(N=1, C=4, H=8, W=8, K=8, R=3, S=3, stride=2, layout=nhwc)",
      "softmax(rows=16, cols=100)",
      "layernorm(rows=8, cols=64, dtype=bf16)",
      "reduce(rows=12, cols=50, op=mean)"};
  for (const schedules::Target& t : {schedules::HostTarget(), schedules::CudaTarget("sm_90")}) {
    for (const std::string& spec : specs) {
      SCOPED_TRACE(spec + " on " + t.ToString());
      auto cs = SampleCandidates(spec, t, 3);
      ASSERT_FALSE(cs.empty());
      auto ref = schedules::BuildCandidate(cs[0].workload, t, std::nullopt);
      ASSERT_TRUE(ref.ok()) << ref.status();
      cs.push_back(*std::move(ref));
      for (const auto& c : cs) {
        const Features f = ExtractFeatures(c.program, t);
        ASSERT_EQ(f.size(), FeatureNames().size());
        for (size_t i = 0; i < f.size(); ++i) {
          EXPECT_TRUE(std::isfinite(f[i])) << FeatureNames()[i];
          EXPECT_GE(f[i], 0) << FeatureNames()[i];
        }
        EXPECT_EQ(f[Slot("kernels")], static_cast<float>(c.program.kernels.size()));
        EXPECT_GT(f[Slot("log2_flops")], 0);
        EXPECT_GT(f[Slot("log2_global_read_bytes")], 0);
        EXPECT_GT(f[Slot("log2_global_write_bytes")], 0);
        EXPECT_GT(f[Slot("buf0_touched_bytes")], 0);
        if (t.is_cuda()) {
          EXPECT_GT(f[Slot("log2_threads_per_block")], 0);
        }
      }
    }
  }
}

// Not a pass/fail timing (timing never decides a unit test): prints the cost per candidate.
TEST(CostModelFeatures, ExtractionTimePerCandidate) {
  for (const schedules::Target& t : {schedules::HostTarget(), schedules::CudaTarget("sm_90")}) {
    auto cs = SampleCandidates("matmul(M=1024, N=1024, K=1024)", t, 16);
    ASSERT_FALSE(cs.empty());
    const int reps = 50;
    const auto start = std::chrono::steady_clock::now();
    size_t sink = 0;
    for (int r = 0; r < reps; ++r) {
      for (const auto& c : cs) sink += ExtractFeatures(c.program, t).size();
    }
    const double us =
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start)
            .count() /
        static_cast<double>(reps * cs.size());
    EXPECT_EQ(sink, reps * cs.size() * FeatureNames().size());
    std::cout << "feature extraction, matmul 1024^3 on " << t.ToString() << ": " << us
              << " us per candidate (" << cs.size() << " candidates x " << reps << ")\n";
  }
}

}  // namespace
}  // namespace tessel::testing
