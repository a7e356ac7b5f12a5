// Bulk tensor copies (the tensor memory accelerator) without a GPU: the wgmma sketch whose
// operands the copy engine fetches, in each of its three producer forms (thread 0 after a
// barrier, thread 0 on empty mbarriers, a producer warp plane with setmaxnreg); the tensor maps a
// kernel takes and their JSON forms (launch JSON, candidate files); NVRTC compiling the kernels
// where the CUDA toolkit is installed; the cost model's view; and the errors: a target without
// the copy engine, a bulk copy outside a pipeline, into an unswizzled buffer, of a box that
// differs between threads, malformed tensor maps; and the write-back through bulk tensor stores.
// GPU runs: tests/gpu/tensor_core_gpu_test.cc (BulkCopySpaceGpu).

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>
#include <map>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "schedules/codegen/source_json.h"
#include "schedules/ir/tensor_intrin.h"
#include "schedules/lower/lower.h"
#include "schedules/space/candidate.h"
#include "schedules/space/space_generator.h"
#include "tests/e2e/e2e_util.h"
#include "tests/schedules/test_workloads.h"
#include "tests/test_util.h"
#ifdef TESSEL_HAVE_CUDA
#include "worker/cuda/nvrtc_compiler.h"
#endif

namespace tessel::schedules {
namespace {

using tessel::testing::BlockRounds;
using tessel::testing::FeatureOf;
using test_workloads::BlockOf;
using test_workloads::LoopsOf;
using test_workloads::NewSchedule;
using test_workloads::ValueOrDie;
using ::testing::HasSubstr;
using ::testing::Not;

bool IsBulkSample(const Candidate& c) {
  return c.source.code.find("cp.async.bulk.tensor") != std::string::npos;
}

// Whether a kernel forks off a producer plane: a z slice past the computing ones, or four warps
// past two warpgroups along y.
bool HasPlane(const std::string& code) {
  return code.find("if (threadIdx.z == ") != std::string::npos ||
         code.find("if (threadIdx.y >= 8) {") != std::string::npos;
}

// The producer form a bulk sample was lowered to: 0 barrier, 1 thread 0 on empty mbarriers, 2 a
// producer plane (a pipeline_producer of 2 is lowered as 1 where no plane fits the block).
int FormOf(const Candidate& c) {
  const std::string& code = c.source.code;
  if (code.find("tessel_mbarrier_arrive(&") == std::string::npos &&
      code.find("tessel_mbarrier_arrive_cluster(&") == std::string::npos) {
    return 0;
  }
  return HasPlane(code) ? 2 : 1;
}

// The pipeline_producer a bulk sample's loop is annotated with (-1: none).
int ProducerOf(const Candidate& c) {
  for (int p = 0; p < 3; ++p) {
    if (c.source.code.find("pipeline_producer=" + std::to_string(p)) != std::string::npos) {
      return p;
    }
  }
  return -1;
}

void ExpectCompiles(const GeneratedSource& source, const std::string& arch) {
#ifdef TESSEL_HAVE_CUDA
  if (!worker::FindCudaIncludeDir().ok()) return;
  worker::NvrtcOptions o;
  o.arch = arch;
  auto bin = worker::CompileCuda(source, o);
  EXPECT_TRUE(bin.ok()) << bin.status() << "\n" << source.code;
#else
  (void)source;
  (void)arch;
#endif
}

// The first bulk samples of each producer form as lowered (seeds 1 to 200) of `spec` on sm_90a.
std::map<int, Candidate> BulkSamples(const std::string& spec) {
  std::map<int, Candidate> out;
  auto space = SpaceGenerator::Create(testing::LoadSpec(spec), CudaTarget("sm_90a"));
  EXPECT_TRUE(space.ok()) << space.status();
  if (!space.ok()) return out;
  for (uint64_t seed = 1; seed <= 200 && out.size() < 3; ++seed) {
    auto c = space->Sample(seed);
    if (c.ok() && IsBulkSample(*c)) out.emplace(FormOf(*c), *std::move(c));
  }
  return out;
}

// Up to `count` samples of matmul 512^3 f16 on sm_90a (seeds 1 to `seeds`) that `keep` accepts.
std::vector<Candidate> SamplesWhere(uint64_t seeds, size_t count,
                                    const std::function<bool(const Candidate&)>& keep,
                                    const std::string& spec =
                                        "matmul(M=512, N=512, K=512, "
                                        "dtype=f16)") {
  std::vector<Candidate> out;
  auto space = SpaceGenerator::Create(testing::LoadSpec(spec), CudaTarget("sm_90a"));
  EXPECT_TRUE(space.ok()) << space.status();
  if (!space.ok()) return out;
  for (uint64_t seed = 1; seed <= seeds && out.size() < count; ++seed) {
    auto c = space->Sample(seed);
    if (c.ok() && keep(*c)) out.push_back(*std::move(c));
  }
  return out;
}

// What each producer form's kernel is made of, and that it compiles.
TEST(BulkCopy, SamplesOfEachProducerForm) {
  const std::map<int, Candidate> samples = BulkSamples("matmul(M=512, N=512, K=512, dtype=f16)");
  ASSERT_EQ(samples.size(), 3u) << "a sample of every pipeline_producer";
  for (const auto& [producer, c] : samples) {
    SCOPED_TRACE(producer);
    EXPECT_GE(ProducerOf(c), producer);
    const std::string& code = c.source.code;
    ASSERT_EQ(c.source.kernels.size(), 1u);
    const LaunchConfig& l = c.source.kernels[0].launch;
    // A (512 x 512, row-major) and B: boxes of one 128-byte swizzle row a side (64 f16) by the
    // tile's rows, both swizzled by 128 bytes; the output's too where bulk tensor stores write
    // it back (BulkCopy.WriteBacksThroughBulkTensorStores).
    ASSERT_EQ(l.tensor_maps.size(), absl::StrContains(code, "tessel_tma_store_2d(") ? 3u : 2u);
    for (const TensorMapSpec& m : l.tensor_maps) {
      ASSERT_EQ(m.box.size(), 2u);
      EXPECT_EQ(m.box[1], 64);
      EXPECT_LE(m.box[0], 256);
      EXPECT_EQ(m.swizzle_bytes, 128);
    }
    EXPECT_THAT(code, HasSubstr("const __grid_constant__ tessel_tensor_map tessel_tmap_1"));
    EXPECT_THAT(code, HasSubstr("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::"
                                "complete_tx::bytes"));
    EXPECT_THAT(code, HasSubstr("tessel_mbarrier_expect_tx("));
    EXPECT_THAT(code, HasSubstr("tessel_fence_mbarrier_init();"));
    EXPECT_THAT(code, Not(HasSubstr("tessel_cp_async_16(")));
    const size_t loop = code.find("// software_pipeline=");
    ASSERT_NE(loop, std::string::npos);
    const size_t wait = code.find("tessel_mbarrier_wait(", loop);
    EXPECT_NE(wait, std::string::npos);
    const std::string body = code.substr(loop);
    if (producer == 0) {
      // The slot comes back through the barrier every thread passes.
      EXPECT_THAT(body.substr(0, body.find("tessel_wgmma_fence")), HasSubstr("__syncthreads();"));
      EXPECT_THAT(code, Not(HasSubstr("tessel_mbarrier_arrive(&")));
    } else {
      // Each computing thread arrives on the slot's empty mbarrier (every CTA's, multicasting).
      EXPECT_TRUE(absl::StrContains(code, "tessel_mbarrier_arrive(&") ||
                  absl::StrContains(code, "tessel_mbarrier_arrive_cluster(&"));
      EXPECT_THAT(body.substr(0, body.find("tessel_wgmma_wait_0")),
                  Not(HasSubstr("__syncthreads();")));
    }
    if (producer == 2) {
      // A plane of producer warps past the computing ones; over 256 threads it gives its
      // registers to the computing warpgroups (at 256 every thread may have 255 already).
      EXPECT_TRUE(HasPlane(code)) << code;
      if (l.threads_per_block() > 256) {
        EXPECT_THAT(code, HasSubstr("tessel_setmaxnreg_dec_40();"));
        EXPECT_THAT(code, HasSubstr("setmaxnreg.inc.sync.aligned.u32"));
        EXPECT_THAT(code,
                    HasSubstr(absl::StrCat("__launch_bounds__(", l.threads_per_block(), ", 1)")));
      }
    }
    ExpectCompiles(c.source, "sm_90a");
    // The cost model sees the copy engine's bytes and the producer form.
    auto feature = [&](const std::string& n) { return FeatureOf(c.program, c.target, n); };
    EXPECT_GT(feature("log2_bulk_copy_bytes"), 0);
    EXPECT_EQ(feature("log2_async_copy_bytes"), 0);
    EXPECT_EQ(feature("pipeline_producer"), ProducerOf(c));
  }
}

// Two computing warpgroups stacked along y (block (32, 8, 1), 128-row tiles) get a producer plane
// of one warpgroup too: four more warps along y (384 threads), forked off by threadIdx.y, the
// plane's first thread issuing the copies, 40 registers a producer thread and the rest (232) for
// the computing threads, whose accumulators fit the entry cap of 168 (65536 / 384).
TEST(BulkCopy, APlaneOfFourWarpsBesideTwoWarpgroupsAlongY) {
  const std::vector<Candidate> samples = SamplesWhere(300, 2, [](const Candidate& c) {
    return IsBulkSample(c) && ProducerOf(c) == 2 && c.source.kernels.at(0).launch.block[1] == 12;
  });
  EXPECT_EQ(samples.size(), 2u) << "samples with a plane beside two warpgroups along y";
  for (const Candidate& sample : samples) {
    const Candidate* c = &sample;
    const LaunchConfig& l = c->source.kernels.at(0).launch;
    const std::string& code = c->source.code;
    EXPECT_EQ(l.block[0], 32);
    EXPECT_EQ(l.block[2], 1);
    EXPECT_TRUE(absl::StrContains(code, "__launch_bounds__(384, 1)"))
        << "__launch_bounds__(384, 1)";
    EXPECT_TRUE(absl::StrContains(code, "if (threadIdx.y >= 8) {")) << "if (threadIdx.y >= 8) {";
    EXPECT_TRUE(absl::StrContains(code, "if (threadIdx.x == 0 && threadIdx.y == 8) {"))
        << "if (threadIdx.x == 0 && threadIdx.y == 8) {";
    EXPECT_TRUE(absl::StrContains(code, "tessel_setmaxnreg_dec_40();"))
        << "tessel_setmaxnreg_dec_40();";
    EXPECT_TRUE(absl::StrContains(code, "tessel_setmaxnreg_inc_232();"))
        << "tessel_setmaxnreg_inc_232();";
    // The computing threads' empty arrivals: 256 a slot, the plane's threads none.
    const bool multicast = absl::StrContains(code, "tessel_tma_multicast_");
    const int64_t arrivals = multicast ? 256 / 32 * 2 : 256;
    EXPECT_TRUE(absl::StrContains(code, absl::StrCat("_empty[0], ", arrivals, ");"))) << arrivals;
    EXPECT_EQ(FormOf(*c), 2);
    ExpectCompiles(c->source, "sm_90a");
  }
}

// Consecutive blocks in clusters of two (cluster.x) share a tile of one operand: each CTA's
// producer copies half of its rows and multicasts them to both CTAs, whose full mbarriers still
// wait for the whole stage; a slot comes back once both CTAs' computing threads have left it
// (a lane of each warp arrives on each CTA's empty mbarrier), and the CTAs meet at cluster barriers
// after the mbarriers' setup and at the end.
TEST(BulkCopy, ClustersOfTwoMulticastTheTileTheyShare) {
  const std::vector<Candidate> samples = SamplesWhere(400, 3, [](const Candidate& c) {
    return c.source.code.find("tessel_tma_multicast_2d(") != std::string::npos;
  });
  EXPECT_EQ(samples.size(), 3u) << "multicasting samples";
  for (const Candidate& sample : samples) {
    const Candidate* c = &sample;
    const std::string& code = c->source.code;
    const LaunchConfig& l = c->source.kernels.at(0).launch;
    EXPECT_EQ(l.cluster, 2);
    EXPECT_EQ(l.grid[0] % 2, 0);
    EXPECT_TRUE(absl::StrContains(code, "__cluster_dims__(2, 1, 1)"))
        << "__cluster_dims__(2, 1, 1)";
    EXPECT_TRUE(absl::StrContains(code, ".multicast::cluster [%0], [%1, {%3, %4}], [%2], %5;"))
        << ".multicast::cluster [%0], [%1, {%3, %4}], [%2], %5;";
    // Each computing warp's lane c arrives on CTA c's empty mbarrier (the tensor cores, not its
    // threads, read the slot; its wait for them is the warp's): two arrivals a warp a phase.
    const int64_t consumers = l.threads_per_block() - (HasPlane(code) ? 128 : 0);
    EXPECT_TRUE(absl::StrContains(code, absl::StrCat("_empty[0], ", consumers / 32 * 2, ");")))
        << consumers;
    EXPECT_TRUE(absl::StrContains(code, "if (threadIdx.x < 2) {"));
    EXPECT_TRUE(absl::StrContains(code, "], threadIdx.x);"));
    EXPECT_FALSE(absl::StrContains(code, "tessel_mbarrier_arrive(&"));
    size_t barriers = 0;
    for (size_t at = code.find("barrier.cluster.arrive"); at != std::string::npos;
         at = code.find("barrier.cluster.arrive", at + 1)) {
      ++barriers;
    }
    EXPECT_EQ(barriers, 2u) << "after the setup and at the end";
    // The shared operand's map boxes half the rows of the other's kind of box.
    bool half = false;
    for (const TensorMapSpec& m : l.tensor_maps) half |= m.box[0] * 2 * 2 * 64 % 1024 == 0;
    EXPECT_TRUE(half);
    ExpectCompiles(c->source, "sm_90a");
    EXPECT_EQ(FeatureOf(c->program, c->target, "tma_multicast"), 1);
    EXPECT_NEAR(FeatureOf(c->program, c->target, "log2_cluster_ctas"), std::log2(3.0), 1e-6);
  }
}

// A persistent grid: up to one or two blocks an SM (132 or 264 on sm_90a), as few as take the
// same rounds, take the tiles of a 1664 x 2816 GEMM (13 x 11 tiles of 128 x 256) in rounds,
// the blocks past the tiles in the last round computing a padded tile whose stores are guarded;
// the producer's slots and phases count on across the rounds; the cost model sees the rounds. Where
// the tiles do not outnumber the blocks, the grid stays one block a tile.
TEST(BulkCopy, PersistentBlocksTakeTheTilesInRounds) {
  const std::vector<Candidate> samples = SamplesWhere(
      300, 3,
      [](const Candidate& c) {
        return IsBulkSample(c) && HasPlane(c.source.code) && BlockRounds(c) > 1;
      },
      "matmul(M=1664, N=2816, K=256, dtype=f16)");
  ASSERT_EQ(samples.size(), 3u) << "persistent samples";
  bool guarded = false;
  for (const Candidate& c : samples) {
    const std::string& code = c.source.code;
    const int64_t blocks = c.source.kernels.at(0).launch.grid[0];  // a cluster's blocks included
    EXPECT_LE(blocks, 264);
    // The same trace with a block a tile: its grid is the tile count.
    nlohmann::json j = c.trace->ToJson();
    for (nlohmann::json& inst : j["insts"]) {
      if (inst["kind"] == "sample_categorical" && !inst.value("inputs", nlohmann::json()).empty()) {
        inst["decision"] = 0;
      }
    }
    auto grid = BuildCandidate(c.workload, c.target, Trace::FromJson(j).value());
    ASSERT_TRUE(grid.ok()) << grid.status();
    const int64_t tiles = grid->source.kernels.at(0).launch.grid[0];
    EXPECT_EQ(BlockRounds(*grid), 1);
    const int64_t rounds = BlockRounds(c);
    ASSERT_GT(rounds, 1);
    // As few tiles a round as take that many rounds: fewer than `rounds` slots past the tiles;
    // the grid is those blocks, rounded up to whole clusters.
    const int64_t per_round = (tiles + rounds - 1) / rounds;
    EXPECT_LT(per_round * rounds - tiles, rounds);
    const int64_t cluster = std::max<int64_t>(1, c.source.kernels[0].launch.cluster);
    EXPECT_EQ(blocks, (per_round + cluster - 1) / cluster * cluster);
    EXPECT_TRUE(absl::StrContains(code, absl::StrCat(" < ", rounds, "; ++"))) << rounds;
    if (per_round * rounds > tiles) {
      guarded = true;
      // The stores of the last round's blocks past the tiles are guarded.
      EXPECT_TRUE(absl::StrContains(code, absl::StrCat(" * ", per_round, " + ")) &&
                  absl::StrContains(code, absl::StrCat(" < ", tiles)))
          << per_round << " " << tiles;
    }
    ExpectCompiles(c.source, "sm_90a");
  }
  EXPECT_TRUE(guarded) << "a sample whose blocks do not divide the tiles";
  // 512 x 512: at most 64 tiles, never more than the SMs.
  const std::vector<Candidate> small =
      SamplesWhere(120, 100, [](const Candidate& c) { return IsBulkSample(c); });
  ASSERT_FALSE(small.empty());
  for (const Candidate& c : small) {
    EXPECT_EQ(BlockRounds(c), 1);
  }
}

// Transposed operands, an epilogue and tiles past the extents (the copy engine fills zeros) all
// take bulk copies; the samples stay valid.
TEST(BulkCopy, OtherFamiliesTakeBulkCopies) {
  for (const char* spec : {"matmul(M=128, N=512, K=192, dtype=bf16, transpose_a=true)",
                           "matmul(M=256, N=256, K=128, dtype=f16, transpose_b=true)",
                           "matmul_bias_gelu(M=256, N=256, K=128, dtype=f16)",
                           "matmul(M=200, N=136, K=168, dtype=f16)"}) {
    SCOPED_TRACE(spec);
    const std::map<int, Candidate> samples = BulkSamples(spec);
    EXPECT_EQ(samples.size(), 3u);
    if (!samples.empty()) ExpectCompiles(samples.begin()->second.source, "sm_90a");
  }
}

// `c` with its write-back decision (the sample_categorical over {0, 1} after the producer form's)
// set to `bulk_store`, rebuilt.
Candidate WithBulkStore(const Candidate& c, int bulk_store) {
  nlohmann::json j = c.trace->ToJson();
  bool after_producer = false;
  for (nlohmann::json& inst : j["insts"]) {
    if (inst["kind"] != "sample_categorical") continue;
    const std::vector<int64_t> cands = inst["attrs"]["candidates"];
    if (cands == std::vector<int64_t>{0, 1, 2}) after_producer = true;
    if (after_producer && cands == std::vector<int64_t>{0, 1}) {
      inst["decision"] = bulk_store;
      break;
    }
  }
  EXPECT_TRUE(after_producer) << "no producer decision";
  auto out = BuildCandidate(c.workload, c.target, Trace::FromJson(j).value());
  EXPECT_TRUE(out.ok()) << out.status();
  return *std::move(out);
}

// The write-back through bulk tensor stores (kBulkStore): each computing warp writes its 16 rows
// into a 128-byte swizzled staging buffer of its own in 64-column chunks (two slots), its first
// lane storing each chunk through a tensor map over the output (box 16 x 64; 1 x 16 x 64 for a
// batched output) once at most one earlier store still reads the other slot; every thread waits
// for its stores' reads before the block leaves. The same trace without the decision stores
// through the lanes' quad stores. The cost model sees the bytes. Guards: the blocks past the
// tiles of a persistent grid's last round skip their chunks as a warp, rows past the output's
// extent are the copy engine's to drop, and a tile-count guard on the columns keeps the lanes'
// stores.
TEST(BulkCopy, WriteBacksThroughBulkTensorStores) {
  for (const char* spec :
       {"matmul(M=512, N=512, K=512, dtype=f16)",
        "matmul(M=128, N=128, K=128, batch=3, dtype=bf16)",
        "matmul(M=1664, N=2816, K=256, dtype=f16)", "matmul(M=200, N=256, K=168, dtype=f16)"}) {
    SCOPED_TRACE(spec);
    const std::vector<Candidate> samples = SamplesWhere(
        200, 2,
        [](const Candidate& c) {
          return absl::StrContains(c.source.code, "cp.async.bulk.tensor.2d.global.shared::cta") ||
                 absl::StrContains(c.source.code, "cp.async.bulk.tensor.3d.global.shared::cta");
        },
        spec);
    ASSERT_EQ(samples.size(), 2u) << "samples with bulk tensor stores";
    const bool batched = absl::StrContains(spec, "batch=");
    for (const Candidate& c : samples) {
      const std::string& code = c.source.code;
      const LaunchConfig& l = c.source.kernels.at(0).launch;
      const std::string out = c.program.buffers.back().buffer->name;
      int maps_of_output = 0;
      for (const TensorMapSpec& m : l.tensor_maps) {
        if (c.program.buffers[m.buffer].buffer->name != out) continue;
        ++maps_of_output;
        EXPECT_EQ(m.box,
                  batched ? std::vector<int64_t>({1, 16, 64}) : std::vector<int64_t>({16, 64}));
        EXPECT_EQ(m.swizzle_bytes, 128);
      }
      EXPECT_EQ(maps_of_output, 1);
      for (const char* part : {"tessel_syncwarp();", "tessel_fence_proxy_async();",
                               "tessel_bulk_commit();", "_stage = reinterpret_cast<"}) {
        EXPECT_THAT(code, HasSubstr(part));
      }
      EXPECT_THAT(code, Not(HasSubstr("tessel_quad_store_")));
      // A slot is rewritten once no group reads it: with an odd number of chunks a warp (a tile's
      // first chunk takes the slot of the previous tile's last), the first chunk waits for all.
      const size_t chunk_loop = code.find("_j_c < ");
      ASSERT_NE(chunk_loop, std::string::npos);
      const int chunks = std::atoi(code.c_str() + chunk_loop + 7);
      size_t waits_for_all = 0;
      for (size_t at = code.find("tessel_bulk_wait_read_0();"); at != std::string::npos;
           at = code.find("tessel_bulk_wait_read_0();", at + 1)) {
        ++waits_for_all;
      }
      EXPECT_EQ(waits_for_all, chunks % 2 == 1 ? 2u : 1u) << chunks << " chunks";
      EXPECT_EQ(absl::StrContains(code, "tessel_bulk_wait_read_1();"), chunks > 1) << chunks;
      const size_t last_store = code.rfind("tessel_tma_store_");
      ASSERT_NE(last_store, std::string::npos);
      EXPECT_NE(code.find("tessel_bulk_wait_read_0();", last_store), std::string::npos)
          << "the wait before the block leaves";
      ExpectCompiles(c.source, "sm_90a");
      const float bytes = FeatureOf(c.program, c.target, "log2_bulk_store_bytes");
      // A warp's chunks of 16 x 64 f16 (2 KB) in each round of tiles: one at least.
      EXPECT_GE(bytes, std::log2(1.0 + 16 * 64 * 2 * BlockRounds(c)) - 1e-3);

      const Candidate lanes = WithBulkStore(c, 0);
      EXPECT_THAT(lanes.source.code, Not(HasSubstr("tessel_tma_store_")));
      EXPECT_THAT(lanes.source.code, Not(HasSubstr("_stage = reinterpret_cast<")));
      EXPECT_EQ(lanes.source.kernels.at(0).launch.tensor_maps.size() + 1, l.tensor_maps.size());
      EXPECT_EQ(FeatureOf(lanes.program, lanes.target, "log2_bulk_store_bytes"), 0);
      // Both forms write the output's tiles once: the same global bytes written.
      EXPECT_NEAR(FeatureOf(c.program, c.target, "log2_global_write_bytes"),
                  FeatureOf(lanes.program, lanes.target, "log2_global_write_bytes"), 1e-3);
      if (absl::StrContains(spec, "M=200")) {
        // The lanes' stores are guarded by the rows' extent; the bulk stores leave it to the copy
        // engine.
        EXPECT_THAT(lanes.source.code, HasSubstr(" < 200"));
        EXPECT_THAT(code.substr(code.find("_stage = reinterpret_cast<")), Not(HasSubstr(" < 200")));
      }
      if (BlockRounds(c) > 1 && absl::StrContains(spec, "M=1664")) {
        // Blocks past the tiles in the last round (no grid of whole rounds fits 1664 x 2816 in
        // 128-row tiles): the warp's chunks are skipped as a whole, under a guard of no lane's.
        const size_t guard = code.rfind("if (", chunk_loop);
        const size_t after_loop = code.rfind("tessel_wgmma_wait_0();", chunk_loop);
        ASSERT_NE(guard, std::string::npos);
        EXPECT_GT(guard, after_loop);
        const std::string cond = code.substr(guard, code.find('\n', guard) - guard);
        EXPECT_THAT(cond, HasSubstr(" < "));
        EXPECT_THAT(cond, Not(HasSubstr("lane")));
      }
    }
  }
  // Three chunks a warp (N = 192): the first waits for every group, the others for all but one.
  const std::vector<Candidate> three = SamplesWhere(
      300, 1, [](const Candidate& c) { return absl::StrContains(c.source.code, "_j_c < 3; "); },
      "matmul(M=512, N=768, K=256, dtype=f16)");
  ASSERT_EQ(three.size(), 1u);
  const std::string& code3 = three[0].source.code;
  const size_t first = code3.find("_j_c == 0) {");
  ASSERT_NE(first, std::string::npos);
  const size_t all = code3.find("tessel_bulk_wait_read_0();", first);
  const size_t otherwise = code3.find("} else {", first);
  EXPECT_LT(all, otherwise);
  EXPECT_LT(otherwise, code3.find("tessel_bulk_wait_read_1();", first));
  ExpectCompiles(three[0].source, "sm_90a");
  // Columns guarded by their 8-column tile count (136 columns of 17 tiles): the lanes' stores.
  const std::vector<Candidate> odd = SamplesWhere(
      200, 1, [](const Candidate& c) { return absl::StrContains(c.source.code, "cp.async.bulk"); },
      "matmul(M=200, N=136, K=168, dtype=f16)");
  ASSERT_EQ(odd.size(), 1u);
  EXPECT_THAT(WithBulkStore(odd[0], 1).source.code, Not(HasSubstr("tessel_tma_store_")));
}

// A kernel's tensor maps in the launch JSON and in candidate files; malformed maps are refused
// with the kernel, the map and the fix.
TEST(BulkCopy, TensorMapsInJsonForms) {
  const std::map<int, Candidate> samples = BulkSamples("matmul(M=256, N=256, K=256, dtype=f16)");
  ASSERT_FALSE(samples.empty());
  const Candidate& c = samples.begin()->second;
  const std::vector<TensorMapSpec>& maps = c.source.kernels[0].launch.tensor_maps;
  ASSERT_FALSE(maps.empty());
  auto back = SourceFromLaunchJson(SourceLaunchToJson(c.source), c.source.code);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->kernels[0].launch.tensor_maps, maps);

  const std::string dir = testing::MakeTempDir("bulk_copy_candidate");
  auto path = WriteCandidateFiles(c, dir, "c");
  ASSERT_TRUE(path.ok()) << path.status();
  auto file = ReadCandidateFile(*path);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(file->source.kernels[0].launch.tensor_maps, maps);

  nlohmann::json j = nlohmann::json::parse(SourceLaunchToJson(c.source));
  j["kernels"][0]["tensor_maps"][0]["box"][0] = 300;
  auto bad = SourceFromLaunchJson(j.dump(), "");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(),
              HasSubstr("tensor map 0 has a box extent of 300: the copy engine moves 1 to 256 a "
                        "side"));
  j["kernels"][0]["tensor_maps"][0]["box"] = {64};
  bad = SourceFromLaunchJson(j.dump(), "");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("has a box of 1 extents over"));
  EXPECT_THAT(bad.status().message(), HasSubstr("give one extent per axis"));
  j["kernels"][0]["tensor_maps"][0] = {{"buffer", 0}, {"box", {8, 64}}, {"swizzle_bytes", 48}};
  bad = SourceFromLaunchJson(j.dump(), "");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(),
              HasSubstr("has rows of 128 bytes and a swizzle of 48 bytes: rows are a multiple of "
                        "16 bytes, at most the swizzle (0, 32, 64 or 128)"));
  j["kernels"][0]["tensor_maps"] = 5;
  bad = SourceFromLaunchJson(j.dump(), "");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("\"tensor_maps\" must be an array"));
}

// matmul(M=64, N=64, K=256, f16) by hand: the block's 64 threads along n, k in steps of 64, B's
// 64 x 64 tile of each step copied into swizzled shared memory by a bulk copy, the k steps a
// 2-stage pipeline (no tensor cores: the copy engine serves any shared fetch).
Schedule HandPipelined(int64_t swizzle, int64_t stages, bool bulk_outer = true) {
  Schedule sch = NewSchedule(testing::LoadSpec("matmul(M=64, N=64, K=256, dtype=f16)"));
  BlockRV c = BlockOf(sch, "C");
  BlockRV sh = ValueOrDie(sch.CacheRead("B", "shared", {c}));
  std::vector<LoopRV> l = LoopsOf(sch, c);
  EXPECT_TRUE(sch.Bind(l[0], "blockIdx.x").ok());
  EXPECT_TRUE(sch.Bind(l[1], "threadIdx.x").ok());
  std::vector<LoopRV> k = ValueOrDie(sch.Split(l[2], {-1, 64}));
  EXPECT_TRUE(sch.ComputeAt(sh, k[0]).ok());
  if (swizzle > 0) {
    EXPECT_TRUE(sch.Annotate(sh, kStorageSwizzle, swizzle).ok());
  }
  std::vector<LoopRV> sl = LoopsOf(sch, sh);
  EXPECT_TRUE(sch.Annotate(bulk_outer ? sl.front() : sl.back(), kBulkCopy, 1).ok());
  if (stages > 1) {
    EXPECT_TRUE(sch.Annotate(k[0], kSoftwarePipeline, stages).ok());
  }
  return sch;
}

TEST(BulkCopy, AnyPipelinedSharedFetchOnSm90) {
  auto p = Lower(HandPipelined(128, 2), CudaTarget("sm_90"));
  ASSERT_TRUE(p.ok()) << p.status();
  // The kernel of the sum (the other initializes C).
  const Kernel* sum = nullptr;
  for (const Kernel& k : p->kernels) {
    if (!k.launch.tensor_maps.empty()) sum = &k;
  }
  ASSERT_NE(sum, nullptr) << ToString(*p);
  const Kernel& k = *sum;
  ASSERT_EQ(k.launch.tensor_maps.size(), 1u);
  const TensorMapSpec& m = k.launch.tensor_maps[0];
  EXPECT_EQ(m.box, (std::vector<int64_t>{64, 64}));
  EXPECT_EQ(m.swizzle_bytes, 128);
  // B is input 1 of the program's buffers (A, B, C).
  EXPECT_EQ(p->buffers[m.buffer].buffer->name, "B");
  auto source = testing::Generate(HandPipelined(128, 2), CudaTarget("sm_90"));
  ASSERT_TRUE(source.ok()) << source.status();
  EXPECT_THAT(source->code, HasSubstr("tessel_tma_load_2d("));
  ExpectCompiles(*source, "sm_90");
}

// A producer plane's mbarriers are set up once, at the kernel's start, so a pipeline inside a
// serial loop (here over the rows of C: 4 runs of 4 stages) counts its steps from the first run:
// the slot and the phase of each wait follow the loop's iterations too.
TEST(BulkCopy, APlaneCountsStepsAcrossTheLoopsAroundIt) {
  const Schedule sch = testing::PlanePipelineInsideALoop();
  auto source = testing::Generate(sch, CudaTarget("sm_90"));
  ASSERT_TRUE(source.ok()) << source.status();
  const std::string& code = source->code;
  ASSERT_THAT(code, HasSubstr("if (threadIdx.z == 1) {")) << code;
  // The full barrier's slot is (4 m + k) % 3, not k % 3.
  const size_t wait = code.find("tessel_mbarrier_wait(&tessel_k_0_full[");
  ASSERT_NE(wait, std::string::npos) << code;
  const std::string line = code.substr(wait, code.find('\n', wait) - wait);
  EXPECT_THAT(line, HasSubstr("m")) << line;
  ExpectCompiles(*source, "sm_90");
}

// Two thread groups taking turns (pipeline_turns on the z loop of C's two column halves): the
// shared buffer holds one half's tile; a plane (the z slice past the two halves, although the
// pipeline asks for no producer) fetches half 0's stages and then half 1's into the same three
// slots (a serial loop over the halves), so the steps count over the rows and the halves; a
// half's threads wait for the other's to have issued their steps (the turn mbarriers of 128
// arrivals) and alone hand its slots back.
TEST(BulkCopy, ThreadsTakingTurnsShareOneRingOfSlots) {
  auto source = testing::Generate(testing::TurnsPipelineInsideALoop(testing::TurnsFetch::kBulk),
                                  CudaTarget("sm_90"));
  ASSERT_TRUE(source.ok()) << source.status();
  const std::string& code = source->code;
  const LaunchConfig& l = source->kernels.at(0).launch;
  EXPECT_EQ(l.block, (std::array<int64_t, 3>{128, 1, 3}));
  ASSERT_THAT(code, HasSubstr("if (threadIdx.z == 2) {")) << code;
  // Three slots of one half's 64 x 128 tile, and the mbarriers.
  EXPECT_THAT(code, HasSubstr("// 24576 elements")) << code;
  EXPECT_THAT(code, HasSubstr("_empty[0], 128);"));
  EXPECT_THAT(code, HasSubstr("_turn[0], 128);"));
  EXPECT_THAT(code, HasSubstr("_turn[1], 128);"));
  // The producer runs over both halves, the computing threads over their own.
  const std::string producer =
      code.substr(code.find("if (threadIdx.z == 2) {"),
                  code.find("} else {", code.find("if (threadIdx.z == 2) {")) -
                      code.find("if (threadIdx.z == 2) {"));
  EXPECT_THAT(producer, HasSubstr("for (int n_0 = 0; n_0 < 2; ++n_0) {")) << producer;
  EXPECT_THAT(producer, Not(HasSubstr("_turn[")));
  EXPECT_THAT(code, HasSubstr("tessel_mbarrier_arrive(&tessel_k_0_turn["));
  const size_t wait = code.find("tessel_mbarrier_wait(&tessel_k_0_turn[");
  ASSERT_NE(wait, std::string::npos) << code;
  ExpectCompiles(*source, "sm_90");
}

// The warpgroup sketch's ping-pong form: two warpgroups along n taking turns (pipeline_turns),
// each at its own 64-row tile of N columns, block (32, 4, 2) and the plane's z slice; each shared
// buffer holds one turn's tiles (the same trace without turns holds both warpgroups' columns of
// B); the consumers wait for the turn before theirs; the cost model sees the turns. Where the
// block has two warpgroups along m too (no plane fits), the sample is refused with the reason.
TEST(BulkCopy, WarpgroupsAlongNTakeTurnsInTheWgmmaSketch) {
  const std::string spec = "matmul_bias_gelu(M=512, N=1024, K=512, dtype=f16)";
  const std::vector<Candidate> samples = SamplesWhere(
      1500, 3, [](const Candidate& c) { return absl::StrContains(c.source.code, "_turn["); }, spec);
  ASSERT_EQ(samples.size(), 3u) << "samples whose warpgroups take turns";
  for (const Candidate& c : samples) {
    const std::string& code = c.source.code;
    const LaunchConfig& l = c.source.kernels.at(0).launch;
    EXPECT_EQ(l.block, (std::array<int64_t, 3>{32, 4, 3}));
    EXPECT_THAT(code, HasSubstr("if (threadIdx.z == 2) {"));
    EXPECT_THAT(code, HasSubstr("_turn[1], 128);"));
    EXPECT_THAT(code, HasSubstr("const int n_0_1 = threadIdx.z;  // pipeline_turns=1"));
    EXPECT_THAT(code, HasSubstr("for (int n_0_1 = 0; n_0_1 < 2; ++n_0_1) {"));
    EXPECT_NEAR(FeatureOf(c.program, c.target, "log2_pipeline_turns"), std::log2(3.0), 1e-6);
    ExpectCompiles(c.source, "sm_90a");
    // The same trace with the warpgroups sharing the buffers at once.
    nlohmann::json j = c.trace->ToJson();
    std::string turns_rv;
    for (const nlohmann::json& inst : j["insts"]) {
      if (inst["kind"] == "annotate_loop" && inst["attrs"]["key"] == kPipelineTurns) {
        turns_rv = inst["inputs"][1].get<std::string>();
      }
    }
    ASSERT_FALSE(turns_rv.empty());
    // Two stages, so that both fit the shared memory.
    for (nlohmann::json& inst : j["insts"]) {
      if (inst["kind"] == "sample_categorical" &&
          inst["attrs"]["candidates"] == nlohmann::json::array({2, 3, 4, 5})) {
        inst["decision"] = 0;
      }
    }
    auto in_turns = BuildCandidate(c.workload, c.target, Trace::FromJson(j).value());
    ASSERT_TRUE(in_turns.ok()) << in_turns.status();
    for (nlohmann::json& inst : j["insts"]) {
      if (inst.value("outputs", nlohmann::json::array()) == nlohmann::json::array({turns_rv})) {
        inst["decision"] = 0;
      }
    }
    auto together = BuildCandidate(c.workload, c.target, Trace::FromJson(j).value());
    ASSERT_TRUE(together.ok()) << together.status();
    EXPECT_THAT(together->source.code, Not(HasSubstr("_turn[")));
    EXPECT_GT(together->source.kernels.at(0).launch.dynamic_shared_bytes,
              in_turns->source.kernels.at(0).launch.dynamic_shared_bytes);
    EXPECT_NEAR(FeatureOf(together->program, together->target, "log2_pipeline_turns"), 1.0, 1e-6);
    // With two warpgroups along m as well: four computing warpgroups, no plane. The block
    // rasterization's tiling of the (half as many) m tiles follows.
    for (nlohmann::json& inst : j["insts"]) {
      if (inst["kind"] == "sample_categorical" &&
          inst["attrs"]["candidates"] == nlohmann::json::array({4, 8})) {
        inst["decision"] = 1;
        break;
      }
    }
    for (nlohmann::json& inst : j["insts"]) {
      if (inst["kind"] == "sample_perfect_tile") {
        std::vector<int64_t> f = inst["decision"].get<std::vector<int64_t>>();
        f[f[0] % 2 == 0 ? 0 : 1] /= 2;
        inst["decision"] = f;
        break;
      }
    }
    for (nlohmann::json& inst : j["insts"]) {
      if (inst.value("outputs", nlohmann::json::array()) == nlohmann::json::array({turns_rv})) {
        inst["decision"] = 1;
      }
    }
    auto wide = BuildCandidate(c.workload, c.target, Trace::FromJson(j).value());
    ASSERT_FALSE(wide.ok());
    EXPECT_THAT(std::string(wide.status().message()),
                HasSubstr("whose threads take turns at shared memory (pipeline_turns), but no "
                          "producer plane can be split off: that needs a kernel that "
                          "synchronizes nowhere else, at most two computing warpgroups"));
  }
}

// Threads taking turns at shared memory need a producer plane of bulk copies.
TEST(BulkCopy, TurnsWithoutAPlaneAreRefused) {
  auto threads =
      Lower(testing::TurnsPipelineInsideALoop(testing::TurnsFetch::kThreads), CudaTarget("sm_90"));
  ASSERT_FALSE(threads.ok());
  EXPECT_THAT(std::string(threads.status().message()),
              HasSubstr("whose threads take turns at shared memory (pipeline_turns), but its "
                        "fetches are not all bulk copies; only a producer plane of bulk copies "
                        "fetches the turns' stages one after another, so fetch with bulk_copy "
                        "from a block of at most two computing warpgroups or drop "
                        "pipeline_turns"));
  auto between = Lower(testing::TurnsPipelineInsideALoop(testing::TurnsFetch::kLoopBetween),
                       CudaTarget("sm_90"));
  ASSERT_FALSE(between.ok());
  EXPECT_THAT(std::string(between.status().message()),
              HasSubstr("but a serial loop runs between them"));
}

TEST(BulkCopy, ErrorsNameTheFix) {
  auto sm80 = Lower(HandPipelined(128, 2), CudaTarget("sm_80"));
  ASSERT_FALSE(sm80.ok());
  EXPECT_THAT(sm80.status().message(),
              HasSubstr("its bulk_copy fetches need the tensor memory accelerator, which sm_80 "
                        "lacks (compile for sm_90 or sm_90a)"));
  auto unpipelined = Lower(HandPipelined(128, 1), CudaTarget("sm_90"));
  ASSERT_FALSE(unpipelined.ok());
  EXPECT_THAT(unpipelined.status().message(),
              HasSubstr("is annotated bulk_copy but is not a shared-memory fetch of a "
                        "software_pipeline loop"));
  auto unswizzled = Lower(HandPipelined(0, 2), CudaTarget("sm_90"));
  ASSERT_FALSE(unswizzled.ok());
  EXPECT_THAT(unswizzled.status().message(), HasSubstr(", not a swizzled shared buffer; annotate "
                                                       "only a copy of a box of a global buffer"));
  // Annotated on the copy's inner loop: one row a copy, no whole swizzle period.
  auto inner = Lower(HandPipelined(128, 2, /*bulk_outer=*/false), CudaTarget("sm_90"));
  ASSERT_FALSE(inner.ok());
  EXPECT_THAT(std::string(inner.status().message()),
              HasSubstr("is annotated bulk_copy but its box of 1 rows of 64 elements is no whole "
                        "number of swizzle periods"));
}

}  // namespace
}  // namespace tessel::schedules
