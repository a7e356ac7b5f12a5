// Virtual-thread injection (schedules/lower/inject_vthread.h): structure of the CUDA matmul with
// vthread (shared fetch once per reduction step, accumulator expanded, barriers unchanged), the
// design space's samples, host runs of vthread schedules against the reference, and the cases
// the pass refuses.

#include "schedules/lower/inject_vthread.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "schedules/lower/lower.h"
#include "schedules/schedule/schedule.h"
#include "schedules/space/space_generator.h"
#include "schedules/workload/builtins.h"
#include "tests/e2e/e2e_util.h"
#include "tests/schedules/test_workloads.h"
#include "tests/schedules/vthread_matmul.h"
#include "worker/backend.h"

namespace tessel::schedules {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using namespace test_workloads;  // NOLINT

// ---- Walking the lowered IR.

// Calls f on every statement with the loops enclosing it (outermost first) and the number of
// enclosing conditions.
void VisitNest(const Stmt& s, std::vector<const ForNode*>* loops, int ifs,
               const std::function<void(const Stmt&, const std::vector<const ForNode*>&, int)>& f) {
  if (!s) return;
  f(s, *loops, ifs);
  switch (s->kind) {
    case StmtKind::kFor:
      loops->push_back(As<ForNode>(s));
      VisitNest(As<ForNode>(s)->body, loops, ifs, f);
      loops->pop_back();
      return;
    case StmtKind::kAllocate:
      VisitNest(As<AllocateNode>(s)->body, loops, ifs, f);
      return;
    case StmtKind::kIfThenElse:
      VisitNest(As<IfThenElseNode>(s)->then_case, loops, ifs + 1, f);
      VisitNest(As<IfThenElseNode>(s)->else_case, loops, ifs + 1, f);
      return;
    case StmtKind::kSeq:
      for (const Stmt& c : As<SeqNode>(s)->stmts) VisitNest(c, loops, ifs, f);
      return;
    case StmtKind::kLetStmt:
      VisitNest(As<LetStmtNode>(s)->body, loops, ifs, f);
      return;
    default:
      return;
  }
}

bool HasVThread(const std::vector<const ForNode*>& loops) {
  for (const ForNode* l : loops) {
    if (l->thread == ThreadTag::kVThread) return true;
  }
  return false;
}

// What the structural tests look at in a kernel.
struct Shape {
  int plain_vthread_loops = 0;  // kept as they were (kThreadBinding)
  int injected_vthread_loops = 0;
  int shared_stores = 0;  // store statements into shared buffers
  int shared_stores_in_vthread = 0;
  int barriers = 0;
  int barriers_in_vthread_or_if = 0;
  int barriers_in_k0 = 0;  // inside the loop named k_0 (the shared-memory step)
};

Shape ShapeOf(const Stmt& body) {
  Shape r;
  std::vector<const ForNode*> loops;
  VisitNest(body, &loops, 0, [&](const Stmt& s, const std::vector<const ForNode*>& ls, int ifs) {
    if (const auto* f = As<ForNode>(s); f && f->thread == ThreadTag::kVThread) {
      (f->kind == ForKind::kThreadBinding ? r.plain_vthread_loops : r.injected_vthread_loops)++;
    }
    if (const auto* st = As<StoreNode>(s); st && st->buffer->scope == MemScope::kShared) {
      ++r.shared_stores;
      if (HasVThread(ls)) ++r.shared_stores_in_vthread;
    }
    if (s->kind == StmtKind::kBarrier) {
      ++r.barriers;
      if (HasVThread(ls) || ifs > 0) ++r.barriers_in_vthread_or_if;
      for (const ForNode* l : ls) {
        if (l->var->name == "k_0") ++r.barriers_in_k0;
      }
    }
  });
  return r;
}

const AllocateNode* FindAlloc(const Stmt& s, const std::string& name) {
  return FindAllocate(s, name);
}

// =============================================================================================
// CUDA structure.

TEST(InjectVThread, CudaSharedFetchOncePerReductionStep) {
  const Workload w = Matmul(64, 64, 64);
  auto with = Lower(VThreadMatmul(w, {.vm = 2, .vn = 2}, /*cuda=*/true), CudaT());
  auto without = Lower(VThreadMatmul(w, {.vm = 1, .vn = 1}, /*cuda=*/true), CudaT());
  TESSEL_ASSERT_OK(with);
  TESSEL_ASSERT_OK(without);
  const Stmt& body = with->kernels[0].body;
  const std::string ir = ToString(body);
  const Shape s = ShapeOf(body);
  const Shape base = ShapeOf(without->kernels[0].body);
  EXPECT_EQ(s.plain_vthread_loops, 0) << ir;
  EXPECT_GT(s.injected_vthread_loops, 0) << ir;
  // The two fetches (A and B), once per step, outside every vthread loop.
  EXPECT_EQ(s.shared_stores, 2) << ir;
  EXPECT_EQ(s.shared_stores_in_vthread, 0) << ir;
  // The barriers of a reduction step: as many as without virtual threads, none under a vthread
  // loop or a condition.
  EXPECT_EQ(s.barriers_in_k0, 2) << ir;
  EXPECT_EQ(s.barriers_in_k0, base.barriers_in_k0);
  EXPECT_EQ(s.barriers, base.barriers);
  EXPECT_EQ(s.barriers_in_vthread_or_if, 0) << ir;
  // The accumulator: one per-thread tile (2 x 2) per virtual thread (2 x 2).
  const AllocateNode* acc = FindAlloc(body, "C_local");
  ASSERT_NE(acc, nullptr) << ir;
  EXPECT_THAT(acc->buffer->shape, ElementsAre(2, 2, 2, 2));
  const AllocateNode* acc1 = FindAlloc(without->kernels[0].body, "C_local");
  ASSERT_NE(acc1, nullptr);
  EXPECT_THAT(acc1->buffer->shape, ElementsAre(2, 2));
  // The register caches: A's depends on the m virtual thread only, B's on the n one.
  const AllocateNode* al = FindAlloc(body, "A_shared_local");
  const AllocateNode* bl = FindAlloc(body, "B_shared_local");
  ASSERT_NE(al, nullptr) << ir;
  ASSERT_NE(bl, nullptr) << ir;
  EXPECT_EQ(al->buffer->shape.size(), 3u) << ir;
  EXPECT_EQ(al->buffer->shape[0], 2) << ir;
  EXPECT_EQ(bl->buffer->shape.size(), 3u) << ir;
  EXPECT_EQ(bl->buffer->shape[0], 2) << ir;
}

TEST(InjectVThread, CudaSharedFetchOnceWithoutRegisterCaches) {
  auto prog = Lower(VThreadMatmul(Matmul(64, 48, 40), {.vm = 4, .vn = 1, .local_caches = false},
                                  /*cuda=*/true),
                    CudaT());
  TESSEL_ASSERT_OK(prog);
  const Stmt& body = prog->kernels[0].body;
  const Shape s = ShapeOf(body);
  EXPECT_EQ(s.plain_vthread_loops, 0) << ToString(body);
  EXPECT_EQ(s.shared_stores_in_vthread, 0) << ToString(body);
  EXPECT_EQ(s.barriers_in_vthread_or_if, 0) << ToString(body);
  const AllocateNode* acc = FindAlloc(body, "C_local");
  ASSERT_NE(acc, nullptr);
  EXPECT_THAT(acc->buffer->shape, ElementsAre(4, 2, 2));
}

TEST(InjectVThread, CudaGeneratedSourceHasNoFetchInsideVThreadLoops) {
  auto sch = VThreadMatmul(Matmul(64, 64, 64), {.vm = 2, .vn = 2}, /*cuda=*/true);
  auto src = testing::Generate(sch, CudaT());
  TESSEL_ASSERT_OK(src);
  const std::string& code = src->code;
  EXPECT_EQ(CountOf(code, "__syncthreads()"), 2) << code;
  EXPECT_THAT(code, HasSubstr("// vthread")) << code;
  // Every vthread loop closes before the next barrier or shared store: scan the source keeping
  // track of the depth of open vthread loops.
  std::vector<bool> open;  // per open brace: a vthread loop
  int in_vthread = 0;
  size_t pos = 0;
  while (pos < code.size()) {
    size_t eol = code.find('\n', pos);
    if (eol == std::string::npos) eol = code.size();
    const std::string line = code.substr(pos, eol - pos);
    pos = eol + 1;
    const size_t shared = line.find("_shared["), assign = line.find(" = ");
    const bool shared_store =
        shared != std::string::npos && assign != std::string::npos && shared < assign;
    if (line.find("__syncthreads") != std::string::npos || shared_store) {
      EXPECT_EQ(in_vthread, 0) << line << "\n" << code;
    }
    for (char ch : line) {
      if (ch == '{') {
        open.push_back(line.find("// vthread") != std::string::npos);
        in_vthread += open.back();
      } else if (ch == '}' && !open.empty()) {
        in_vthread -= open.back();
        open.pop_back();
      }
    }
  }
}

// Every sample of the CUDA design space of the contractions (matmul, batched and transposed,
// f16, with an epilogue, odd extents; the convolutions' space has no vthread): no vthread loop
// is left plain, the shared fetches and the barriers are outside the vthread loops.
class InjectVThreadSpace : public ::testing::TestWithParam<std::string> {};

TEST_P(InjectVThreadSpace, SamplesAreInjected) {
  auto w = ParseWorkloadSpec(GetParam());
  ASSERT_TRUE(w.ok()) << w.status();
  auto g = SpaceGenerator::Create(*w, CudaT());
  ASSERT_TRUE(g.ok()) << g.status();
  int with_vthread = 0;
  for (uint64_t seed = 0; seed < 24; ++seed) {
    auto c = g->Sample(seed);
    if (!c.ok()) continue;
    for (const Kernel& k : c->program.kernels) {
      const Shape s = ShapeOf(k.body);
      EXPECT_EQ(s.plain_vthread_loops, 0) << "seed " << seed << "\n" << ToString(k.body);
      EXPECT_EQ(s.shared_stores_in_vthread, 0) << "seed " << seed << "\n" << ToString(k.body);
      EXPECT_EQ(s.barriers_in_vthread_or_if, 0) << "seed " << seed << "\n" << ToString(k.body);
      with_vthread += s.injected_vthread_loops > 0;
    }
  }
  EXPECT_GT(with_vthread, 0);
}

INSTANTIATE_TEST_SUITE_P(Contractions, InjectVThreadSpace,
                         ::testing::Values("matmul(M=128, N=128, K=64)",
                                           "matmul(M=33, N=48, K=50, batch=3, transpose_a=true)",
                                           "matmul(M=64, N=36, K=24, transpose_b=true, dtype=f16)",
                                           "matmul_bias_gelu(M=64, N=70, K=33)",
                                           "matmul(M=50, N=45, K=29)"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return std::to_string(info.index);
                         });

// =============================================================================================
// Host runs against the reference.

class InjectVThreadHost : public ::testing::TestWithParam<std::tuple<int64_t, int64_t, bool>> {};

TEST_P(InjectVThreadHost, MatchesReference) {
  const auto [vm, vn, local] = GetParam();
  const Target t = HostTarget();
  for (const Workload& w : {Matmul(64, 64, 32), Matmul(37, 29, 19)}) {
    Schedule sch = VThreadMatmul(w, {.vm = vm, .vn = vn, .local_caches = local}, /*cuda=*/false);
    auto prog = Lower(sch, t);
    TESSEL_ASSERT_OK(prog);
    const Stmt& body = prog->kernels[0].body;
    const Shape s = ShapeOf(body);
    EXPECT_EQ(s.plain_vthread_loops, 0) << ToString(body);
    EXPECT_GT(s.injected_vthread_loops, 0) << ToString(body);
    EXPECT_EQ(s.shared_stores_in_vthread, 0) << ToString(body);
    const AllocateNode* acc = FindAlloc(body, "C_local");
    ASSERT_NE(acc, nullptr);
    EXPECT_EQ(acc->buffer->NumElements(), vm * vn * 4) << ToString(body);
    auto ref = testing::GenerateReference(w, t);
    TESSEL_ASSERT_OK(ref);
    auto cand = testing::Generate(sch, t);
    TESSEL_ASSERT_OK(cand);
    absl::Status v = worker::RunAndVerify(*cand, *ref, /*seed=*/vm * 10 + vn);
    EXPECT_TRUE(v.ok()) << v << "\n" << cand->code;
  }
}

INSTANTIATE_TEST_SUITE_P(VThreads, InjectVThreadHost,
                         ::testing::Values(std::make_tuple(2, 1, true), std::make_tuple(1, 4, true),
                                           std::make_tuple(2, 2, true), std::make_tuple(4, 2, true),
                                           std::make_tuple(2, 2, false)));

// =============================================================================================
// What the pass refuses: the loop is kept as it was.

// for v in vthread [0, 2): alloc shared S[4] { <pre>; S[0] = X[0]; Y[v] = S[0] }
struct Fixture {
  BufferPtr x = MakeBuffer("X", DType::kFloat32, {4});
  BufferPtr y = MakeBuffer("Y", DType::kFloat32, {4});
  BufferPtr sh = MakeBuffer("S", DType::kFloat32, {4}, MemScope::kShared);
  VarPtr v = MakeVar("v");
  Stmt Loop(Stmt body) const {
    return MakeFor(v, MakeInt(0), MakeInt(2), ForKind::kThreadBinding, ThreadTag::kVThread,
                   std::move(body));
  }
  Stmt Fetch() const { return MakeStore(sh, {MakeInt(0)}, MakeLoad(x, {MakeInt(0)})); }
  Stmt Use() const { return MakeStore(y, {Expr(v)}, MakeLoad(sh, {MakeInt(0)})); }
};

TEST(InjectVThread, FetchAndBarrierAreHoisted) {
  Fixture f;
  Stmt in = f.Loop(MakeAllocate(f.sh, MakeSeq({MakeBarrier(), f.Fetch(), MakeBarrier(), f.Use()})));
  std::vector<std::string> kept;
  Stmt out = InjectVirtualThreads(in, &kept);
  EXPECT_TRUE(kept.empty());
  EXPECT_EQ(ToString(out),
            "alloc shared f32 S[4]\n"
            "barrier\n"
            "S[0] = X[0]\n"
            "barrier\n"
            "unrolled for v in [0, 2):\n"
            "  Y[v] = S[0]\n");
}

TEST(InjectVThread, BarrierUnderVThreadConditionIsKept) {
  Fixture f;
  Stmt in = f.Loop(MakeAllocate(
      f.sh, MakeSeq({MakeIf(Expr(f.v) < 1, MakeBarrier()), f.Fetch(), MakeBarrier(), f.Use()})));
  std::vector<std::string> kept;
  Stmt out = InjectVirtualThreads(in, &kept);
  EXPECT_EQ(out, in);  // the same statement: lowered as before
  EXPECT_THAT(kept, ElementsAre("v: a barrier is under a condition that depends on it"));
}

TEST(InjectVThread, ReadOfPerThreadWriteIsKept) {
  // Z[0] = Y[0] does not use v but reads what v = 0 wrote; hoisting it would change nothing here,
  // but it reads a buffer each virtual thread writes, which the pass does not reorder.
  Fixture f;
  BufferPtr z = MakeBuffer("Z", DType::kFloat32, {1});
  Stmt in = f.Loop(MakeAllocate(
      f.sh,
      MakeSeq({f.Fetch(), f.Use(), MakeStore(z, {MakeInt(0)}, MakeLoad(f.y, {MakeInt(0)}))})));
  std::vector<std::string> kept;
  EXPECT_EQ(InjectVirtualThreads(in, &kept), in);
  EXPECT_THAT(kept, ElementsAre("v: a statement emitted once reads Y, which a statement of each "
                                "virtual thread writes"));
}

TEST(InjectVThread, ReadBeforeWriteIsKept) {
  // Y[v] = S[0] before S[0] = X[0]: virtual thread 1 reads what virtual thread 0 fetched.
  Fixture f;
  Stmt in = f.Loop(MakeAllocate(f.sh, MakeSeq({f.Use(), f.Fetch()})));
  std::vector<std::string> kept;
  EXPECT_EQ(InjectVirtualThreads(in, &kept), in);
  EXPECT_THAT(kept, ElementsAre("v: a read of S does not follow its write in the same iteration"));
}

TEST(InjectVThread, NonIdempotentStatementIsKept) {
  // Y[0] = Y[0] + 1 does not use v but must run once per virtual thread.
  Fixture f;
  Stmt in =
      f.Loop(MakeSeq({MakeStore(f.y, {MakeInt(0)}, MakeLoad(f.y, {MakeInt(0)}) + MakeFloat(1)),
                      MakeStore(f.x, {Expr(f.v)}, MakeFloat(0))}));
  std::vector<std::string> kept;
  EXPECT_EQ(InjectVirtualThreads(in, &kept), in);
  ASSERT_EQ(kept.size(), 1u);
  EXPECT_THAT(kept[0], HasSubstr("Y"));
}

// A host schedule the pass refuses (the write-back is inside a serial loop between the vthread
// loops and the accumulator, so the virtual threads' stores to C would be reordered): the
// vthread loops stay plain loops and the result is still right.
TEST(InjectVThread, RefusedHostScheduleStillMatchesReference) {
  const Target t = HostTarget();
  const Workload w = Matmul(24, 20, 12);
  Schedule sch = NewSchedule(w);
  BlockRV c = BlockOf(sch, "C");
  BlockRV cl = ValueOrDie(sch.CacheWrite(c, "local"));
  std::vector<LoopRV> l = LoopsOf(sch, c);
  std::vector<LoopRV> is = ValueOrDie(sch.Split(l[0], {-1, 2, 3, 2}));
  std::vector<LoopRV> js = ValueOrDie(sch.Split(l[1], {-1, 2, 5}));
  Checked(sch.Reorder({is[0], js[0], is[1], js[1], is[2], is[3], js[2]}));
  Checked(sch.Bind(is[1], "vthread"));
  Checked(sch.Bind(js[1], "vthread"));
  Checked(sch.ComputeAt(cl, is[2]));
  BlockRV sh = ValueOrDie(sch.CacheRead("A", "shared", {cl}));
  std::vector<LoopRV> cls = LoopsOf(sch, cl);
  Checked(sch.ComputeAt(sh, cls[0]));
  auto prog = Lower(sch, t);
  TESSEL_ASSERT_OK(prog);
  const std::string ir = ToString(prog->kernels[0].body);
  EXPECT_EQ(ShapeOf(prog->kernels[0].body).plain_vthread_loops, 2) << ir;
  std::vector<std::string> kept;
  InjectVirtualThreads(prog->kernels[0].body, &kept);
  EXPECT_EQ(kept.size(), 2u);
  auto ref = testing::GenerateReference(w, t);
  TESSEL_ASSERT_OK(ref);
  auto cand = testing::Generate(sch, t);
  TESSEL_ASSERT_OK(cand);
  absl::Status v = worker::RunAndVerify(*cand, *ref, /*seed=*/3);
  EXPECT_TRUE(v.ok()) << v << "\n" << cand->code;
}

}  // namespace
}  // namespace tessel::schedules
