// The design space: what each schedule rule puts in a sketch (the structure of the trace, not a
// source golden), determinism, the share of samples that pass the verifier, and candidate files.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <string>

#include "schedules/rules/rule_util.h"
#include "schedules/rules/schedule_rule.h"
#include "schedules/space/space_generator.h"
#include "schedules/workload/builtins.h"
#include "tests/e2e/e2e_util.h"
#include "tests/schedules/test_workloads.h"
#include "tests/test_util.h"
#include "worker/backend.h"

namespace tessel::testing {
namespace {

using schedules::CudaTarget;
using schedules::HostTarget;
using schedules::SpaceGenerator;
using schedules::Target;
using schedules::Trace;
using ::testing::HasSubstr;

schedules::Workload Load(const std::string& spec) {
  auto w = schedules::ParseWorkloadSpec(spec);
  EXPECT_TRUE(w.ok()) << w.status();
  return *w;
}

SpaceGenerator Space(const std::string& spec, const Target& t) {
  auto g = SpaceGenerator::Create(Load(spec), t);
  EXPECT_TRUE(g.ok()) << g.status();
  return std::move(*g);
}

// Instruction kinds of a trace, counted.
std::map<std::string, int> Kinds(const Trace& t) {
  std::map<std::string, int> k;
  for (const auto& inst : t.insts) ++k[inst.kind];
  return k;
}

// The attribute values of one kind (e.g. every bound thread tag).
std::vector<std::string> Attrs(const Trace& t, const std::string& kind, const std::string& key) {
  std::vector<std::string> out;
  for (const auto& inst : t.insts) {
    if (inst.kind == kind && inst.attrs.contains(key)) {
      out.push_back(inst.attrs[key].is_string() ? inst.attrs[key].get<std::string>()
                                                : inst.attrs[key].dump());
    }
  }
  return out;
}

// Samples seeds 0 to n - 1 of a space: how many are valid, how many of those `keep` accepts,
// and why the others were rejected.
struct SampleCount {
  int valid = 0;
  int kept = 0;
  std::vector<std::string> why;
};
SampleCount CountSamples(const SpaceGenerator& g, int n,
                         const std::function<bool(const Trace&)>& keep) {
  SampleCount out;
  for (uint64_t seed = 0; seed < static_cast<uint64_t>(n); ++seed) {
    schedules::Rejection r;
    auto c = g.Sample(seed, &r);
    if (!c.ok()) {
      out.why.push_back(r.step + ": " + r.message);
      continue;
    }
    ++out.valid;
    out.kept += keep(*c->trace);
  }
  return out;
}

// Replays samples of a space from their JSON (the valid ones among seeds 0 to `seeds` - 1 that
// `keep` accepts, at most `most`), checking each gives the same kernel; returns how many.
int ReplayFromJson(const std::string& spec, const Target& t, int seeds, int most,
                   const std::function<bool(const Trace&)>& keep) {
  SpaceGenerator g = Space(spec, t);
  int replayed = 0;
  for (uint64_t seed = 0; seed < static_cast<uint64_t>(seeds) && replayed < most; ++seed) {
    auto c = g.Sample(seed);
    if (!c.ok() || !keep(*c->trace)) continue;
    auto parsed = Trace::Parse(c->trace->ToJsonString());
    EXPECT_TRUE(parsed.ok()) << parsed.status();
    if (!parsed.ok()) continue;
    auto again = schedules::BuildCandidate(Load(spec), t, *parsed);
    EXPECT_TRUE(again.ok()) << again.status();
    if (again.ok()) {
      EXPECT_EQ(again->source.code, c->source.code);
    }
    ++replayed;
  }
  return replayed;
}

// ---- Each rule's effect.

// The loop nest of a stage as a pattern: 'S' per spatial leaf loop, 'R' per reduction leaf loop,
// and the thread tag (or loop kind) of each.
std::string NestPattern(const schedules::Stage& st) {
  std::string p;
  for (int l : st.leaves) p += st.iters[l].reduce ? 'R' : 'S';
  return p;
}
std::vector<std::string> NestTags(const schedules::Stage& st) {
  std::vector<std::string> out;
  for (int l : st.leaves) {
    const schedules::IterVar& iv = st.iters[l];
    out.push_back(iv.thread != schedules::ThreadTag::kNone ? schedules::ThreadTagName(iv.thread)
                                                           : schedules::ForKindName(iv.kind));
  }
  return out;
}

// The sample_perfect_tile instructions of a trace as "n/max_innermost".
std::vector<std::string> PerfectTiles(const Trace& t) {
  std::vector<std::string> out;
  for (const auto& inst : t.insts) {
    if (inst.kind != "sample_perfect_tile") continue;
    out.push_back(inst.attrs["n"].dump() + "/" + inst.attrs["max_innermost"].dump());
  }
  return out;
}

TEST(Rules, MultiLevelTilingCudaIsSSSRRSRS) {
  const std::string spec = "matmul(M=128, N=96, K=64)";
  SpaceGenerator g = Space(spec, CudaTarget("sm_90"));
  // Two sketches: the caches' levels are sample_compute_location decisions; then the same with
  // the shared copies at the step loop, a software pipeline.
  ASSERT_EQ(g.sketches().size(), 2u);
  {
    auto pk = Kinds(g.sketches()[1]);
    EXPECT_EQ(pk["cache_read"], 4);
    EXPECT_EQ(pk["sample_compute_location"], 2);  // the register caches only
    bool pipelined = false;
    for (const auto& inst : g.sketches()[1].insts) {
      pipelined |=
          inst.kind == "annotate_loop" && inst.attrs.value("key", "") == "software_pipeline";
    }
    EXPECT_TRUE(pipelined);
  }
  const Trace& t = g.sketches()[0];
  auto k = Kinds(t);
  EXPECT_EQ(k["cache_write"], 1);  // accumulator in registers
  EXPECT_EQ(k["cache_read"], 4);   // A and B, each in shared then local memory
  EXPECT_EQ(k["compute_at"], 5);   // accumulator + four caches
  EXPECT_EQ(k["decompose_reduction"], 1);
  // Every tile factor is an open sample_perfect_tile with a bounded innermost factor: per output
  // axis the per-thread tile (<= 8), the threads (<= 32) and the virtual threads (<= 2); per
  // accumulator axis S4 (<= 4); the reduction's R2 (<= 4) and R1 (<= 8).
  EXPECT_THAT(PerfectTiles(t), ::testing::ElementsAre("2/8", "2/32", "2/2", "2/8", "2/32", "2/2",
                                                      "2/4", "2/4", "2/4", "2/8"));
  EXPECT_EQ(k["sample_categorical"], 2);  // the fetch width and the unroll step
  // Each cache's location, among two explicit candidate loops of the accumulator.
  EXPECT_EQ(k["sample_compute_location"], 4);
  for (const auto& inst : t.insts) {
    if (inst.kind == "sample_compute_location") {
      EXPECT_EQ(inst.inputs.size(), 3u);
    }
  }
  for (const auto& inst : t.insts) {
    if (inst.kind.rfind("sample_", 0) == 0) {
      EXPECT_TRUE(inst.decision.is_null()) << inst.kind;
    }
  }
  EXPECT_THAT(Attrs(t, "cache_read", "scope"),
              ::testing::UnorderedElementsAre("shared", "local", "shared", "local"));

  // A sample's loop nest: the output's block / vthread / thread loops (S S S, one per axis),
  // then the accumulator attached at the thread loop: R0 R1 S3 R2 S4.
  auto c = g.Sample(3);
  ASSERT_TRUE(c.ok()) << c.status();
  auto sch = schedules::Replay(Load(spec), *c->trace);
  ASSERT_TRUE(sch.ok()) << sch.status();
  const schedules::Stage* out = sch->FindStage("C");
  ASSERT_NE(out, nullptr);
  EXPECT_THAT(NestTags(*out),
              ::testing::ElementsAre("blockIdx.y", "blockIdx.x", "vthread", "vthread",
                                     "threadIdx.y", "threadIdx.x", "unrolled", "unrolled"));
  const schedules::Stage* acc = nullptr;
  for (const schedules::Stage& st : sch->stages()) {
    if (st.reduce && st.attach.kind == schedules::AttachPoint::Kind::kAt) acc = &st;
  }
  ASSERT_NE(acc, nullptr);
  EXPECT_EQ(acc->attach.stage, "C");
  EXPECT_EQ(NestPattern(*out).substr(0, 6) + NestPattern(*acc),
            "SSSSSS"
            "RRSSRSS");
  // The shared caches at R0 or R1, the register caches at R1 or at R2; each combination
  // appears among the samples.
  std::set<std::pair<int, int>> seen;
  for (uint64_t seed = 0; seed < 24; ++seed) {
    SCOPED_TRACE(seed);
    auto r = schedules::Replay(Load(spec), t, seed);
    ASSERT_TRUE(r.ok()) << r.status();
    int shared = 0, local = 0;
    const schedules::Stage* a = nullptr;
    for (const schedules::Stage& st : r->stages()) {
      if (st.reduce && st.attach.kind == schedules::AttachPoint::Kind::kAt) a = &st;
    }
    ASSERT_NE(a, nullptr);
    // The accumulator's leaves: R0 R1 S3 S3 R2 S4 S4.
    const std::vector<int> shared_at = {a->leaves[0], a->leaves[1]};
    const std::vector<int> local_at = {a->leaves[1], a->leaves[4]};
    for (const schedules::Stage& st : r->stages()) {
      if (st.attach.stage != a->name || st.name.find("_shared") == std::string::npos) continue;
      const bool is_local = st.name.find("_local") != std::string::npos;
      const std::vector<int>& at = is_local ? local_at : shared_at;
      const auto it = std::find(at.begin(), at.end(), st.attach.iter);
      ASSERT_NE(it, at.end()) << st.name;
      ++(is_local ? local : shared);
    }
    EXPECT_EQ(shared, 2);
    EXPECT_EQ(local, 2);
    int a_shared = -1, a_local = -1;
    for (const schedules::Stage& st : r->stages()) {
      if (st.name == "A_shared") a_shared = st.attach.iter == shared_at[0] ? 0 : 1;
      if (st.name == "A_shared_local") a_local = st.attach.iter == local_at[0] ? 0 : 1;
    }
    seen.emplace(a_shared, a_local);
  }
  EXPECT_EQ(seen.size(), 4u);
  // The decisions are perfect tiles: each pair multiplies to its loop's extent.
  int64_t m = 1;
  int count = 0;
  for (const auto& inst : c->trace->insts) {
    if (inst.kind != "sample_perfect_tile" || count++ >= 3) continue;
    const std::vector<int64_t> d = inst.decision.get<std::vector<int64_t>>();
    ASSERT_EQ(d.size(), 2u);
    EXPECT_LE(d[1], inst.attrs["max_innermost"].get<int64_t>());
    m *= d[1];
    if (count == 3) m *= d[0];
  }
  EXPECT_EQ(m, 128);  // the m axis: per-thread tile x threads x vthreads x blocks
}

// A shared cache and its register copy attached to the same reduction loop (both at R1): the
// barrier that publishes the shared fetch comes between them, so the copy reads a complete tile.
TEST(Rules, MultiLevelTilingSharedAndRegisterCachesAtOneLoopAreSeparatedByABarrier) {
  const std::string spec = "matmul(M=128, N=128, K=64)";
  const Target t = CudaTarget("sm_90");
  const SpaceGenerator g = Space(spec, t);
  bool found = false;
  for (uint64_t seed = 0; seed < 64 && !found; ++seed) {
    auto c = g.Sample(seed);
    if (!c.ok()) continue;
    auto r = schedules::Replay(Load(spec), *c->trace);
    ASSERT_TRUE(r.ok()) << r.status();
    const schedules::Stage* sh = r->FindStage("A_shared");
    const schedules::Stage* lo = r->FindStage("A_shared_local");
    ASSERT_TRUE(sh && lo);
    if (sh->attach.stage != lo->attach.stage || sh->attach.iter != lo->attach.iter) continue;
    found = true;
    auto p = schedules::Lower(*r, t);
    ASSERT_TRUE(p.ok()) << p.status();
    const std::string ir = schedules::ToString(*p);
    const size_t fetch = ir.find("] = A[");               // the shared fetch's store
    const size_t copy = ir.find("] = A_shared[", fetch);  // the register copy's store
    ASSERT_NE(fetch, std::string::npos) << ir;
    ASSERT_NE(copy, std::string::npos) << ir;
    EXPECT_NE(ir.substr(fetch, copy - fetch).find("barrier"), std::string::npos) << ir;
  }
  EXPECT_TRUE(found) << "no sample put A's shared and register caches at one loop";
}

TEST(Rules, MultiLevelTilingHostIsSSRSRS) {
  const std::string spec = "matmul(M=128, N=96, K=64)";
  const SpaceGenerator gen = Space(spec, HostTarget());
  const Trace& t = gen.sketches()[0];
  auto k = Kinds(t);
  // i and j in four levels (innermost <= 4 and <= 16, the vectorized one), k in two (<= 16).
  EXPECT_THAT(PerfectTiles(t), ::testing::ElementsAre("4/4", "4/16", "2/16"));
  EXPECT_EQ(k["split"], 3);
  EXPECT_EQ(k["reorder"], 1);
  EXPECT_EQ(k["parallel"], 1);
  EXPECT_EQ(k["vectorize"], 1);
  EXPECT_EQ(k["sample_categorical"], 1);  // the unroll step
  EXPECT_EQ(k.count("bind"), 0u);
  auto c = gen.Sample(5);
  ASSERT_TRUE(c.ok()) << c.status();
  auto sch = schedules::Replay(Load(spec), *c->trace);
  ASSERT_TRUE(sch.ok()) << sch.status();
  const schedules::Stage* st = sch->FindStage("C");
  ASSERT_NE(st, nullptr);
  // The outer i and j tiles fused (parallel), then S R S R S with a loop per axis for each S.
  EXPECT_EQ(NestPattern(*st),
            "S"
            "SS"
            "R"
            "SS"
            "R"
            "SS");
  const std::vector<std::string> tags = NestTags(*st);
  EXPECT_EQ(tags.front(), "parallel");
  EXPECT_EQ(tags.back(), "vectorized");
}

TEST(Rules, AutoInlineFusesTheEpilogue) {
  // matmul_bias_gelu: one kernel, the epilogue on the write-back.
  SpaceGenerator g = Space("matmul_bias_gelu(M=64, N=64, K=32)", CudaTarget("sm_90"));
  auto c = g.Sample(1);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->program.kernels.size(), 1u);
  // conv2d_bias_relu: the convolution computed in a register of the epilogue's thread.
  SpaceGenerator conv =
      Space("conv2d_bias_relu(N=1, C=3, H=9, W=10, K=4, R=3, S=3, padding=2)", CudaTarget("sm_90"));
  auto cc = conv.Sample(2);
  ASSERT_TRUE(cc.ok()) << cc.status();
  EXPECT_EQ(cc->program.kernels.size(), 1u);
  // softmax: the exponentials stage is inlined by auto_inline.
  const SpaceGenerator gen = Space("softmax(rows=200, cols=300)", HostTarget());
  const Trace& t = gen.sketches()[0];
  EXPECT_EQ(Kinds(t)["compute_inline"], 1);
}

TEST(Rules, CrossThreadReductionForksSoftmaxIntoThreeAndOnePass) {
  SpaceGenerator g = Space("softmax(rows=200, cols=300)", CudaTarget("sm_90"));
  ASSERT_EQ(g.sketches().size(), 2u);
  EXPECT_EQ(Kinds(g.sketches()[0]).count("fuse_reductions"), 0u);
  EXPECT_EQ(Kinds(g.sketches()[1])["fuse_reductions"], 1);  // online softmax
  for (const Trace& t : g.sketches()) {
    auto k = Kinds(t);
    EXPECT_GE(k["compute_at"], 1);
    EXPECT_THAT(Attrs(t, "set_scope", "scope"), ::testing::Each("local"));
    EXPECT_THAT(Attrs(t, "bind", "thread"), ::testing::Contains("threadIdx.x"));
  }
  // Both sketches lower to one kernel: every reduction at the row, across threads.
  for (uint64_t seed : {1, 2, 3, 4}) {
    auto c = g.Sample(seed);
    ASSERT_TRUE(c.ok()) << c.status();
    EXPECT_EQ(c->program.kernels.size(), 1u);
  }
}

TEST(Rules, CrossThreadReductionSplitsFewLongRowsOverBlocks) {
  // 16 rows cannot fill 132 SMs: the statistics, one Welford tuple reduction (one read of the
  // input for both), split into chunks (rfactor).
  const SpaceGenerator gen = Space("layernorm(rows=16, cols=65536)", CudaTarget("sm_90"));
  const Trace& t = gen.sketches()[0];
  auto k = Kinds(t);
  EXPECT_EQ(k["fuse_reductions"], 1);
  EXPECT_EQ(k["rfactor"], 1);
  // Samples of this sketch: the partials, their combination, the consumer (the grid sketch
  // gives one kernel; its samples that do not divide the row are rejected).
  int three = 0;
  for (uint64_t seed = 1; seed <= 16; ++seed) {
    auto c = gen.Sample(seed);
    if (c.ok() && c->program.kernels.size() == 3) ++three;
  }
  EXPECT_GT(three, 0);
}

TEST(Rules, CrossThreadReductionKeepsRowsInRegistersOverAClusterOnSm90) {
  // A third sketch: every row read once into registers, the row split over a sampled cluster.
  SpaceGenerator g = Space("softmax(rows=256, cols=16384)", CudaTarget("sm_90"));
  ASSERT_EQ(g.sketches().size(), 3u);
  const Trace& t = g.sketches()[2];
  auto k = Kinds(t);
  EXPECT_EQ(k["split_buffer_axis"], 1);
  EXPECT_EQ(k.count("fuse_reductions"), 0u);
  EXPECT_THAT(Attrs(t, "bind", "thread"), ::testing::Contains("cluster.x"));
  EXPECT_THAT(Attrs(t, "cache_read", "scope"), ::testing::ElementsAre("local"));
  // Samples that divide the row lower to one kernel whose cluster is the rest of the split;
  // the others are rejected before they are measured.
  int clusters = 0;
  for (uint64_t seed = 1; seed <= 24; ++seed) {
    auto c = g.Sample(seed);
    if (!c.ok()) continue;
    ASSERT_EQ(c->program.kernels.size(), 1u);
    if (c->program.kernels[0].launch.cluster > 1) ++clusters;
  }
  EXPECT_GT(clusters, 0);
  // Without clusters (sm_80) the row goes to one block; rows that 128 vectors do not divide
  // have no such sketch.
  EXPECT_EQ(Space("softmax(rows=256, cols=16384)", CudaTarget("sm_80")).sketches().size(), 3u);
  EXPECT_EQ(Space("softmax(rows=256, cols=1000)", CudaTarget("sm_90")).sketches().size(), 2u);
}

TEST(Rules, CrossThreadReductionPutsFewRowsInOneGridSynchronizedKernel) {
  // Statistics that fuse into one tuple reduction (layernorm's Welford triple, softmax's online
  // pair) get a second sketch: one grid-synchronized kernel.
  for (const char* spec : {"layernorm(rows=16, cols=262144)", "softmax(rows=16, cols=262144)"}) {
    SCOPED_TRACE(spec);
    SpaceGenerator g = Space(spec, CudaTarget("sm_90"));
    ASSERT_EQ(g.sketches().size(), 2u);
    auto k = Kinds(g.sketches()[1]);
    EXPECT_EQ(k["fuse_reductions"], 1);
    EXPECT_EQ(k["split_buffer_axis"], 1);
    EXPECT_THAT(Attrs(g.sketches()[1], "cache_read", "scope"), ::testing::Contains("local"));
    int grid_kernels = 0;
    for (uint64_t seed = 1; seed <= 24; ++seed) {
      auto c = g.Sample(seed);
      if (!c.ok() || c->program.kernels.size() != 1) continue;
      EXPECT_TRUE(c->program.kernels[0].launch.cooperative);
      ++grid_kernels;
    }
    EXPECT_GT(grid_kernels, 0);
  }
  EXPECT_THAT(Attrs(Space("layernorm(rows=16, cols=262144)", CudaTarget("sm_90")).sketches()[1],
                    "cache_read", "scope"),
              ::testing::UnorderedElementsAre("local", "shared"));
  // Statistics that do not fuse (one reduction) have no grid sketch.
  EXPECT_EQ(Space("reduce(rows=16, cols=262144)", CudaTarget("sm_90")).sketches().size(), 1u);
}

TEST(Rules, AutoBindCudaSamplesThreadsAndVectorWidth) {
  // An elementwise chain: B inlined into C, C fused and bound with sampled threads and width.
  auto g = SpaceGenerator::Create(schedules::test_workloads::ElementwiseChain(64, 96),
                                  CudaTarget("sm_90"));
  ASSERT_TRUE(g.ok()) << g.status();
  const Trace& t = g->sketches()[0];
  auto k = Kinds(t);
  EXPECT_GE(k["bind"], 2);
  EXPECT_GE(k["sample_categorical"], 3);  // threads, vector width, unroll
  EXPECT_EQ(k["vectorize"], 1);
}

// ---- Convolution as an implicit GEMM (multi-level tiling).

// The variable name of the leaf loop of `st` bound to `tag`, or "".
std::string BoundVar(const schedules::Stage& st, const std::string& tag) {
  for (int l : st.leaves) {
    const schedules::IterVar& iv = st.iters[l];
    if (iv.thread != schedules::ThreadTag::kNone && schedules::ThreadTagName(iv.thread) == tag) {
      return iv.var->name;
    }
  }
  return "";
}

TEST(Rules, MultiLevelTilingCudaConvIsImplicitGemm) {
  struct Case {
    std::string spec;
    std::string x_axis, y_axis;  // the output axes bound to threadIdx.x and threadIdx.y
    bool padded;
  };
  for (const Case& c : std::vector<Case>{
           {"conv2d(N=2, C=3, H=11, W=13, K=5, R=3, S=3, padding=1)", "q", "k", true},
           {"conv2d(N=1, C=4, H=12, W=12, K=6, R=3, S=2, stride=2, dilation=2, layout=nhwc)", "k",
            "q", false},
           {"conv2d_bias_relu(N=1, C=3, H=9, W=10, K=4, R=3, S=3, padding=2)", "q", "k", true}}) {
    SCOPED_TRACE(c.spec);
    SpaceGenerator g = Space(c.spec, CudaTarget("sm_90"));
    ASSERT_EQ(g.sketches().size(), 1u);
    const Trace& t = g.sketches()[0];
    auto k = Kinds(t);
    EXPECT_EQ(k["cache_write"], 1);  // the accumulator in registers
    EXPECT_THAT(Attrs(t, "cache_read", "scope"),
                ::testing::UnorderedElementsAre("shared", "local", "shared", "local"));
    EXPECT_EQ(k["sample_compute_location"], 4);
    EXPECT_THAT(Attrs(t, "bind", "thread"),
                ::testing::IsSupersetOf({"blockIdx.z", "blockIdx.y", "blockIdx.x", "vthread",
                                         "threadIdx.y", "threadIdx.x"}));
    // The padding is computed by the shared copy of the padded input (inlined into it), not by
    // a kernel of its own.
    EXPECT_EQ(k["compute_inline"], (c.padded ? 1 : 0) + (c.spec.rfind("conv2d_bias", 0) == 0));
    for (uint64_t seed : {1, 2, 3}) {
      SCOPED_TRACE(seed);
      auto cand = g.Sample(seed);
      ASSERT_TRUE(cand.ok()) << cand.status();
      EXPECT_EQ(cand->program.kernels.size(), 1u);
      auto sch = schedules::Replay(Load(c.spec), *cand->trace);
      ASSERT_TRUE(sch.ok()) << sch.status();
      const schedules::Stage* acc = nullptr;
      const schedules::Stage* out = nullptr;
      for (const schedules::Stage& st : sch->stages()) {
        if (st.reduce && st.attach.kind == schedules::AttachPoint::Kind::kAt) acc = &st;
        if (st.is_output) out = &st;
      }
      ASSERT_NE(acc, nullptr);
      ASSERT_NE(out, nullptr);
      // The GEMM axes: n (threadIdx.x) the innermost output axis, m (threadIdx.y) the other
      // operand's innermost axis; the batch axes fused on blockIdx.z.
      EXPECT_EQ(BoundVar(*out, "threadIdx.x").substr(0, 1), c.x_axis);
      EXPECT_EQ(BoundVar(*out, "threadIdx.y").substr(0, 1), c.y_axis);
      EXPECT_EQ(NestTags(*out).front(), "blockIdx.z");
      // The channel loop in three levels, the filter taps (r, s) whole inside R1: R0 R1 r s
      // [two batch loops] S3 S3 R2 S4 S4.
      EXPECT_EQ(NestPattern(*acc), "RRRRSSSSRSS");
      EXPECT_EQ(acc->iters[acc->leaves[2]].var->name, "r");
      EXPECT_EQ(acc->iters[acc->leaves[3]].var->name, "s");
      if (c.padded) {
        const schedules::Stage* padded = sch->FindStage("padded");
        ASSERT_NE(padded, nullptr);
        EXPECT_TRUE(padded->inlined());
        const schedules::Stage* copy = sch->FindStage("padded_shared");
        ASSERT_NE(copy, nullptr);
        EXPECT_EQ(copy->attach.stage, acc->name);
        EXPECT_NE(schedules::ToString(copy->body).find("select"), std::string::npos)
            << schedules::ToString(copy->body);
      }
    }
  }
}

TEST(Rules, MultiLevelTilingHostConvIsImplicitGemm) {
  const std::string spec = "conv2d(N=2, C=3, H=11, W=13, K=5, R=3, S=3, padding=1)";
  const SpaceGenerator gen = Space(spec, HostTarget());
  const Trace& t = gen.sketches()[0];
  auto k = Kinds(t);
  EXPECT_THAT(PerfectTiles(t), ::testing::ElementsAre("4/4", "4/16", "2/16"));
  EXPECT_EQ(k["compute_inline"], 1);  // the padding, into the loads
  EXPECT_EQ(k["fuse"], 2);            // c, r, s; then the batch loops and the outer tiles
  EXPECT_EQ(k["parallel"], 1);
  EXPECT_EQ(k["vectorize"], 1);
  auto c = gen.Sample(5);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->program.kernels.size(), 1u);
  auto sch = schedules::Replay(Load(spec), *c->trace);
  ASSERT_TRUE(sch.ok()) << sch.status();
  const schedules::Stage* st = sch->FindStage("conv");
  ASSERT_NE(st, nullptr);
  EXPECT_EQ(NestPattern(*st), "SSSRSSRSS");
  EXPECT_EQ(NestTags(*st).front(), "parallel");
  EXPECT_EQ(NestTags(*st).back(), "vectorized");
  // The vectorized loop tiles q (the innermost output axis); the one before it k.
  EXPECT_EQ(st->iters[st->leaves.back()].var->name.substr(0, 1), "q");
  EXPECT_EQ(st->iters[st->leaves[st->leaves.size() - 2]].var->name.substr(0, 1), "k");
}

// Convolutions of every layout, stride, dilation, padding and dtype, on shapes the tiles do not
// divide: most samples pass the verifier on both targets, and on the host they compute what the
// reference computes.
TEST(Space, ConvSamplesAreValidAndMatchTheReferenceOnTheHost) {
  for (const std::string spec : {
           "conv2d(N=1, C=3, H=9, W=11, K=5, R=3, S=3, padding=1)",
           "conv2d(N=2, C=4, H=10, W=9, K=3, R=3, S=3, stride=2, padding=1)",
           "conv2d(N=1, C=5, H=9, W=8, K=7, R=2, S=3, dilation=2, padding=1, layout=nhwc)",
           "conv2d(N=1, C=3, H=7, W=9, K=6, R=3, S=3, padding=1, dtype=f16)",
           "conv2d_bias_relu(N=2, C=3, H=8, W=7, K=5, R=3, S=3, stride=2, padding=1, "
           "layout=nhwc)",
       }) {
    SCOPED_TRACE(spec);
    const schedules::Workload w = Load(spec);
    for (const Target& t : {HostTarget(), CudaTarget("sm_90")}) {
      SCOPED_TRACE(t.ToString());
      SpaceGenerator g = Space(spec, t);
      EXPECT_EQ(Kinds(g.sketches()[0]).count(t.is_cuda() ? "cache_write" : "parallel"), 1u);
      constexpr int kSamples = 20;
      int valid = 0, checked = 0;
      std::vector<std::string> why;
      auto ref = GenerateReference(w, t);
      ASSERT_TRUE(ref.ok()) << ref.status();
      for (uint64_t seed = 0; seed < kSamples; ++seed) {
        schedules::Rejection r;
        auto c = g.Sample(seed, &r);
        if (!c.ok()) {
          why.push_back(r.step + ": " + r.message);
          continue;
        }
        ++valid;
        if (t.is_cuda() || checked >= 3) continue;
        ++checked;
        absl::Status v = worker::RunAndVerify(c->source, *ref, seed);
        EXPECT_TRUE(v.ok()) << "seed " << seed << ": " << v << "\n"
                            << c->trace->ToJsonString() << "\n"
                            << c->source.code;
      }
      EXPECT_GE(valid, kSamples * 9 / 10) << ::testing::PrintToString(why);
      if (!t.is_cuda()) {
        EXPECT_EQ(checked, 3);
      }
    }
  }
}

TEST(Rules, UnrollAnnotatesWithASampledStep) {
  const SpaceGenerator gen = Space("reduce(rows=200, cols=1000)", CudaTarget("sm_90"));
  const Trace& t = gen.sketches()[0];
  bool found = false;
  for (const auto& inst : t.insts) {
    if (inst.kind != "annotate_stage") continue;
    EXPECT_EQ(inst.attrs["key"], "auto_unroll_max_step");
    EXPECT_TRUE(inst.attrs["value"].is_null());  // the value is the sampled input
    ASSERT_EQ(inst.inputs.size(), 2u);
    found = true;
  }
  EXPECT_TRUE(found);
}

// ---- Split-K (multi-level tiling's second sketch).

// The sample_categorical whose value splits the rfactor'd loop: its candidates and probabilities.
const schedules::Instruction* SplitKChoice(const Trace& t) {
  for (const auto& rf : t.insts) {
    if (rf.kind != "rfactor") continue;
    for (const auto& split : t.insts) {
      if (split.kind != "split" || split.outputs.empty() || split.outputs[0] != rf.inputs[0]) {
        continue;
      }
      for (const auto& c : t.insts) {
        if (c.kind == "sample_categorical" && c.outputs[0] == split.inputs[1]) return &c;
      }
    }
  }
  return nullptr;
}

TEST(Rules, MultiLevelTilingSplitsKOverBlocks) {
  const std::string spec = "matmul(M=512, N=512, K=262144)";
  SpaceGenerator g = Space(spec, CudaTarget("sm_90"));
  // The plain sketch first (as without split-K), then the split one; then both pipelined.
  ASSERT_EQ(g.sketches().size(), 4u);
  EXPECT_EQ(Kinds(g.sketches()[2]).count("rfactor"), 0u);
  EXPECT_EQ(Kinds(g.sketches()[3])["rfactor"], 1);
  EXPECT_EQ(Kinds(g.sketches()[0]).count("rfactor"), 0u);
  const Trace& t = g.sketches()[1];
  auto k = Kinds(t);
  EXPECT_EQ(k["rfactor"], 1);
  EXPECT_EQ(k["cache_write"], 2);  // the partials' accumulator, the combine's register
  for (const auto& inst : t.insts) {
    if (inst.kind == "rfactor") {
      EXPECT_EQ(inst.attrs.value("factor_axis", -1), 0);  // the chunk is the partials' axis 0
    }
  }
  // 1 and the powers of two to 64 (K / 64 = 4096 >= 128); 16 tiles of 128 x 128 on 132 SMs
  // and K = 512 x 512: the prior is centred on 64 and grows with the factor.
  const schedules::Instruction* choice = SplitKChoice(t);
  ASSERT_NE(choice, nullptr);
  EXPECT_EQ(choice->attrs["candidates"], nlohmann::json({1, 2, 4, 8, 16, 32, 64}));
  const std::vector<double> probs = choice->attrs["probs"].get<std::vector<double>>();
  for (size_t i = 1; i < probs.size(); ++i) EXPECT_GT(probs[i], probs[i - 1]);
  EXPECT_TRUE(choice->decision.is_null());

  // A split sample: the partials [f, m, n] with f on blockIdx.z (the batch of the GEMM view) and
  // the contraction their combine, one output a thread summing the chunks in order.
  const schedules::Workload w = Load(spec);
  int split = 0;
  for (uint64_t seed = 0; seed < 16 && split == 0; ++seed) {
    auto c = g.Sample(seed);
    ASSERT_TRUE(c.ok()) << c.status();
    const int64_t f = SplitKFactor(*c->trace);
    if (f == 1) continue;
    ++split;
    auto sch = schedules::Replay(w, *c->trace);
    ASSERT_TRUE(sch.ok()) << sch.status();
    const schedules::Stage* rf = sch->FindStage("C_rf");
    ASSERT_NE(rf, nullptr);
    EXPECT_EQ(rf->buffer->shape, (std::vector<int64_t>{f, 512, 512}));
    EXPECT_EQ(NestTags(*rf)[0], "blockIdx.z");
    ASSERT_EQ(c->source.kernels.size(), 2u);
    EXPECT_EQ(c->source.kernels[0].launch.grid[2], f);
    const schedules::Stage* comb = sch->FindStage("C");
    ASSERT_NE(comb, nullptr);
    EXPECT_THAT(NestTags(*comb), ::testing::ElementsAre("blockIdx.x", "threadIdx.x"));
  }
  EXPECT_EQ(split, 1);
}

// The chunk counts split-K samples: the divisors of K and the powers of two (a shorter, guarded
// last chunk) leaving chunks of at least 128, up to 64.
TEST(Rules, MultiLevelTilingSplitsKIntoDivisorsAndPowersOfTwo) {
  for (const auto& [spec, candidates] : std::vector<std::pair<std::string, nlohmann::json>>{
           {"matmul(M=256, N=256, K=4099)", {1, 2, 4, 8, 16, 32}},  // 4099 is prime
           {"matmul(M=256, N=256, K=3000)", {1, 2, 3, 4, 5, 6, 8, 10, 12, 15, 16, 20}},
       }) {
    SCOPED_TRACE(spec);
    SpaceGenerator g = Space(spec, CudaTarget("sm_90"));
    ASSERT_GE(g.sketches().size(), 2u);
    const schedules::Instruction* choice = SplitKChoice(g.sketches()[1]);
    ASSERT_NE(choice, nullptr);
    EXPECT_EQ(choice->attrs["candidates"], candidates);
  }
}

TEST(Rules, MultiLevelTilingSplitsKOnlyWhereItCanPay) {
  struct Case {
    std::string spec;
    Target target;
    size_t sketches;
  };
  // On CUDA with M and N above 16, each sketch also pipelined (twice as many).
  for (const Case& c : std::vector<Case>{
           // Many output tiles and a short K: no split.
           {"matmul(M=4096, N=4096, K=4096)", CudaTarget("sm_90"), 1 * 2},
           // K too short for chunks of 128.
           {"matmul(M=128, N=96, K=64)", CudaTarget("sm_90"), 1 * 2},
           // A long K that no factor up to 64 divides (1031 is prime): split into chunks of
           // ceil(K / S), S a power of two, the last chunk guarded (on CUDA after
           // skinny_contraction's unsplit sketch: N = 1; chunks of 1024 are too long for its
           // split).
           {"matmul(M=8, N=1, K=1031)", CudaTarget("sm_90"), 1 + 2},
           {"matmul(M=8, N=1, K=1031)", HostTarget(), 2},
           // Few output tiles (64 of 128 x 128 on 132 SMs) but K = N: split on CUDA only.
           {"matmul(M=64, N=8192, K=8192)", CudaTarget("sm_90"), 2 * 2},
           {"matmul(M=64, N=8192, K=8192)", HostTarget(), 1},
           // A long K: on both (on CUDA after skinny_contraction's two sketches).
           {"matmul(M=4096, N=1, K=262144)", CudaTarget("sm_80"), 2 + 2},
           {"matmul(M=4096, N=1, K=262144)", HostTarget(), 2},
       }) {
    SCOPED_TRACE(c.spec + " on " + c.target.ToString());
    EXPECT_EQ(Space(c.spec, c.target).sketches().size(), c.sketches);
  }
}

// Every split-K family on both targets: mostly valid, and a good share of the samples split.
class SplitKSpace : public ::testing::TestWithParam<std::string> {};

TEST_P(SplitKSpace, MostlyValidAndManySplit) {
  int split_spaces = 0;
  for (const Target& t : {HostTarget(), CudaTarget("sm_80"), CudaTarget("sm_90")}) {
    SCOPED_TRACE(t.ToString());
    SpaceGenerator g = Space(GetParam(), t);
    // Few output tiles count on CUDA only (M=32, N=8192, K=8192 splits there, not on the host).
    const bool splits = std::any_of(g.sketches().begin(), g.sketches().end(),
                                    [](const Trace& sk) { return Kinds(sk).count("rfactor") > 0; });
    split_spaces += splits;
    constexpr int kSamples = 64;
    const SampleCount n =
        CountSamples(g, kSamples, [](const Trace& tr) { return SplitKFactor(tr) > 1; });
    EXPECT_GE(n.valid, kSamples * 9 / 10) << ::testing::PrintToString(n.why);
    if (splits) {
      EXPECT_GE(n.kept, kSamples / 8);
    } else {
      EXPECT_EQ(n.kept, 0);
    }
  }
  EXPECT_GE(split_spaces, 2);
}

std::vector<std::string> SplitKSpaceSpecs() {
  std::vector<std::string> specs = SplitKSpecs();
  for (const char* s : {"matmul(M=512, N=512, K=262144)", "matmul(M=4096, N=1, K=262144)",
                        "matmul(M=32, N=8192, K=8192)", "matmul(M=64, N=8192, K=8192)",
                        "conv2d(N=1, C=256, H=7, W=7, K=64, R=3, S=3, padding=1, layout=nhwc)"}) {
    specs.push_back(s);
  }
  return specs;
}

INSTANTIATE_TEST_SUITE_P(Families, SplitKSpace, ::testing::ValuesIn(SplitKSpaceSpecs()),
                         SpecTestName);

// ---- Skinny contractions (skinny_contraction.cc).

// The sketches skinny_contraction makes of the contraction C of `spec` (the untouched copy last).
std::vector<schedules::Schedule> SkinnySketches(const std::string& spec, const Target& t) {
  auto sch = schedules::Schedule::Create(Load(spec));
  EXPECT_TRUE(sch.ok()) << sch.status();
  if (!sch.ok()) return {};
  auto r = schedules::MakeSkinnyContraction(t)->Apply(*sch, "C");
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? std::move(*r) : std::vector<schedules::Schedule>{};
}

// A sample of a sketch: its trace replayed with fresh decisions, lowered and printed.
schedules::Candidate SampleOf(const std::string& spec, const schedules::Schedule& sketch,
                              const Target& t, uint64_t seed) {
  auto s = schedules::Replay(Load(spec), schedules::WithoutDecisions(sketch.trace()), seed);
  EXPECT_TRUE(s.ok()) << s.status();
  if (!s.ok()) return {};
  auto c = schedules::BuildCandidate(*s, t);
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? std::move(*c) : schedules::Candidate{};
}

TEST(Rules, SkinnyContractionSpreadsKOverThreadsAlongTheRows) {
  // N = 1 with A row-major: A is contiguous along k. The outputs go R to a block (threadIdx.y),
  // each one's k over T threads (threadIdx.x, combined across them) at V lanes (vectorized);
  // a second sketch splits k over blocks first (rfactor); the untouched copy is last.
  const std::string spec = "matmul(M=4096, N=1, K=262144)";
  const Target t = CudaTarget("sm_90");
  std::vector<schedules::Schedule> sk = SkinnySketches(spec, t);
  ASSERT_EQ(sk.size(), 3u);
  EXPECT_TRUE(sk[2].trace().insts.empty());
  const std::vector<std::string> rows = {"blockIdx.x", "threadIdx.y", "serial",
                                         "unrolled",   "threadIdx.x", "vectorized"};
  EXPECT_EQ(NestTags(*sk[0].FindStage("C")), rows);
  EXPECT_EQ(NestPattern(*sk[0].FindStage("C")), "SSRRRR");
  ASSERT_NE(sk[1].FindStage("C_rf"), nullptr);
  EXPECT_EQ(NestTags(*sk[1].FindStage("C_rf")), rows);
  EXPECT_THAT(NestTags(*sk[1].FindStage("C")), ::testing::ElementsAre("blockIdx.x", "threadIdx.x"));
  // The chunks: 1 and the powers of two to 64 (chunks of at least 1024), the prior centred on 2
  // (4096 outputs of about 32 threads fill 132 SMs of 2048 threads twice).
  const schedules::Instruction* choice = SplitKChoice(sk[1].trace());
  ASSERT_NE(choice, nullptr);
  EXPECT_EQ(choice->attrs["candidates"], nlohmann::json({1, 2, 4, 8, 16, 32, 64}));
  const std::vector<double> probs = choice->attrs["probs"].get<std::vector<double>>();
  EXPECT_EQ(std::max_element(probs.begin(), probs.end()) - probs.begin(), 1);
  // Samples: one kernel reducing across threads with shuffles, some with 16-byte vectors.
  int vectors = 0;
  for (uint64_t seed = 0; seed < 16; ++seed) {
    const schedules::Candidate c = SampleOf(spec, sk[0], t, seed);
    ASSERT_EQ(c.source.kernels.size(), 1u);
    EXPECT_THAT(c.source.code, HasSubstr("__shfl_xor_sync"));
    EXPECT_THAT(c.source.code, ::testing::Not(HasSubstr("__shared__ __align__(16) float A")));
    vectors += c.source.code.find("float4") != std::string::npos;
  }
  EXPECT_GT(vectors, 0);
}

TEST(Rules, SkinnyContractionPutsThreadsAlongTheColumns) {
  // M = 1 with B row-major: B is contiguous along n, not k. Sketch 0: n over threadIdx.x
  // (coalesced), k over threadIdx.y combined across them; sketch 1 splits k over blocks first;
  // sketch 2 computes the partials of sampled chunks of k one thread a chunk and V columns, with
  // 16-byte vector loads of B's rows and no reduction across threads; sketch 3 does the same
  // with the chunks a block's threads, their partials summed in shared memory (one kernel).
  const std::string spec = "matmul(M=1, N=8192, K=8192, dtype=f16)";
  const Target t = CudaTarget("sm_90");
  std::vector<schedules::Schedule> sk = SkinnySketches(spec, t);
  ASSERT_EQ(sk.size(), 5u);
  // The f16 output D (the cast) takes the output's loops; C is computed at its thread, in a
  // register.
  EXPECT_THAT(NestTags(*sk[0].FindStage("D")), ::testing::ElementsAre("blockIdx.x", "threadIdx.x"));
  EXPECT_THAT(NestTags(*sk[0].FindStage("C")).back(), "threadIdx.y");
  EXPECT_EQ(sk[0].FindStage("C")->buffer->scope, schedules::MemScope::kLocal);
  EXPECT_THAT(
      NestTags(*sk[1].FindStage("C_rf")),
      ::testing::ElementsAre("blockIdx.x", "threadIdx.x", "serial", "unrolled", "threadIdx.y"));
  EXPECT_THAT(NestTags(*sk[2].FindStage("C_rf")),
              ::testing::ElementsAre("blockIdx.x", "threadIdx.y", "threadIdx.x", "unrolled"));
  EXPECT_TRUE(sk[4].trace().insts.empty());
  int vectors = 0;
  for (uint64_t seed = 0; seed < 16; ++seed) {
    const schedules::Candidate c = SampleOf(spec, sk[2], t, seed);
    ASSERT_EQ(c.source.kernels.size(), 2u);  // the partials, then their combine
    EXPECT_THAT(c.source.code, ::testing::Not(HasSubstr("allreduce")));
    EXPECT_THAT(c.source.code, HasSubstr("float C_rf_local["));  // f16 accumulated in f32
    vectors += c.source.code.find("reinterpret_cast<const uint4*>(&B[") != std::string::npos;
  }
  EXPECT_GT(vectors, 0);
  // Sketch 3: the partials in shared memory at the output's block (its chunks the block's
  // threadIdx.y, its columns threadIdx.x x V lanes), the output one thread a column.
  const schedules::Stage& rf = *sk[3].FindStage("C_rf");
  EXPECT_EQ(rf.buffer->scope, schedules::MemScope::kShared);
  EXPECT_THAT(NestTags(rf),
              ::testing::ElementsAre("threadIdx.y", "serial", "threadIdx.x", "unrolled"));
  EXPECT_THAT(NestTags(*sk[3].FindStage("D")),
              ::testing::ElementsAre("blockIdx.x", "threadIdx.y", "threadIdx.x"));
  // The priors: 8 threads of 8 columns (128 blocks, about one an SM) and 128 chunks (1024
  // threads) weigh most.
  std::vector<const schedules::Instruction*> cats;
  for (const schedules::Instruction& inst : sk[3].trace().insts) {
    if (inst.kind == "sample_categorical") cats.push_back(&inst);
  }
  ASSERT_GE(cats.size(), 3u);
  const auto most_likely = [](const schedules::Instruction& inst) {
    const std::vector<double> p = inst.attrs["probs"].get<std::vector<double>>();
    return inst.attrs["candidates"][std::max_element(p.begin(), p.end()) - p.begin()]
        .get<int64_t>();
  };
  EXPECT_EQ(most_likely(*cats[0]), 128);  // chunks a block
  EXPECT_EQ(most_likely(*cats[2]), 8);    // threads along the columns
  int streamed = 0;
  for (uint64_t seed = 0; seed < 16; ++seed) {
    const schedules::Candidate c = SampleOf(spec, sk[3], t, seed);
    ASSERT_EQ(c.source.kernels.size(), 1u);
    EXPECT_THAT(c.source.code, HasSubstr("__shared__ __align__(16) float C_rf["));
    EXPECT_THAT(c.source.code, HasSubstr("__syncthreads();"));
    streamed +=
        c.source.code.find("__ldcs(reinterpret_cast<const uint4*>(&B[") != std::string::npos;
  }
  EXPECT_GT(streamed, 0);
}

TEST(Rules, SkinnyContractionReadsTheLayoutFromTheStrides) {
  // The transposed operands swap the mappings: A^T (K x M) is contiguous along m, B^T (N x K)
  // along k.
  const Target t = CudaTarget("sm_90");
  std::vector<schedules::Schedule> a =
      SkinnySketches("matmul(M=4096, N=1, K=8192, transpose_a=true)", t);
  ASSERT_GE(a.size(), 2u);
  EXPECT_EQ(NestTags(*a[0].FindStage("C")).back(), "threadIdx.y");
  std::vector<schedules::Schedule> b =
      SkinnySketches("matmul(M=1, N=8192, K=8192, transpose_b=true, dtype=f16)", t);
  ASSERT_GE(b.size(), 2u);
  EXPECT_EQ(NestTags(*b[0].FindStage("C")).back(), "vectorized");
  // Batched: the batch axis is one more output axis.
  std::vector<schedules::Schedule> c = SkinnySketches("matmul(M=1, N=4096, K=4096, batch=4)", t);
  ASSERT_GE(c.size(), 2u);
  EXPECT_THAT(
      NestTags(*c[0].FindStage("C")),
      ::testing::ElementsAre("blockIdx.x", "threadIdx.x", "serial", "unrolled", "threadIdx.y"));
}

TEST(Rules, SkinnyContractionLeavesOtherStagesAlone) {
  // Not skinny (both of M and N over 16, or K under 256), not a contraction, or the host: the
  // rule does nothing, so these spaces are the sketches they were before it existed.
  struct Case {
    std::string spec;
    Target target;
  };
  for (const Case& c : std::vector<Case>{
           {"matmul(M=512, N=512, K=512)", CudaTarget("sm_90")},
           {"matmul(M=512, N=512, K=262144)", CudaTarget("sm_90")},
           {"matmul(M=4099, N=3001, K=1999)", CudaTarget("sm_90")},
           {"matmul(M=64, N=17, K=4096)", CudaTarget("sm_90")},
           {"matmul(M=17, N=8192, K=8192, dtype=f16)", CudaTarget("sm_90a")},
           {"matmul(M=8, N=1, K=128)", CudaTarget("sm_90")},
           {"matmul(M=4096, N=1, K=262144)", HostTarget()},
           {"matmul_bias_gelu(M=512, N=512, K=512)", CudaTarget("sm_80")},
           {"conv2d(N=1, C=256, H=7, W=7, K=64, R=3, S=3, padding=1, layout=nhwc)",
            CudaTarget("sm_90")},
           {"softmax(rows=4, cols=65536)", CudaTarget("sm_90")},
           {"layernorm(rows=150, cols=100)", CudaTarget("sm_90")},
       }) {
    SCOPED_TRACE(c.spec + " on " + c.target.ToString());
    auto sch = schedules::Schedule::Create(Load(c.spec));
    ASSERT_TRUE(sch.ok()) << sch.status();
    auto rule = schedules::MakeSkinnyContraction(c.target);
    for (const schedules::Stage& st : sch->stages()) {
      auto r = rule->Apply(*sch, st.name);
      ASSERT_TRUE(r.ok()) << r.status();
      EXPECT_TRUE(r->empty()) << st.name;
    }
    // And none of the CUDA space's sketches is one of the rule's (they all cache their operands
    // in shared memory).
    if (c.spec.rfind("matmul", 0) == 0 && c.target.is_cuda()) {
      const SpaceGenerator g = Space(c.spec, c.target);
      for (const Trace& sk : g.sketches()) {
        EXPECT_GT(Kinds(sk).count("cache_read"), 0u);
      }
    }
  }
}

TEST(Rules, SkinnySamplesReplayFromTheirJson) {
  // Every decision of the rule is a sample instruction: a sample's JSON replays to its kernel.
  const Target t = CudaTarget("sm_90");
  for (const std::string spec :
       {"matmul(M=4096, N=1, K=262144)", "matmul(M=1, N=8192, K=8192, dtype=f16)"}) {
    SCOPED_TRACE(spec);
    EXPECT_EQ(ReplayFromJson(spec, t, 32, 3, IsSkinnySample), 3);
  }
}

// Every skinny family on sm_80 and sm_90: the space has the rule's sketches, its samples are
// mostly valid, and a good share of them are the rule's.
class SkinnySpace : public ::testing::TestWithParam<std::string> {};

TEST_P(SkinnySpace, MostlyValidAndManySkinny) {
  for (const Target& t : {CudaTarget("sm_80"), CudaTarget("sm_90")}) {
    SCOPED_TRACE(t.ToString());
    SpaceGenerator g = Space(GetParam(), t);
    constexpr int kSamples = 64;
    const SampleCount n = CountSamples(g, kSamples, IsSkinnySample);
    EXPECT_GE(n.valid, kSamples * 9 / 10) << ::testing::PrintToString(n.why);
    EXPECT_GE(n.kept, kSamples / 4);
  }
}

INSTANTIATE_TEST_SUITE_P(Families, SkinnySpace, ::testing::ValuesIn(SkinnySpecs()), SpecTestName);

// ---- Shapes no tile divides (padded tiles, kPadTile).

TEST(Rules, PaddedExtentChoicesPreferALargeTileAndLittleWaste) {
  const std::vector<int64_t> block = {16, 32, 48, 64, 80, 96, 112, 128};
  // A dividing extent, one too small to pad without waste, and one whose divisors already give
  // the largest tile: nothing to choose.
  EXPECT_TRUE(schedules::rules::PaddedExtentChoices(4096, 128, block).values.empty());
  EXPECT_TRUE(schedules::rules::PaddedExtentChoices(7, 128, block).values.empty());
  EXPECT_TRUE(schedules::rules::PaddedExtentChoices(1, 128, block).values.empty());
  EXPECT_TRUE(schedules::rules::PaddedExtentChoices(384, 128, block).values.empty());
  // 4099 is prime: the extent itself, then its multiples of 16, 32 (= 96 x 43), 112, 64 (= 104 x
  // 40) and 128; the extent itself is the least likely.
  const auto m = schedules::rules::PaddedExtentChoices(4099, 128, block);
  EXPECT_EQ(m.values, (std::vector<int64_t>{4099, 4112, 4128, 4144, 4160, 4224}));
  ASSERT_EQ(m.weights.size(), m.values.size());
  for (size_t i = 1; i < m.weights.size(); ++i) EXPECT_GT(m.weights[i], m.weights[0]);
  EXPECT_GT(m.weights[5], 40 * m.weights[0]);
  // k in steps up to 32: 1999 is prime; 2000 = 25 x 80 and 2016 = 32 x 63.
  const auto k = schedules::rules::PaddedExtentChoices(1999, 32, {8, 16, 24, 32});
  EXPECT_EQ(k.values, (std::vector<int64_t>{1999, 2000, 2016}));
  // An extent with a good tile keeps most of the weight against a padding that wastes more.
  const auto e = schedules::rules::PaddedExtentChoices(1000, 128, block);
  ASSERT_FALSE(e.values.empty());
  EXPECT_EQ(e.values[0], 1000);
}

// The sample_categorical instructions that choose a padded extent, with their candidates.
std::vector<std::vector<int64_t>> PaddedExtentCandidates(const Trace& t) {
  std::vector<std::vector<int64_t>> out;
  for (const auto& tile : t.insts) {
    if (tile.kind != "sample_perfect_tile" || tile.inputs.size() < 2) continue;
    for (const auto& c : t.insts) {
      if (c.kind == "sample_categorical" && c.outputs[0] == tile.inputs[1]) {
        out.push_back(c.attrs["candidates"].get<std::vector<int64_t>>());
      }
    }
  }
  return out;
}

TEST(Rules, MultiLevelTilingPadsShapesNoTileDivides) {
  // issue 18's shape: 4099, 3001 and 1999 are prime, so today's perfect tiles are 1 or the
  // whole extent. m, n and k each get a padded extent to choose; the accumulator and the four
  // caches compute whole tiles (kPadTile).
  const std::string spec = "matmul(M=4099, N=3001, K=1999)";
  SpaceGenerator g = Space(spec, CudaTarget("sm_90"));
  // The plain sketch, then the pipelined one over a copy of B with padded rows (A, whose shared
  // copy is stored k-major and fetched one element a copy, is read where it is).
  ASSERT_EQ(g.sketches().size(), 2u);
  EXPECT_EQ(Kinds(g.sketches()[0]).count("pad_axis"), 0u);
  EXPECT_EQ(Kinds(g.sketches()[1])["pad_axis"], 1);
  EXPECT_EQ(Kinds(g.sketches()[1])["permute_axes"], 1);
  const Trace& t = g.sketches()[0];
  const auto choices = PaddedExtentCandidates(t);
  ASSERT_EQ(choices.size(), 3u);
  EXPECT_EQ(choices[0].front(), 4099);
  EXPECT_EQ(choices[1].front(), 3001);
  EXPECT_EQ(choices[2], (std::vector<int64_t>{1999, 2000, 2016}));
  const std::vector<std::string> keys = Attrs(t, "annotate_stage", "key");
  EXPECT_EQ(std::count(keys.begin(), keys.end(), "pad_tile"), 5);
  // Samples: mostly valid, mostly padded, and a padded sample has block tiles that need no
  // divisor of the extents.
  const schedules::Workload w = Load(spec);
  constexpr int kSamples = 32;
  int valid = 0, padded = 0;
  std::vector<std::string> why;
  for (uint64_t seed = 0; seed < kSamples; ++seed) {
    schedules::Rejection r;
    auto c = g.Sample(seed, &r);
    if (!c.ok()) {
      why.push_back(r.step + ": " + r.message);
      continue;
    }
    ++valid;
    if (PaddedLoops(*c->trace) == 0) continue;
    ++padded;
    // The output's stores stay guarded; the shared copies zero-fill past the extents.
    EXPECT_THAT(c->source.code, HasSubstr("< 4099")) << c->source.code;
  }
  EXPECT_GE(valid, kSamples * 9 / 10) << ::testing::PrintToString(why);
  EXPECT_GE(padded, kSamples * 3 / 4);
}

TEST(Rules, PaddedCopiesStayVectorized) {
  // 96 and 68 are multiples of 4: a padded tile's shared copies read whole vectors of the
  // operands (a chunk of lanes is all inside K or all past it) and store zero vectors past M
  // and K.
  SpaceGenerator g = Space("matmul(M=131, N=96, K=68)", CudaTarget("sm_90"));
  int vectorized = 0;
  for (uint64_t seed = 0; seed < 64 && vectorized < 2; ++seed) {
    auto c = g.Sample(seed);
    if (!c.ok() || PaddedLoops(*c->trace) == 0) continue;
    const std::string& code = c->source.code;
    if (code.find("zero where the source is past its extent") == std::string::npos) continue;
    ++vectorized;
    EXPECT_THAT(code, ::testing::AnyOf(HasSubstr(" = float4{};"), HasSubstr(" = float2{};")))
        << code;
    EXPECT_THAT(code, HasSubstr("} else {")) << code;
  }
  EXPECT_EQ(vectorized, 2);
}

TEST(Rules, MultiLevelTilingKeepsDividingShapesAsTheyWere) {
  // No padded extent to choose and no kPadTile where the tiles divide: the same sketch as
  // before padding existed, on both targets and in the split-K sketch.
  for (const Target& t : {HostTarget(), CudaTarget("sm_80"), CudaTarget("sm_90")}) {
    for (const char* spec : {"matmul(M=4096, N=4096, K=4096)", "matmul(M=512, N=512, K=262144)",
                             "matmul(M=1024, N=1024, K=1024, dtype=f16)"}) {
      SCOPED_TRACE(std::string(spec) + " on " + t.ToString());
      SpaceGenerator g = Space(spec, t);
      for (const Trace& sk : g.sketches()) {
        EXPECT_TRUE(PaddedExtentCandidates(sk).empty());
        if (Kinds(sk).count("tensorize") > 0) continue;  // the tensor-core sketch pads always
        for (const std::string& key : Attrs(sk, "annotate_stage", "key")) {
          EXPECT_NE(key, "pad_tile");
        }
      }
    }
  }
}

TEST(Rules, PaddedSamplesReplayFromTheirJson) {
  // The padded extents are decisions of the trace: its JSON replays to the same kernel.
  const std::string spec = "matmul(M=4099, N=3001, K=1999)";
  for (const Target& t : {HostTarget(), CudaTarget("sm_90")}) {
    SCOPED_TRACE(t.ToString());
    EXPECT_EQ(ReplayFromJson(spec, t, 16, 2, [](const Trace& tr) { return PaddedLoops(tr) > 0; }),
              2);
  }
}

TEST(Rules, PaddedTileDecisionMustMultiplyToThePaddedExtent) {
  // A trace whose tile no longer fits its padded extent (edited by hand) names both.
  const std::string spec = "matmul(M=4099, N=3001, K=1999)";
  SpaceGenerator g = Space(spec, CudaTarget("sm_90"));
  std::optional<Trace> padded;
  for (uint64_t seed = 0; seed < 16 && !padded; ++seed) {
    auto c = g.Sample(seed);
    if (c.ok() && PaddedLoops(*c->trace) > 0) padded = *c->trace;
  }
  ASSERT_TRUE(padded.has_value());
  for (auto& inst : padded->insts) {
    if (inst.kind == "sample_perfect_tile" && inst.inputs.size() == 2) {
      inst.decision = {1, 4099};
      break;
    }
  }
  auto c = schedules::BuildCandidate(Load(spec), CudaTarget("sm_90"), *padded);
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(c.status().message(), HasSubstr("decision [1, 4099] is not 2 positive factors of"));
  EXPECT_THAT(c.status().message(), HasSubstr("(padded extent "));
}

// Shapes no tile divides, on every target: mostly valid, and on CUDA most samples pad.
class PaddedTileSpace : public ::testing::TestWithParam<std::string> {};

TEST_P(PaddedTileSpace, MostlyValidAndManyPadded) {
  for (const Target& t : {HostTarget(), CudaTarget("sm_80"), CudaTarget("sm_90")}) {
    SCOPED_TRACE(t.ToString());
    SpaceGenerator g = Space(GetParam(), t);
    constexpr int kSamples = 64;
    const SampleCount n =
        CountSamples(g, kSamples, [](const Trace& tr) { return PaddedLoops(tr) > 0; });
    EXPECT_GE(n.valid, kSamples * 9 / 10) << ::testing::PrintToString(n.why);
    EXPECT_GE(n.kept, kSamples / 4);
  }
}

std::vector<std::string> PaddedTileSpaceSpecs() {
  std::vector<std::string> specs = PaddedTileSpecs();
  for (const char* s :
       {"matmul(M=4099, N=3001, K=1999)", "matmul(M=4099, N=3001, K=1999, dtype=f16)",
        "matmul(M=1000, N=4099, K=1000)"}) {
    specs.push_back(s);
  }
  return specs;
}

INSTANTIATE_TEST_SUITE_P(Families, PaddedTileSpace, ::testing::ValuesIn(PaddedTileSpaceSpecs()),
                         SpecTestName);

// ---- The space as a whole, every family on both targets.

class SpaceFamilies : public ::testing::TestWithParam<std::string> {};

TEST_P(SpaceFamilies, DeterministicAndMostlyValid) {
  for (const Target& t : {HostTarget(), CudaTarget("sm_80"), CudaTarget("sm_90")}) {
    SCOPED_TRACE(t.ToString());
    SpaceGenerator g = Space(GetParam(), t);
    ASSERT_FALSE(g.sketches().empty());
    constexpr int kSamples = 64;
    int valid = 0;
    std::vector<std::string> why;
    for (uint64_t seed = 0; seed < kSamples; ++seed) {
      schedules::Rejection r;
      auto c = g.Sample(seed, &r);
      if (!c.ok()) {
        why.push_back(r.step + ": " + r.message);
        continue;
      }
      ++valid;
      if (seed < 3) {
        auto again = g.Sample(seed);
        ASSERT_TRUE(again.ok());
        EXPECT_EQ(again->trace->ToJsonString(), c->trace->ToJsonString());
        EXPECT_EQ(again->source.code, c->source.code);
      }
    }
    EXPECT_GE(valid, kSamples * 9 / 10) << ::testing::PrintToString(why);
  }
}

INSTANTIATE_TEST_SUITE_P(Families, SpaceFamilies, ::testing::ValuesIn(SpaceFamilySpecs()),
                         SpecTestName);

TEST(Space, DifferentSeedsGiveDifferentCandidates) {
  SpaceGenerator g = Space("matmul(M=128, N=128, K=128)", CudaTarget("sm_90"));
  std::set<std::string> traces;
  for (uint64_t seed = 0; seed < 16; ++seed) {
    auto c = g.Sample(seed);
    ASSERT_TRUE(c.ok()) << c.status();
    traces.insert(c->trace->ToJsonString());
  }
  EXPECT_GE(traces.size(), 12u);
}

TEST(Space, RejectionsNameTheStep) {
  // A device that allows 64 threads per block: most matmul tiles are over its limit.
  Target small = CudaTarget("sm_90");
  small.max_threads_per_block = 64;
  SpaceGenerator g = Space("matmul(M=128, N=128, K=64)", small);
  int rejected = 0;
  for (uint64_t seed = 0; seed < 16; ++seed) {
    schedules::Rejection r;
    auto c = g.Sample(seed, &r);
    if (c.ok()) continue;
    ++rejected;
    EXPECT_EQ(r.step, "over_limits");
    EXPECT_THAT(r.message, HasSubstr("threads per block, over the limit of 64"));
  }
  EXPECT_GT(rejected, 0);
}

// ---- Candidate files.

TEST(CandidateFile, RoundTrip) {
  SpaceGenerator g = Space("softmax(rows=200, cols=300)", CudaTarget("sm_90"));
  auto c = g.Sample(5);
  ASSERT_TRUE(c.ok()) << c.status();
  const std::string dir = MakeTempDir("cand");
  auto path = schedules::WriteCandidateFiles(*c, dir, "cand_000005");
  ASSERT_TRUE(path.ok()) << path.status();
  EXPECT_TRUE(std::filesystem::exists(dir + "/cand_000005.cu"));
  auto f = schedules::ReadCandidateFile(*path);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->source.code, c->source.code);
  EXPECT_EQ(f->trace->ToJsonString(), c->trace->ToJsonString());
  EXPECT_EQ(f->workload.spec, c->workload.spec);
  EXPECT_TRUE(f->target.is_cuda());
  ASSERT_EQ(f->source.kernels.size(), c->source.kernels.size());
  for (size_t i = 0; i < f->source.kernels.size(); ++i) {
    EXPECT_EQ(f->source.kernels[i].entry, c->source.kernels[i].entry);
    EXPECT_EQ(f->source.kernels[i].launch.grid, c->source.kernels[i].launch.grid);
    EXPECT_EQ(f->source.kernels[i].launch.block, c->source.kernels[i].launch.block);
    EXPECT_EQ(f->source.kernels[i].params, c->source.kernels[i].params);
  }
  ASSERT_EQ(f->source.buffers.size(), c->source.buffers.size());
  for (size_t i = 0; i < f->source.buffers.size(); ++i) {
    EXPECT_EQ(f->source.buffers[i].buffer->shape, c->source.buffers[i].buffer->shape);
    EXPECT_EQ(f->source.buffers[i].role, c->source.buffers[i].role);
  }
  // The trace replays to the same source.
  auto rebuilt = schedules::BuildCandidate(f->workload, f->target, f->trace);
  ASSERT_TRUE(rebuilt.ok()) << rebuilt.status();
  EXPECT_EQ(rebuilt->source.code, c->source.code);
}

TEST(CandidateFile, ReferenceRoundTrip) {
  // The reference lowering as a candidate: no trace.
  auto w = Load("reduce(rows=20, cols=30)");
  auto c = schedules::BuildCandidate(w, HostTarget(), std::nullopt);
  ASSERT_TRUE(c.ok()) << c.status();
  auto path = schedules::WriteCandidateFiles(*c, MakeTempDir("candref"), "ref");
  ASSERT_TRUE(path.ok()) << path.status();
  auto f = schedules::ReadCandidateFile(*path);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_FALSE(f->trace.has_value());
  EXPECT_EQ(f->source.code, c->source.code);
}

std::string WriteText(const std::string& name, const std::string& text) {
  const std::string path = MakeTempDir("candbad") + "/" + name;
  std::ofstream(path) << text;
  return path;
}

TEST(CandidateFile, Errors) {
  auto missing = schedules::ReadCandidateFile("/nonexistent/cand.json");
  EXPECT_THAT(missing.status().message(),
              HasSubstr("cannot read candidate file '/nonexistent/cand.json'; check the path"));
  auto not_json = schedules::ReadCandidateFile(WriteText("a.json", "{nope"));
  EXPECT_THAT(not_json.status().message(),
              HasSubstr("not a valid candidate file: it is not a JSON object; write candidate "
                        "files with `tessel sample --out DIR`"));
  auto wrong = schedules::ReadCandidateFile(WriteText("b.json", R"({"format": "other"})"));
  EXPECT_THAT(wrong.status().message(), HasSubstr("\"format\" is not \"tessel-candidate\""));
  auto version = schedules::ReadCandidateFile(
      WriteText("c.json", R"({"format": "tessel-candidate", "version": 7})"));
  EXPECT_THAT(version.status().message(),
              HasSubstr("unsupported \"version\" (this build reads version 1)"));

  // A file whose workload key no longer matches (the definition changed since).
  SpaceGenerator g = Space("reduce(rows=200, cols=100)", HostTarget());
  auto c = g.Sample(1);
  ASSERT_TRUE(c.ok());
  nlohmann::json j = schedules::CandidateToJson(*c, "x.cc");
  j["workload"]["key"] = "0000000000000000";
  auto stale = schedules::ReadCandidateFile(WriteText("d.json", j.dump()));
  ASSERT_FALSE(stale.ok());
  EXPECT_THAT(stale.status().message(),
              HasSubstr("the file was written with (its definition changed); sample the "
                        "candidate again"));
}

// Values of the wrong type or out of range (found by tests/fuzz/candidate_file_fuzzer.cc; the
// inputs are in its corpus as regression_*): each was an uncaught exception (abort) or an index
// taken modulo 2^32, and is now an error naming the field.
TEST(CandidateFile, WrongTypesAreErrors) {
  auto format = schedules::ReadCandidateFile(WriteText("f.json", R"({"format": 1})"));
  EXPECT_THAT(format.status().message(), HasSubstr("\"format\" is not \"tessel-candidate\""));

  SpaceGenerator g = Space("softmax(rows=200, cols=300)", CudaTarget("sm_90"));
  auto c = g.Sample(5);
  ASSERT_TRUE(c.ok()) << c.status();
  const nlohmann::json good = schedules::CandidateToJson(*c, "x.cu");
  ASSERT_TRUE(schedules::ReadCandidateFile(WriteText("good.json", good.dump())).ok());
  auto read_with = [&](const std::function<void(nlohmann::json&)>& change) {
    nlohmann::json j = good;
    change(j);
    return schedules::ReadCandidateFile(WriteText("changed.json", j.dump())).status();
  };
  EXPECT_THAT(
      read_with([](nlohmann::json& j) { j["kernels"][0]["cooperative"] = "yes"; }).message(),
      HasSubstr("\"cooperative\" must be true or false"));
  EXPECT_THAT(read_with([](nlohmann::json& j) {
                j["kernels"][0]["dynamic_shared_bytes"] = "big";
              }).message(),
              HasSubstr("\"dynamic_shared_bytes\" must be an integer >= 0"));
  EXPECT_THAT(read_with([](nlohmann::json& j) {
                j["kernels"][0]["params"] = {int64_t{1} << 32};
              }).message(),
              HasSubstr("names a buffer that does not exist"));
  EXPECT_THAT(read_with([](nlohmann::json& j) {
                j["buffers"][0]["shape"] = {int64_t{1} << 40, int64_t{1} << 40};
              }).message(),
              HasSubstr("has more elements than a 64-bit integer can count"));
}

}  // namespace
}  // namespace tessel::testing
