// A row held in registers: split_buffer_axis (a cache's axis stored as several axes), the
// thread-axis compaction of local buffers in lowering (compact_thread_axes.h), and the vectorized
// fill of a register cache (16-byte loads, lane-by-lane stores). What each does, each error of
// the primitive, trace replay, and results on the host against the reference lowering (CUDA
// results: tests/gpu/e2e_gpu_test.cc, RegisterCachedSoftmaxMatchesReference).

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "schedules/ir/substitute.h"
#include "schedules/lower/compact_thread_axes.h"
#include "schedules/lower/lower.h"
#include "schedules/schedule/schedule.h"
#include "schedules/templates/templates.h"
#include "schedules/workload/builtins.h"
#include "tests/e2e/e2e_util.h"
#include "tests/schedules/test_workloads.h"
#include "worker/backend.h"

namespace tessel::testing {
namespace {

using schedules::BlockRV;
using schedules::BufferPtr;
using schedules::DType;
using schedules::Expr;
using schedules::ForKind;
using schedules::LoopRV;
using schedules::MemScope;
using schedules::Schedule;
using schedules::Stmt;
using schedules::ThreadTag;
using schedules::Workload;
using ::testing::HasSubstr;

std::vector<LoopRV> Loops(Schedule* s, BlockRV b) {
  auto l = s->GetLoops(b);
  EXPECT_TRUE(l.ok()) << l.status();
  return *l;
}

// Softmax with X cached at the row loop of Y, the cache's column axis split {J, 8, 4}.
Schedule RowCachedSoftmax(const std::string& spec, std::vector<int64_t> factors) {
  auto s = Schedule::Create(LoadSpec(spec));
  EXPECT_TRUE(s.ok()) << s.status();
  EXPECT_TRUE(s->ComputeInline(BlockNamed(&*s, "exps")).ok());
  std::vector<LoopRV> yl = Loops(&*s, BlockNamed(&*s, "Y"));
  for (const char* name : {"row_sum", "row_max"}) {
    absl::Status st = s->ComputeAt(BlockNamed(&*s, name), yl[0]);
    EXPECT_TRUE(st.ok()) << st;
  }
  auto xl = s->CacheRead(
      "X", "local", {BlockNamed(&*s, "row_max"), BlockNamed(&*s, "row_sum"), BlockNamed(&*s, "Y")});
  EXPECT_TRUE(xl.ok()) << xl.status();
  absl::Status st =
      s->SplitBufferAxis(*xl, 1, std::vector<schedules::Factor>(factors.begin(), factors.end()));
  EXPECT_TRUE(st.ok()) << st;
  st = s->ComputeAt(*xl, yl[0]);
  EXPECT_TRUE(st.ok()) << st;
  return std::move(*s);
}

// ---------------------------------------------------------------------------------------------
// split_buffer_axis

TEST(SplitBufferAxis, SplitsTheBufferAndRewritesEveryReader) {
  Schedule s = RowCachedSoftmax("softmax(rows=3, cols=64)", {-1, 8, 4});
  const schedules::Stage* c = s.FindStage("X_local");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->buffer->shape, (std::vector<int64_t>{3, 2, 8, 4}));
  ASSERT_EQ(c->axes.size(), 4u);
  // The copy reads X at the recombined column.
  EXPECT_EQ(schedules::ToString(c->body), "X[ax0, ax1_0 * 32 + ax1_1 * 4 + ax1_2]");
  // The readers index the cache by quotient and remainder of their column.
  const std::string y = schedules::ToString(s.FindStage("Y")->body);
  EXPECT_THAT(y, HasSubstr("X_local[i, j / 32, j / 4 % 8, j % 4]")) << y;
  const auto& inst = s.trace().insts;
  auto it = std::find_if(inst.begin(), inst.end(),
                         [](const auto& i) { return i.kind == "split_buffer_axis"; });
  ASSERT_NE(it, inst.end());
  // Recorded as given, like split's factors: -1 stays inferred.
  EXPECT_EQ(it->attrs, nlohmann::json::parse(R"({"axis": 1, "factors": [-1, 8, 4]})"));
}

TEST(SplitBufferAxis, ReplayGivesTheSameProgram) {
  Schedule s = RowCachedSoftmax("softmax(rows=3, cols=64)", {2, -1, 4});
  auto json = s.trace().ToJsonString();
  auto trace = schedules::Trace::FromJson(nlohmann::json::parse(json));
  ASSERT_TRUE(trace.ok()) << trace.status();
  auto again = schedules::Replay(s.workload(), *trace);
  ASSERT_TRUE(again.ok()) << again.status();
  auto a = schedules::Lower(s, schedules::HostTarget());
  auto b = schedules::Lower(*again, schedules::HostTarget());
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(schedules::ToString(*a), schedules::ToString(*b));
}

TEST(SplitBufferAxis, SampledFactorsReplayWithTheirDecisions) {
  // A sampled factor is recorded as a null literal and an input, so that a replay with another
  // decision splits the buffer by the new value (the design space samples register layouts).
  auto s = Schedule::Create(LoadSpec("softmax(rows=3, cols=64)"), /*seed=*/7);
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_TRUE(s->ComputeInline(BlockNamed(&*s, "exps")).ok());
  auto xl = s->CacheRead("X", "local", {BlockNamed(&*s, "Y")});
  ASSERT_TRUE(xl.ok()) << xl.status();
  auto v = s->SampleCategorical({2, 4}, {0.5, 0.5}, /*decision=*/1);  // 4
  ASSERT_TRUE(v.ok()) << v.status();
  absl::Status st = s->SplitBufferAxis(*xl, 1, {-1, *v});
  ASSERT_TRUE(st.ok()) << st;
  EXPECT_EQ(s->FindStage("X_local")->buffer->shape, (std::vector<int64_t>{3, 16, 4}));
  nlohmann::json j = s->trace().ToJson();
  nlohmann::json& insts = j["insts"];
  for (nlohmann::json& inst : insts) {
    if (inst["kind"] == "split_buffer_axis") {
      EXPECT_EQ(inst["attrs"]["factors"], nlohmann::json::parse("[-1, null]"));
    }
    if (inst["kind"] == "sample_categorical") inst["decision"] = 0;  // 2
  }
  auto trace = schedules::Trace::FromJson(j);
  ASSERT_TRUE(trace.ok()) << trace.status();
  auto again = schedules::Replay(s->workload(), *trace);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->FindStage("X_local")->buffer->shape, (std::vector<int64_t>{3, 32, 2}));
}

TEST(SplitBufferAxis, HostResultsMatchTheReference) {
  // Dividing and (for the readers' loops) non-dividing shapes; the cache covers one row.
  ExpectMatchesReference(RowCachedSoftmax("softmax(rows=3, cols=64)", {-1, 8, 4}),
                         schedules::HostTarget(), 1);
  Schedule odd = RowCachedSoftmax("softmax(rows=5, cols=96)", {3, 4, 8});
  std::vector<LoopRV> yl = Loops(&odd, BlockNamed(&odd, "Y"));
  ASSERT_TRUE(odd.Split(yl[1], {-1, 7}).ok());  // 96 = 13 x 7 with a guarded tail
  ExpectMatchesReference(odd, schedules::HostTarget(), 2);
}

TEST(SplitBufferAxis, Errors) {
  auto fresh = [] {
    auto s = Schedule::Create(LoadSpec("softmax(rows=3, cols=64)"));
    EXPECT_TRUE(s.ok());
    return std::move(*s);
  };
  struct Case {
    std::string stage;
    int axis;
    std::vector<int64_t> factors;
    absl::StatusCode code;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"exps",
       2,
       {2, 32},
       absl::StatusCode::kInvalidArgument,
       "split_buffer_axis: axis 2 of stage exps (rank 2) must be in [0, 2)"},
      {"exps",
       1,
       {64},
       absl::StatusCode::kInvalidArgument,
       "split_buffer_axis: needs at least two factors to split axis 1 of stage exps, got 1"},
      {"exps",
       1,
       {-1, -1},
       absl::StatusCode::kInvalidArgument,
       "split_buffer_axis: factors [-1, -1] must be positive; at most one may be -1 (inferred)"},
      {"exps",
       1,
       {0, 64},
       absl::StatusCode::kInvalidArgument,
       "split_buffer_axis: factors [0, 64] must be positive"},
      {"exps",
       1,
       {3, 16},
       absl::StatusCode::kInvalidArgument,
       "split_buffer_axis: factors [3, 16] do not multiply to the extent 64 of axis 1 of stage "
       "exps; give factors whose product is 64"},
      {"exps",
       1,
       {-1, 6},
       absl::StatusCode::kInvalidArgument,
       "factors [-1, 6] do not multiply to the extent 64"},
      {"Y",
       1,
       {8, 8},
       absl::StatusCode::kFailedPrecondition,
       "split_buffer_axis: stage Y is an output; its layout is the workload's"},
  };
  for (const Case& c : cases) {
    Schedule s = fresh();
    absl::Status st =
        s.SplitBufferAxis(BlockNamed(&s, c.stage), c.axis, {c.factors.begin(), c.factors.end()});
    EXPECT_EQ(st.code(), c.code) << st;
    EXPECT_THAT(std::string(st.message()), HasSubstr(c.message));
  }
  {  // Transformed loops.
    Schedule s = fresh();
    BlockRV e = BlockNamed(&s, "exps");
    ASSERT_TRUE(s.Split(Loops(&s, e)[1], {-1, 8}).ok());
    const size_t n = s.trace().insts.size();
    absl::Status st = s.SplitBufferAxis(e, 1, {8, 8});
    EXPECT_THAT(std::string(st.message()),
                HasSubstr("split_buffer_axis: stage exps has transformed or attached loops; "
                          "split_buffer_axis must come before its loops are transformed and "
                          "before compute_at"));
    EXPECT_EQ(s.trace().insts.size(), n);  // nothing recorded
    EXPECT_EQ(s.FindStage("exps")->buffer->shape, (std::vector<int64_t>{3, 64}));
  }
  {  // Attached.
    Schedule s = fresh();
    ASSERT_TRUE(s.ComputeAt(BlockNamed(&s, "row_sum"), Loops(&s, BlockNamed(&s, "Y"))[0]).ok());
    EXPECT_THAT(std::string(s.SplitBufferAxis(BlockNamed(&s, "row_sum"), 0, {1, 3}).message()),
                HasSubstr("stage row_sum has transformed or attached loops"));
  }
  {  // Padded.
    auto s2 = Schedule::Create(LoadSpec("softmax(rows=3, cols=64)"));
    ASSERT_TRUE(s2.ok());
    auto c = s2->CacheRead("X", "shared", {BlockNamed(&*s2, "row_max")});
    ASSERT_TRUE(c.ok());
    ASSERT_TRUE(s2->StorageAlign(*c, 0, 32, 1).ok());
    EXPECT_THAT(std::string(s2->SplitBufferAxis(*c, 1, {8, 8}).message()),
                HasSubstr("stage X_shared is padded with storage_align; split its axis before "
                          "storage_align"));
  }
}

TEST(SplitBufferAxis, ReplayRejectsMalformedFactors) {
  Schedule s = RowCachedSoftmax("softmax(rows=3, cols=64)", {-1, 8, 4});
  nlohmann::json j = s.trace().ToJson();
  for (auto& inst : j["insts"]) {
    if (inst["kind"] == "split_buffer_axis") inst["attrs"]["factors"] = "8x8";
  }
  auto trace = schedules::Trace::FromJson(j);
  ASSERT_TRUE(trace.ok()) << trace.status();
  auto r = schedules::Replay(s.workload(), *trace);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()),
              HasSubstr("(split_buffer_axis): attribute \"factors\" must be an array"));
}

// ---------------------------------------------------------------------------------------------
// Thread-axis compaction

// alloc local L[4, 2]; for t in threadIdx.x: L[t, k] = X[t * 2 + k]; for u in threadIdx.x:
// Y[u * 2 + k] = L[<second_index>, k] (k a serial loop of 2).
Stmt CompactionFixture(bool reader_uses_thread) {
  const BufferPtr x = schedules::MakeBuffer("X", DType::kFloat32, {8});
  const BufferPtr y = schedules::MakeBuffer("Y", DType::kFloat32, {8});
  const BufferPtr l = schedules::MakeBuffer("L", DType::kFloat32, {4, 2}, MemScope::kLocal);
  auto t = schedules::MakeVar("t"), u = schedules::MakeVar("u");
  auto k1 = schedules::MakeVar("k1"), k2 = schedules::MakeVar("k2");
  auto fill = schedules::MakeFor(
      k1, schedules::MakeInt(0), schedules::MakeInt(2), ForKind::kSerial, ThreadTag::kNone,
      schedules::MakeStore(l, {Expr(t), Expr(k1)}, schedules::MakeLoad(x, {t * 2 + k1})));
  const Expr row = reader_uses_thread ? Expr(u) : schedules::MakeInt(0);
  auto use = schedules::MakeFor(
      k2, schedules::MakeInt(0), schedules::MakeInt(2), ForKind::kSerial, ThreadTag::kNone,
      schedules::MakeStore(y, {u * 2 + k2}, schedules::MakeLoad(l, {row, Expr(k2)})));
  auto bind = [](schedules::VarPtr v, Stmt body) {
    return schedules::MakeFor(v, schedules::MakeInt(0), schedules::MakeInt(4),
                              ForKind::kThreadBinding, ThreadTag::kThreadX, std::move(body));
  };
  return schedules::MakeAllocate(l, schedules::MakeSeq({bind(t, fill), bind(u, use)}));
}

TEST(CompactThreadAxes, DropsAnAxisEveryAccessIndexesWithTheThreadIndex) {
  Stmt out = schedules::CompactThreadAxes(CompactionFixture(true));
  const auto* a = schedules::test_workloads::FindAllocate(out, "L");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->buffer->shape, (std::vector<int64_t>{2}));
  const std::string ir = schedules::ToString(out);
  EXPECT_THAT(ir, HasSubstr("L[k1] = X[t * 2 + k1]")) << ir;
  EXPECT_THAT(ir, HasSubstr("= L[k2]")) << ir;
}

TEST(CompactThreadAxes, KeepsAnAxisAnyAccessIndexesOtherwise) {
  // Thread u reads the slot thread 0 wrote: the axis holds data shared across threads' indices
  // and must stay.
  Stmt in = CompactionFixture(false);
  Stmt out = schedules::CompactThreadAxes(in);
  const auto* a = schedules::test_workloads::FindAllocate(out, "L");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->buffer->shape, (std::vector<int64_t>{4, 2}));
}

TEST(CompactThreadAxes, RegisterCachedSoftmaxHoldsOneThreadsShare) {
  const auto t = schedules::CudaTarget("sm_90");
  schedules::TemplateOptions o;
  o.row_threads = 128;
  o.row_in_registers = true;
  auto s = schedules::HandwrittenSchedule(LoadSpec("softmax(rows=4, cols=4096)"), t, o);
  ASSERT_TRUE(s.ok()) << s.status();
  auto p = schedules::Lower(*s, t);
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_EQ(p->kernels.size(), 1u);
  const auto* a = schedules::test_workloads::FindAllocate(p->kernels[0].body, "X_local");
  ASSERT_NE(a, nullptr) << schedules::ToString(*p);
  // 4096 columns over 128 threads: 32 per thread (the row, j and v axes; t dropped).
  EXPECT_EQ(a->buffer->shape, (std::vector<int64_t>{1, 8, 4}));
  auto src = Generate(*s, t);
  ASSERT_TRUE(src.ok()) << src.status() << schedules::ToString(*p);
  // The fill reads 16 bytes at a time and stores the lanes to registers one by one.
  EXPECT_THAT(src->code, HasSubstr("4-lane loads, stored lane by lane to registers"));
  EXPECT_THAT(src->code,
              HasSubstr("const float4 tessel_vec = __ldg(reinterpret_cast<const float4*>"));
  EXPECT_THAT(src->code, HasSubstr("X_local[ax1_0 * 4 + 3] = tessel_vec.w;")) << src->code;
  // X is read once: only the fill loads it.
  EXPECT_EQ(src->code.find("&X["), src->code.rfind("&X[")) << src->code;
}

TEST(CompactThreadAxes, RegisterCacheIsSkippedWhenTheShareIsTooLarge) {
  const auto t = schedules::CudaTarget("sm_90");
  schedules::TemplateOptions o;
  o.row_threads = 32;
  o.row_in_registers = true;  // 4096 / 32 = 128 columns a thread, over the 64 allowed
  auto s = schedules::HandwrittenSchedule(LoadSpec("softmax(rows=4, cols=4096)"), t, o);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->FindStage("X_local"), nullptr);
}

}  // namespace
}  // namespace tessel::testing
