// Tests of the sampling primitives (schedules/schedule/primitive/sampling.cc: sample_perfect_tile,
// sample_categorical, sample_compute_location): what each samples, that a decision is used and
// validated, and each of its errors (code and message), with the state left unchanged by a failed
// primitive.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "schedules/lower/lower.h"
#include "schedules/schedule/schedule.h"
#include "tests/schedules/primitive/primitive_test_util.h"
#include "tests/schedules/test_workloads.h"

namespace tessel::schedules {
namespace {

using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;
using namespace test_workloads;  // NOLINT
using namespace primitive_test;  // NOLINT

// =============================================================================================
// Sampling

TEST(ScheduleSamplePerfectTile, ProductIsExtentAndInnermostBounded) {
  for (uint64_t seed = 0; seed < 30; ++seed) {
    Schedule sch = NewSchedule(VectorAdd(96), seed);
    LoopRV i = LoopsOf(sch, "C")[0];
    auto tiles = sch.SamplePerfectTile(i, 3, 4);
    TESSEL_ASSERT_OK(tiles);
    ASSERT_EQ(tiles->size(), 3u);
    int64_t prod = 1;
    for (IntRV v : *tiles) {
      EXPECT_GE(sch.Value(v), 1);
      prod *= sch.Value(v);
    }
    EXPECT_EQ(prod, 96) << "seed " << seed;
    EXPECT_LE(sch.Value(tiles->back()), 4) << "seed " << seed;
    const Instruction& inst = sch.trace().insts.back();
    EXPECT_EQ(inst.kind, "sample_perfect_tile");
    EXPECT_EQ(inst.attrs, nlohmann::json::parse(R"({"n": 3, "max_innermost": 4})"));
    EXPECT_EQ(inst.decision, nlohmann::json({sch.Value((*tiles)[0]), sch.Value((*tiles)[1]),
                                             sch.Value((*tiles)[2])}));
  }
}

TEST(ScheduleSamplePerfectTile, PaddedExtentTilesPastTheLoop) {
  // A loop of 97 tiled as 112 (a sampled extent): the factors multiply to 112, the split by
  // them covers the loop, and the trace names the extent's value as a second input.
  for (uint64_t seed = 0; seed < 10; ++seed) {
    Schedule sch = NewSchedule(VectorAdd(97), seed);
    LoopRV i = LoopsOf(sch, "C")[0];
    IntRV padded = ValueOrDie(sch.SampleCategorical({97, 112}, {0, 1}));
    auto tiles = sch.SamplePerfectTile(i, 2, 8, std::nullopt, padded);
    TESSEL_ASSERT_OK(tiles);
    EXPECT_EQ(sch.Value((*tiles)[0]) * sch.Value((*tiles)[1]), 112);
    const Instruction& inst = sch.trace().insts.back();
    ASSERT_EQ(inst.inputs.size(), 2u);
    const auto& insts = sch.trace().insts;
    EXPECT_EQ(inst.inputs[1], insts[insts.size() - 2].outputs.at(0));  // the categorical's value
    TESSEL_ASSERT_OK(sch.Split(i, {(*tiles)[0], (*tiles)[1]}));
  }
  // Replayed with its decision, and checked against the padded extent.
  Schedule sch = NewSchedule(VectorAdd(97));
  LoopRV i = LoopsOf(sch, "C")[0];
  IntRV padded = ValueOrDie(sch.SampleCategorical({97, 112}, {0, 1}));
  auto ok = sch.SamplePerfectTile(i, 2, 8, std::vector<int64_t>{14, 8}, padded);
  TESSEL_ASSERT_OK(ok);
  auto bad = sch.SamplePerfectTile(i, 2, 8, std::vector<int64_t>{97, 1}, padded);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(),
              HasSubstr("decision [97, 1] is not 2 positive factors of loop"));
  EXPECT_THAT(bad.status().message(), HasSubstr("(padded extent 112)"));
}

TEST(ScheduleSamplePerfectTile, PaddedExtentBelowTheLoopsIsAnError) {
  Schedule sch = NewSchedule(VectorAdd(97));
  LoopRV i = LoopsOf(sch, "C")[0];
  IntRV padded = ValueOrDie(sch.SampleCategorical({64}, {1}));
  const size_t before = sch.trace().insts.size();
  auto r = sch.SamplePerfectTile(i, 2, 8, std::nullopt, padded);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("padded extent 64 is less than the extent 97 of"));
  EXPECT_EQ(sch.trace().insts.size(), before);
}

std::vector<int64_t> SampleTiles(uint64_t seed) {
  Schedule sch = NewSchedule(VectorAdd(1024), seed);
  LoopRV i = LoopsOf(sch, "C")[0];
  std::vector<int64_t> out;
  for (IntRV v : ValueOrDie(sch.SamplePerfectTile(i, 4, 64))) out.push_back(sch.Value(v));
  return out;
}

TEST(ScheduleSamplePerfectTile, DeterministicForASeed) {
  std::set<std::vector<int64_t>> distinct;
  for (uint64_t seed = 0; seed < 20; ++seed) {
    EXPECT_EQ(SampleTiles(seed), SampleTiles(seed));
    distinct.insert(SampleTiles(seed));
  }
  EXPECT_GT(distinct.size(), 1u) << "the seed does not change the samples";
}

TEST(ScheduleSamplePerfectTile, DecisionIsUsed) {
  Schedule sch = NewSchedule(VectorAdd(64));
  LoopRV i = LoopsOf(sch, "C")[0];
  auto tiles = sch.SamplePerfectTile(i, 2, 16, std::vector<int64_t>{8, 8});
  TESSEL_ASSERT_OK(tiles);
  EXPECT_EQ(sch.Value((*tiles)[0]), 8);
  EXPECT_EQ(sch.Value((*tiles)[1]), 8);
  EXPECT_EQ(sch.trace().insts.back().decision, nlohmann::json::parse("[8, 8]"));
}

// Regression: with n == 1 the only factor is the extent; sampling rejects an extent above
// max_innermost, as the decision check (and so Replay) does.
TEST(ScheduleSamplePerfectTile, SingleFactorRespectsMaxInnermost) {
  Schedule sch = NewSchedule(VectorAdd(64));
  LoopRV i = LoopsOf(sch, "C")[0];
  auto tiles = sch.SamplePerfectTile(i, 1, 16);
  if (tiles.ok()) {
    EXPECT_LE(sch.Value(tiles->back()), 16) << "sampled [64] with max_innermost 16";
    auto replayed = Replay(sch.workload(), sch.trace());
    EXPECT_TRUE(replayed.ok()) << replayed.status();
  }
}

TEST(ScheduleErrors, SamplePerfectTileSingleFactorOverMaxInnermost) {
  Schedule sch = NewSchedule(VectorAdd(64));
  LoopRV i = LoopsOf(sch, "C")[0];
  ExpectFails(
      sch, [&] { return sch.SamplePerfectTile(i, 1, 16); }, kInvalid,
      "sample_perfect_tile: n is 1, so the only factor is the extent 64 of loop i of "
      "stage C, which exceeds max_innermost 16; use n >= 2 or raise max_innermost");
  auto ok = sch.SamplePerfectTile(i, 1, 64);
  TESSEL_ASSERT_OK(ok);
  EXPECT_EQ(sch.Value(ok->back()), 64);
}

TEST(ScheduleErrors, SamplePerfectTileBadN) {
  Schedule sch = NewSchedule(VectorAdd(64));
  LoopRV i = LoopsOf(sch, "C")[0];
  ExpectFails(
      sch, [&] { return sch.SamplePerfectTile(i, 0, 16); }, kInvalid,
      "sample_perfect_tile: n must be at least 1, got 0");
  ExpectFails(
      sch, [&] { return sch.SamplePerfectTile(i, 2, 0); }, kInvalid,
      "sample_perfect_tile: max_innermost must be at least 1, got 0");
}

TEST(ScheduleErrors, SamplePerfectTileBadDecision) {
  Schedule sch = NewSchedule(VectorAdd(64));
  LoopRV i = LoopsOf(sch, "C")[0];
  ExpectFails(
      sch,
      [&] {
        return sch.SamplePerfectTile(i, 2, 16, std::vector<int64_t>{3, 8});
      },
      kInvalid,
      "sample_perfect_tile: decision [3, 8] is not 2 positive factors of loop i of "
      "stage C (extent 64)");
  ExpectFails(
      sch, [&] { return sch.SamplePerfectTile(i, 2, 16, std::vector<int64_t>{64}); }, kInvalid,
      "decision [64] is not 2 positive factors");
  ExpectFails(
      sch,
      [&] {
        return sch.SamplePerfectTile(i, 2, 16, std::vector<int64_t>{-8, -8});
      },
      kInvalid, "decision [-8, -8] is not 2 positive factors");
  ExpectFails(
      sch,
      [&] {
        return sch.SamplePerfectTile(i, 2, 16, std::vector<int64_t>{2, 32});
      },
      kInvalid, "sample_perfect_tile: decision's innermost factor 32 exceeds max_innermost 16");
}

int64_t SampleCat(uint64_t seed) {
  Schedule sch = NewSchedule(VectorAdd(8), seed);
  return sch.Value(ValueOrDie(sch.SampleCategorical({16, 32, 64, 128}, {0.1, 0.2, 0.3, 0.4})));
}

TEST(ScheduleSampleCategorical, DeterministicAndWithinCandidates) {
  std::set<int64_t> seen;
  for (uint64_t seed = 0; seed < 40; ++seed) {
    const int64_t v = SampleCat(seed);
    EXPECT_EQ(v, SampleCat(seed));
    EXPECT_THAT((std::vector<int64_t>{16, 32, 64, 128}), ::testing::Contains(v));
    seen.insert(v);
  }
  EXPECT_GT(seen.size(), 1u);
}

TEST(ScheduleSampleCategorical, ZeroProbabilityNeverChosen) {
  for (uint64_t seed = 0; seed < 20; ++seed) {
    Schedule sch = NewSchedule(VectorAdd(8), seed);
    auto v = sch.SampleCategorical({1, 2, 3}, {0.0, 1.0, 0.0});
    TESSEL_ASSERT_OK(v);
    EXPECT_EQ(sch.Value(*v), 2);
    EXPECT_EQ(sch.trace().insts.back().decision, nlohmann::json(1));
  }
}

TEST(ScheduleSampleCategorical, DecisionIsUsed) {
  Schedule sch = NewSchedule(VectorAdd(8));
  auto v = sch.SampleCategorical({16, 32, 64}, {0.9, 0.05, 0.05}, 2);
  TESSEL_ASSERT_OK(v);
  EXPECT_EQ(sch.Value(*v), 64);
  const Instruction& inst = sch.trace().insts.back();
  EXPECT_EQ(inst.kind, "sample_categorical");
  EXPECT_EQ(inst.decision, nlohmann::json(2));
  EXPECT_EQ(inst.attrs["candidates"], nlohmann::json::parse("[16, 32, 64]"));
  EXPECT_TRUE(inst.inputs.empty());
  EXPECT_EQ(inst.outputs.size(), 1u);
}

TEST(ScheduleErrors, SampleCategoricalMismatchedSizes) {
  Schedule sch = NewSchedule(VectorAdd(8));
  ExpectFails(
      sch,
      [&] {
        return sch.SampleCategorical({1, 2, 3}, {0.5, 0.5});
      },
      kInvalid,
      "sample_categorical: needs as many probabilities as candidates (got 3 candidates "
      "and 2 probabilities)");
  ExpectFails(
      sch, [&] { return sch.SampleCategorical({}, {}); }, kInvalid,
      "got 0 candidates and 0 probabilities");
}

TEST(ScheduleErrors, SampleCategoricalBadProbabilities) {
  Schedule sch = NewSchedule(VectorAdd(8));
  ExpectFails(
      sch,
      [&] {
        return sch.SampleCategorical({1, 2}, {-0.5, 1.5});
      },
      kInvalid, "sample_categorical: probabilities must be non-negative");
  ExpectFails(
      sch,
      [&] {
        return sch.SampleCategorical({1, 2}, {0.0, 0.0});
      },
      kInvalid, "sample_categorical: probabilities must not all be zero");
}

TEST(ScheduleErrors, SampleCategoricalBadDecision) {
  Schedule sch = NewSchedule(VectorAdd(8));
  ExpectFails(
      sch,
      [&] {
        return sch.SampleCategorical({1, 2, 3}, {1, 1, 1}, 3);
      },
      kInvalid, "sample_categorical: decision 3 is not an index below 3");
  ExpectFails(
      sch,
      [&] {
        return sch.SampleCategorical({1, 2, 3}, {1, 1, 1}, -1);
      },
      kInvalid, "decision -1 is not an index below 3");
}

TEST(ScheduleSampleComputeLocation, DecisionsMapToLocations) {
  Schedule sch = NewSchedule(ElementwiseChain(8, 8));
  BlockRV b = BlockOf(sch, "B");
  auto at = sch.SampleComputeLocation(b, 1);
  TESSEL_ASSERT_OK(at);
  EXPECT_EQ(sch.LoopName(*at), "C.j");
  EXPECT_EQ(sch.trace().insts.back().kind, "sample_compute_location");
  EXPECT_EQ(sch.trace().insts.back().decision, nlohmann::json(1));
  auto root = sch.SampleComputeLocation(b, -2);
  TESSEL_ASSERT_OK(root);
  EXPECT_EQ(root->id, Schedule::kRootLoop);
  EXPECT_THAT(sch.trace().insts.back().outputs, ElementsAre("root"));
  auto inl = sch.SampleComputeLocation(b, -1);
  TESSEL_ASSERT_OK(inl);
  EXPECT_EQ(inl->id, Schedule::kInlineLoop);
  // The sampled loop is usable by compute_at.
  TESSEL_ASSERT_OK(sch.ComputeAt(b, *at));
  EXPECT_THAT(LeafExtents(StageNamed(sch, "B")), ElementsAre(1, 1));
}

TEST(ScheduleSampleComputeLocation, SampledLocationsAreValidAndDeterministic) {
  std::set<int64_t> seen;
  for (uint64_t seed = 0; seed < 30; ++seed) {
    int64_t first = 0;
    for (int rep = 0; rep < 2; ++rep) {
      Schedule sch = NewSchedule(ElementwiseChain(8, 8), seed);
      BlockRV b = BlockOf(sch, "B");
      auto at = sch.SampleComputeLocation(b);
      TESSEL_ASSERT_OK(at);
      const int64_t d = sch.trace().insts.back().decision.get<int64_t>();
      EXPECT_THAT((std::vector<int64_t>{-2, -1, 0, 1}), ::testing::Contains(d));
      if (rep == 0) first = d;
      EXPECT_EQ(d, first) << "seed " << seed;
      // Applying the location works for every choice.
      TESSEL_ASSERT_OK(sch.ComputeAt(b, *at));
      EXPECT_THAT(LowerText(sch, HostT()), Not(HasSubstr("ERROR")));
    }
    seen.insert(first);
  }
  EXPECT_EQ(seen.size(), 4u);
}

TEST(ScheduleSampleComputeLocation, ReductionAndOutputCannotInline) {
  Schedule sch = NewSchedule(MatmulRelu(8, 8, 8));
  BlockRV c = BlockOf(sch, "C");
  ExpectFails(
      sch, [&] { return sch.SampleComputeLocation(c, -1); }, kInvalid,
      "sample_compute_location: decision -1 is not a location of stage C");
  BlockRV d = BlockOf(sch, "D");
  ExpectFails(
      sch, [&] { return sch.SampleComputeLocation(d, 0); }, kInvalid,
      "sample_compute_location: decision 0 is not a location of stage D");
  auto root = sch.SampleComputeLocation(d);
  TESSEL_ASSERT_OK(root);
  EXPECT_EQ(root->id, Schedule::kRootLoop);
}

TEST(ScheduleErrors, SampleComputeLocationOfInlinedStage) {
  Schedule sch = NewSchedule(ElementwiseChain(8, 8));
  BlockRV b = BlockOf(sch, "B");
  TESSEL_ASSERT_OK(sch.ComputeInline(b));
  ExpectFails(
      sch, [&] { return sch.SampleComputeLocation(b); }, kPrecondition,
      "sample_compute_location: stage B was inlined and has no loops");
}

TEST(ScheduleSampleComputeLocation, SeveralConsumersOnlyRootOrInline) {
  Schedule sch = NewSchedule(Softmax(8, 16));
  BlockRV e = BlockOf(sch, "E");  // read by Sm and Y
  ExpectFails(
      sch, [&] { return sch.SampleComputeLocation(e, 0); }, kInvalid,
      "sample_compute_location: decision 0 is not a location of stage E");
  TESSEL_ASSERT_OK(sch.SampleComputeLocation(e, -1));
}

// Regression: inline (-1) is offered only where compute_inline accepts it: not with a stage
// attached to the stage's loops (Mx at a loop of E), nor for a stage without consumers.
TEST(ScheduleSampleComputeLocation, InlineNotOfferedWhenAStageIsAttached) {
  Schedule sch = NewSchedule(Softmax(8, 16));
  BlockRV mx = BlockOf(sch, "Mx");
  BlockRV e = BlockOf(sch, "E");
  TESSEL_ASSERT_OK(sch.ComputeAt(mx, LoopsOf(sch, e)[0]));
  ExpectFails(
      sch, [&] { return sch.SampleComputeLocation(e, -1); }, kInvalid,
      "decision -1 is not a location of stage E");
  Schedule dead = NewSchedule(DeadStageWorkload());
  BlockRV b = BlockOf(dead, "B");
  ExpectFails(
      dead, [&] { return dead.SampleComputeLocation(b, -1); }, kInvalid,
      "decision -1 is not a location of stage B");
}

// A consumer attached inside the stage (reverse_compute_at) cannot host it: compute_at would make
// a cycle, so its loops are not offered.
TEST(ScheduleSampleComputeLocation, ConsumerAttachedInsideIsNotOffered) {
  Schedule sch = NewSchedule(MatmulRelu(16, 16, 8));
  BlockRV c = BlockOf(sch, "C");
  BlockRV d = BlockOf(sch, "D");
  TESSEL_ASSERT_OK(sch.ReverseComputeAt(d, LoopsOf(sch, c)[1]));
  ExpectFails(
      sch, [&] { return sch.SampleComputeLocation(c, 0); }, kInvalid,
      "decision 0 is not a location of stage C");
}

// Whatever is sampled can be applied.
TEST(ScheduleSampleComputeLocation, SampledLocationsCanBeApplied) {
  for (uint64_t seed = 0; seed < 24; ++seed) {
    SCOPED_TRACE(seed);
    Schedule sch = NewSchedule(MatmulRelu(16, 16, 8), seed);
    BlockRV c = BlockOf(sch, "C");
    BlockRV d = BlockOf(sch, "D");
    if (seed % 2) TESSEL_ASSERT_OK(sch.ReverseComputeAt(d, LoopsOf(sch, c)[1]));
    auto loc = sch.SampleComputeLocation(c);
    TESSEL_ASSERT_OK(loc);
    const absl::Status applied = sch.ComputeAt(c, *loc);
    EXPECT_TRUE(applied.ok()) << applied;
  }
}

// The explicit form: the decision is an index into candidate loops given by the caller (here the
// loops of the consumer's k split, as a cache level is chosen in multi-level tiling).
TEST(ScheduleSampleComputeLocation, ExplicitCandidatesDecisionIsAnIndex) {
  for (int64_t d : {0, 1}) {
    SCOPED_TRACE(d);
    Schedule sch = NewSchedule(Matmul(16, 16, 16));
    BlockRV c = BlockOf(sch, "C");
    BlockRV a = ValueOrDie(sch.CacheRead("A", "local", {c}));
    std::vector<LoopRV> l = LoopsOf(sch, c);
    std::vector<LoopRV> k = ValueOrDie(sch.Split(l[2], {4, 4}));
    auto at = sch.SampleComputeLocation(a, {k[0], k[1]}, d);
    TESSEL_ASSERT_OK(at);
    EXPECT_EQ(sch.LoopName(*at), d == 0 ? "C.k_0" : "C.k_1");
    const Instruction& inst = sch.trace().insts.back();
    EXPECT_EQ(inst.kind, "sample_compute_location");
    EXPECT_EQ(inst.inputs.size(), 3u);  // the stage, then the candidates
    EXPECT_EQ(inst.decision, nlohmann::json(d));
    TESSEL_ASSERT_OK(sch.ComputeAt(a, *at));
    // The trace replays through JSON to the same attachment, and another decision moves it.
    nlohmann::json j = sch.trace().ToJson();
    auto again = Replay(sch.workload(), ValueOrDie(Trace::FromJson(j)));
    TESSEL_ASSERT_OK(again);
    EXPECT_EQ(StageNamed(*again, "A_local").attach.iter, StageNamed(sch, "A_local").attach.iter);
    EXPECT_EQ(again->trace().ToJson(), j);
    for (auto& inst_json : j["insts"]) {
      if (inst_json["kind"] == "sample_compute_location") inst_json["decision"] = 1 - d;
    }
    auto moved = Replay(sch.workload(), ValueOrDie(Trace::FromJson(j)));
    TESSEL_ASSERT_OK(moved);
    EXPECT_NE(StageNamed(*moved, "A_local").attach.iter, StageNamed(sch, "A_local").attach.iter);
    EXPECT_THAT(LowerText(*moved, HostT()), Not(HasSubstr("ERROR")));
  }
  // Sampled decisions cover the list.
  std::set<int64_t> seen;
  for (uint64_t seed = 0; seed < 16; ++seed) {
    Schedule sch = NewSchedule(Matmul(16, 16, 16), seed);
    BlockRV c = BlockOf(sch, "C");
    BlockRV a = ValueOrDie(sch.CacheRead("A", "local", {c}));
    std::vector<LoopRV> l = LoopsOf(sch, c);
    TESSEL_ASSERT_OK(sch.SampleComputeLocation(a, {l[0], l[1], l[2]}));
    seen.insert(sch.trace().insts.back().decision.get<int64_t>());
  }
  EXPECT_EQ(seen.size(), 3u);
}

TEST(ScheduleErrors, SampleComputeLocationRefusedCandidate) {
  Schedule sch = NewSchedule(Matmul(16, 16, 16));
  BlockRV c = BlockOf(sch, "C");
  BlockRV a = ValueOrDie(sch.CacheRead("A", "shared", {c}));
  BlockRV al = ValueOrDie(sch.CacheRead("A_shared", "local", {c}));
  std::vector<LoopRV> l = LoopsOf(sch, c);
  // A_shared's reader A_shared_local is not inside C yet: compute_at would refuse every loop.
  ExpectFails(
      sch,
      [&] {
        return sch.SampleComputeLocation(a, {l[0], l[1]});
      },
      kPrecondition,
      "sample_compute_location: candidate 0 (loop i of stage C) is not a location of stage "
      "A_shared: compute_at: stage A_shared is also read by stage A_shared_local, which is not "
      "inside stage C; cache_read it for each reader or attach that reader too");
  // A stage cannot be its own location.
  std::vector<LoopRV> own = LoopsOf(sch, al);
  ExpectFails(
      sch,
      [&] {
        return sch.SampleComputeLocation(al, {l[2], own[0]});
      },
      kInvalid,
      "candidate 1 (loop ax0 of stage A_shared_local) is not a location of stage "
      "A_shared_local: compute_at: cannot attach stage A_shared_local to itself");
  ExpectFails(
      sch,
      [&] {
        return sch.SampleComputeLocation(al, {l[0], l[2]}, 2);
      },
      kInvalid,
      "sample_compute_location: decision 2 is not an index below 2 (the candidate loops of "
      "stage A_shared_local)");
  ExpectFails(
      sch, [&] { return sch.SampleComputeLocation(al, std::vector<LoopRV>{}); }, kInvalid,
      "sample_compute_location: needs at least one candidate loop for stage A_shared_local");
}

}  // namespace
}  // namespace tessel::schedules
