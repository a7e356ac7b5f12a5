// CUPTI hardware counters as far as they can be checked without a GPU: the arguments Create()
// refuses before touching CUPTI, and turning metric values into measure::HardwareCounters. The
// counts themselves are checked in tests/gpu/cupti_counters_gpu_test.cc.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#ifdef TESSEL_HAVE_CUDA

#include <cmath>
#include <cstdlib>
#include <limits>
#include <map>
#include <string>

#include "worker/cuda/cupti_counters.h"

namespace tessel::worker {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Any non-null pointer: Create() must refuse the metrics before it uses the context.
CUcontext FakeContext() { return reinterpret_cast<CUcontext>(static_cast<uintptr_t>(0x1000)); }

TEST(HardwareCounterMetrics, NamesTheThreeMetrics) {
  EXPECT_THAT(HardwareCounterMetrics(),
              ElementsAre("dram__bytes_read.sum", "dram__bytes_write.sum",
                          "sm__warps_active.avg.pct_of_peak_sustained_active"));
}

TEST(HardwareCountersFromValues, TakesEachMetric) {
  absl::StatusOr<measure::HardwareCounters> c =
      HardwareCountersFromValues({{kDramReadBytesMetric, 1.5e9},
                                  {kDramWriteBytesMetric, 2.5e8},
                                  {kAchievedOccupancyMetric, 87.5},
                                  {"gpu__time_duration.sum", 1000}});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->dram_read_bytes, 1.5e9);
  EXPECT_EQ(c->dram_write_bytes, 2.5e8);
  EXPECT_EQ(c->achieved_occupancy, 87.5);
}

TEST(HardwareCountersFromValues, MissingMetricIsNamed) {
  absl::StatusOr<measure::HardwareCounters> c =
      HardwareCountersFromValues({{kDramReadBytesMetric, 1.0}, {kAchievedOccupancyMetric, 50.0}});
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(c.status().message(), HasSubstr("'dram__bytes_write.sum' was not collected"));
  EXPECT_THAT(c.status().message(), HasSubstr("HardwareCounterMetrics()"));
}

TEST(HardwareCountersFromValues, NanIsRefused) {
  absl::StatusOr<measure::HardwareCounters> c = HardwareCountersFromValues(
      {{kDramReadBytesMetric, 1.0},
       {kDramWriteBytesMetric, 1.0},
       {kAchievedOccupancyMetric, std::numeric_limits<double>::quiet_NaN()}});
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(c.status().message(), HasSubstr(kAchievedOccupancyMetric));
}

#ifdef TESSEL_HAVE_CUPTI

TEST(CuptiCountersCreate, NullContextIsRefused) {
  auto c = CuptiCounters::Create(nullptr, HardwareCounterMetrics());
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(c.status().message(), HasSubstr("need a CUDA context"));
  EXPECT_THAT(c.status().message(), HasSubstr("not null"));
}

TEST(CuptiCountersCreate, NoMetricIsRefused) {
  auto c = CuptiCounters::Create(FakeContext(), {});
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(c.status().message(), HasSubstr("no metric asked for"));
}

TEST(CuptiCountersCreate, EmptyMetricNameIsRefused) {
  auto c = CuptiCounters::Create(FakeContext(), {kDramReadBytesMetric, ""});
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(c.status().message(), HasSubstr("empty metric name"));
}

TEST(CuptiCountersCreate, TurnedOffByEnvironment) {
  setenv("TESSEL_NO_CUPTI", "1", 1);
  auto c = CuptiCounters::Create(FakeContext(), HardwareCounterMetrics());
  unsetenv("TESSEL_NO_CUPTI");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(c.status().message(), HasSubstr("TESSEL_NO_CUPTI=1 (unset it"));
}

#else

TEST(CuptiCountersCreate, BuildWithoutCuptiSaysSo) {
  auto c = CuptiCounters::Create(nullptr, HardwareCounterMetrics());
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(c.status().message(), HasSubstr("built without CUPTI"));
}

#endif  // TESSEL_HAVE_CUPTI

}  // namespace
}  // namespace tessel::worker

#endif  // TESSEL_HAVE_CUDA
