// fuse_reductions: reductions over one domain as one tuple reduction with a combiner (online
// softmax, Welford, independent reductions side by side). Results on the host against the
// reference lowering (root, attached, rfactored, one pass and two passes), the lowered CUDA
// (one tuple all-reduce), the primitive's errors, and trace replay (CUDA results: tests/gpu).

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "schedules/lower/lower.h"
#include "schedules/schedule/schedule.h"
#include "schedules/schedule/trace.h"
#include "schedules/workload/parser.h"
#include "tests/e2e/e2e_util.h"
#include "tests/schedules/test_workloads.h"

namespace tessel::testing {
namespace {

using schedules::BlockRV;
using schedules::HostTarget;
using schedules::Schedule;
using ::testing::HasSubstr;

// The injective stages between the reductions inlined (softmax's exps, layernorm's mean and var).
Schedule Inlined(const std::string& spec) {
  auto s = Schedule::Create(LoadSpec(spec));
  EXPECT_TRUE(s.ok()) << s.status();
  for (const char* name : {"exps", "mean", "var"}) {
    if (s->FindStage(name)) {
      EXPECT_TRUE(s->ComputeInline(BlockNamed(&*s, name)).ok());
    }
  }
  return std::move(*s);
}

Schedule Fused(const std::string& spec, const std::string& a, const std::string& b) {
  Schedule s = Inlined(spec);
  absl::Status st = s.FuseReductions({BlockNamed(&s, a), BlockNamed(&s, b)});
  EXPECT_TRUE(st.ok()) << st;
  return s;
}

TEST(FuseReductions, SoftmaxIsAnOnlineSoftmaxTuple) {
  Schedule s = Fused("softmax(rows=5, cols=33)", "row_max", "row_sum");
  const schedules::Stage* lead = s.FindStage("row_max");
  ASSERT_NE(lead->combiner, nullptr);
  EXPECT_EQ(lead->combiner->name, "online_softmax");
  EXPECT_EQ(s.FindStage("row_sum")->computed_by, "row_max");
  auto p = schedules::Lower(s, HostTarget());
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_EQ(p->kernels.size(), 2u);  // the tuple's nest, then Y
  EXPECT_THAT(p->kernels[0].name, HasSubstr("row_max"));
  // One pass over X writes both statistics.
  const std::string ir = schedules::ToString(*p);
  EXPECT_THAT(ir, HasSubstr("row_max[i] = row_max_acc_m[0]\n    row_sum[i] = row_max_acc_s[0]"));
}

TEST(FuseReductions, HostOnlineSoftmaxMatchesReference) {
  ExpectMatchesReference(Fused("softmax(rows=7, cols=1001)", "row_max", "row_sum"), HostTarget(),
                         3);
  ExpectMatchesReference(Fused("softmax(rows=3, cols=257, dtype=f16)", "row_sum", "row_max"),
                         HostTarget(), 4);
}

TEST(FuseReductions, HostWelfordMatchesReference) {
  Schedule s = Fused("layernorm(rows=3, cols=1000)", "x_sum", "sq_sum");
  EXPECT_EQ(s.FindStage("x_sum")->combiner->name, "welford");
  ExpectMatchesReference(s, HostTarget(), 1);
}

TEST(FuseReductions, HostTwoPassesMatchReference) {
  for (const char* spec : {"softmax(rows=4, cols=515)", "layernorm(rows=4, cols=515)"}) {
    const bool softmax = std::string(spec).rfind("softmax", 0) == 0;
    Schedule s = Fused(spec, softmax ? "row_max" : "x_sum", softmax ? "row_sum" : "sq_sum");
    const BlockRV lead = BlockNamed(&s, softmax ? "row_max" : "x_sum");
    ASSERT_TRUE(s.Annotate(lead, "two_pass", 1).ok());
    auto p = schedules::Lower(s, HostTarget());
    ASSERT_TRUE(p.ok()) << p.status();
    // The batch's steps appear as their own accumulators.
    EXPECT_THAT(schedules::ToString(*p), HasSubstr(softmax ? "_m[0]" : "_avg[0]")) << spec;
    ExpectMatchesReference(s, HostTarget(), 6);
  }
}

TEST(FuseReductions, HostAttachedAndSplitMatchesReference) {
  // The tuple as local scalars inside Y's row loop, its reduction split; the other output
  // follows the first's attachment.
  Schedule s = Inlined("softmax(rows=6, cols=515)");
  for (const char* n : {"row_max", "row_sum"})
    ASSERT_TRUE(s.SetScope(BlockNamed(&s, n), "local").ok());
  ASSERT_TRUE(s.FuseReductions({BlockNamed(&s, "row_max"), BlockNamed(&s, "row_sum")}).ok());
  auto yl = s.GetLoops(BlockNamed(&s, "Y"));
  ASSERT_TRUE(yl.ok());
  ASSERT_TRUE(s.ComputeAt(BlockNamed(&s, "row_max"), (*yl)[0]).ok());
  EXPECT_EQ(s.FindStage("row_sum")->attach.stage, "Y");
  auto sl = s.GetLoops(BlockNamed(&s, "row_max"));
  ASSERT_TRUE(sl.ok());
  ASSERT_TRUE(s.Split(sl->back(), {-1, 8}).ok());
  ExpectMatchesReference(s, HostTarget(), 5);
}

// The stage's reduction split into chunks of `chunk` and rfactored: the partials' stage.
BlockRV RFactorChunks(Schedule* s, const std::string& stage, int64_t chunk) {
  auto loops = s->GetLoops(BlockNamed(s, stage));
  EXPECT_TRUE(loops.ok());
  auto ks = s->Split(loops->back(), {-1, chunk});
  EXPECT_TRUE(ks.ok());
  auto rf = s->RFactor((*ks)[0]);
  EXPECT_TRUE(rf.ok()) << rf.status();
  return *rf;
}

TEST(FuseReductions, RFactorGivesTuplePartials) {
  // 1000 = 7 * 128 + 104: the last chunk's points beyond the row contribute the identity.
  Schedule s = Fused("layernorm(rows=4, cols=1000)", "x_sum", "sq_sum");
  const schedules::Stage& partial = s.GetStage(RFactorChunks(&s, "x_sum", 128));
  ASSERT_EQ(partial.outputs.size(), 3u);  // count, mean, m2 a chunk
  EXPECT_EQ(s.FindStage(partial.outputs[2].stage)->computed_by, partial.name);
  ExpectMatchesReference(s, HostTarget(), 2);
}

TEST(FuseReductions, ChunksThatDivideKeepTheirCountAsAConstant) {
  // 1024 = 8 * 128: every chunk counts 128 elements, so the partials hold only the mean and m2
  // and the combination reads the count as a constant; with two passes over all the partials the
  // row's count is the constant 1024.
  Schedule s = Fused("layernorm(rows=4, cols=1024)", "x_sum", "sq_sum");
  const schedules::Stage& partial = s.GetStage(RFactorChunks(&s, "x_sum", 128));
  ASSERT_EQ(partial.outputs.size(), 2u);  // mean, m2 a chunk
  EXPECT_EQ(schedules::ToString(partial.outputs[0].value), "mean");
  EXPECT_THAT(schedules::ToString(s.FindStage("x_sum")->body), HasSubstr("tuple(128.0, "));
  ExpectMatchesReference(s, HostTarget(), 10);
  ASSERT_TRUE(s.Annotate(BlockNamed(&s, "x_sum"), "two_pass", 2).ok());
  auto p = schedules::Lower(s, HostTarget());
  ASSERT_TRUE(p.ok()) << p.status();
  ExpectMatchesReference(s, HostTarget(), 11);
}

TEST(FuseReductions, TwoPassesOverPaddingOnlyGiveTheIdentity) {
  // 4 chunks of 100 over 300 columns: the last chunk is padding only, (-inf, 0) for every element;
  // its two-pass partial must be the identity, not NaN (exp(-inf - -inf)).
  Schedule s = Fused("softmax(rows=3, cols=300)", "row_max", "row_sum");
  ASSERT_TRUE(s.Annotate(BlockNamed(&s, "row_max"), "two_pass", 1).ok());
  auto loops = s.GetLoops(BlockNamed(&s, "row_max"));
  ASSERT_TRUE(loops.ok());
  auto ks = s.Split(loops->back(), {4, 100});
  ASSERT_TRUE(ks.ok()) << ks.status();
  auto rf = s.RFactor((*ks)[0]);
  ASSERT_TRUE(rf.ok()) << rf.status();
  ExpectMatchesReference(s, HostTarget(), 9);
}

TEST(FuseReductions, IndependentReductionsSideBySide) {
  // A row's maximum and sum read the same row once.
  const char* def =
      "X = input(f32, [6, 100])\n"
      "m[i] = max(j) X[i, j]\n"
      "s[i] = sum(j) X[i, j] * X[i, j]\n"
      "Y[i] = m[i] + s[i]\n"
      "output Y\n";
  auto w = schedules::ParseWorkload(def);
  ASSERT_TRUE(w.ok()) << w.status();
  auto s = Schedule::Create(*w);
  ASSERT_TRUE(s.ok());
  ASSERT_TRUE(s->FuseReductions({BlockNamed(&*s, "s"), BlockNamed(&*s, "m")}).ok());
  EXPECT_EQ(s->FindStage("s")->combiner->name, "tuple(sum, max)");
  ExpectMatchesReference(*s, HostTarget(), 7);
}

TEST(FuseReductions, CudaAcrossThreadsIsOneTupleAllReduce) {
  Schedule s = Inlined("softmax(rows=64, cols=4096)");
  for (const char* n : {"row_max", "row_sum"})
    ASSERT_TRUE(s.SetScope(BlockNamed(&s, n), "local").ok());
  ASSERT_TRUE(s.FuseReductions({BlockNamed(&s, "row_max"), BlockNamed(&s, "row_sum")}).ok());
  auto yl = s.GetLoops(BlockNamed(&s, "Y"));
  ASSERT_TRUE(yl.ok());
  ASSERT_TRUE(s.Bind((*yl)[0], "blockIdx.x").ok());
  auto ys = s.Split((*yl)[1], {-1, 256});
  ASSERT_TRUE(ys.ok());
  ASSERT_TRUE(s.Bind((*ys)[1], "threadIdx.x").ok());
  ASSERT_TRUE(s.ComputeAt(BlockNamed(&s, "row_max"), (*yl)[0]).ok());
  auto rl = s.GetLoops(BlockNamed(&s, "row_max"));
  ASSERT_TRUE(rl.ok());
  auto rs = s.Split(rl->back(), {-1, 256});
  ASSERT_TRUE(rs.ok());
  ASSERT_TRUE(s.Bind((*rs)[1], "threadIdx.x").ok());
  auto p = schedules::Lower(s, schedules::CudaTarget("sm_90"));
  ASSERT_TRUE(p.ok()) << p.status();
  // As lowering has it before the all-reduces are expanded (lower_all_reduce).
  const std::string ir = schedules::test_workloads::IrBeforePass(s, schedules::CudaTarget("sm_90"),
                                                                 "lower_all_reduce");
  size_t count = 0;
  for (size_t at = ir.find("allreduce_"); at != std::string::npos;
       at = ir.find("allreduce_", at + 1)) {
    ++count;
  }
  EXPECT_EQ(count, 1u) << ir;
  EXPECT_THAT(ir, HasSubstr("= allreduce_online_softmax("));
  // The combiner is spelled out where it is used.
  EXPECT_THAT(ir, HasSubstr("combiner online_softmax((m, s), (m_2, s_2)) identity (-inf, 0.0)"));
}

TEST(FuseReductions, TraceReplaysToTheSameProgram) {
  Schedule s = Fused("layernorm(rows=3, cols=256)", "x_sum", "sq_sum");
  auto a = schedules::Lower(s, HostTarget());
  ASSERT_TRUE(a.ok());
  auto r = schedules::Replay(s.workload(), s.trace());
  ASSERT_TRUE(r.ok()) << r.status();
  auto b = schedules::Lower(*r, HostTarget());
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(schedules::ToString(*a), schedules::ToString(*b));
}

// A trace of the schedule `s` with `kind`(the block `stage`) appended, as an older Tessel wrote it.
schedules::Trace WithOldInstruction(Schedule* s, const std::string& kind,
                                    const std::vector<std::string>& stages) {
  std::vector<std::string> inputs;
  for (const std::string& st : stages) {
    BlockNamed(s, st);
    inputs.push_back(s->trace().insts.back().outputs[0]);
  }
  schedules::Trace t = s->trace();
  t.insts.push_back(schedules::Instruction{kind, inputs, nlohmann::json::object(), {}, nullptr});
  return t;
}

TEST(FuseReductions, OlderTracesReplayOrSayWhy) {
  // fuse_online_max(sum) replays as fuse_reductions(sum, max).
  Schedule s = Inlined("softmax(rows=5, cols=33)");
  auto r = schedules::Replay(s.workload(), WithOldInstruction(&s, "fuse_online_max", {"row_sum"}));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->FindStage("row_max")->computed_by, "row_sum");
  ExpectMatchesReference(*r, HostTarget(), 8);
  // The centred partials do not replay; the error says what replaced them.
  Schedule l = Inlined("layernorm(rows=3, cols=256)");
  auto c = schedules::Replay(l.workload(),
                             WithOldInstruction(&l, "center_partials", {"sq_sum", "x_sum"}));
  EXPECT_FALSE(c.ok());
  EXPECT_THAT(c.status().message(), HasSubstr("replaced by fuse_reductions"));
  EXPECT_THAT(c.status().message(), HasSubstr("tune the workload again"));
}

void ExpectFuseError(const std::string& spec, const std::vector<std::string>& names,
                     const std::string& message) {
  Schedule s = Inlined(spec);
  std::vector<BlockRV> blocks;
  for (const std::string& n : names) blocks.push_back(BlockNamed(&s, n));
  absl::Status st = s.FuseReductions(blocks);
  EXPECT_FALSE(st.ok());
  EXPECT_THAT(st.message(), HasSubstr(message)) << st;
}

TEST(FuseReductionsErrors, EachNamesTheProblem) {
  ExpectFuseError("softmax(rows=4, cols=64)", {"row_max"}, "needs at least two reduction stages");
  ExpectFuseError("softmax(rows=4, cols=64)", {"row_max", "row_max"}, "is given twice");
  ExpectFuseError("softmax(rows=4, cols=64)", {"row_max", "Y"}, "stage Y is not a plain reduction");
  ExpectFuseError("matmul(M=8, N=8, K=8)", {"C", "C"}, "is given twice");
  // softmax's sum reads exps (not inlined): the reductions read each other through it.
  auto raw = Schedule::Create(LoadSpec("softmax(rows=4, cols=64)"));
  ASSERT_TRUE(raw.ok());
  absl::Status st =
      raw->FuseReductions({BlockNamed(&*raw, "row_max"), BlockNamed(&*raw, "row_sum")});
  EXPECT_THAT(st.message(), HasSubstr("read each other and are neither"));
  EXPECT_THAT(st.message(), HasSubstr("inline what lies between them first"));
}

TEST(FuseReductionsErrors, FusedStagesAreScheduledThroughTheFirst) {
  Schedule s = Fused("softmax(rows=4, cols=64)", "row_max", "row_sum");
  auto loops = s.GetLoops(BlockNamed(&s, "row_sum"));
  EXPECT_FALSE(loops.ok());
  EXPECT_THAT(loops.status().message(),
              HasSubstr("stage row_sum is computed by stage row_max (fuse_reductions); schedule "
                        "that stage instead"));
  absl::Status again = s.FuseReductions({BlockNamed(&s, "row_max"), BlockNamed(&s, "Y")});
  EXPECT_THAT(again.message(), HasSubstr("it is a tuple reduction already"));
  auto cw = s.CacheWrite(BlockNamed(&s, "row_max"), "local");
  EXPECT_THAT(cw.status().message(), HasSubstr("is a tuple reduction (fuse_reductions)"));
}

TEST(FuseReductionsErrors, LaterMembersMustBeUnscheduled) {
  Schedule s = Inlined("softmax(rows=4, cols=64)");
  auto loops = s.GetLoops(BlockNamed(&s, "row_sum"));
  ASSERT_TRUE(loops.ok());
  ASSERT_TRUE(s.Split(loops->back(), {-1, 8}).ok());
  absl::Status st = s.FuseReductions({BlockNamed(&s, "row_max"), BlockNamed(&s, "row_sum")});
  EXPECT_THAT(st.message(), HasSubstr("is scheduled already; fuse it before scheduling it"));
}

}  // namespace
}  // namespace tessel::testing
