// libtessel_runtime on the host target, through its C API (tessel/runtime.h) and C++ wrapper
// (tessel/runtime.hpp): real tuning logs and packs in temporary folders, real compiles with the
// system compiler, launches on the test's own buffers checked against a reference, and every
// error a caller can get, with its message.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "runtime/include/tessel/runtime.h"
#include "runtime/include/tessel/runtime.hpp"
#include "schedules/codegen/codegen_version.h"
#include "schedules/space/space_generator.h"
#include "schedules/workload/builtins.h"
#include "schedules/workload/key.h"
#include "store/kernel_pack.h"
#include "store/sqlite_tuning_log.h"
#include "store/tuning_log.h"
#include "tests/store/store_test_util.h"
#include "tests/test_util.h"
#include "worker/daemon/result_artifact.h"
#include "worker/host/host_compiler.h"

namespace tessel::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

constexpr int kM = 8, kN = 12, kK = 16;
constexpr char kSpec[] = "matmul(M=8, N=12, K=16)";

// A tuning log with records of kSpec on the host: the best sampled schedule measured on this
// machine's CPU, and (optionally) a faster one on another CPU.
struct Log {
  std::string dir;
  std::string path;
  std::string cache;
  std::string key;
  std::string here_uid;   // measured on this CPU
  std::string there_uid;  // measured on "Other CPU"
  std::string here_source;
};

struct LogOptions {
  bool here = true;
  bool there = true;
  bool artifacts = true;
};

Log MakeLog(const LogOptions& o = {}) {
  Log l;
  l.dir = MakeTempDir("tessel_runtime");
  l.path = l.dir + "/tuning.db";
  l.cache = l.dir + "/cache";
  auto log = store::OpenTuningLog(l.path);
  EXPECT_TRUE(log.ok()) << log.status();
  auto w = schedules::ParseWorkloadSpec(kSpec);
  const schedules::Target host = schedules::HostTarget();
  l.key = schedules::WorkloadKey(*w);
  EXPECT_TRUE((*log)->PutWorkload({l.key, schedules::CanonicalText(*w), w->name, w->spec}).ok());
  auto space = schedules::SpaceGenerator::Create(*w, host);
  EXPECT_TRUE(space.ok()) << space.status();
  std::vector<schedules::Candidate> samples;
  for (uint64_t seed = 1; samples.size() < 2 && seed < 200; ++seed) {
    auto c = space->Sample(seed);
    if (c.ok() && c->trace) samples.push_back(std::move(*c));
  }
  EXPECT_EQ(samples.size(), 2u);
  proto::Device device;
  device.set_name(host.device_name);
  device.set_arch(host.arch);
  device.set_cores(static_cast<int>(host.cores));
  device.set_toolkit_version("c++");
  auto add = [&](const schedules::Candidate& c, const std::string& device_name, double ms) {
    store::Record r = MakeTestRecord(1, l.key, "host");
    r.trace_json = c.trace->ToJson().dump();
    r.measurement.timings = measure::MakeTimings({ms, ms});
    r.measurement.device_name = device_name;
    if (o.artifacts) {
      r.measurement.artifact =
          worker::ResultArtifact(c.source, {}, device, worker::HostCompileOptions());
    }
    EXPECT_TRUE((*log)->AddRecord(&r).ok());
    return r.uid;
  };
  if (o.here) {
    l.here_uid = add(samples[0], host.device_name, 2.0);
    l.here_source = samples[0].source.code;
  }
  if (o.there) l.there_uid = add(samples[1], "Other CPU", 1.0);
  return l;
}

struct Buffers {
  std::vector<float> a = std::vector<float>(kM * kK);
  std::vector<float> b = std::vector<float>(kK * kN);
  std::vector<float> c = std::vector<float>(kM * kN, NAN);
  std::vector<int64_t> a_shape{kM, kK}, b_shape{kK, kN}, c_shape{kM, kN};

  Buffers() {
    std::mt19937 rng(3);
    std::uniform_real_distribution<float> u(-1, 1);
    for (float& v : a) v = u(rng);
    for (float& v : b) v = u(rng);
  }
  std::vector<tessel_tensor> Args() {
    return {{a.data(), "f32", 2, a_shape.data()},
            {b.data(), "f32", 2, b_shape.data()},
            {c.data(), "f32", 2, c_shape.data()}};
  }
  double MaxError() const {
    double worst = 0;
    for (int i = 0; i < kM; ++i) {
      for (int j = 0; j < kN; ++j) {
        double want = 0;
        for (int k = 0; k < kK; ++k) want += double(a[i * kK + k]) * b[k * kN + j];
        const double err = std::fabs(c[i * kN + j] - want);
        if (!(err <= worst)) worst = err;
      }
    }
    return worst;
  }
};

tessel_db* MustOpen(const Log& l, const std::string& path = "") {
  tessel_open_options o{l.cache.c_str(), 0};
  tessel_db* db = nullptr;
  EXPECT_EQ(tessel_open(path.empty() ? l.path.c_str() : path.c_str(), &o, &db), TESSEL_OK)
      << tessel_last_error();
  return db;
}

TEST(Runtime, FindsTheSameDeviceFirstAndLaunchesOnTheCallersBuffers) {
  Log l = MakeLog();
  tessel_db* db = MustOpen(l);
  tessel_kernel* k = nullptr;
  ASSERT_EQ(tessel_find(db, kSpec, TESSEL_TARGET_HOST, &k), TESSEL_OK) << tessel_last_error();
  EXPECT_EQ(tessel_kernel_match(k), TESSEL_MATCH_DEVICE);
  EXPECT_EQ(std::string(tessel_kernel_match_description(k)),
            "same device (" + schedules::HostTarget().device_name + ")");
  EXPECT_EQ(std::string(tessel_kernel_record_uid(k)), l.here_uid);
  EXPECT_EQ(std::string(tessel_kernel_workload_key(k)), l.key);
  EXPECT_EQ(tessel_kernel_median_ms(k), 2.0);
  EXPECT_EQ(tessel_kernel_regenerated(k), 0);
  EXPECT_EQ(tessel_kernel_compiled_here(k), 1);
  EXPECT_EQ(tessel_kernel_codegen_version(k), schedules::kCodegenVersion);
  size_t size = 0;
  const char* source = tessel_kernel_source(k, &size);
  EXPECT_EQ(std::string(source, size), l.here_source);
  tessel_kernel_binary(k, &size);
  EXPECT_EQ(size, 0u);  // the host keeps no binary
  ASSERT_EQ(tessel_kernel_num_args(k), 3);
  const char *name = nullptr, *dtype = nullptr;
  int ndim = 0, is_output = 0;
  const int64_t* shape = nullptr;
  ASSERT_EQ(tessel_kernel_arg(k, 2, &name, &dtype, &ndim, &shape, &is_output), TESSEL_OK);
  EXPECT_EQ(std::string(dtype), "f32");
  EXPECT_EQ(std::vector<int64_t>(shape, shape + ndim), (std::vector<int64_t>{kM, kN}));
  EXPECT_EQ(is_output, 1);

  Buffers buf;
  std::vector<tessel_tensor> args = buf.Args();
  ASSERT_EQ(tessel_launch(k, args.data(), 3, nullptr), TESSEL_OK) << tessel_last_error();
  EXPECT_LT(buf.MaxError(), 1e-4);
  EXPECT_EQ(std::string(tessel_last_error()), "");
  tessel_kernel_release(k);

  // By the workload's key, the same record and the same loaded module.
  tessel_kernel* by_key = nullptr;
  ASSERT_EQ(tessel_find(db, l.key.c_str(), TESSEL_TARGET_HOST, &by_key), TESSEL_OK)
      << tessel_last_error();
  EXPECT_EQ(std::string(tessel_kernel_record_uid(by_key)), l.here_uid);
  tessel_close(db);  // a kernel outlives its db
  Buffers again;
  args = again.Args();
  EXPECT_EQ(tessel_launch(by_key, args.data(), 3, nullptr), TESSEL_OK) << tessel_last_error();
  EXPECT_LT(again.MaxError(), 1e-4);
  tessel_kernel_release(by_key);
}

TEST(Runtime, FallsBackToTheSameArchitectureAndSaysSo) {
  Log l = MakeLog({.here = false});
  tessel_db* db = MustOpen(l);
  tessel_kernel* k = nullptr;
  ASSERT_EQ(tessel_find(db, kSpec, TESSEL_TARGET_HOST, &k), TESSEL_OK) << tessel_last_error();
  EXPECT_EQ(tessel_kernel_match(k), TESSEL_MATCH_ARCHITECTURE);
  EXPECT_EQ(std::string(tessel_kernel_match_description(k)),
            "same architecture (host), measured on Other CPU; no record of " +
                schedules::HostTarget().device_name);
  EXPECT_EQ(std::string(tessel_kernel_record_uid(k)), l.there_uid);
  Buffers buf;
  std::vector<tessel_tensor> args = buf.Args();
  ASSERT_EQ(tessel_launch(k, args.data(), 3, nullptr), TESSEL_OK) << tessel_last_error();
  EXPECT_LT(buf.MaxError(), 1e-4);
  tessel_kernel_release(k);
  tessel_close(db);
}

TEST(Runtime, ARecordWithoutItsSourceIsRegeneratedAndSaysSo) {
  Log l = MakeLog({.there = false, .artifacts = false});
  tessel_db* db = MustOpen(l);
  tessel_kernel* k = nullptr;
  ASSERT_EQ(tessel_find(db, kSpec, TESSEL_TARGET_HOST, &k), TESSEL_OK) << tessel_last_error();
  EXPECT_EQ(tessel_kernel_regenerated(k), 1);
  size_t size = 0;
  EXPECT_EQ(std::string(tessel_kernel_source(k, &size)), l.here_source);
  Buffers buf;
  std::vector<tessel_tensor> args = buf.Args();
  ASSERT_EQ(tessel_launch(k, args.data(), 3, nullptr), TESSEL_OK) << tessel_last_error();
  EXPECT_LT(buf.MaxError(), 1e-4);
  tessel_kernel_release(k);
  tessel_close(db);
}

TEST(Runtime, OpensAPackLikeALog) {
  Log l = MakeLog();
  store::TuningLogOptions ro;
  ro.read_only = true;
  auto log = store::OpenTuningLog(l.path, ro);
  ASSERT_TRUE(log.ok());
  const std::string pack = l.dir + "/kernels.pack";
  ASSERT_TRUE(
      store::WriteKernelPack(log->get(), {*schedules::ParseWorkloadSpec(kSpec)}, pack).ok());
  tessel_db* db = MustOpen(l, pack);
  tessel_kernel* k = nullptr;
  ASSERT_EQ(tessel_find(db, kSpec, TESSEL_TARGET_HOST, &k), TESSEL_OK) << tessel_last_error();
  EXPECT_EQ(std::string(tessel_kernel_record_uid(k)), l.here_uid);
  EXPECT_EQ(tessel_kernel_match(k), TESSEL_MATCH_DEVICE);
  Buffers buf;
  std::vector<tessel_tensor> args = buf.Args();
  ASSERT_EQ(tessel_launch(k, args.data(), 3, nullptr), TESSEL_OK) << tessel_last_error();
  EXPECT_LT(buf.MaxError(), 1e-4);
  tessel_kernel_release(k);
  tessel_close(db);
}

TEST(Runtime, WrongTensorsAreRefusedNamingTheTensor) {
  Log l = MakeLog();
  tessel_db* db = MustOpen(l);
  tessel_kernel* k = nullptr;
  ASSERT_EQ(tessel_find(db, kSpec, TESSEL_TARGET_HOST, &k), TESSEL_OK) << tessel_last_error();
  Buffers buf;
  std::vector<tessel_tensor> args = buf.Args();
  EXPECT_EQ(tessel_launch(k, args.data(), 2, nullptr), TESSEL_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(std::string(tessel_last_error()),
            "the kernel of workload " + l.key +
                " takes 3 tensors (A, B, C: inputs, then outputs), not 2");
  const int64_t wrong[2] = {kK, kK};
  args[1].shape = wrong;
  EXPECT_EQ(tessel_launch(k, args.data(), 3, nullptr), TESSEL_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(std::string(tessel_last_error()), "tensor 1 (B): shape [16, 16], expected [16, 12]");
  args = buf.Args();
  args[0].ndim = 1;
  EXPECT_EQ(tessel_launch(k, args.data(), 3, nullptr), TESSEL_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(std::string(tessel_last_error()), "tensor 0 (A): shape [8], expected [8, 16]");
  args = buf.Args();
  args[2].dtype = "f16";
  EXPECT_EQ(tessel_launch(k, args.data(), 3, nullptr), TESSEL_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(std::string(tessel_last_error()), "tensor 2 (C): dtype f16, expected f32");
  args = buf.Args();
  args[0].data = nullptr;
  EXPECT_EQ(tessel_launch(k, args.data(), 3, nullptr), TESSEL_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(std::string(tessel_last_error()), "tensor 0 (A): data is NULL");
  args = buf.Args();
  int stream = 0;
  EXPECT_EQ(tessel_launch(k, args.data(), 3, &stream), TESSEL_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(std::string(tessel_last_error()),
            "a host kernel runs on the calling thread: pass a NULL stream");
  // Nothing ran: the output is still poisoned.
  EXPECT_TRUE(std::isnan(buf.c[0]));
  EXPECT_EQ(tessel_launch(nullptr, args.data(), 3, nullptr), TESSEL_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(std::string(tessel_last_error()), "tessel_launch: kernel is NULL");
  tessel_kernel_release(k);
  tessel_close(db);
}

TEST(Runtime, UnknownWorkloadsAndTargetsWithoutRecords) {
  Log l = MakeLog();
  tessel_db* db = MustOpen(l);
  tessel_kernel* k = nullptr;
  EXPECT_EQ(tessel_find(db, "convolution(size=3)", TESSEL_TARGET_HOST, &k), TESSEL_ERROR_NOT_FOUND);
  EXPECT_THAT(std::string(tessel_last_error()),
              StartsWith("unknown workload 'convolution(size=3)': it is no workload key of " +
                         l.path + ", and as a spec: "));
  EXPECT_EQ(k, nullptr);
  auto other = schedules::ParseWorkloadSpec("matmul(M=4, N=4, K=4)");
  EXPECT_EQ(tessel_find(db, "matmul(M=4, N=4, K=4)", TESSEL_TARGET_HOST, &k),
            TESSEL_ERROR_NOT_FOUND);
  EXPECT_EQ(std::string(tessel_last_error()),
            "no ok record of " + other->spec + " (key " + schedules::WorkloadKey(*other) +
                ") for host (device " + schedules::HostTarget().device_name + ") in " + l.path +
                ": neither on the same device nor on the same architecture; it has no ok record "
                "of this workload on any target. Tune it on this target first (tessel tune or "
                "tessel submit)");
  EXPECT_EQ(tessel_find(db, kSpec, static_cast<tessel_target>(7), &k),
            TESSEL_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(std::string(tessel_last_error()),
            "unknown target 7; pass TESSEL_TARGET_HOST or TESSEL_TARGET_CUDA");
  EXPECT_EQ(tessel_find(db, nullptr, TESSEL_TARGET_HOST, &k), TESSEL_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(std::string(tessel_last_error()), "tessel_find: db and workload must not be NULL");
  tessel_close(db);
}

TEST(Runtime, CudaWithoutAGpuIsUnsupported) {
  Log l = MakeLog();
  tessel_db* db = MustOpen(l);
  tessel_kernel* k = nullptr;
  const tessel_status s = tessel_find(db, kSpec, TESSEL_TARGET_CUDA, &k);
  const std::string message = tessel_last_error();
  tessel_close(db);
  if (s == TESSEL_ERROR_NOT_FOUND) GTEST_SKIP() << "a GPU is here: " << message;
  EXPECT_EQ(s, TESSEL_ERROR_UNSUPPORTED);
  EXPECT_THAT(message, ::testing::AnyOf(StartsWith("no usable CUDA driver here: "),
                                        StartsWith("this libtessel_runtime was built without "
                                                   "the CUDA toolkit")));
}

TEST(Runtime, MissingCorruptAndStaleFilesAreClearErrors) {
  const std::string dir = MakeTempDir("tessel_runtime");
  tessel_db* db = nullptr;
  const std::string missing = dir + "/none.db";
  EXPECT_EQ(tessel_open(missing.c_str(), nullptr, &db), TESSEL_ERROR_NOT_FOUND);
  EXPECT_EQ(std::string(tessel_last_error()),
            "tuning log " + missing +
                " does not exist; check the path (a read-only open never creates a log)");
  EXPECT_EQ(db, nullptr);

  const std::string garbage = dir + "/garbage.db";
  std::ofstream(garbage) << std::string(8192, 'x');
  EXPECT_EQ(tessel_open(garbage.c_str(), nullptr, &db), TESSEL_ERROR_BAD_FILE);
  EXPECT_EQ(std::string(tessel_last_error()),
            garbage +
                " is not a Tessel tuning log (not an SQLite database); pass a new file or "
                "a log written by tessel serve");

  const std::string other = dir + "/other.db";
  ASSERT_EQ(RawExec(other, "CREATE TABLE t (x)"), "");
  EXPECT_EQ(tessel_open(other.c_str(), nullptr, &db), TESSEL_ERROR_BAD_FILE);
  EXPECT_THAT(std::string(tessel_last_error()),
              StartsWith(other + " is not a Tessel tuning log (application id 0"));

  Log l = MakeLog();
  ASSERT_EQ(RawExec(l.path, "PRAGMA user_version = 2"), "");
  EXPECT_EQ(tessel_open(l.path.c_str(), nullptr, &db), TESSEL_ERROR_BAD_FILE);
  EXPECT_EQ(std::string(tessel_last_error()),
            l.path + " has schema 2 and this build reads schema " +
                std::to_string(store::LatestSchemaVersion()) +
                "; open it once for writing (tessel serve or tessel import) to migrate it");

  EXPECT_EQ(tessel_open(nullptr, nullptr, &db), TESSEL_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(std::string(tessel_last_error()),
            "tessel_open: path is NULL; pass a tuning log or kernel pack");
}

TEST(Runtime, ADamagedArtifactIsABadFile) {
  Log l = MakeLog({.there = false});
  ASSERT_EQ(RawExec(l.path, "UPDATE artifacts SET launch_json = '{\"target\": \"host\"}'"), "");
  tessel_db* db = MustOpen(l);
  tessel_kernel* k = nullptr;
  EXPECT_EQ(tessel_find(db, kSpec, TESSEL_TARGET_HOST, &k), TESSEL_ERROR_BAD_FILE);
  EXPECT_EQ(std::string(tessel_last_error()),
            "record " + l.here_uid + " of " + l.path +
                ": malformed launch configuration: \"buffers\" and \"kernels\" must be arrays");
  tessel_close(db);
}

TEST(Runtime, AStoredSourceThatDoesNotCompileIsACompileError) {
  Log l = MakeLog({.there = false});
  ASSERT_EQ(RawExec(l.path, "UPDATE artifacts SET source = source || 'this is not C++'"), "");
  tessel_db* db = MustOpen(l);
  tessel_kernel* k = nullptr;
  EXPECT_EQ(tessel_find(db, kSpec, TESSEL_TARGET_HOST, &k), TESSEL_ERROR_COMPILE);
  EXPECT_THAT(std::string(tessel_last_error()),
              StartsWith("compiling the stored host source with c++ failed: "));
  tessel_close(db);
}

TEST(Runtime, ThreadsShareOneDatabaseAndOneCompiledKernel) {
  Log l = MakeLog();
  tessel_db* db = MustOpen(l);
  std::vector<std::thread> threads;
  std::vector<double> errors(4, -1);
  std::vector<std::string> uids(4);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t]() {
      tessel_kernel* k = nullptr;
      if (tessel_find(db, kSpec, TESSEL_TARGET_HOST, &k) != TESSEL_OK) return;
      uids[t] = tessel_kernel_record_uid(k);
      for (int i = 0; i < 5; ++i) {
        Buffers buf;
        std::vector<tessel_tensor> args = buf.Args();
        if (tessel_launch(k, args.data(), 3, nullptr) != TESSEL_OK) return;
        errors[t] = std::max(errors[t], buf.MaxError());
      }
      tessel_kernel_release(k);
    });
  }
  for (std::thread& t : threads) t.join();
  tessel_close(db);
  for (int t = 0; t < 4; ++t) {
    EXPECT_EQ(uids[t], l.here_uid);
    EXPECT_GE(errors[t], 0);
    EXPECT_LT(errors[t], 1e-4);
  }
  // Compiled once: one shared object in the cache.
  int objects = 0;
  for (const auto& e : std::filesystem::recursive_directory_iterator(l.cache)) {
    if (e.path().extension() == ".so") ++objects;
  }
  EXPECT_EQ(objects, 1);
}

TEST(Runtime, CppWrapper) {
  Log l = MakeLog();
  tessel::Database db(l.path, l.cache);
  tessel::Kernel k = db.Find(kSpec, TESSEL_TARGET_HOST);
  EXPECT_EQ(k.record_uid(), l.here_uid);
  EXPECT_EQ(k.match(), TESSEL_MATCH_DEVICE);
  EXPECT_EQ(k.source(), l.here_source);
  ASSERT_EQ(k.args().size(), 3u);
  EXPECT_EQ(k.args()[1].name, "B");
  Buffers buf;
  k.Launch({{buf.a.data(), "f32", buf.a_shape},
            {buf.b.data(), "f32", buf.b_shape},
            {buf.c.data(), "f32", buf.c_shape}});
  EXPECT_LT(buf.MaxError(), 1e-4);
  try {
    k.Launch({{buf.a.data(), "f32", buf.a_shape}});
    ADD_FAILURE() << "no exception";
  } catch (const tessel::Error& e) {
    EXPECT_EQ(e.status(), TESSEL_ERROR_INVALID_ARGUMENT);
    EXPECT_THAT(std::string(e.what()), HasSubstr("takes 3 tensors"));
  }
  try {
    tessel::Database missing(l.dir + "/none.db");
    ADD_FAILURE() << "no exception";
  } catch (const tessel::Error& e) {
    EXPECT_EQ(e.status(), TESSEL_ERROR_NOT_FOUND);
  }
}

}  // namespace
}  // namespace tessel::testing
