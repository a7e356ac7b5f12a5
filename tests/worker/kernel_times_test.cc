// Kernel times from CUPTI as far as they can be checked without a GPU: splitting the activity
// records into timed repeats, and their trip through the protocol (MeasureResult).

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "measure/measurement.h"
#include "proto/convert.h"
#ifdef TESSEL_HAVE_CUDA
#include "worker/cuda/cupti_kernel_timer.h"
#endif

namespace tessel::worker {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

#ifdef TESSEL_HAVE_CUDA
CuptiKernelRecord Kernel(uint64_t start_ns, uint64_t end_ns) {
  CuptiKernelRecord r;
  r.start_ns = start_ns;
  r.end_ns = end_ns;
  return r;
}

TEST(KernelTimesPerRepeat, OneKernelPerRepeat) {
  absl::StatusOr<std::vector<double>> t =
      KernelTimesPerRepeat({Kernel(0, 1000000), Kernel(5000000, 7500000)}, 2);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_THAT(*t, ElementsAre(1.0, 2.5));
}

TEST(KernelTimesPerRepeat, SumsTheKernelsOfEachRepeat) {
  absl::StatusOr<std::vector<double>> t =
      KernelTimesPerRepeat({Kernel(0, 1000000), Kernel(1000000, 1500000), Kernel(9000000, 11000000),
                            Kernel(11000000, 11250000)},
                           2);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_THAT(*t, ElementsAre(1.5, 2.25));
}

TEST(KernelTimesPerRepeat, ACountThatIsNotAMultipleOfTheRepeatsSaysSo) {
  absl::StatusOr<std::vector<double>> t =
      KernelTimesPerRepeat({Kernel(0, 1), Kernel(2, 3), Kernel(4, 5)}, 2);
  ASSERT_FALSE(t.ok());
  EXPECT_THAT(t.status().message(),
              HasSubstr("CUPTI recorded 3 kernels for 2 timed repeats, not a multiple"));
  EXPECT_THAT(t.status().message(), HasSubstr("the CUDA-event times stand"));
  absl::StatusOr<std::vector<double>> none = KernelTimesPerRepeat({}, 3);
  ASSERT_FALSE(none.ok());
  EXPECT_THAT(none.status().message(), HasSubstr("CUPTI recorded 0 kernels for 3"));
}

TEST(KernelTimesPerRepeat, NoRepeatsNoTimes) {
  absl::StatusOr<std::vector<double>> t = KernelTimesPerRepeat({}, 0);
  ASSERT_TRUE(t.ok());
  EXPECT_TRUE(t->empty());
}

TEST(CuptiKernelTimer, TurnedOffByTheEnvironmentSaysHowToTurnItOn) {
#ifdef TESSEL_HAVE_CUPTI
  // Get() decides once per process; this test binary never uses CUPTI otherwise.
  setenv("TESSEL_NO_CUPTI", "1", 1);
  absl::StatusOr<CuptiKernelTimer*> timer = CuptiKernelTimer::Get();
  unsetenv("TESSEL_NO_CUPTI");
  ASSERT_FALSE(timer.ok());
  EXPECT_THAT(timer.status().message(), HasSubstr("TESSEL_NO_CUPTI=1 (unset it"));
#else
  absl::StatusOr<CuptiKernelTimer*> timer = CuptiKernelTimer::Get();
  ASSERT_FALSE(timer.ok());
  EXPECT_THAT(timer.status().message(), HasSubstr("built without CUPTI"));
#endif
}
#endif  // TESSEL_HAVE_CUDA

TEST(KernelTimesProto, SurviveTheTripThroughMeasureResult) {
  measure::Measurement in;
  in.timings = measure::MakeTimings({1.0, 3.0, 2.0});
  in.timings.kernel_repeats_ms = {0.9, 2.9, 1.9};
  in.timings.kernel_median_ms = 1.9;
  proto::MeasureResult m;
  proto::ToProto(in, &m);
  EXPECT_THAT(m.kernel_repeats_ms(), ElementsAre(0.9, 2.9, 1.9));
  EXPECT_EQ(m.kernel_median_ms(), 1.9);
  EXPECT_EQ(m.timing_note(), "");
  measure::Measurement out = proto::FromProto(m);
  EXPECT_THAT(out.timings.kernel_repeats_ms, ElementsAre(0.9, 2.9, 1.9));
  EXPECT_EQ(out.timings.kernel_median_ms, 1.9);
  EXPECT_THAT(out.timings.repeats_ms, ElementsAre(1.0, 3.0, 2.0));
}

TEST(KernelTimesProto, ANoteTravelsWhenThereAreNoKernelTimes) {
  measure::Measurement in;
  in.timings = measure::MakeTimings({1.0});
  in.timings.note = "CUPTI dropped 3 activity records";
  proto::MeasureResult m;
  proto::ToProto(in, &m);
  EXPECT_EQ(m.kernel_repeats_ms_size(), 0);
  EXPECT_EQ(proto::FromProto(m).timings.note, "CUPTI dropped 3 activity records");
}

TEST(KernelTimesProto, HardwareCountersTravelOnlyWhenCollected) {
  measure::Measurement in;
  in.timings.repeats_ms = {1.0};
  in.timings.counters = measure::HardwareCounters{1.5e9, 0.5e9, 87.5};
  proto::MeasureResult m;
  proto::ToProto(in, &m);
  ASSERT_TRUE(m.has_counters());
  measure::Measurement out = proto::FromProto(m);
  ASSERT_TRUE(out.timings.counters.has_value());
  EXPECT_EQ(out.timings.counters->dram_read_bytes, 1.5e9);
  EXPECT_EQ(out.timings.counters->dram_write_bytes, 0.5e9);
  EXPECT_EQ(out.timings.counters->achieved_occupancy, 87.5);
  in.timings.counters.reset();
  proto::MeasureResult none;
  proto::ToProto(in, &none);
  EXPECT_FALSE(none.has_counters());
  EXPECT_FALSE(proto::FromProto(none).timings.counters.has_value());
}

}  // namespace
}  // namespace tessel::worker
