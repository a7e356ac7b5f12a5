#include "tests/e2e/e2e_util.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <optional>
#include <random>

#include "absl/strings/str_cat.h"
#include "costmodel/features.h"
#include "schedules/codegen/cuda_codegen.h"
#include "schedules/codegen/host_codegen.h"
#include "schedules/ir/tensor_intrin.h"
#include "schedules/lower/check_limits.h"
#include "schedules/lower/lower.h"
#include "schedules/space/space_generator.h"
#include "schedules/util/status_macros.h"
#include "schedules/workload/builtins.h"
#include "worker/backend.h"
#ifdef TESSEL_HAVE_CUDA
#include "worker/cuda/nvrtc_compiler.h"
#endif

namespace tessel::testing {

using namespace schedules;  // NOLINT: test utility

namespace {

// Calls `check` on the samples VerifySamples and CompileSamples take; returns how many.
int ForEachSample(const std::string& spec, const Target& target, uint64_t seeds, int most,
                  const SampleFilter& keep,
                  const std::function<void(uint64_t seed, const Candidate&)>& check) {
  absl::StatusOr<Workload> w = ParseWorkloadText(spec);
  absl::StatusOr<SpaceGenerator> g =
      w.ok() ? SpaceGenerator::Create(*w, target) : absl::StatusOr<SpaceGenerator>(w.status());
  if (!g.ok()) {
    ADD_FAILURE() << spec << ": " << g.status();
    return 0;
  }
  int taken = 0;
  for (uint64_t seed = 0; seed < seeds && taken < most; ++seed) {
    absl::StatusOr<Candidate> c = g->Sample(seed);
    if (!c.ok() || (keep && !keep(*c))) continue;
    ++taken;
    check(seed, *c);
  }
  return taken;
}

}  // namespace

int VerifySamples(const std::string& spec, const Target& target, uint64_t seeds, int most,
                  const SampleFilter& keep, const worker::VerifyOptions& options) {
  absl::StatusOr<Workload> w = ParseWorkloadText(spec);
  absl::StatusOr<GeneratedSource> ref =
      w.ok() ? GenerateReference(*w, target) : absl::StatusOr<GeneratedSource>(w.status());
  if (!ref.ok()) {
    ADD_FAILURE() << spec << ": " << ref.status();
    return 0;
  }
  return ForEachSample(spec, target, seeds, most, keep, [&](uint64_t seed, const Candidate& c) {
    absl::Status v = worker::RunAndVerify(c.source, *ref, seed, options);
    EXPECT_TRUE(v.ok()) << spec << ", seed " << seed << ": " << v << "\n"
                        << c.trace->ToJsonString() << "\n"
                        << c.source.code;
  });
}

int CompileSamples(const std::string& spec, const std::string& arch, uint64_t seeds, int most,
                   const SampleFilter& keep) {
#ifndef TESSEL_HAVE_CUDA
  return 0;
#else
  return ForEachSample(spec, CudaTarget(arch), seeds, most, keep,
                       [&](uint64_t seed, const Candidate& c) {
                         worker::NvrtcOptions o;
                         o.arch = arch;
                         auto bin = worker::CompileCuda(c.source, o);
                         EXPECT_TRUE(bin.ok()) << spec << ", " << arch << " seed " << seed << ": "
                                               << bin.status() << "\n"
                                               << c.source.code;
                       });
#endif
}

std::vector<std::string> SmallFamilySpecs() {
  return {
      "matmul(M=37, N=45, K=29)",
      "matmul(M=64, N=64, K=64)",
      "matmul(M=33, N=17, K=50, batch=3, transpose_a=true)",
      "matmul(M=20, N=36, K=24, transpose_b=true, dtype=f16)",
      "matmul(M=19, N=40, K=16, dtype=bf16)",
      "matmul_bias_gelu(M=50, N=70, K=33)",
      "conv2d(N=2, C=3, H=11, W=13, K=5, R=3, S=3, padding=1)",
      "conv2d(N=1, C=4, H=12, W=12, K=6, R=3, S=2, stride=2, dilation=2, layout=nhwc)",
      "conv2d_bias_relu(N=1, C=3, H=9, W=10, K=4, R=3, S=3, padding=2)",
      "softmax(rows=7, cols=300)",
      "softmax(rows=5, cols=130, dtype=f16)",
      "layernorm(rows=5, cols=777)",
      "layernorm(rows=3, cols=20000)",
      "reduce(rows=9, cols=1001, op=sum)",
      "reduce(rows=4, cols=333, op=max)",
      "reduce(rows=6, cols=250, op=mean, dtype=bf16)",
  };
}

std::vector<std::string> SpaceFamilySpecs() {
  std::vector<std::string> specs = SmallFamilySpecs();
  specs.push_back("softmax(rows=200, cols=300)");
  specs.push_back("layernorm(rows=150, cols=100)");
  specs.push_back("reduce(rows=300, cols=70, op=mean)");
  return specs;
}

std::vector<std::string> SplitKSpecs() {
  return {
      "matmul(M=8, N=1, K=2048)",
      "matmul(M=20, N=36, K=1152)",
      "matmul(M=24, N=20, K=1031)",  // prime K: chunks of ceil(K / S), the last one guarded
      "matmul(M=6, N=10, K=1536, batch=2, transpose_a=true)",
      "matmul_bias_gelu(M=12, N=20, K=2048)",
      "matmul(M=8, N=16, K=1024, dtype=f16)",
      "conv2d(N=1, C=256, H=5, W=6, K=4, R=3, S=3, padding=1)",
      "conv2d_bias_relu(N=1, C=512, H=4, W=4, K=8, R=3, S=3, padding=1, layout=nhwc)",
  };
}

float FeatureOf(const schedules::Program& program, const schedules::Target& target,
                const std::string& name) {
  const std::vector<std::string>& names = costmodel::FeatureNames();
  const auto at = std::find(names.begin(), names.end(), name);
  EXPECT_NE(at, names.end()) << "no feature " << name;
  if (at == names.end()) return 0;
  return costmodel::ExtractFeatures(program, target)[at - names.begin()];
}

int64_t BlockRounds(const schedules::Candidate& c) {
  return std::llround(std::exp2(FeatureOf(c.program, c.target, "log2_block_rounds"))) - 1;
}

int64_t SplitKFactor(const Trace& trace) {
  const auto& insts = trace.insts;
  for (const Instruction& rf : insts) {
    if (rf.kind != "rfactor" || rf.inputs.empty()) continue;
    for (const Instruction& split : insts) {
      if (split.kind != "split" || split.outputs.empty() || split.outputs[0] != rf.inputs[0] ||
          split.inputs.size() < 2) {
        continue;
      }
      for (const Instruction& c : insts) {
        if (c.kind == "sample_categorical" && !c.outputs.empty() &&
            c.outputs[0] == split.inputs[1] && c.decision.is_number_integer()) {
          return c.attrs["candidates"][c.decision.get<int64_t>()].get<int64_t>();
        }
      }
    }
  }
  return 1;
}

std::vector<std::string> SkinnySpecs() {
  return {
      "matmul(M=2048, N=1, K=4096)",
      "matmul(M=1024, N=1, K=2048, transpose_a=true)",
      "matmul(M=1, N=2048, K=2048, dtype=f16)",
      "matmul(M=1, N=1024, K=4096, transpose_b=true, dtype=f16)",
      "matmul(M=1, N=512, K=1024, batch=3)",
      "matmul_bias_gelu(M=1, N=1024, K=2048, dtype=f16)",
      "matmul_bias_gelu(M=512, N=1, K=2048)",
      "matmul(M=1000, N=3, K=1000)",
      "matmul(M=8, N=1024, K=1024, dtype=f16)",
      "matmul(M=257, N=2, K=1030)",
  };
}

bool IsSkinnySample(const Trace& trace) {
  for (const Instruction& inst : trace.insts) {
    if (inst.kind == "cache_read") return false;
  }
  return true;
}

bool IsBlockColumnsSample(const Trace& trace) {
  if (!IsSkinnySample(trace)) return false;
  for (const Instruction& inst : trace.insts) {
    if (inst.kind == "set_scope" && inst.attrs.value("scope", "") == "shared") return true;
  }
  return false;
}

std::vector<std::string> PaddedTileSpecs() {
  return {
      "matmul(M=131, N=97, K=67)",
      "matmul(M=131, N=96, K=68)",  // padded copies vectorized: 96 and 68 are multiples of 4
      "matmul(M=257, N=61, K=131, transpose_a=true)",
      "matmul(M=67, N=131, K=97, transpose_b=true)",
      "matmul(M=37, N=67, K=71, batch=3)",
      "matmul_bias_gelu(M=131, N=67, K=61)",
      "matmul(M=131, N=67, K=61, dtype=f16)",
      "matmul(M=131, N=96, K=68, dtype=f16)",  // vectorized: uint2 / uint4 zero fills
      "conv2d(N=1, C=67, H=9, W=17, K=37, R=3, S=3, padding=1)",
  };
}

int PaddedLoops(const Trace& trace) {
  int n = 0;
  for (const Instruction& tile : trace.insts) {
    if (tile.kind != "sample_perfect_tile" || tile.inputs.size() < 2) continue;
    for (const Instruction& c : trace.insts) {
      if (c.kind == "sample_categorical" && !c.outputs.empty() && c.outputs[0] == tile.inputs[1] &&
          c.decision.is_number_integer() && c.decision.get<int64_t>() > 0) {
        ++n;
      }
    }
  }
  return n;
}

std::string SpecTestName(const ::testing::TestParamInfo<std::string>& info) {
  std::string name;
  for (char c : info.param) name += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return absl::StrCat(info.index, "_", name.substr(0, 40));
}

namespace {

int64_t Pick(std::mt19937_64& rng, int64_t n) { return static_cast<int64_t>(rng() % n); }

std::vector<std::string> LiveStages(const Schedule& s) {
  std::vector<std::string> out;
  for (const Stage& st : s.stages()) {
    if (!st.inlined()) out.push_back(st.name);
  }
  return out;
}

}  // namespace

absl::StatusOr<Schedule> RandomSchedule(const Workload& w, const Target& t, uint64_t seed,
                                        int steps) {
  auto created = Schedule::Create(w, seed);
  if (!created.ok()) return created.status();
  Schedule s = std::move(*created);
  std::mt19937_64 rng(seed);
  for (int step = 0; step < steps; ++step) {
    std::vector<std::string> names = LiveStages(s);
    auto b = s.GetBlock(names[Pick(rng, static_cast<int64_t>(names.size()))]);
    if (!b.ok()) return b.status();
    auto loops = s.GetLoops(*b);
    if (!loops.ok()) return loops.status();
    if (loops->empty()) continue;
    const LoopRV l = (*loops)[Pick(rng, static_cast<int64_t>(loops->size()))];
    switch (Pick(rng, 11)) {
      case 0:
      case 1: {
        static const int64_t kFactors[] = {2, 3, 4, 5, 8, 16};
        (void)s.Split(l, {-1, kFactors[Pick(rng, 6)]});
        break;
      }
      case 2: {
        const size_t i = Pick(rng, static_cast<int64_t>(loops->size()));
        if (i + 1 < loops->size()) (void)s.Fuse({(*loops)[i], (*loops)[i + 1]});
        break;
      }
      case 3: {
        const LoopRV other = (*loops)[Pick(rng, static_cast<int64_t>(loops->size()))];
        if (other.id != l.id) (void)s.Reorder({other, l});
        break;
      }
      case 4:
        if (s.LoopExtent(l) <= 16) (void)s.Unroll(l);
        break;
      case 5:
        if (s.LoopExtent(loops->back()) <= 16) (void)s.Vectorize(loops->back());
        break;
      case 6:
        if (!t.is_cuda()) (void)s.Parallel((*loops)[0]);
        break;
      case 7:
        (void)s.ComputeInline(*b);
        break;
      case 8: {
        // Cache an input of this stage in local memory at a random loop of it.
        const Stage& st = s.GetStage(*b);
        for (const TensorDef& td : w.tensors) {
          if (!td.is_input) continue;
          auto c = s.CacheRead(td.name, "local", {*b});
          if (!c.ok()) continue;
          auto again = s.GetLoops(*b);
          if (!again.ok() || again->empty()) break;
          // A random loop where the copy can live; the innermost always works.
          const int64_t start = Pick(rng, static_cast<int64_t>(again->size()));
          for (int64_t k = start; k < static_cast<int64_t>(again->size()); ++k) {
            if (s.ComputeAt(*c, (*again)[k]).ok()) break;
          }
          break;
        }
        (void)st;
        break;
      }
      case 9: {
        // Accumulate in a local buffer attached at a random loop of the write-back stage.
        auto c = s.CacheWrite(*b, "local");
        if (!c.ok()) break;
        auto wb = s.GetLoops(*b);
        if (!wb.ok() || wb->empty()) break;
        for (int64_t k = Pick(rng, static_cast<int64_t>(wb->size()));
             k < static_cast<int64_t>(wb->size()); ++k) {
          if (s.ComputeAt(*c, (*wb)[k]).ok()) break;
        }
        break;
      }
      case 10: {
        // Attach a producer at a random loop of its consumer.
        const std::string& name = names[Pick(rng, static_cast<int64_t>(names.size()))];
        auto pb = s.GetBlock(name);
        if (!pb.ok() || pb->id == b->id) break;
        (void)s.ComputeAt(*pb, l);
        break;
      }
    }
  }
  // Make the reduction initialization legal where random reorders moved spatial loops inside.
  for (const std::string& name : LiveStages(s)) {
    auto b = s.GetBlock(name);
    if (!b.ok()) return b.status();
    if (!s.GetStage(*b).reduce) continue;
    auto loops = s.GetLoops(*b);
    if (!loops.ok() || loops->empty()) continue;
    (void)s.DecomposeReduction(*b, (*loops)[0]);
  }
  if (t.is_cuda()) {
    for (const std::string& name : LiveStages(s)) {
      const Stage* st = s.FindStage(name);
      if (st->attach.kind != AttachPoint::Kind::kRoot) continue;
      auto b = s.GetBlock(name);
      if (!b.ok()) return b.status();
      auto loops = s.GetLoops(*b);
      if (!loops.ok() || loops->empty()) continue;
      const Stage& stage = s.GetStage(*b);
      auto is_plain_spatial = [&](LoopRV x) {
        const IterVar& iv = stage.iters[s.LoopIter(x)];
        return !iv.reduce && iv.kind == ForKind::kSerial;
      };
      if (is_plain_spatial((*loops)[0])) (void)s.Bind((*loops)[0], "blockIdx.x");
      if (loops->size() > 1 && is_plain_spatial((*loops)[1]) && s.LoopExtent((*loops)[1]) <= 1024) {
        (void)s.Bind((*loops)[1], "threadIdx.x");
      }
    }
  }
  return s;
}

absl::StatusOr<GeneratedSource> Generate(const Schedule& s, const Target& t) {
  auto p = Lower(s, t);
  if (!p.ok()) return p.status();
  if (auto st = CheckTargetLimits(*p, t); !st.ok()) return st;
  return t.is_cuda() ? GenerateCuda(*p, t) : GenerateHost(*p);
}

absl::StatusOr<GeneratedSource> GenerateReference(const Workload& w, const Target& t) {
  auto p = LowerReference(w, t);
  if (!p.ok()) return p.status();
  return t.is_cuda() ? GenerateCuda(*p, t) : GenerateHost(*p);
}

Workload LoadSpec(const std::string& spec) {
  auto w = schedules::ParseWorkloadSpec(spec);
  EXPECT_TRUE(w.ok()) << w.status();
  return w.ok() ? *w : Workload{};
}

schedules::BlockRV BlockNamed(Schedule* s, const std::string& name) {
  auto b = s->GetBlock(name);
  EXPECT_TRUE(b.ok()) << b.status();
  return b.ok() ? *b : schedules::BlockRV{};
}

void ExpectMatchesReference(const Schedule& s, const Target& t, uint64_t seed) {
  auto ref = GenerateReference(s.workload(), t);
  ASSERT_TRUE(ref.ok()) << ref.status();
  auto cand = Generate(s, t);
  ASSERT_TRUE(cand.ok()) << cand.status() << "\n" << s.trace().ToJsonString();
  absl::Status v = worker::RunAndVerify(*cand, *ref, seed);
  EXPECT_TRUE(v.ok()) << v << "\n" << cand->code;
}

namespace {

// `spec` (a matmul) with B cached in 128-byte swizzled shared memory at C's k steps of 64, the
// steps a 3-stage software pipeline (pipeline_producer `producer` where positive), after
// `arrange` has ordered and bound C's loops (m, n, k). `bulk`: B's copy is a bulk copy; else the
// threads' own, its inner loop on threadIdx.x.
schedules::Schedule PipelinedSharedB(
    const std::string& spec, bool bulk, int64_t producer,
    const std::function<void(schedules::Schedule*, const std::vector<schedules::LoopRV>&)>&
        arrange) {
  auto created = schedules::Schedule::Create(LoadSpec(spec));
  EXPECT_TRUE(created.ok()) << created.status();
  schedules::Schedule sch = *std::move(created);
  schedules::BlockRV c = BlockNamed(&sch, "C");
  auto sh = sch.CacheRead("B", "shared", {c});
  auto l = sch.GetLoops(c);
  EXPECT_TRUE(sh.ok() && l.ok());
  if (!sh.ok() || !l.ok()) return sch;
  arrange(&sch, *l);
  auto k = sch.Split((*l)[2], {-1, 64});
  EXPECT_TRUE(k.ok());
  EXPECT_TRUE(sch.ComputeAt(*sh, (*k)[0]).ok());
  EXPECT_TRUE(sch.Annotate(*sh, schedules::kStorageSwizzle, 128).ok());
  auto sl = sch.GetLoops(*sh);
  EXPECT_TRUE(sl.ok());
  if (bulk) {
    EXPECT_TRUE(sch.Annotate(sl->front(), schedules::kBulkCopy, 1).ok());
  } else {
    EXPECT_TRUE(sch.Bind(sl->back(), "threadIdx.x").ok());
  }
  EXPECT_TRUE(sch.Annotate((*k)[0], schedules::kSoftwarePipeline, 3).ok());
  if (producer > 0) {
    EXPECT_TRUE(sch.Annotate((*k)[0], schedules::kPipelineProducer, producer).ok());
  }
  return sch;
}

}  // namespace

schedules::Schedule PlanePipelineInsideALoop() {
  return PipelinedSharedB("matmul(M=4, N=128, K=256, dtype=f16)", /*bulk=*/true, /*producer=*/2,
                          [](schedules::Schedule* sch, const std::vector<schedules::LoopRV>& l) {
                            EXPECT_TRUE(sch->Bind(l[1], "threadIdx.x").ok());
                            EXPECT_TRUE(sch->Reorder({l[1], l[0], l[2]}).ok());
                          });
}

absl::StatusOr<schedules::Schedule> WgmmaWithRegisterOperand(const schedules::Candidate& c,
                                                             const std::string& operand) {
  using schedules::BlockRV;
  using schedules::LoopRV;
  TESSEL_ASSIGN_OR_RETURN(schedules::Schedule s, schedules::Replay(c.workload, *c.trace));
  // The stage that reads A's shared copy (the accumulator) and its pipelined k loop.
  const schedules::Stage* acc_stage = nullptr;
  for (const schedules::Stage& st : s.stages()) {
    if (st.buffer && st.buffer->scope == schedules::MemScope::kFragment) acc_stage = &st;
  }
  if (!acc_stage) return absl::NotFoundError("no fragment stage in the sample");
  const std::string acc_name = acc_stage->name;
  TESSEL_ASSIGN_OR_RETURN(BlockRV acc, s.GetBlock(acc_name));
  TESSEL_ASSIGN_OR_RETURN(BlockRV fr, s.CacheRead(operand + "_shared", "fragment", {acc}));
  TESSEL_ASSIGN_OR_RETURN(std::vector<LoopRV> al, s.GetLoops(acc));
  std::optional<LoopRV> k0;
  for (LoopRV l : al) {
    const schedules::IterVar& iv = s.LoopStage(l).iters[s.LoopIter(l)];
    if (!k0 && schedules::SoftwarePipelineStages(iv.annotations) >= 2) k0 = l;
  }
  if (!k0) return absl::NotFoundError("no software_pipeline loop in " + acc_name);
  TESSEL_RETURN_IF_ERROR(s.Annotate(fr, schedules::kPadTile, 1));
  TESSEL_RETURN_IF_ERROR(s.ComputeAt(fr, *k0));
  // The fragment's rows (16 a tile) and k (16 a tile), the tiles outermost, ldmatrix's loop the
  // tile's rows.
  TESSEL_ASSIGN_OR_RETURN(std::vector<LoopRV> fl, s.GetLoops(fr));
  if (fl.size() < 2) return absl::InternalError("the fragment has fewer than two loops");
  TESSEL_ASSIGN_OR_RETURN(auto rows, s.Split(fl[fl.size() - 2], {-1, 16}));
  TESSEL_ASSIGN_OR_RETURN(auto ks, s.Split(fl.back(), {-1, 16}));
  TESSEL_RETURN_IF_ERROR(s.Reorder({rows[0], ks[0], rows[1], ks[1]}));
  TESSEL_RETURN_IF_ERROR(s.Unroll(rows[0]));
  TESSEL_RETURN_IF_ERROR(s.Unroll(ks[0]));
  TESSEL_RETURN_IF_ERROR(s.Tensorize(rows[1], "ldmatrix"));
  return s;
}

schedules::Schedule TurnsPipelineInsideALoop(TurnsFetch fetch) {
  return PipelinedSharedB(
      "matmul(M=4, N=256, K=256, dtype=f16)", fetch != TurnsFetch::kThreads, /*producer=*/0,
      [fetch](schedules::Schedule* sch, const std::vector<schedules::LoopRV>& l) {
        auto halves = sch->Split(l[1], {2, 128});
        EXPECT_TRUE(halves.ok());
        if (!halves.ok()) return;
        const schedules::LoopRV m = l[0], half = (*halves)[0], column = (*halves)[1];
        if (fetch == TurnsFetch::kLoopBetween) {
          EXPECT_TRUE(sch->Reorder({half, column, m}).ok());
        }
        EXPECT_TRUE(sch->Bind(half, "threadIdx.z").ok());
        EXPECT_TRUE(sch->Annotate(half, schedules::kPipelineTurns, 1).ok());
        EXPECT_TRUE(sch->Bind(column, "threadIdx.x").ok());
      });
}

}  // namespace tessel::testing
