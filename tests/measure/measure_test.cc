// The measurement vocabulary (measure/): status names round-trip, a status attached to an
// absl::Status is found again, timings' summaries, and the peak resources the tuning log keeps.

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
  m.status = MeasureStatus::kRuntimeError;
  EXPECT_EQ(m.latency_ms(), 0);
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
