// center_partials: layernorm's variance partials centred on their own chunk's mean, so that the
// sums and the squares of a chunk come from one pass. Results on the host against the reference
// (CUDA: tests/gpu with the hand-written layernorm schedule, which uses it), the primitive's
// errors, and trace replay.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "schedules/lower/lower.h"
#include "schedules/schedule/schedule.h"
#include "schedules/workload/builtins.h"
#include "tests/e2e/e2e_util.h"
#include "worker/backend.h"

namespace tessel::testing {
namespace {

using schedules::BlockRV;
using schedules::HostTarget;
using schedules::Schedule;
using ::testing::HasSubstr;

// mean and var inlined; x_sum and sq_sum split into chunks of `chunk` and rfactored.
Schedule Partials(const std::string& spec, int64_t chunk, BlockRV* sum_rf, BlockRV* sq_rf) {
  auto w = schedules::ParseWorkloadSpec(spec);
  EXPECT_TRUE(w.ok()) << w.status();
  auto s = Schedule::Create(*w);
  EXPECT_TRUE(s.ok());
  EXPECT_TRUE(s->ComputeInline(BlockNamed(&*s, "mean")).ok());
  EXPECT_TRUE(s->ComputeInline(BlockNamed(&*s, "var")).ok());
  BlockRV* out[] = {sum_rf, sq_rf};
  const char* names[] = {"x_sum", "sq_sum"};
  for (int i = 0; i < 2; ++i) {
    auto loops = s->GetLoops(BlockNamed(&*s, names[i]));
    EXPECT_TRUE(loops.ok());
    auto ks = s->Split(loops->back(), {-1, chunk});
    EXPECT_TRUE(ks.ok());
    auto rf = s->RFactor((*ks)[0]);
    EXPECT_TRUE(rf.ok()) << rf.status();
    *out[i] = *rf;
  }
  return std::move(*s);
}

TEST(CenterPartials, DividingChunksMatchReference) {
  BlockRV p, q;
  Schedule s = Partials("layernorm(rows=3, cols=1024)", 128, &p, &q);
  absl::Status st = s.CenterPartials(q, p);
  ASSERT_TRUE(st.ok()) << st;
  ExpectMatchesReference(s, HostTarget(), 1);
}

TEST(CenterPartials, RaggedLastChunkMatchesReference) {
  // 1000 = 7 * 128 + 104: the last chunk counts 104 elements.
  BlockRV p, q;
  Schedule s = Partials("layernorm(rows=4, cols=1000)", 128, &p, &q);
  ASSERT_TRUE(s.CenterPartials(q, p).ok());
  ExpectMatchesReference(s, HostTarget(), 2);
}

TEST(CenterPartials, OnePassOverTheInputForTheStatistics) {
  // The sums computed inside the squares' chunk loop: the statistics read X in one nest.
  BlockRV p, q;
  Schedule s = Partials("layernorm(rows=4, cols=1000)", 128, &p, &q);
  ASSERT_TRUE(s.CenterPartials(q, p).ok());
  auto ql = s.GetLoops(q);
  ASSERT_TRUE(ql.ok());
  absl::Status at = s.ComputeAt(p, (*ql)[1]);  // the chunk loop
  ASSERT_TRUE(at.ok()) << at;
  auto prog = schedules::Lower(s, HostTarget());
  ASSERT_TRUE(prog.ok()) << prog.status();
  // x_sum_rf has no nest of its own: it is computed in sq_sum_rf's, which comes first.
  EXPECT_THAT(prog->kernels[0].name, HasSubstr("sq_sum_rf"));
  for (const auto& k : prog->kernels) EXPECT_THAT(k.name, ::testing::Not(HasSubstr("x_sum_rf")));
  ExpectMatchesReference(s, HostTarget(), 3);
}

TEST(CenterPartials, TraceReplays) {
  BlockRV p, q;
  Schedule s = Partials("layernorm(rows=2, cols=300)", 64, &p, &q);
  ASSERT_TRUE(s.CenterPartials(q, p).ok());
  auto parsed = schedules::Trace::Parse(s.trace().ToJsonString());
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  auto r = schedules::Replay(s.workload(), *parsed);
  ASSERT_TRUE(r.ok()) << r.status();
  auto a = schedules::Lower(s, HostTarget());
  auto b = schedules::Lower(*r, HostTarget());
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(schedules::ToString(*a), schedules::ToString(*b));
}

TEST(CenterPartialsErrors, NotPartials) {
  auto w = schedules::ParseWorkloadSpec("layernorm(rows=2, cols=64)");
  auto s = Schedule::Create(*w);
  absl::Status st = s->CenterPartials(BlockNamed(&*s, "sq_sum"), BlockNamed(&*s, "x_sum"));
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(st.message(),
              HasSubstr("center_partials: stages sq_sum and x_sum are not two rfactor partial "
                        "sums; it applies to rfactor partials"));
}

TEST(CenterPartialsErrors, DifferentChunks) {
  auto w = schedules::ParseWorkloadSpec("layernorm(rows=2, cols=64)");
  auto s = Schedule::Create(*w);
  ASSERT_TRUE(s->ComputeInline(BlockNamed(&*s, "mean")).ok());
  BlockRV rf[2];
  int64_t chunks[2] = {8, 16};
  const char* names[] = {"x_sum", "sq_sum"};
  for (int i = 0; i < 2; ++i) {
    auto loops = s->GetLoops(BlockNamed(&*s, names[i]));
    auto ks = s->Split(loops->back(), {-1, chunks[i]});
    rf[i] = *s->RFactor((*ks)[0]);
  }
  absl::Status st = s->CenterPartials(rf[1], rf[0]);
  EXPECT_THAT(st.message(), HasSubstr("stages sq_sum_rf and x_sum_rf do not have the same chunks"));
}

TEST(CenterPartialsErrors, SquareOfAnotherValue) {
  // Swapped: x_sum_rf is not a square.
  BlockRV p, q;
  Schedule s = Partials("layernorm(rows=2, cols=64)", 8, &p, &q);
  absl::Status st = s.CenterPartials(p, q);
  EXPECT_THAT(st.message(),
              HasSubstr("the body of stage x_sum_rf is not a square (e - M) * (e - M)"));
}

}  // namespace
}  // namespace tessel::testing
