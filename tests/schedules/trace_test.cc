// Tests of traces (schedules/schedule/trace.h) and Replay (schedule.h): the JSON form and its
// round trip, replay of recorded schedules (same trace, same lowered program), replay with changed
// decisions, and the errors for malformed traces.

#include "schedules/schedule/trace.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "schedules/lower/lower.h"
#include "schedules/schedule/schedule.h"
#include "schedules/space/space_generator.h"
#include "schedules/target/target.h"
#include "schedules/workload/builtins.h"
#include "tests/schedules/recorded_schedules.h"
#include "tests/schedules/test_workloads.h"

namespace tessel::schedules {
namespace {

using nlohmann::json;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using namespace test_workloads;      // NOLINT
using namespace recorded_schedules;  // NOLINT

constexpr absl::StatusCode kInvalid = absl::StatusCode::kInvalidArgument;

void ExpectError(const absl::Status& st, absl::StatusCode code, const std::string& sub) {
  EXPECT_EQ(st.code(), code) << st;
  EXPECT_THAT(std::string(st.message()), HasSubstr(sub));
}

// =============================================================================================
// JSON form.

TEST(TraceJson, DocumentedForm) {
  Schedule sch = CudaTiledMatmul(3);
  const json j = sch.trace().ToJson();
  EXPECT_EQ(j["version"], 1);
  ASSERT_TRUE(j["insts"].is_array());
  EXPECT_EQ(j["insts"][0], json::parse(R"({"kind": "get_stage", "attrs": {"name": "C"},
                                           "outputs": ["b0"]})"));
  EXPECT_EQ(j["insts"][1], json::parse(R"({"kind": "get_loops", "inputs": ["b0"],
                                           "outputs": ["l1", "l2", "l3"]})"));
  const json& tile = j["insts"][2];
  EXPECT_EQ(tile["kind"], "sample_perfect_tile");
  EXPECT_EQ(tile["inputs"], json::parse(R"(["l1"])"));
  EXPECT_EQ(tile["attrs"], json::parse(R"({"n": 2, "max_innermost": 16})"));
  EXPECT_EQ(tile["outputs"], json::parse(R"(["v4", "v5"])"));
  ASSERT_TRUE(tile["decision"].is_array());
  EXPECT_EQ(tile["decision"][0].get<int64_t>() * tile["decision"][1].get<int64_t>(), 64);
  const json& split = j["insts"][4];
  EXPECT_EQ(split["kind"], "split");
  EXPECT_EQ(split["inputs"], json::parse(R"(["l1", "v4", "v5"])"));
  EXPECT_EQ(split["attrs"], json::parse(R"({"factors": [null, null]})"));
  EXPECT_EQ(j["insts"][6]["attrs"], json::parse(R"({"factors": [-1, 8]})"));
  // Instructions without attributes or decisions leave those keys out.
  for (const json& inst : j["insts"]) {
    if (inst.contains("decision")) {
      EXPECT_THAT(inst["kind"].get<std::string>(), HasSubstr("sample_"));
    }
  }
}

TEST(TraceJson, RoundTripPreservesJson) {
  for (const Recorded& r : AllRecorded()) {
    SCOPED_TRACE(r.name);
    const Trace t = r.make(1).trace();
    auto back = Trace::FromJson(t.ToJson());
    TESSEL_ASSERT_OK(back);
    EXPECT_EQ(back->ToJson(), t.ToJson());
    ASSERT_EQ(back->insts.size(), t.insts.size());
    for (size_t i = 0; i < t.insts.size(); ++i) {
      EXPECT_EQ(back->insts[i].kind, t.insts[i].kind);
      EXPECT_EQ(back->insts[i].inputs, t.insts[i].inputs);
      EXPECT_EQ(back->insts[i].outputs, t.insts[i].outputs);
      EXPECT_EQ(back->insts[i].decision, t.insts[i].decision);
    }
    auto parsed = Trace::Parse(t.ToJsonString());
    TESSEL_ASSERT_OK(parsed);
    EXPECT_EQ(parsed->ToJson(), t.ToJson());
    auto compact = Trace::Parse(t.ToJsonString(-1));
    TESSEL_ASSERT_OK(compact);
    EXPECT_EQ(compact->ToJson(), t.ToJson());
    EXPECT_EQ(*compact, *parsed) << compact->ToJsonString();
  }
}

// Regression: instructions without attributes used to be recorded with JSON null attrs (from
// `Instruction{kind, inputs, {}, outputs, {}}`) while FromJson gives `{}`, so a round trip did not
// compare equal. Record and FromJson both normalize attrs to an object.
TEST(TraceJson, RoundTripEqualsOriginal) {
  for (const Recorded& r : AllRecorded()) {
    SCOPED_TRACE(r.name);
    const Trace t = r.make(1).trace();
    auto back = Trace::FromJson(t.ToJson());
    TESSEL_ASSERT_OK(back);
    EXPECT_EQ(*back, t) << back->ToJsonString() << "\nvs\n" << t.ToJsonString();
    auto replayed = Replay(r.make(1).workload(), *back, 1);
    TESSEL_ASSERT_OK(replayed);
    EXPECT_EQ(replayed->trace(), *back) << replayed->trace().ToJsonString();
    for (const Instruction& inst : t.insts) EXPECT_TRUE(inst.attrs.is_object()) << inst.kind;
  }
}

TEST(TraceJson, NullAttrsReadAsEmptyObject) {
  auto t = Trace::Parse(R"({"version": 1, "insts": [
      {"kind": "get_stage", "attrs": {"name": "C"}, "outputs": ["b0"]},
      {"kind": "get_loops", "inputs": ["b0"], "attrs": null, "outputs": ["l1", "l2", "l3"]}]})");
  TESSEL_ASSERT_OK(t);
  EXPECT_TRUE(t->insts[1].attrs.is_object());
  auto sch = Replay(Matmul(8, 8, 8), *t);
  TESSEL_ASSERT_OK(sch);
  EXPECT_EQ(sch->trace(), *t);
}

TEST(TraceJsonErrors, AttrsNotAnObject) {
  auto t = Trace::Parse(R"({"version": 1, "insts": [
      {"kind": "get_stage", "attrs": ["C"], "outputs": ["b0"]}]})");
  ASSERT_FALSE(t.ok());
  ExpectError(t.status(), kInvalid, "trace instruction 0 (get_stage): \"attrs\" must be an object");
}

TEST(TraceJson, EmptyTrace) {
  Trace t;
  EXPECT_EQ(t.ToJson(), json::parse(R"({"version": 1, "insts": []})"));
  auto back = Trace::Parse(t.ToJsonString());
  TESSEL_ASSERT_OK(back);
  EXPECT_TRUE(back->insts.empty());
  auto sch = Replay(Matmul(8, 8, 8), *back);
  TESSEL_ASSERT_OK(sch);
  EXPECT_TRUE(sch->trace().insts.empty());
}

TEST(TraceJsonErrors, NotJson) {
  auto t = Trace::Parse("{\"version\": 1, \"insts\": [");
  ASSERT_FALSE(t.ok());
  ExpectError(t.status(), kInvalid, "trace is not valid JSON");
}

TEST(TraceJsonErrors, NotAnObject) {
  auto t = Trace::FromJson(json::parse("[1, 2]"));
  ASSERT_FALSE(t.ok());
  ExpectError(t.status(), kInvalid,
              "trace JSON must be an object with an integer \"version\" and an \"insts\" array");
  auto t2 = Trace::FromJson(json::parse(R"({"version": "1", "insts": []})"));
  ASSERT_FALSE(t2.ok());
  ExpectError(t2.status(), kInvalid, "integer \"version\"");
}

TEST(TraceJsonErrors, VersionMismatch) {
  auto t = Trace::Parse(R"({"version": 2, "insts": []})");
  ASSERT_FALSE(t.ok());
  ExpectError(t.status(), kInvalid, "trace version 2 is not supported; this build reads version 1");
}

TEST(TraceJsonErrors, NoInsts) {
  auto t = Trace::Parse(R"({"version": 1})");
  ASSERT_FALSE(t.ok());
  ExpectError(t.status(), kInvalid, "trace JSON has no \"insts\" array");
  auto t2 = Trace::Parse(R"({"version": 1, "insts": {}})");
  ASSERT_FALSE(t2.ok());
  ExpectError(t2.status(), kInvalid, "trace JSON has no \"insts\" array");
}

TEST(TraceJsonErrors, InstructionWithoutKind) {
  auto t = Trace::Parse(R"({"version": 1, "insts": [{"inputs": []}]})");
  ASSERT_FALSE(t.ok());
  ExpectError(t.status(), kInvalid, "trace instruction 0 has no string \"kind\"");
}

TEST(TraceJsonErrors, UnknownKind) {
  auto t = Trace::Parse(R"({"version": 1, "insts": [
      {"kind": "get_stage", "attrs": {"name": "C"}, "outputs": ["b0"]},
      {"kind": "tile", "inputs": ["b0"]}]})");
  ASSERT_FALSE(t.ok());
  ExpectError(t.status(), kInvalid, "trace instruction 1 has unknown kind 'tile'");
}

TEST(TraceJsonErrors, NamesMustBeStrings) {
  auto t = Trace::Parse(R"({"version": 1, "insts": [{"kind": "get_loops", "inputs": "b0"}]})");
  ASSERT_FALSE(t.ok());
  ExpectError(t.status(), kInvalid,
              "trace instruction 0 (get_loops): \"inputs\" must be an array of names");
  auto t2 = Trace::Parse(
      R"({"version": 1, "insts": [{"kind": "get_loops", "inputs": ["b0"], "outputs": [1]}]})");
  ASSERT_FALSE(t2.ok());
  ExpectError(t2.status(), kInvalid,
              "trace instruction 0 (get_loops): \"outputs\" must hold strings");
}

// =============================================================================================
// Replay.

TEST(TraceReplay, SameTraceAndSameProgram) {
  for (const Recorded& r : AllRecorded()) {
    for (uint64_t seed : {0u, 1u, 7u}) {
      SCOPED_TRACE(r.name + " seed " + std::to_string(seed));
      Schedule orig = r.make(seed);
      const std::string orig_ir = ProgramText(orig, r.cuda);
      ASSERT_THAT(orig_ir, ::testing::Not(HasSubstr("ERROR"))) << orig_ir;
      // Replay with another seed: the recorded decisions are used.
      auto rep = Replay(orig.workload(), orig.trace(), seed + 100);
      TESSEL_ASSERT_OK(rep);
      EXPECT_EQ(rep->trace(), orig.trace()) << rep->trace().ToJsonString();
      EXPECT_EQ(rep->trace().ToJson(), orig.trace().ToJson());
      EXPECT_EQ(ProgramText(*rep, r.cuda), orig_ir);
      EXPECT_EQ(DescribeSchedule(*rep), DescribeSchedule(orig));
      // Through the JSON text, as the tuner's database stores it.
      auto parsed = Trace::Parse(orig.trace().ToJsonString());
      TESSEL_ASSERT_OK(parsed);
      auto rep2 = Replay(orig.workload(), *parsed, 12345);
      TESSEL_ASSERT_OK(rep2);
      EXPECT_EQ(rep2->trace().ToJson(), orig.trace().ToJson());
      EXPECT_EQ(ProgramText(*rep2, r.cuda), orig_ir);
    }
  }
}

TEST(TraceReplay, ReplayIsDeterministic) {
  Schedule orig = CudaTiledMatmul(5);
  auto a = Replay(orig.workload(), orig.trace());
  auto b = Replay(orig.workload(), orig.trace());
  TESSEL_ASSERT_OK(a);
  TESSEL_ASSERT_OK(b);
  EXPECT_EQ(ProgramText(*a, true), ProgramText(*b, true));
}

// Index of the first instruction of `kind`.
size_t FindInst(const json& j, const std::string& kind) {
  for (size_t i = 0; i < j["insts"].size(); ++i) {
    if (j["insts"][i]["kind"] == kind) return i;
  }
  throw std::runtime_error("no instruction " + kind);
}

TEST(TraceReplay, ChangedPerfectTileDecisionIsApplied) {
  Schedule orig = CudaTiledMatmul(0);
  json j = orig.trace().ToJson();
  const size_t t0 = FindInst(j, "sample_perfect_tile");
  j["insts"][t0]["decision"] = json::parse("[8, 8]");
  j["insts"][t0 + 1]["decision"] = json::parse("[2, 32]");  // innermost 32 > 16: rejected
  auto bad = Replay(orig.workload(), ValueOrDie(Trace::FromJson(j)));
  ASSERT_FALSE(bad.ok());
  ExpectError(bad.status(), kInvalid,
              "sample_perfect_tile: decision's innermost factor 32 exceeds max_innermost 16");
  j["insts"][t0 + 1]["decision"] = json::parse("[16, 4]");
  auto rep = Replay(orig.workload(), ValueOrDie(Trace::FromJson(j)));
  TESSEL_ASSERT_OK(rep);
  EXPECT_EQ(rep->trace().insts[t0].decision, json::parse("[8, 8]"));
  EXPECT_EQ(rep->trace().insts[t0 + 1].decision, json::parse("[16, 4]"));
  const Stage& c = *rep->FindStage("C");
  std::vector<int64_t> extents;
  for (int l : c.leaves) extents.push_back(c.iters[l].extent);
  EXPECT_THAT(extents, ElementsAre(8, 16, 8, 4, 8, 8));  // i_0 j_0 i_1 j_1 k_0 k_1
  auto prog = Lower(*rep, CudaT());
  TESSEL_ASSERT_OK(prog);
  EXPECT_EQ(prog->kernels[0].launch.grid[0], 16);  // blockIdx.x = j_0
  EXPECT_EQ(prog->kernels[0].launch.grid[1], 8);   // blockIdx.y = i_0
  EXPECT_EQ(prog->kernels[0].launch.block[0], 4);
  EXPECT_EQ(prog->kernels[0].launch.block[1], 8);
  const AllocateNode* a = FindAllocate(prog->kernels[0].body, "A_shared");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->buffer->shape, (std::vector<int64_t>{8, 8}));
}

// With innermost_by_size, the innermost factor is drawn in proportion to its size (the block
// rasterization's group: rules::BindBlocksRasterized), and the instruction says so, so that a
// replay draws the same way.
TEST(TraceReplay, PerfectTileDrawsItsInnermostFactorBySize) {
  std::map<int64_t, int> counts;
  constexpr int kDraws = 3000;
  for (uint64_t seed = 0; seed < kDraws; ++seed) {
    Schedule sch = NewSchedule(Matmul(64, 64, 64), seed);
    const BlockRV c = ValueOrDie(sch.GetBlock("C"));
    const std::vector<LoopRV> loops = ValueOrDie(sch.GetLoops(c));
    const std::vector<IntRV> f =
        ValueOrDie(sch.SamplePerfectTile(loops[0], 2, 8, std::nullopt, std::nullopt, true));
    ++counts[sch.Value(f[1])];
    if (seed == 0) {
      const json tile = sch.trace().ToJson()["insts"][2];
      EXPECT_EQ(tile["attrs"], json::parse(R"({"n": 2, "max_innermost": 8,
                                               "innermost_by_size": 1})"));
      auto rep = Replay(sch.workload(), sch.trace());
      TESSEL_ASSERT_OK(rep);
      EXPECT_EQ(rep->trace().ToJson()["insts"][2], tile);
    }
  }
  ASSERT_EQ(counts.size(), 4u);  // 1, 2, 4, 8
  for (const auto& [factor, n] : counts) {
    EXPECT_NEAR(static_cast<double>(n) / kDraws, static_cast<double>(factor) / 15.0, 0.03)
        << factor;
  }
}

TEST(TraceReplay, ChangedCategoricalDecisionIsApplied) {
  Schedule orig = CudaTiledMatmul(0);
  json j = orig.trace().ToJson();
  const size_t ci = FindInst(j, "sample_categorical");
  j["insts"][ci]["decision"] = 2;  // candidate 64
  // The annotation's literal value was recorded, so it stays; the sampled value changes.
  auto rep = Replay(orig.workload(), ValueOrDie(Trace::FromJson(j)));
  TESSEL_ASSERT_OK(rep);
  EXPECT_EQ(rep->trace().insts[ci].decision, json(2));
  const std::string out = rep->trace().insts[ci].outputs.at(0);
  EXPECT_EQ(rep->Value(IntRV{std::stoi(out.substr(1))}), 64);
}

// A categorical capped at a loop's extent (a persistent grid's blocks) follows the extent the
// earlier decisions give the loop when replayed: candidate 0 is the whole extent, a larger one
// is capped, a smaller one c is the size of ceil(E / c) equal parts.
TEST(TraceReplay, CappedCategoricalFollowsTheLoopsExtent) {
  auto created = Schedule::Create(Matmul(64, 8, 8));
  TESSEL_ASSERT_OK(created);
  Schedule s = *std::move(created);
  auto c = s.GetBlock("C");
  TESSEL_ASSERT_OK(c);
  auto loops = s.GetLoops(*c);
  TESSEL_ASSERT_OK(loops);
  auto tile = s.SamplePerfectTile((*loops)[0], 2, 64, std::vector<int64_t>{16, 4});
  TESSEL_ASSERT_OK(tile);
  auto split = s.Split((*loops)[0], {(*tile)[0], (*tile)[1]});
  TESSEL_ASSERT_OK(split);
  auto blocks = s.SampleCategorical({0, 6, 32}, {1, 1, 1}, 1, (*split)[0]);
  TESSEL_ASSERT_OK(blocks);
  EXPECT_EQ(s.Value(*blocks), 6);  // 16 in 3 parts of 6
  TESSEL_ASSERT_OK(s.Split((*split)[0], {-1, *blocks}).status());
  json j = s.trace().ToJson();
  const size_t ti = FindInst(j, "sample_perfect_tile");
  const size_t ci = FindInst(j, "sample_categorical");
  ASSERT_EQ(j["insts"][ci]["inputs"].size(), 1u) << "the loop it is capped at";
  auto value = [&](const json& jj) -> int64_t {
    auto rep = Replay(s.workload(), ValueOrDie(Trace::FromJson(jj)));
    EXPECT_TRUE(rep.ok()) << rep.status();
    if (!rep.ok()) return -1;
    const std::string out = rep->trace().insts[ci].outputs.at(0);
    return rep->Value(IntRV{std::stoi(out.substr(1))});
  };
  EXPECT_EQ(value(j), 6);
  j["insts"][ti]["decision"] = json::array({4, 16});  // the loop now runs 4 times
  EXPECT_EQ(value(j), 4) << "6 capped at the extent 4";
  j["insts"][ci]["decision"] = 0;
  EXPECT_EQ(value(j), 4) << "0: the extent";
  j["insts"][ti]["decision"] = json::array({64, 1});
  j["insts"][ci]["decision"] = 2;
  EXPECT_EQ(value(j), 32);
  j["insts"][ci]["decision"] = 1;
  EXPECT_EQ(value(j), 6) << "64 in 11 parts of 6";
  j["insts"][ci]["decision"] = 0;
  EXPECT_EQ(value(j), 64);
  j["insts"][ti]["decision"] = json::array({8, 8});
  j["insts"][ci]["decision"] = 1;
  EXPECT_EQ(value(j), 4) << "8 in 2 parts of 4, not 6 + 2";
}

TEST(TraceReplay, MissingDecisionIsSampledWithTheSeed) {
  Schedule orig = CudaTiledMatmul(0);
  json j = orig.trace().ToJson();
  for (json& inst : j["insts"]) inst.erase("decision");
  const Trace stripped = ValueOrDie(Trace::FromJson(j));
  for (uint64_t seed = 0; seed < 10; ++seed) {
    auto a = Replay(orig.workload(), stripped, seed);
    auto b = Replay(orig.workload(), stripped, seed);
    TESSEL_ASSERT_OK(a);
    TESSEL_ASSERT_OK(b);
    EXPECT_EQ(a->trace(), b->trace()) << a->trace().ToJsonString();
    const Stage& c = *a->FindStage("C");
    EXPECT_EQ(c.iters[c.leaves[0]].extent * c.iters[c.leaves[2]].extent, 64);
    // The replayed trace records the decisions it sampled, and replays to the same program.
    auto again = Replay(orig.workload(), a->trace(), seed + 1);
    TESSEL_ASSERT_OK(again);
    EXPECT_EQ(ProgramText(*again, true), ProgramText(*a, true));
  }
}

TEST(TraceReplay, ComputeLocationDecisionIsApplied) {
  Schedule orig = HostChainScoped(0);
  json j = orig.trace().ToJson();
  const size_t si = FindInst(j, "sample_compute_location");
  EXPECT_EQ(j["insts"][si]["decision"], 1);
  j["insts"][si]["decision"] = 0;  // C.i instead of C.j
  auto rep = Replay(orig.workload(), ValueOrDie(Trace::FromJson(j)));
  TESSEL_ASSERT_OK(rep);
  EXPECT_EQ(rep->trace().insts[si].outputs, orig.trace().insts[si].outputs);
  j["insts"][si]["decision"] = 5;
  auto bad = Replay(orig.workload(), ValueOrDie(Trace::FromJson(j)));
  ASSERT_FALSE(bad.ok());
  ExpectError(bad.status(), kInvalid,
              "sample_compute_location: decision 5 is not a location of stage B");
}

// ---- Replay errors.

absl::Status ReplayText(const Workload& w, const std::string& text) {
  auto t = Trace::Parse(text);
  if (!t.ok()) return t.status();
  return Replay(w, *t).status();
}

TEST(TraceReplayErrors, UndefinedInput) {
  ExpectError(ReplayText(Matmul(8, 8, 8), R"({"version": 1, "insts": [
                  {"kind": "get_loops", "inputs": ["b0"], "outputs": ["l1"]}]})"),
              kInvalid, "replaying instruction 0 (get_loops): input b0 is not defined before");
}

TEST(TraceReplayErrors, WrongInputKind) {
  ExpectError(ReplayText(Matmul(8, 8, 8), R"({"version": 1, "insts": [
                  {"kind": "get_stage", "attrs": {"name": "C"}, "outputs": ["b0"]},
                  {"kind": "get_loops", "inputs": ["b0"], "outputs": ["l1", "l2", "l3"]},
                  {"kind": "split", "inputs": ["b0"], "attrs": {"factors": [2, 4]},
                   "outputs": ["l4", "l5"]}]})"),
              kInvalid,
              "replaying instruction 2 (split): input b0 has the wrong kind (expected a loop)");
  ExpectError(ReplayText(Matmul(8, 8, 8), R"({"version": 1, "insts": [
                  {"kind": "get_stage", "attrs": {"name": "C"}, "outputs": ["b0"]},
                  {"kind": "get_loops", "inputs": ["b0"], "outputs": ["l1", "l2", "l3"]},
                  {"kind": "split", "inputs": ["l1", "l2"], "attrs": {"factors": [null, 4]},
                   "outputs": ["l4", "l5"]}]})"),
              kInvalid, "input l2 has the wrong kind (expected a value)");
  ExpectError(ReplayText(Matmul(8, 8, 8), R"({"version": 1, "insts": [
                  {"kind": "get_stage", "attrs": {"name": "C"}, "outputs": ["b0"]},
                  {"kind": "get_loops", "inputs": ["b0"], "outputs": ["l1", "l2", "l3"]},
                  {"kind": "compute_inline", "inputs": ["l1"]}]})"),
              kInvalid, "input l1 has the wrong kind (expected a stage)");
}

TEST(TraceReplayErrors, MissingInput) {
  ExpectError(ReplayText(Matmul(8, 8, 8), R"({"version": 1, "insts": [
                  {"kind": "get_loops", "outputs": ["l1"]}]})"),
              kInvalid, "replaying instruction 0 (get_loops): missing input 0");
}

TEST(TraceReplayErrors, BadAttributes) {
  ExpectError(ReplayText(Matmul(8, 8, 8), R"({"version": 1, "insts": [
                  {"kind": "get_stage", "attrs": {"nom": "C"}, "outputs": ["b0"]}]})"),
              kInvalid, "replaying instruction 0 (get_stage): attribute \"name\" must be a string");
  const std::string prefix = R"({"version": 1, "insts": [
      {"kind": "get_stage", "attrs": {"name": "C"}, "outputs": ["b0"]},
      {"kind": "get_loops", "inputs": ["b0"], "outputs": ["l1", "l2", "l3"]},)";
  ExpectError(ReplayText(Matmul(8, 8, 8), prefix + R"(
                  {"kind": "split", "inputs": ["l1"], "outputs": ["l4", "l5"]}]})"),
              kInvalid, "replaying instruction 2 (split): attribute \"factors\" must be an array");
  ExpectError(ReplayText(Matmul(8, 8, 8), prefix + R"(
                  {"kind": "split", "inputs": ["l1"], "attrs": {"factors": ["2", 4]},
                   "outputs": ["l4", "l5"]}]})"),
              kInvalid, "replaying instruction 2 (split): factors must be integers or null");
  ExpectError(ReplayText(Matmul(8, 8, 8), prefix + R"(
                  {"kind": "sample_perfect_tile", "inputs": ["l1"], "attrs": {"n": 2},
                   "outputs": ["v4", "v5"]}]})"),
              kInvalid, "attribute \"max_innermost\" must be an integer");
  ExpectError(ReplayText(Matmul(8, 8, 8), R"({"version": 1, "insts": [
                  {"kind": "sample_categorical", "attrs": {"candidates": [1, 2]},
                   "outputs": ["v0"]}]})"),
              kInvalid,
              "replaying instruction 0 (sample_categorical): needs \"candidates\" and "
              "\"probs\"");
  ExpectError(ReplayText(Matmul(8, 8, 8), prefix + R"(
                  {"kind": "bind", "inputs": ["l1"], "attrs": {"thread": 1}}]})"),
              kInvalid, "replaying instruction 2 (bind): attribute \"thread\" must be a string");
}

TEST(TraceReplayErrors, WrongNumberOfOutputs) {
  ExpectError(ReplayText(Matmul(8, 8, 8), R"({"version": 1, "insts": [
                  {"kind": "get_stage", "attrs": {"name": "C"}, "outputs": ["b0"]},
                  {"kind": "get_loops", "inputs": ["b0"], "outputs": ["l1", "l2"]}]})"),
              kInvalid,
              "replaying instruction 1 (get_loops): produced 3 results but the trace names 2");
}

TEST(TraceReplayErrors, PrimitiveErrorKeepsItsCode) {
  // reorder (a Status primitive) fails: the message says which instruction.
  const absl::Status st = ReplayText(Matmul(8, 8, 8), R"({"version": 1, "insts": [
      {"kind": "get_stage", "attrs": {"name": "C"}, "outputs": ["b0"]},
      {"kind": "get_loops", "inputs": ["b0"], "outputs": ["l1", "l2", "l3"]},
      {"kind": "parallel", "inputs": ["l3"]}]})");
  ExpectError(st, kInvalid,
              "replaying instruction 2 (parallel): parallel: cannot make reduction loop k of "
              "stage C parallel");
  const absl::Status st2 = ReplayText(Matmul(8, 8, 8), R"({"version": 1, "insts": [
      {"kind": "get_stage", "attrs": {"name": "C"}, "outputs": ["b0"]},
      {"kind": "get_loops", "inputs": ["b0"], "outputs": ["l1", "l2", "l3"]},
      {"kind": "bind", "inputs": ["l1"], "attrs": {"thread": "threadIdx.x"}},
      {"kind": "bind", "inputs": ["l1"], "attrs": {"thread": "threadIdx.y"}}]})");
  ExpectError(st2, absl::StatusCode::kFailedPrecondition,
              "replaying instruction 3 (bind): bind: loop i of stage C is already threadIdx.x");
}

TEST(TraceReplayErrors, TraceOfAnotherWorkload) {
  Schedule orig = HostSoftmax(0);
  auto rep = Replay(Matmul(8, 8, 8), orig.trace());
  ASSERT_FALSE(rep.ok());
  ExpectError(rep.status(), kInvalid, "get_stage: no stage named 'E'; the stages are: C");
}

// Regression: errors of the primitives that return StatusOr (get_stage, get_loops, sample_*,
// split, fuse, cache_read, cache_write, rfactor) carry the "replaying instruction N (kind): "
// prefix too.
TEST(TraceReplayErrors, StatusOrPrimitiveErrorNamesTheInstruction) {
  const absl::Status st = ReplayText(Matmul(8, 8, 8), R"({"version": 1, "insts": [
      {"kind": "get_stage", "attrs": {"name": "C"}, "outputs": ["b0"]},
      {"kind": "get_loops", "inputs": ["b0"], "outputs": ["l1", "l2", "l3"]},
      {"kind": "split", "inputs": ["l1"], "attrs": {"factors": [0, 8]},
       "outputs": ["l4", "l5"]}]})");
  ExpectError(st, kInvalid, "replaying instruction 2 (split): split: factor 0 is not positive");
  ExpectError(ReplayText(Matmul(8, 8, 8), R"({"version": 1, "insts": [
                  {"kind": "get_stage", "attrs": {"name": "Q"}, "outputs": ["b0"]}]})"),
              kInvalid, "replaying instruction 0 (get_stage): get_stage: no stage named 'Q'");
}

// Regression: attribute and decision values of the wrong JSON type used to escape as
// nlohmann::json::type_error exceptions (a corrupt database row would crash the tuner); they are
// kInvalidArgument errors naming the attribute.
TEST(TraceReplayErrors, WrongAttributeTypesAreErrorsNotExceptions) {
  absl::Status st;
  EXPECT_NO_THROW(st = ReplayText(Matmul(8, 8, 8), R"({"version": 1, "insts": [
                      {"kind": "sample_categorical",
                       "attrs": {"candidates": "x", "probs": [1.0]}, "outputs": ["v0"]}]})"));
  EXPECT_EQ(st.code(), kInvalid) << st;
  EXPECT_NO_THROW(st = ReplayText(Matmul(8, 8, 8), R"({"version": 1, "insts": [
                      {"kind": "sample_categorical",
                       "attrs": {"candidates": [1], "probs": ["a"]}, "outputs": ["v0"]}]})"));
  EXPECT_EQ(st.code(), kInvalid) << st;
  EXPECT_NO_THROW(st = ReplayText(Matmul(8, 8, 8), R"({"version": 1, "insts": [
      {"kind": "get_stage", "attrs": {"name": "C"}, "outputs": ["b0"]},
      {"kind": "get_loops", "inputs": ["b0"], "outputs": ["l1", "l2", "l3"]},
      {"kind": "sample_perfect_tile", "inputs": ["l1"], "attrs": {"n": 2, "max_innermost": 8},
       "outputs": ["v4", "v5"], "decision": ["a", "b"]}]})"));
  EXPECT_EQ(st.code(), kInvalid) << st;
}

TEST(TraceReplayErrors, WrongAttributeTypeMessages) {
  ExpectError(ReplayText(Matmul(8, 8, 8), R"({"version": 1, "insts": [
                  {"kind": "sample_categorical",
                   "attrs": {"candidates": "x", "probs": [1.0]}, "outputs": ["v0"]}]})"),
              kInvalid,
              "replaying instruction 0 (sample_categorical): attribute \"candidates\" "
              "must be an array of integers");
  ExpectError(ReplayText(Matmul(8, 8, 8), R"({"version": 1, "insts": [
                  {"kind": "sample_categorical",
                   "attrs": {"candidates": [1], "probs": ["a"]}, "outputs": ["v0"]}]})"),
              kInvalid,
              "replaying instruction 0 (sample_categorical): attribute \"probs\" must "
              "be an array of numbers");
  ExpectError(ReplayText(Matmul(8, 8, 8), R"({"version": 1, "insts": [
                  {"kind": "sample_categorical", "attrs": {"candidates": [1], "probs": [1]},
                   "outputs": ["v0"], "decision": "0"}]})"),
              kInvalid,
              "replaying instruction 0 (sample_categorical): \"decision\" must be an "
              "integer");
  ExpectError(ReplayText(Matmul(8, 8, 8), R"({"version": 1, "insts": [
      {"kind": "get_stage", "attrs": {"name": "C"}, "outputs": ["b0"]},
      {"kind": "get_loops", "inputs": ["b0"], "outputs": ["l1", "l2", "l3"]},
      {"kind": "sample_perfect_tile", "inputs": ["l1"], "attrs": {"n": 2, "max_innermost": 8},
       "outputs": ["v4", "v5"], "decision": ["a", "b"]}]})"),
              kInvalid,
              "replaying instruction 2 (sample_perfect_tile): \"decision\" must be an "
              "array of integers");
  ExpectError(ReplayText(Matmul(8, 8, 8), R"({"version": 1, "insts": [
      {"kind": "get_stage", "attrs": {"name": "C"}, "outputs": ["b0"]},
      {"kind": "sample_compute_location", "inputs": ["b0"], "outputs": ["l1"],
       "decision": [0]}]})"),
              kInvalid,
              "replaying instruction 1 (sample_compute_location): \"decision\" must be "
              "an integer");
}

// An instruction built in code with non-object attrs is an error, not an exception.
TEST(TraceReplayErrors, AttrsNotAnObjectInMemory) {
  Trace t;
  t.insts.push_back(Instruction{"get_stage", {}, nlohmann::json::array({"C"}), {"b0"}, {}});
  absl::Status st;
  EXPECT_NO_THROW(st = Replay(Matmul(8, 8, 8), t).status());
  ExpectError(st, kInvalid, "replaying instruction 0 (get_stage): \"attrs\" must be an object");
}

// The compact text (what candidate ids hash) is written without building the JSON tree; it is the
// bytes nlohmann::json's dump gives, for recorded and sampled traces of every kind of sketch and
// for names that need escaping.
TEST(TraceJson, CompactTextIsTheLibrarysDumpByteForByte) {
  int checked = 0;
  for (const Recorded& r : AllRecorded()) {
    const Trace t = r.make(1).trace();
    EXPECT_EQ(t.ToJsonString(-1), t.ToJson().dump()) << r.name;
    ++checked;
  }
  for (const auto& [spec, arch] : std::vector<std::pair<std::string, std::string>>{
           {"matmul(M=4096, N=4096, K=4096, dtype=f16)", "sm_90a"},
           {"matmul_bias_gelu(M=2048, N=8192, K=2048, dtype=f16)", "sm_80"},
           {"matmul(M=1, N=8192, K=8192, dtype=f16)", "sm_90"},
           {"softmax(rows=4096, cols=65536)", "sm_90"},
           {"conv2d(N=8, C=3, H=64, W=64, K=16, R=3, S=3, padding=1)", "sm_90"}}) {
    auto w = ParseWorkloadSpec(spec);
    ASSERT_TRUE(w.ok()) << w.status();
    auto g = SpaceGenerator::Create(*w, CudaTarget(arch));
    ASSERT_TRUE(g.ok()) << g.status();
    for (uint64_t seed = 0; seed < 24; ++seed) {
      auto c = g->Sample(seed);
      if (!c.ok() || !c->trace) continue;
      EXPECT_EQ(c->trace->ToJsonString(-1), c->trace->ToJson().dump()) << spec << " " << seed;
      ++checked;
    }
  }
  EXPECT_GT(checked, 60);
  Trace odd;
  odd.insts.push_back({"get_block",
                       {"a\"b", "c\\d", "tab\there", "\x01", "caf\xc3\xa9"},
                       json{{"name", "q\"uote"}, {"x", 1.5}, {"list", {1, -2, 3}}},
                       {"out\n"},
                       json::array({4, 8})});
  odd.insts.push_back({"split", {}, json::object(), {}, nullptr});
  odd.insts.push_back({"fuse", {"x"}, nullptr, {"y"}, json(0.25)});
  EXPECT_EQ(odd.ToJsonString(-1), odd.ToJson().dump());
  EXPECT_EQ(Trace{}.ToJsonString(-1), Trace{}.ToJson().dump());
}

}  // namespace
}  // namespace tessel::schedules
