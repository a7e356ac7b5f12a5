// Proto <-> domain conversions (proto/convert.h) and the protocol version checks.

#include "proto/convert.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "proto/protocol.h"
#include "schedules/target/target.h"
#include "schedules/workload/builtins.h"
#include "tests/e2e/e2e_util.h"

namespace tessel::testing {
namespace {

using ::testing::HasSubstr;

schedules::GeneratedSource CudaSoftmax() {
  absl::StatusOr<schedules::Workload> w = schedules::ParseWorkloadSpec("softmax(rows=4, cols=64)");
  EXPECT_TRUE(w.ok());
  absl::StatusOr<schedules::GeneratedSource> s =
      GenerateReference(*w, schedules::CudaTarget("sm_90"));
  EXPECT_TRUE(s.ok()) << s.status();
  return *s;
}

TEST(ProtoConvert, GeneratedSourceRoundTrips) {
  const schedules::GeneratedSource in = CudaSoftmax();
  proto::Source p;
  proto::ToProto(in, &p);
  EXPECT_EQ(p.target(), proto::TARGET_KIND_CUDA);
  absl::StatusOr<schedules::GeneratedSource> out = proto::FromProto(p);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->target, in.target);
  EXPECT_EQ(out->code, in.code);
  ASSERT_EQ(out->kernels.size(), in.kernels.size());
  for (size_t i = 0; i < in.kernels.size(); ++i) {
    EXPECT_EQ(out->kernels[i].entry, in.kernels[i].entry);
    EXPECT_EQ(out->kernels[i].params, in.kernels[i].params);
    EXPECT_EQ(out->kernels[i].launch.grid, in.kernels[i].launch.grid);
    EXPECT_EQ(out->kernels[i].launch.block, in.kernels[i].launch.block);
    EXPECT_EQ(out->kernels[i].launch.dynamic_shared_bytes,
              in.kernels[i].launch.dynamic_shared_bytes);
    EXPECT_EQ(out->kernels[i].launch.cooperative, in.kernels[i].launch.cooperative);
  }
  ASSERT_EQ(out->buffers.size(), in.buffers.size());
  for (size_t i = 0; i < in.buffers.size(); ++i) {
    EXPECT_EQ(out->buffers[i].role, in.buffers[i].role);
    EXPECT_EQ(out->buffers[i].buffer->name, in.buffers[i].buffer->name);
    EXPECT_EQ(out->buffers[i].buffer->dtype, in.buffers[i].buffer->dtype);
    EXPECT_EQ(out->buffers[i].buffer->shape, in.buffers[i].buffer->shape);
    EXPECT_EQ(out->buffers[i].buffer->Strides(), in.buffers[i].buffer->Strides());
  }
}

TEST(ProtoConvert, CooperativeLaunchRoundTrips) {
  schedules::GeneratedSource in = CudaSoftmax();
  ASSERT_FALSE(in.kernels.empty());
  for (bool cooperative : {true, false}) {
    in.kernels[0].launch.cooperative = cooperative;
    proto::Source p;
    proto::ToProto(in, &p);
    EXPECT_EQ(p.kernels(0).launch().cooperative(), cooperative);
    absl::StatusOr<schedules::GeneratedSource> out = proto::FromProto(p);
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ(out->kernels[0].launch.cooperative, cooperative);
  }
}

// A kernel's tensor maps (bulk tensor copies) survive the trip; a map of a box the copy engine
// cannot move is refused with its kernel and the fix.
TEST(ProtoConvert, TensorMapsRoundTripAndAreChecked) {
  schedules::GeneratedSource in = CudaSoftmax();
  ASSERT_FALSE(in.kernels.empty());
  in.kernels[0].launch.tensor_maps = {{0, {1, 32}, 128}, {0, {4, 32}, 0}};
  proto::Source p;
  proto::ToProto(in, &p);
  ASSERT_EQ(p.kernels(0).launch().tensor_maps_size(), 2);
  absl::StatusOr<schedules::GeneratedSource> out = proto::FromProto(p);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->kernels[0].launch.tensor_maps, in.kernels[0].launch.tensor_maps);

  p.mutable_kernels(0)->mutable_launch()->mutable_tensor_maps(0)->set_box(1, 512);
  out = proto::FromProto(p);
  ASSERT_FALSE(out.ok());
  EXPECT_THAT(out.status().message(),
              HasSubstr("tensor map 0 has a box extent of 512: the copy engine moves 1 to 256 a "
                        "side"));
  p.mutable_kernels(0)->mutable_launch()->mutable_tensor_maps(0)->set_box(1, 32);
  p.mutable_kernels(0)->mutable_launch()->mutable_tensor_maps(1)->set_buffer(7);
  out = proto::FromProto(p);
  ASSERT_FALSE(out.ok());
  EXPECT_THAT(std::string(out.status().message()),
              HasSubstr("tensor map 1 names buffer 7 of 5: a tensor map's buffer indexes the "
                        "program's buffers"));
}

TEST(ProtoConvert, MalformedSourcesNameTheField) {
  proto::Source p;
  proto::ToProto(CudaSoftmax(), &p);
  {
    proto::Source bad = p;
    bad.clear_target();
    EXPECT_THAT(std::string(proto::FromProto(bad).status().message()),
                HasSubstr("Source.target is unset"));
  }
  {
    proto::Source bad = p;
    bad.mutable_buffers(0)->set_dtype("f8");
    EXPECT_THAT(std::string(proto::FromProto(bad).status().message()),
                HasSubstr("Source.buffers[0] ('X') has unknown dtype 'f8': use f32, f16"));
  }
  {
    proto::Source bad = p;
    bad.mutable_buffers(0)->clear_role();
    EXPECT_THAT(std::string(proto::FromProto(bad).status().message()),
                HasSubstr("has no role: set input, output or workspace"));
  }
  {
    proto::Source bad = p;
    bad.mutable_kernels(0)->add_params(42);
    EXPECT_THAT(std::string(proto::FromProto(bad).status().message()),
                HasSubstr("names buffer 42 of "));
  }
  {
    proto::Source bad = p;
    bad.mutable_kernels(0)->mutable_launch()->add_grid(1);
    EXPECT_THAT(std::string(proto::FromProto(bad).status().message()),
                HasSubstr("has 4 grid and 3 block extents: give 3 of each"));
  }
}

// Buffer sizes a peer could get wrong (found by tests/fuzz/proto_convert_fuzzer.cc; the input is
// its corpus's regression_buffer_overflow.bin): a shape whose element count overflows int64 was
// accepted, and the worker's size arithmetic (Buffer::NumElements) overflowed.
TEST(ProtoConvert, BufferSizesAreChecked) {
  proto::Source p;
  proto::ToProto(CudaSoftmax(), &p);
  auto message = [&](const std::function<void(proto::Buffer*)>& change) {
    proto::Source bad = p;
    change(bad.mutable_buffers(0));
    return std::string(proto::FromProto(bad).status().message());
  };
  EXPECT_THAT(message([](proto::Buffer* b) {
                b->clear_shape();
                b->add_shape(int64_t{1} << 62);
                b->add_shape(4);
              }),
              HasSubstr("Source.buffers[0] ('X'): tensor X of shape [4611686018427387904, 4] has "
                        "more elements than a 64-bit integer can count"));
  EXPECT_THAT(message([](proto::Buffer* b) { b->set_shape(0, -3); }),
              HasSubstr("Source.buffers[0] ('X') has extent -3 in dimension 0: extents must be "
                        "positive"));
  EXPECT_THAT(message([](proto::Buffer* b) {
                b->clear_strides();
                for (int d = 0; d < b->shape_size(); ++d) b->add_strides(int64_t{1} << 41);
              }),
              HasSubstr("strides must be >= 0 and span at most 2^40 elements"));
  EXPECT_THAT(message([](proto::Buffer* b) {
                b->clear_strides();
                for (int d = 0; d < b->shape_size(); ++d) b->add_strides(-1);
              }),
              HasSubstr("has stride -1 in dimension 0"));
}

TEST(ProtoConvert, TimingOptionsRoundTripAndAreChecked) {
  measure::TimingOptions t;
  t.warmup_runs = 3;
  t.min_repeats = 4;
  t.max_repeats = 9;
  t.min_total_ms = 12.5;
  t.flush_cache = false;
  t.max_wall_ms = 750;
  t.kernel_times = false;
  t.hardware_counters = true;
  t.median_precision = 0.01;
  proto::TimingOptions p;
  proto::ToProto(t, &p);
  absl::StatusOr<measure::TimingOptions> back = proto::FromProto(p);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->warmup_runs, 3);
  EXPECT_EQ(back->min_repeats, 4);
  EXPECT_EQ(back->max_repeats, 9);
  EXPECT_EQ(back->min_total_ms, 12.5);
  EXPECT_FALSE(back->flush_cache);
  EXPECT_EQ(back->max_wall_ms, 750);
  EXPECT_FALSE(back->kernel_times);
  EXPECT_TRUE(back->hardware_counters);
  EXPECT_EQ(back->median_precision, 0.01);
  // A peer that does not set them gets the defaults; an older server's jobs, no median precision
  // (they time until min_total_ms, as they asked).
  proto::TimingOptions older = p;
  older.clear_max_wall_ms();
  older.clear_no_kernel_times();
  older.clear_median_precision();
  absl::StatusOr<measure::TimingOptions> defaults = proto::FromProto(older);
  ASSERT_TRUE(defaults.ok());
  EXPECT_EQ(defaults->max_wall_ms, measure::TimingOptions().max_wall_ms);
  EXPECT_TRUE(defaults->kernel_times);
  EXPECT_EQ(defaults->median_precision, 0);
  proto::TimingOptions imprecise = p;
  imprecise.set_median_precision(1.5);
  EXPECT_EQ(std::string(proto::FromProto(imprecise).status().message()),
            "TimingOptions: median_precision 1.5 is not a fraction: give 0 (off) or a value in "
            "(0, 1), e.g. 0.005");
  p.set_max_repeats(2);
  EXPECT_THAT(std::string(proto::FromProto(p).status().message()),
              HasSubstr("max_repeats must be at least 1 and at least min_repeats"));
}

TEST(ProtoConvert, ResultsRoundTripWithEveryStatus) {
  for (measure::MeasureStatus s :
       {measure::MeasureStatus::kOk, measure::MeasureStatus::kCompileError,
        measure::MeasureStatus::kVerifyFailed, measure::MeasureStatus::kRuntimeError,
        measure::MeasureStatus::kTimeout, measure::MeasureStatus::kDeviceLimitExceeded,
        measure::MeasureStatus::kWorkerError}) {
    measure::Measurement r;
    r.status = s;
    r.error = "why";
    r.timings = measure::MakeTimings({3, 1, 2});
    r.compile_ms = 5;
    r.compile_cache_hit = true;
    r.kernels.push_back(measure::KernelResources{"k", 40, 1024, 2048, 16});
    r.worker_id = "w";
    r.device = 1;
    r.device_name = "gpu";
    proto::MeasureResult p;
    proto::ToProto(r, &p);
    const measure::Measurement back = proto::FromProto(p);
    EXPECT_EQ(back.status, s);
    EXPECT_EQ(back.error, "why");
    EXPECT_EQ(back.timings.repeats_ms, (std::vector<double>{3, 1, 2}));
    EXPECT_EQ(back.timings.median_ms, 2);
    EXPECT_TRUE(back.compile_cache_hit);
    ASSERT_EQ(back.kernels.size(), 1u);
    EXPECT_EQ(back.kernels[0].registers, 40);
    EXPECT_EQ(back.kernels[0].local_bytes_per_thread, 16);
    EXPECT_EQ(back.device, 1);
  }
  EXPECT_EQ(proto::FromProto(proto::MEASURE_STATUS_UNSPECIFIED),
            measure::MeasureStatus::kWorkerError);
}

TEST(ProtoConvert, EveryMeasuredFigureRoundTrips) {
  measure::Measurement r;
  r.timings = measure::MakeTimings({3, 1, 2});
  r.timings.kernel_repeats_ms = {2.5, 0.5, 1.5};
  r.timings.kernel_median_ms = 1.5;
  r.timings.counters = measure::HardwareCounters{1.5e9, 0.5e9, 87.5};
  r.timings.device_state = {1980, 2619, 47};
  r.timings.note = "a note";
  r.timings.kind = measure::TimingKind::kScreened;
  proto::MeasureResult p;
  proto::ToProto(r, &p);
  EXPECT_EQ(p.timing_kind(), proto::TIMING_KIND_SCREENED);
  EXPECT_EQ(p.device_state().sm_clock_mhz(), 1980);
  const measure::Measurement back = proto::FromProto(p);
  const measure::Timings& t = back.timings;
  EXPECT_EQ(t.kernel_repeats_ms, (std::vector<double>{2.5, 0.5, 1.5}));
  EXPECT_EQ(t.kernel_median_ms, 1.5);
  ASSERT_TRUE(t.counters.has_value());
  EXPECT_EQ(t.counters->dram_read_bytes, 1.5e9);
  EXPECT_EQ(t.counters->dram_write_bytes, 0.5e9);
  EXPECT_EQ(t.counters->achieved_occupancy, 87.5);
  EXPECT_EQ(t.device_state.sm_clock_mhz, 1980);
  EXPECT_EQ(t.device_state.memory_clock_mhz, 2619);
  EXPECT_EQ(t.device_state.temperature_c, 47);
  EXPECT_EQ(t.note, "a note");
  EXPECT_EQ(t.kind, measure::TimingKind::kScreened);

  // Confirmed travels as confirmed; unknown clocks are left unset.
  r.timings.kind = measure::TimingKind::kConfirmed;
  r.timings.device_state = {};
  proto::ToProto(r, &p);
  EXPECT_EQ(p.timing_kind(), proto::TIMING_KIND_CONFIRMED);
  EXPECT_FALSE(p.has_device_state());
  EXPECT_EQ(proto::FromProto(p).timings.kind, measure::TimingKind::kConfirmed);
  EXPECT_FALSE(proto::FromProto(p).timings.device_state.known());
}

TEST(ProtoConvert, AResultOfAnOlderWorkerIsAConfirmedTiming) {
  // Workers from before screening never set timing_kind: every timing they made was a full one.
  proto::MeasureResult p;
  p.set_status(proto::MEASURE_STATUS_OK);
  p.add_repeats_ms(1.0);
  p.set_median_ms(1.0);
  ASSERT_EQ(p.timing_kind(), proto::TIMING_KIND_UNSPECIFIED);
  EXPECT_EQ(proto::FromProto(p).timings.kind, measure::TimingKind::kConfirmed);
}

TEST(ProtoConvert, ScreeningRoundTripsAndIsChecked) {
  measure::Measurement m;
  m.timings = measure::MakeTimings({1.0, 2.0, 3.0});
  m.timings.kind = measure::TimingKind::kScreened;
  m.timings.screen_median_ms = 2.0;
  m.timings.screen_repeats = 3;
  m.worker_times = {1.5, 0.5, 7.0, 12.0};
  proto::MeasureResult p;
  proto::ToProto(m, &p);
  EXPECT_EQ(p.timing_kind(), proto::TIMING_KIND_SCREENED);
  measure::Measurement back = proto::FromProto(p);
  EXPECT_EQ(back.timings.kind, measure::TimingKind::kScreened);
  EXPECT_DOUBLE_EQ(back.timings.screen_median_ms, 2.0);
  EXPECT_EQ(back.timings.screen_repeats, 3);
  EXPECT_EQ(back.worker_times, m.worker_times);
  EXPECT_FALSE(back.confirmed());
  // A worker of an older release sends no kind: it timed in full.
  p.clear_timing_kind();
  EXPECT_EQ(proto::FromProto(p).timings.kind, measure::TimingKind::kConfirmed);
  EXPECT_TRUE(proto::FromProto(p).confirmed());

  measure::ScreenOptions s;
  s.enabled = true;
  s.timing.min_repeats = 2;
  s.timing.min_total_ms = 4;
  s.best_ms = 0.25;
  s.margin = 0.05;
  proto::ScreenOptions ps;
  proto::ToProto(s, &ps);
  absl::StatusOr<measure::ScreenOptions> sb = proto::FromProto(ps);
  ASSERT_TRUE(sb.ok()) << sb.status();
  EXPECT_TRUE(sb->enabled);
  EXPECT_EQ(sb->timing.min_repeats, 2);
  EXPECT_DOUBLE_EQ(sb->timing.min_total_ms, 4);
  EXPECT_DOUBLE_EQ(sb->best_ms, 0.25);
  EXPECT_DOUBLE_EQ(sb->margin, 0.05);
  ps.set_margin(-1);
  EXPECT_THAT(std::string(proto::FromProto(ps).status().message()),
              ::testing::HasSubstr("both must be finite and at least 0"));
  ps.set_margin(0.05);
  ps.mutable_timing()->set_max_repeats(0);
  EXPECT_THAT(std::string(proto::FromProto(ps).status().message()),
              ::testing::HasSubstr("ScreenOptions.timing: "));
}

TEST(ProtoConvert, FailureKindsMapToStatuses) {
  EXPECT_EQ(measure::MeasureStatusOf(absl::OkStatus()), measure::MeasureStatus::kOk);
  EXPECT_EQ(measure::MeasureStatusOf(measure::WithMeasureStatus(absl::InternalError("x"),
                                                                measure::MeasureStatus::kTimeout)),
            measure::MeasureStatus::kTimeout);
  EXPECT_EQ(measure::MeasureStatusOf(absl::InternalError("no driver")),
            measure::MeasureStatus::kWorkerError);
}

TEST(ProtocolVersion, MismatchesNameBothVersionsAndTheFix) {
  EXPECT_TRUE(proto::CheckWorkerProtocol(proto::kWorkerProtocolVersion, "w").ok());
  EXPECT_TRUE(proto::CheckServerProtocol(proto::kWorkerProtocolVersion, "s:1").ok());
  EXPECT_EQ(std::string(proto::CheckWorkerProtocol(7, "gpu-node-3:12").message()),
            "worker protocol version mismatch: worker 'gpu-node-3:12' speaks version 7, this "
            "server speaks version 3: run the same Tessel release on the server and its workers");
  EXPECT_EQ(std::string(proto::CheckServerProtocol(7, "tuner:7070").message()),
            "worker protocol version mismatch: the server at tuner:7070 speaks version 7, this "
            "worker speaks version 3: run the same Tessel release on the server and its workers");
}

}  // namespace
}  // namespace tessel::testing
