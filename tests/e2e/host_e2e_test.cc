// End to end on the host (runs in CI): every workload family, on shapes the tiles do not divide,
// with its hand-written schedule and with random legal sequences of primitives, compiled with the
// system compiler and checked against the reference lowering on random inputs.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_join.h"
#include "schedules/templates/templates.h"
#include "schedules/workload/builtins.h"
#include "tests/e2e/e2e_util.h"
#include "worker/backend.h"

namespace tessel::testing {
namespace {

using schedules::HostTarget;
using schedules::ParseWorkloadSpec;

class HostE2E : public ::testing::TestWithParam<std::string> {};

TEST_P(HostE2E, HandwrittenScheduleMatchesReference) {
  auto w = ParseWorkloadSpec(GetParam());
  ASSERT_TRUE(w.ok()) << w.status();
  const auto target = HostTarget();
  auto ref = GenerateReference(*w, target);
  ASSERT_TRUE(ref.ok()) << ref.status();
  auto sch = schedules::HandwrittenSchedule(*w, target);
  ASSERT_TRUE(sch.ok()) << sch.status();
  auto cand = Generate(*sch, target);
  ASSERT_TRUE(cand.ok()) << cand.status() << "\n" << sch->trace().ToJsonString();
  absl::Status v = worker::RunAndVerify(*cand, *ref, /*seed=*/7);
  EXPECT_TRUE(v.ok()) << v << "\n" << cand->code;
}

TEST_P(HostE2E, RandomSchedulesMatchReference) {
  auto w = ParseWorkloadSpec(GetParam());
  ASSERT_TRUE(w.ok()) << w.status();
  const auto target = HostTarget();
  auto ref = GenerateReference(*w, target);
  ASSERT_TRUE(ref.ok()) << ref.status();
  int lowered = 0;
  std::vector<std::string> rejections;
  constexpr int kSeeds = 8;
  for (uint64_t seed = 1; seed <= kSeeds; ++seed) {
    auto sch = RandomSchedule(*w, target, seed, /*steps=*/10);
    ASSERT_TRUE(sch.ok()) << sch.status();
    auto cand = Generate(*sch, target);
    if (!cand.ok()) {
      // A legal schedule may still be rejected by lowering (a precondition it checks there);
      // it must say so with a precondition error, never crash or produce wrong code.
      EXPECT_EQ(cand.status().code(), absl::StatusCode::kFailedPrecondition) << cand.status();
      rejections.push_back(std::string(cand.status().message()));
      continue;
    }
    ++lowered;
    absl::Status v = worker::RunAndVerify(*cand, *ref, seed);
    EXPECT_TRUE(v.ok()) << "seed " << seed << ": " << v << "\n"
                        << sch->trace().ToJsonString() << "\n"
                        << cand->code;
  }
  EXPECT_GE(lowered, kSeeds / 2) << "too many random schedules were rejected: "
                                 << absl::StrJoin(rejections, "; ");
}

INSTANTIATE_TEST_SUITE_P(Families, HostE2E, ::testing::ValuesIn(SmallFamilySpecs()), SpecTestName);

}  // namespace
}  // namespace tessel::testing
