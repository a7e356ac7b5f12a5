#pragma once

// Helpers shared by the schedule primitive tests (tests/schedules/primitive/*_test.cc).

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "schedules/schedule/schedule.h"
#include "tests/schedules/test_workloads.h"

namespace tessel::schedules::primitive_test {

using namespace test_workloads;  // NOLINT

inline constexpr absl::StatusCode kInvalid = absl::StatusCode::kInvalidArgument;
inline constexpr absl::StatusCode kPrecondition = absl::StatusCode::kFailedPrecondition;

inline void ExpectError(const absl::Status& st, absl::StatusCode code, const std::string& sub) {
  EXPECT_EQ(st.code(), code) << st;
  EXPECT_THAT(std::string(st.message()), ::testing::HasSubstr(sub));
}

// Runs a primitive that must fail with `code` and a message containing `sub`, and checks that it
// left the schedule unchanged (stages and trace).
template <typename F>
void ExpectFails(Schedule& sch, F&& f, absl::StatusCode code, const std::string& sub) {
  const std::string before = DescribeSchedule(sch);
  const size_t trace_len = sch.trace().insts.size();
  const absl::Status st = StatusOf(f());
  ASSERT_FALSE(st.ok()) << "expected an error containing: " << sub;
  ExpectError(st, code, sub);
  EXPECT_EQ(sch.trace().insts.size(), trace_len) << "a failed primitive was recorded";
  EXPECT_EQ(DescribeSchedule(sch), before) << "a failed primitive changed the state";
}

inline const Stage& StageNamed(const Schedule& sch, const std::string& name) {
  const Stage* s = sch.FindStage(name);
  if (!s) throw std::runtime_error("no stage " + name);
  return *s;
}

// Leaf loop names of a stage, outermost first.
inline std::vector<std::string> LeafNames(const Stage& s) {
  std::vector<std::string> out;
  for (int l : s.leaves) out.push_back(s.iters[l].var->name);
  return out;
}
inline std::vector<int64_t> LeafExtents(const Stage& s) {
  std::vector<int64_t> out;
  for (int l : s.leaves) out.push_back(s.iters[l].extent);
  return out;
}

// Position of `needle` in `hay`, or npos; used to check statement order in printed IR.
inline size_t Pos(const std::string& hay, const std::string& needle) { return hay.find(needle); }

// Matmul tiled for CUDA: C's loops i_0 j_0 i_1 j_1 k_0 k_1 with i_0/j_0 bound to blocks and
// i_1/j_1 to threads (16 x 16 tiles, k in steps of 8).
struct TiledMatmul {
  Schedule sch;
  BlockRV c;
  LoopRV i0, j0, i1, j1, k0, k1;
};

inline TiledMatmul MakeTiledMatmul(int64_t m, int64_t n, int64_t k) {
  Schedule sch = NewSchedule(Matmul(m, n, k));
  BlockRV c = BlockOf(sch, "C");
  std::vector<LoopRV> l = LoopsOf(sch, c);
  std::vector<LoopRV> i = ValueOrDie(sch.Split(l[0], {-1, 16}));
  std::vector<LoopRV> j = ValueOrDie(sch.Split(l[1], {-1, 16}));
  std::vector<LoopRV> kk = ValueOrDie(sch.Split(l[2], {-1, 8}));
  if (!sch.Reorder({i[0], j[0], i[1], j[1], kk[0], kk[1]}).ok())
    throw std::runtime_error("reorder");
  if (!sch.Bind(i[0], "blockIdx.y").ok() || !sch.Bind(j[0], "blockIdx.x").ok() ||
      !sch.Bind(i[1], "threadIdx.y").ok() || !sch.Bind(j[1], "threadIdx.x").ok()) {
    throw std::runtime_error("bind");
  }
  return TiledMatmul{sch, c, i[0], j[0], i[1], j[1], kk[0], kk[1]};
}

// A = input; B = A * 2 (read by nobody); C = A + 1 (output).
inline Workload DeadStageWorkload() {
  Workload w;
  w.name = "dead";
  TensorDef a = InputTensor("A", {8});
  TensorDef b = ComputeTensor("B", {8}, {"i"});
  b.body = Ld(a, {b.axes[0]}) * MakeFloat(2.0);
  TensorDef c = ComputeTensor("C", {8}, {"i"});
  c.body = Ld(a, {c.axes[0]}) + MakeFloat(1.0);
  w.tensors = {a, b, c};
  w.outputs = {"C"};
  return w;
}

}  // namespace tessel::schedules::primitive_test
