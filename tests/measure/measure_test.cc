// The measurement vocabulary (measure/): status names round-trip, a status attached to an
// absl::Status is found again, timings' summaries, and the peak resources the tuning log keeps.

#include <limits>
#include <vector>

#include "gtest/gtest.h"
#include "measure/measurement.h"

namespace tessel::measure {
namespace {

constexpr MeasureStatus kAll[] = {MeasureStatus::kOk,           MeasureStatus::kCompileError,
                                  MeasureStatus::kVerifyFailed, MeasureStatus::kRuntimeError,
                                  MeasureStatus::kTimeout,      MeasureStatus::kDeviceLimitExceeded,
                                  MeasureStatus::kWorkerError};

TEST(MeasureStatus, NamesAreTheStoredOnesAndParseBack) {
  EXPECT_STREQ(MeasureStatusName(MeasureStatus::kOk), "ok");
  EXPECT_STREQ(MeasureStatusName(MeasureStatus::kCompileError), "compile_error");
  EXPECT_STREQ(MeasureStatusName(MeasureStatus::kDeviceLimitExceeded), "device_limit_exceeded");
  EXPECT_STREQ(MeasureStatusName(MeasureStatus::kWorkerError), "worker_error");
  for (MeasureStatus s : kAll) EXPECT_EQ(ParseMeasureStatus(MeasureStatusName(s)), s);
  EXPECT_EQ(ParseMeasureStatus("OK"), std::nullopt);
  EXPECT_EQ(ParseMeasureStatus(""), std::nullopt);
}

TEST(MeasureStatus, TravelsAttachedToAnAbslStatus) {
  const absl::Status plain = absl::InternalError("disk full");
  EXPECT_EQ(MeasureStatusOf(absl::OkStatus()), MeasureStatus::kOk);
  EXPECT_EQ(MeasureStatusOf(plain), MeasureStatus::kWorkerError);
  EXPECT_EQ(AttachedMeasureStatus(plain), std::nullopt);
  const absl::Status timed_out = WithMeasureStatus(plain, MeasureStatus::kTimeout);
  EXPECT_EQ(timed_out.message(), "disk full");
  EXPECT_EQ(AttachedMeasureStatus(timed_out), MeasureStatus::kTimeout);
  EXPECT_EQ(MeasureStatusOf(timed_out), MeasureStatus::kTimeout);
  EXPECT_TRUE(WithMeasureStatus(absl::OkStatus(), MeasureStatus::kTimeout).ok());

  const Measurement m = Measurement::FromStatus(
      WithMeasureStatus(absl::FailedPreconditionError("wrong"), MeasureStatus::kVerifyFailed));
  EXPECT_EQ(m.status, MeasureStatus::kVerifyFailed);
  EXPECT_EQ(m.error, "wrong");
  EXPECT_FALSE(m.ok());
}

TEST(Timings, MedianMinMaxAndLatency) {
  EXPECT_EQ(MedianOf({}), 0);
  EXPECT_EQ(MedianOf({3, 1, 2}), 2);
  EXPECT_EQ(MedianOf({4, 1, 2, 3}), 2.5);
  const Timings t = MakeTimings({3, 1, 2});
  EXPECT_EQ(t.repeats_ms, (std::vector<double>{3, 1, 2}));  // in the order measured
  EXPECT_EQ(t.min_ms, 1);
  EXPECT_EQ(t.max_ms, 3);

  Measurement m;
  m.timings = t;
  EXPECT_EQ(m.latency_ms(), 2);
  // With CUPTI kernel times, the kernel median is the latency (events add launch overhead).
  m.timings.kernel_repeats_ms = {1.5, 1.4, 1.6};
  m.timings.kernel_median_ms = 1.5;
  EXPECT_EQ(m.timings.latency_ms(), 1.5);
  EXPECT_EQ(m.latency_ms(), 1.5);
  m.status = MeasureStatus::kRuntimeError;
  EXPECT_EQ(m.latency_ms(), 0);
}

TEST(Timings, MedianHalfWidthIsTheOrderStatisticsInterval) {
  // Below 8 values the interval reaches past the ends.
  EXPECT_EQ(MedianHalfWidth({1, 2, 3, 4, 5, 6, 7}), std::numeric_limits<double>::infinity());
  // n = 8: ranks floor(4 - 2.77) = 1 and ceil(5 + 2.77) = 8, the extremes, in any order.
  EXPECT_DOUBLE_EQ(MedianHalfWidth({10, 9, 11, 10, 10, 12, 8, 10}), (12.0 - 8.0) / 2 / 10);
  // n = 100: ranks 40 and 61 of 1..100; the median is 50.5.
  std::vector<double> v;
  for (int i = 100; i >= 1; --i) v.push_back(i);
  EXPECT_DOUBLE_EQ(MedianHalfWidth(v), (61.0 - 40.0) / 2 / 50.5);
  // A few stray repeats far out do not widen it.
  std::vector<double> steady(64, 1.0);
  steady[3] = 50;
  steady[40] = 80;
  EXPECT_EQ(MedianHalfWidth(steady), 0);
  EXPECT_EQ(MedianHalfWidth(std::vector<double>(20, 0.0)), std::numeric_limits<double>::infinity());
}

TEST(Timings, EnoughRepeatsStopsAtThePrecisionOrTheTotalTime) {
  TimingOptions o;
  o.min_repeats = 5;
  o.max_repeats = 1000;
  o.min_total_ms = 200;
  o.median_precision = 0.005;
  const std::vector<double> steady(16, 0.1);  // 1.6 ms in all, the median exact
  EXPECT_TRUE(EnoughRepeats(o, steady, 1.6));
  EXPECT_FALSE(EnoughRepeats(o, std::vector<double>(4, 0.1), 0.4));  // below min_repeats
  // Noisy repeats: 16 of them are not precise to 0.5%; 200 ms of them are enough all the same.
  std::vector<double> noisy;
  for (int i = 0; i < 16; ++i) noisy.push_back(i % 2 == 0 ? 0.09 : 0.11);
  EXPECT_FALSE(EnoughRepeats(o, noisy, 1.6));
  EXPECT_TRUE(EnoughRepeats(o, noisy, 200));
  // Off: the total time rules, as before issue 21.
  o.median_precision = 0;
  EXPECT_FALSE(EnoughRepeats(o, steady, 1.6));
  EXPECT_TRUE(EnoughRepeats(o, steady, 200));
  o.max_repeats = 16;
  EXPECT_TRUE(EnoughRepeats(o, steady, 1.6));
  EXPECT_TRUE(ValidMedianPrecision(0));
  EXPECT_TRUE(ValidMedianPrecision(0.005));
  EXPECT_FALSE(ValidMedianPrecision(1));
  EXPECT_FALSE(ValidMedianPrecision(-0.01));
  EXPECT_FALSE(ValidMedianPrecision(std::numeric_limits<double>::quiet_NaN()));
}

TEST(PeakResources, IsTheMostOfAnyKernelAndRoundTripsThroughOneKernel) {
  const std::vector<KernelResources> kernels = {{"a", 40, 1024, 2048, 0}, {"b", 96, 512, 0, 16}};
  const PeakResources peak = PeakOf(kernels);
  EXPECT_EQ(peak, (PeakResources{96, 3072, 16}));
  EXPECT_EQ(PeakOf(KernelsOfPeak(peak)), peak);
  EXPECT_TRUE(KernelsOfPeak({}).empty());
  EXPECT_EQ(PeakOf({}), PeakResources{});
}

}  // namespace
}  // namespace tessel::measure
