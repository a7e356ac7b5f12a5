// The artifact of a measure result (measure::Artifact <-> proto::Artifact) and the launch JSON it
// carries (schedules/codegen/source_json.h).

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "proto/convert.h"
#include "schedules/codegen/codegen_version.h"
#include "schedules/codegen/source_json.h"
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

TEST(SourceJson, LaunchConfigurationRoundTrips) {
  schedules::GeneratedSource in = CudaSoftmax();
  in.kernels[0].launch.cooperative = true;
  in.kernels[0].launch.dynamic_shared_bytes = 4096;
  in.buffers[0].buffer = schedules::MakeBuffer("X", schedules::DType::kFloat16, {4, 64},
                                               schedules::MemScope::kGlobal, {72, 1});
  absl::StatusOr<schedules::GeneratedSource> out =
      schedules::SourceFromLaunchJson(schedules::SourceLaunchToJson(in), in.code);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->target, in.target);
  EXPECT_EQ(out->code, in.code);
  ASSERT_EQ(out->kernels.size(), in.kernels.size());
  for (size_t i = 0; i < in.kernels.size(); ++i) {
    EXPECT_EQ(out->kernels[i].entry, in.kernels[i].entry);
    EXPECT_EQ(out->kernels[i].launch.grid, in.kernels[i].launch.grid);
    EXPECT_EQ(out->kernels[i].launch.block, in.kernels[i].launch.block);
    EXPECT_EQ(out->kernels[i].launch.dynamic_shared_bytes,
              in.kernels[i].launch.dynamic_shared_bytes);
    EXPECT_EQ(out->kernels[i].launch.cooperative, in.kernels[i].launch.cooperative);
    EXPECT_EQ(out->kernels[i].params, in.kernels[i].params);
  }
  ASSERT_EQ(out->buffers.size(), in.buffers.size());
  for (size_t i = 0; i < in.buffers.size(); ++i) {
    EXPECT_EQ(out->buffers[i].buffer->name, in.buffers[i].buffer->name);
    EXPECT_EQ(out->buffers[i].buffer->dtype, in.buffers[i].buffer->dtype);
    EXPECT_EQ(out->buffers[i].buffer->shape, in.buffers[i].buffer->shape);
    EXPECT_EQ(out->buffers[i].buffer->strides, in.buffers[i].buffer->strides);
    EXPECT_EQ(out->buffers[i].role, in.buffers[i].role);
  }
}

TEST(SourceJson, MalformedLaunchConfigurationsNameTheField) {
  const std::string code = "x";
  auto message = [&](const std::string& json) {
    return std::string(schedules::SourceFromLaunchJson(json, code).status().message());
  };
  EXPECT_EQ(message("[1]"), "malformed launch configuration: it is not a JSON object");
  EXPECT_EQ(message(R"({"target": "tpu", "kernels": [], "buffers": []})"),
            "malformed launch configuration: unknown target 'tpu'");
  EXPECT_EQ(message(R"({"target": "cuda", "buffers": [{"name": "A", "dtype": "f33", "role":
                "input", "shape": [4]}], "kernels": []})"),
            "malformed launch configuration: buffer A: unknown dtype 'f33'");
  EXPECT_EQ(message(R"({"target": "cuda", "buffers": [], "kernels": [{"entry": "k", "grid":
                [1, 1], "block": [1, 1, 1], "params": []}]})"),
            "malformed launch configuration: kernel k: \"grid\" must be three integers");
  EXPECT_EQ(message(R"({"target": "cuda", "buffers": [], "kernels": [{"entry": "k", "grid":
                [1, 1, 1], "block": [1, 1, 1], "params": [0]}]})"),
            "malformed launch configuration: kernel k: a parameter names a buffer that does not "
            "exist");
}

measure::Artifact SoftmaxArtifact() {
  const schedules::GeneratedSource s = CudaSoftmax();
  measure::Artifact a;
  a.codegen_version = schedules::kCodegenVersion;
  a.source = s.code;
  a.launch_json = schedules::SourceLaunchToJson(s);
  a.binary_format = "cubin";
  a.binary_arch = "sm_90";
  a.binary = std::string(
      "\x7f"
      "ELF\0\0\x01",
      7);
  a.compile_options = "--gpu-architecture=sm_90";
  a.compiler_version = "NVRTC 13.0";
  a.driver_version = "13000";
  a.device_arch = "sm_90";
  a.multiprocessor_count = 132;
  return a;
}

TEST(ProtoConvert, ArtifactTravelsWithAnOkResult) {
  measure::Measurement m;
  m.timings = measure::MakeTimings({1.0, 2.0, 3.0});
  m.artifact = SoftmaxArtifact();
  proto::MeasureResult p;
  proto::ToProto(m, &p);
  ASSERT_TRUE(p.has_artifact());
  EXPECT_EQ(p.artifact().source().code(), m.artifact.source);
  EXPECT_EQ(p.artifact().binary(), m.artifact.binary);
  measure::Measurement back = proto::FromProto(p);
  EXPECT_EQ(back.status, measure::MeasureStatus::kOk);
  EXPECT_EQ(back.artifact, m.artifact);
  // Without one, none comes back.
  measure::Measurement plain;
  proto::ToProto(plain, &p);
  EXPECT_FALSE(p.has_artifact());
  EXPECT_FALSE(proto::FromProto(p).artifact.stored());
}

TEST(ProtoConvert, AMalformedArtifactIsAWorkerError) {
  measure::Measurement m;
  m.timings = measure::MakeTimings({1.0});
  m.device_name = "GPU";
  m.artifact = SoftmaxArtifact();
  proto::MeasureResult p;
  proto::ToProto(m, &p);
  p.mutable_artifact()->mutable_source()->mutable_kernels(0)->add_params(99);
  measure::Measurement back = proto::FromProto(p);
  EXPECT_EQ(back.status, measure::MeasureStatus::kWorkerError);
  EXPECT_THAT(back.error,
              HasSubstr("the worker sent a malformed artifact: artifact: its source: "));
  EXPECT_EQ(back.device_name, "GPU");
  EXPECT_FALSE(back.artifact.stored());
  p.mutable_artifact()->set_codegen_version(0);
  EXPECT_EQ(proto::FromProto(p).error,
            "the worker sent a malformed artifact: artifact: codegen_version 0 is not positive");
}

}  // namespace
}  // namespace tessel::testing
