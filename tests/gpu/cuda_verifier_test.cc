// GPU tests of the GPU verifier (CTest label `gpu`; each skips itself where no GPU is usable):
// inputs generated on the device are bit-identical to the host's for every dtype, and the device
// comparison gives the host comparison's verdict and message, for buffers and for whole CUDA
// candidates (correct, wrong answer, unwritten element, NaN, input written).

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#ifdef TESSEL_HAVE_CUDA

#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "measure/measurement.h"
#include "schedules/codegen/source.h"
#include "schedules/ir/buffer.h"
#include "tests/gpu/gpu_test_util.h"
#include "worker/backend.h"
#include "worker/cuda/cuda_runner.h"
#include "worker/cuda/cuda_verifier.h"
#include "worker/output_compare.h"

namespace tessel::worker {
namespace {

using schedules::BufferRole;
using schedules::DType;
using schedules::GeneratedSource;
using schedules::KernelSource;
using schedules::MakeBuffer;
using schedules::ProgramBuffer;
using ::testing::HasSubstr;

class CudaVerifierTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SKIP_WITHOUT_GPU();
    absl::StatusOr<std::unique_ptr<CudaDevice>> d = CudaDevice::Open(0);
    ASSERT_TRUE(d.ok()) << d.status();
    device_ = std::move(*d);
    absl::StatusOr<CudaVerifier*> v = device_->Verifier();
    ASSERT_TRUE(v.ok()) << v.status();
    verifier_ = *v;
  }

  // The device's CompareBuffer and the host's on the same bytes: same code, kind and message.
  void ExpectSameVerdict(const schedules::Buffer& b, const ByteVector& ref, const ByteVector& cand,
                         const Tolerance& tol) {
    std::vector<ProgramBuffer> two = {
        {MakeBuffer("r", b.dtype, b.shape, b.scope, b.strides), BufferRole::kOutput},
        {MakeBuffer("c", b.dtype, b.shape, b.scope, b.strides), BufferRole::kOutput}};
    absl::StatusOr<std::unique_ptr<CudaBuffers>> dev = device_->Allocate(two);
    ASSERT_TRUE(dev.ok()) << dev.status();
    HostBuffers host;
    host.data = {ref, cand};
    ASSERT_TRUE(device_->Upload(host, dev->get()).ok());
    const absl::Status on_host = CompareBuffer(b, ref, cand, tol);
    const absl::Status on_gpu = verifier_->CompareBuffer(b, (*dev)->ptr(0), (*dev)->ptr(1), tol);
    EXPECT_EQ(on_gpu.code(), on_host.code()) << on_gpu << "\nhost: " << on_host;
    EXPECT_EQ(on_gpu.message(), on_host.message());
    EXPECT_EQ(measure::AttachedMeasureStatus(on_gpu), measure::AttachedMeasureStatus(on_host));
  }

  std::unique_ptr<CudaDevice> device_;
  CudaVerifier* verifier_ = nullptr;
};

const DType kAllDTypes[] = {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kBFloat16,
                            DType::kInt32,   DType::kInt64,   DType::kBool};

TEST_F(CudaVerifierTest, InputsFilledOnTheGpuAreBitIdenticalToTheHostsForEveryDtype) {
  std::vector<ProgramBuffer> buffers;
  for (DType t : kAllDTypes) {
    const std::string name = schedules::DTypeName(t);
    buffers.push_back({MakeBuffer("in_" + name, t, {1 << 20}), BufferRole::kInput});
    buffers.push_back(
        {MakeBuffer("padded_" + name, t, {301, 513}, schedules::MemScope::kGlobal, {520, 1}),
         BufferRole::kInput});
    buffers.push_back({MakeBuffer("out_" + name, t, {777}), BufferRole::kOutput});
    buffers.push_back({MakeBuffer("ws_" + name, t, {333}), BufferRole::kWorkspace});
  }
  FillOptions custom;
  custom.float_min = -3.25;
  custom.float_max = 1e4;
  custom.int_min = -1000;
  custom.int_max = 123456;
  for (const FillOptions& fill : {FillOptions(), custom}) {
    for (uint64_t seed : {uint64_t{1}, uint64_t{0xDEADBEEFCAFEull}}) {
      absl::StatusOr<HostBuffers> want = MakeVerificationBuffers(buffers, seed, fill);
      ASSERT_TRUE(want.ok()) << want.status();
      absl::StatusOr<std::unique_ptr<CudaBuffers>> dev = device_->Allocate(buffers);
      ASSERT_TRUE(dev.ok()) << dev.status();
      ASSERT_TRUE(verifier_->FillInputs(buffers, seed, fill, dev->get()).ok());
      ASSERT_TRUE(verifier_->PoisonOutputs(buffers, dev->get()).ok());
      ASSERT_TRUE(device_->Synchronize().ok());
      absl::StatusOr<HostBuffers> got = AllocateHostBuffers(buffers);
      ASSERT_TRUE(got.ok());
      ASSERT_TRUE(device_->Download(**dev, &*got, /*include_inputs=*/true).ok());
      for (size_t i = 0; i < buffers.size(); ++i) {
        EXPECT_TRUE(got->data[i] == want->data[i])
            << buffers[i].buffer->name << " differs between the GPU and the host (seed " << seed
            << ")";
      }
      // And the input check finds nothing changed, then the element a program changed.
      for (size_t i = 0; i < buffers.size(); ++i) {
        if (buffers[i].role != BufferRole::kInput) continue;
        absl::StatusOr<int64_t> changed = verifier_->FirstChangedElement(
            *buffers[i].buffer, static_cast<int64_t>(i), seed, fill, (*dev)->ptr(i));
        ASSERT_TRUE(changed.ok()) << changed.status();
        EXPECT_EQ(*changed, -1) << buffers[i].buffer->name;
      }
      const int64_t size = schedules::DTypeBytes(buffers[0].buffer->dtype);
      const uint8_t poke[8] = {0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0xde, 0xf0};
      ASSERT_EQ(device_->driver().cuMemcpyHtoD_((*dev)->ptr(0) + 4321 * size, poke, size),
                CUDA_SUCCESS);
      ASSERT_EQ(device_->driver().cuMemcpyHtoD_((*dev)->ptr(0) + 99999 * size, poke, size),
                CUDA_SUCCESS);
      absl::StatusOr<int64_t> changed =
          verifier_->FirstChangedElement(*buffers[0].buffer, 0, seed, fill, (*dev)->ptr(0));
      ASSERT_TRUE(changed.ok());
      EXPECT_EQ(*changed, 4321);
    }
  }
}

ByteVector Bytes(const schedules::Buffer& b, const std::vector<double>& values) {
  ByteVector out(static_cast<size_t>(b.AllocatedBytes()), 0);
  for (size_t k = 0; k < values.size(); ++k) {
    const int64_t o = StorageOffset(b, static_cast<int64_t>(k));
    const double v = values[k];
    switch (b.dtype) {
      case DType::kFloat32: {
        const float f = static_cast<float>(v);
        std::memcpy(out.data() + o * 4, &f, 4);
        break;
      }
      case DType::kFloat64:
        std::memcpy(out.data() + o * 8, &v, 8);
        break;
      case DType::kFloat16: {
        const uint16_t h = FloatToHalfBits(static_cast<float>(v));
        std::memcpy(out.data() + o * 2, &h, 2);
        break;
      }
      case DType::kBFloat16: {
        const uint16_t h = FloatToBFloat16Bits(static_cast<float>(v));
        std::memcpy(out.data() + o * 2, &h, 2);
        break;
      }
      case DType::kInt32: {
        const int32_t x = static_cast<int32_t>(v);
        std::memcpy(out.data() + o * 4, &x, 4);
        break;
      }
      case DType::kInt64: {
        const int64_t x = static_cast<int64_t>(v);
        std::memcpy(out.data() + o * 8, &x, 8);
        break;
      }
      case DType::kBool:
        out[static_cast<size_t>(o)] = v != 0;
        break;
    }
  }
  return out;
}

void PoisonAt(const schedules::Buffer& b, ByteVector* bytes, int64_t index) {
  const int64_t size = schedules::DTypeBytes(b.dtype);
  const int64_t o = StorageOffset(b, index) * size;
  switch (b.dtype) {
    case DType::kFloat32:
      std::memcpy(bytes->data() + o, &kPoisonF32, 4);
      break;
    case DType::kFloat64:
      std::memcpy(bytes->data() + o, &kPoisonF64, 8);
      break;
    case DType::kFloat16:
      std::memcpy(bytes->data() + o, &kPoisonF16, 2);
      break;
    case DType::kBFloat16:
      std::memcpy(bytes->data() + o, &kPoisonBF16, 2);
      break;
    default:
      std::memset(bytes->data() + o, kPoisonIntByte, static_cast<size_t>(size));
  }
}

TEST_F(CudaVerifierTest, GpuComparisonGivesTheHostsVerdictAndMessageForEveryDtype) {
  for (DType t : kAllDTypes) {
    for (bool padded : {false, true}) {
      SCOPED_TRACE(std::string(schedules::DTypeName(t)) + (padded ? " padded" : ""));
      const schedules::BufferPtr b =
          padded ? MakeBuffer("C", t, {300, 1000}, schedules::MemScope::kGlobal, {1003, 1})
                 : MakeBuffer("C", t, {300, 1000});
      const int64_t n = b->NumElements();
      std::vector<double> ref(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) {
        ref[static_cast<size_t>(i)] =
            schedules::IsFloat(t) ? std::sin(0.001 * static_cast<double>(i)) * 3
                                  : static_cast<double>((i * 7) % (t == DType::kBool ? 2 : 11));
      }
      const ByteVector r = Bytes(*b, ref);
      const Tolerance tol = DefaultTolerance(t);
      ExpectSameVerdict(*b, r, r, tol);  // correct

      std::vector<double> wrong = ref;
      wrong[1234] += t == DType::kBool ? 1 : 0.75;
      if (t == DType::kBool) wrong[1234] = 1 - ref[1234];
      wrong[250000] += schedules::IsFloat(t) ? 2.5 : 1;  // the largest
      if (t == DType::kBool) wrong[250000] = 1 - ref[250000];
      ExpectSameVerdict(*b, r, Bytes(*b, wrong), tol);

      ByteVector unwritten = r;
      PoisonAt(*b, &unwritten, 4567);
      PoisonAt(*b, &unwritten, 299999);
      ExpectSameVerdict(*b, r, unwritten, tol);

      if (schedules::IsFloat(t)) {
        std::vector<double> nan = ref;
        nan[42] = std::numeric_limits<double>::quiet_NaN();
        nan[43] = std::numeric_limits<double>::infinity();
        ExpectSameVerdict(*b, r, Bytes(*b, nan), tol);
        // Small but everywhere: only the norm test fails.
        std::vector<double> drift = ref;
        for (double& v : drift) v *= 1 + 0.9 * tol.rtol;
        ExpectSameVerdict(*b, r, Bytes(*b, drift), tol);
        // A broken reference is the reference's error.
        ExpectSameVerdict(*b, Bytes(*b, nan), r, tol);
        ExpectSameVerdict(*b, unwritten, r, tol);
      }
    }
  }
}

// ---- Whole candidates through VerifyPrepared: GPU reference, GPU candidate.

GeneratedSource Source(std::string code, std::vector<KernelSource> kernels,
                       std::vector<ProgramBuffer> buffers) {
  GeneratedSource s;
  s.target = schedules::TargetKind::kCuda;
  s.code = std::move(code);
  s.kernels = std::move(kernels);
  s.buffers = std::move(buffers);
  return s;
}

constexpr int kN = 1 << 20;

GeneratedSource Vadd(const std::string& params, const std::string& body) {
  KernelSource k;
  k.entry = "vadd";
  k.params = {0, 1, 2};
  k.launch.grid = {kN / 256, 1, 1};
  k.launch.block = {256, 1, 1};
  return Source("extern \"C\" __global__ void vadd(" + params +
                    ") {\n"
                    "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
                    "  if (i >= " +
                    std::to_string(kN) + ") return;\n  " + body + "\n}\n",
                {k},
                {{MakeBuffer("x", DType::kFloat32, {kN}), BufferRole::kInput},
                 {MakeBuffer("y", DType::kFloat32, {kN}), BufferRole::kInput},
                 {MakeBuffer("z", DType::kFloat32, {kN}), BufferRole::kOutput}});
}

const char kConstParams[] = "const float* x, const float* y, float* z";

class GpuVerifyPreparedTest : public CudaVerifierTest {
 protected:
  // Verifies `candidate` against the vadd reference on the GPU and on the host; both verdicts
  // must be the same, word for word. Returns the GPU's.
  absl::Status Verify(const GeneratedSource& candidate) {
    RunOptions run;
    run.device = device_.get();
    const GeneratedSource reference = Vadd(kConstParams, "z[i] = x[i] + y[i];");
    absl::StatusOr<std::unique_ptr<Executable>> ref = Prepare(reference, run);
    absl::StatusOr<std::unique_ptr<Executable>> cand = Prepare(candidate, run);
    EXPECT_TRUE(ref.ok() && cand.ok());
    if (!ref.ok()) return ref.status();
    if (!cand.ok()) return cand.status();
    VerifyProfile gpu_profile, host_profile;
    VerifyOptions options;
    options.run = run;
    options.profile = &gpu_profile;
    const absl::Status on_gpu = VerifyPrepared(candidate, **cand, reference, **ref, 11, options);
    EXPECT_TRUE(gpu_profile.on_device);
    options.on_device = false;
    options.profile = &host_profile;
    const absl::Status on_host = VerifyPrepared(candidate, **cand, reference, **ref, 11, options);
    EXPECT_FALSE(host_profile.on_device);
    EXPECT_EQ(on_gpu.code(), on_host.code());
    EXPECT_EQ(on_gpu.message(), on_host.message());
    EXPECT_EQ(measure::AttachedMeasureStatus(on_gpu), measure::AttachedMeasureStatus(on_host));
    return on_gpu;
  }
};

TEST_F(GpuVerifyPreparedTest, AcceptsACorrectCandidate) {
  absl::Status s = Verify(Vadd(kConstParams, "z[i] = y[i] + x[i];"));
  EXPECT_TRUE(s.ok()) << s;
}

TEST_F(GpuVerifyPreparedTest, RejectsAWrongAnswer) {
  absl::Status s = Verify(Vadd(kConstParams, "z[i] = x[i] - y[i];"));
  EXPECT_EQ(measure::AttachedMeasureStatus(s), measure::MeasureStatus::kVerifyFailed);
  EXPECT_THAT(s.message(), HasSubstr("verification failed: output 'z' (f32[1048576])"));
  EXPECT_THAT(s.message(), HasSubstr("wrong values, first at index"));
}

TEST_F(GpuVerifyPreparedTest, RejectsAnUnwrittenElement) {
  absl::Status s = Verify(Vadd(kConstParams, "if (i != 12345) z[i] = x[i] + y[i];"));
  EXPECT_EQ(measure::AttachedMeasureStatus(s), measure::MeasureStatus::kVerifyFailed);
  EXPECT_THAT(s.message(), HasSubstr("1 of 1048576 elements differ"));
  EXPECT_THAT(s.message(), HasSubstr("1 never written (still the NaN poison written before the "
                                     "run), first at index 12345 [12345]"));
}

TEST_F(GpuVerifyPreparedTest, RejectsANan) {
  absl::Status s =
      Verify(Vadd(kConstParams, "z[i] = i == 77 ? __int_as_float(0x7fc00000) : x[i] + y[i];"));
  EXPECT_EQ(measure::AttachedMeasureStatus(s), measure::MeasureStatus::kVerifyFailed);
  EXPECT_THAT(s.message(), HasSubstr("1 NaN computed by the program, first at index 77 [77]"));
}

TEST_F(GpuVerifyPreparedTest, RejectsACandidateThatWritesIntoItsInputs) {
  absl::Status s = Verify(
      Vadd("float* x, const float* y, float* z", "z[i] = x[i] + y[i]; if (i == 1000) x[i] = 0;"));
  EXPECT_EQ(measure::AttachedMeasureStatus(s), measure::MeasureStatus::kVerifyFailed);
  EXPECT_THAT(s.message(),
              HasSubstr("the candidate wrote into input buffer 'x' (first changed byte at "
                        "offset 400"));
  EXPECT_THAT(s.message(), HasSubstr("inputs are read-only"));
}

TEST_F(GpuVerifyPreparedTest, TimesOnInputsFilledOnTheGpu) {
  RunOptions run;
  run.device = device_.get();
  const GeneratedSource source = Vadd(kConstParams, "z[i] = x[i] + y[i];");
  absl::StatusOr<std::unique_ptr<Executable>> exe = Prepare(source, run);
  ASSERT_TRUE(exe.ok()) << exe.status();
  measure::TimingOptions timing;
  timing.min_total_ms = 1;
  double fill_ms = -1;
  absl::StatusOr<measure::Timings> t =
      TimePrepared(source, **exe, 3, FillOptions(), timing, &fill_ms);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_GE(t->repeats_ms.size(), 5u);
  EXPECT_GE(fill_ms, 0);
}

}  // namespace
}  // namespace tessel::worker

#else

TEST(CudaVerifierTest, NeedsTheCudaToolkit) { GTEST_SKIP() << "built without the CUDA toolkit"; }

#endif
