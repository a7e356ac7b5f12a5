// The compile pool: caches in memory and on disk, compile errors with the compiler's log, and
// the isolated measuring child (MeasureChild) used directly.

#include "worker/compile_pool.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "proto/convert.h"
#include "schedules/ir/buffer.h"
#include "tests/test_util.h"
#include "tests/worker/worker_test_util.h"
#include "worker/isolation/measure_child.h"

namespace tessel::testing {
namespace {

using ::testing::HasSubstr;

TEST(CompilePool, CachesInMemoryAndOnDisk) {
  const std::string dir = MakeTempDir("tessel_pool");
  const schedules::GeneratedSource src = PlantHostFault(HostMatmulSource(), Plant::kNone, "pool");
  worker::CompilePoolOptions options;
  options.threads = 2;
  options.cache_dir = dir;
  {
    worker::CompilePool pool(options);
    // Two requests at once compile once.
    worker::CompileFuture a = pool.Compile(src, "");
    worker::CompileFuture b = pool.Compile(src, "");
    ASSERT_TRUE(a.get().ok()) << a.get().status();
    ASSERT_TRUE(b.get().ok());
    EXPECT_FALSE(a.get()->cache_hit);
    EXPECT_EQ(a.get()->program.host.library_path, b.get()->program.host.library_path);
    EXPECT_TRUE(std::filesystem::exists(a.get()->program.host.library_path));
    EXPECT_EQ(pool.Stats().compiled, 1);
    EXPECT_EQ(pool.Stats().memory_hits, 1);
  }
  // A new pool (a restarted worker) finds the object on disk.
  worker::CompilePool again(options);
  worker::CompileFuture c = again.Compile(src, "");
  ASSERT_TRUE(c.get().ok());
  EXPECT_TRUE(c.get()->cache_hit);
  EXPECT_EQ(again.Stats().compiled, 0);
  EXPECT_EQ(again.Stats().disk_hits, 1);
}

#ifdef TESSEL_HAVE_CUDA
// The architecture is part of what is compiled and cached: a source that only sm_90a builds
// (wgmma) fails for sm_90 and compiles for sm_90a, each answer its own, in memory and on disk.
TEST(CompilePool, CompilesForTheArchitectureAskedAndCachesEachApart) {
  schedules::GeneratedSource src;
  src.target = schedules::TargetKind::kCuda;
  src.code = R"(extern "C" __global__ void fence(float* y) {
  asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
  y[0] = 1;
})";
  schedules::KernelSource k;
  k.entry = "fence";
  k.params = {0};
  src.kernels.push_back(k);
  src.buffers = {{schedules::MakeBuffer("y", schedules::DType::kFloat32, {1}),
                  schedules::BufferRole::kOutput}};
  worker::CompilePoolOptions options;
  options.threads = 2;
  options.cache_dir = MakeTempDir("tessel_pool_arch");
  for (int round = 0; round < 2; ++round) {  // the second pool finds the sm_90a cubin on disk
    SCOPED_TRACE(round);
    worker::CompilePool pool(options);
    const absl::StatusOr<worker::CompileOutput>& plain = pool.Compile(src, "sm_90").get();
    ASSERT_FALSE(plain.ok());
    EXPECT_THAT(plain.status().message(), HasSubstr("not supported on .target 'sm_90'"));
    const absl::StatusOr<worker::CompileOutput>& hopper = pool.Compile(src, "sm_90a").get();
    ASSERT_TRUE(hopper.ok()) << hopper.status();
    EXPECT_EQ(hopper->program.cuda.arch, "sm_90a");
    EXPECT_EQ(hopper->cache_hit, round == 1);
  }
}
#endif  // TESSEL_HAVE_CUDA

TEST(CompilePool, CompileErrorsCarryTheCompilerLog) {
  const std::string dir = MakeTempDir("tessel_pool");
  worker::CompilePoolOptions options;
  options.threads = 1;
  options.cache_dir = dir;
  worker::CompilePool pool(options);
  const absl::StatusOr<worker::CompileOutput>& out =
      pool.Compile(PlantHostFault(HostMatmulSource(), Plant::kCompileError, "bad"), "").get();
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(measure::MeasureStatusOf(out.status()), measure::MeasureStatus::kCompileError);
  EXPECT_THAT(std::string(out.status().message()), HasSubstr("compiler log:"));
  EXPECT_THAT(std::string(out.status().message()), HasSubstr("this is not C++"));
}

// The measuring child used directly: a crash is a runtime_error and the next candidate measures
// in a fresh child.
TEST(MeasureChild, CrashIsARuntimeErrorAndTheNextCandidateMeasures) {
  const std::string dir = MakeTempDir("tessel_child");
  worker::CompilePoolOptions po;
  po.threads = 2;
  po.cache_dir = dir;
  worker::CompilePool pool(po);
  const schedules::GeneratedSource ref = HostMatmulSource();
  const schedules::GeneratedSource segv = PlantHostFault(ref, Plant::kSegfault, "child-segv");
  const schedules::GeneratedSource good = PlantHostFault(ref, Plant::kNone, "child-good");

  worker::MeasureChildOptions co;
  co.executable = TesselBinary();
  worker::MeasureChild child(co);
  ASSERT_TRUE(child.Start().ok());
  EXPECT_EQ(child.device().kind(), proto::TARGET_KIND_HOST);

  auto request = [&](const schedules::GeneratedSource& s, uint64_t id) {
    proto::ChildMeasure m;
    proto::ToProto(s, m.mutable_candidate());
    proto::ToProto(ref, m.mutable_reference());
    const absl::StatusOr<worker::CompileOutput>& c = pool.Compile(s, "").get();
    const absl::StatusOr<worker::CompileOutput>& r = pool.Compile(ref, "").get();
    EXPECT_TRUE(c.ok() && r.ok());
    m.mutable_candidate_artifact()->set_host_library(c->program.host.library_path);
    m.mutable_reference_artifact()->set_host_library(r->program.host.library_path);
    *m.mutable_options() = FastMeasureOptions();
    m.set_candidate_id(id);
    return m;
  };
  measure::Measurement crashed = child.Measure(request(segv, 1), 10);
  EXPECT_EQ(crashed.status, measure::MeasureStatus::kRuntimeError) << crashed.error;
  EXPECT_THAT(crashed.error, HasSubstr("Segmentation fault"));
  EXPECT_FALSE(child.running());
  measure::Measurement ok = child.Measure(request(good, 2), 10);
  EXPECT_EQ(ok.status, measure::MeasureStatus::kOk) << ok.error;
  EXPECT_EQ(ok.timings.repeats_ms.size(), 3u);
  EXPECT_EQ(child.starts(), 2);
}

TEST(MeasureChild, MissingExecutableSaysSo) {
  worker::MeasureChildOptions co;
  co.executable = "/nonexistent/tessel";
  worker::MeasureChild child(co);
  absl::Status s = child.Start();
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("cannot start the measuring process /nonexistent/tessel"));
  measure::Measurement r = child.Measure(proto::ChildMeasure(), 1);
  EXPECT_EQ(r.status, measure::MeasureStatus::kWorkerError);
}

}  // namespace
}  // namespace tessel::testing
