// tessel_bench_kernels: how good are Tessel's kernels, against the two ceilings of the GPU?
//
//   (a) cuBLAS SGEMM 4096^3, TF32 off (CUBLAS_DEFAULT_MATH: no reduced-precision tensor-core
//       path for float32; --cublas-math=pedantic for CUBLAS_PEDANTIC_MATH): the matrix ceiling;
//   (b) a device-to-device copy of a 1 GiB buffer (cuMemcpyDtoDAsync), counting the bytes read
//       plus the bytes written: the memory ceiling;
//   (c) every candidate handed to BenchCandidate(): Tessel-generated kernels (matmul 4096^3,
//       softmax (4096, 65536), layernorm (16, 4194304)), loaded by LoadTraceCandidates() from the
//       traces in --trace-dir, each verified against its reference first when one is given.
//
// Every row is timed the same way (CudaDevice::TimeRegion: warm-up, then repeats between two
// events on one stream with L2 flushed before each, until --min-ms of measured time), and the
// table shows the median. Compute-bound rows are compared with cuBLAS (GFLOP/s over cuBLAS's),
// memory-bound rows with the copy (GB/s over the copy's).
//
// Usage (on a GPU host; builds where the CUDA toolkit and cuBLAS are found):
//   tessel_bench_kernels [--device=0] [--min-ms=200] [--max-repeats=1000] [--warmup=3]
//                        [--trace-dir=tests/data] [--only=NAME,NAME] [--no-verify]
//                        [--no-baselines] [--copy-mib=1024] [--gemm-n=4096]
//                        [--cublas-math=default|pedantic] [--csv=FILE] [--example]
//   --only       run only the candidates whose name contains one of the given substrings
//                (the baselines always run: the ratios need them; --no-baselines skips them)
//   --csv        also write every repeat of every row to FILE (name,median_ms,repeat_ms...)
//   --space=N    instead of the traces: for matmul 2048^3 (compare with --gemm-n=2048), softmax
//                (4096, 65536) and layernorm (16, 4194304), draw N samples of the design space
//                (schedules/space), compile them in parallel, screen each with a short timing
//                on constant inputs, then verify and time the best three the full way
//   --example    add a hand-written candidate (y = 2x over 256 MiB, verified against a host loop)
//                that shows the candidate path working before the generated kernels are in
// Exit status: 0 when every row ran (and verified), 1 otherwise, 2 for a usage error.

#include <cublas_v2.h>
#include <cuda.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "measure/measurement.h"
#include "schedules/codegen/source.h"
#include "schedules/ir/buffer.h"
#include "schedules/schedule/schedule.h"
#include "schedules/space/space_generator.h"
#include "schedules/workload/builtins.h"
#include "worker/backend.h"
#include "worker/cuda/cuda_driver.h"
#include "worker/cuda/cuda_runner.h"
#include "worker/cuda/nvrtc_compiler.h"
#include "worker/output_compare.h"

namespace tessel::bench {
namespace {

using measure::TimingOptions;
using measure::Timings;
using schedules::BufferRole;
using schedules::DType;
using schedules::GeneratedSource;
using schedules::MakeBuffer;
using schedules::ProgramBuffer;
using worker::CudaDevice;

struct Flags {
  int device = 0;
  double min_ms = 200;
  int max_repeats = 1000;
  int warmup = 3;
  std::string trace_dir;
  std::vector<std::string> only;
  bool verify = true;
  bool baselines = true;
  int64_t copy_mib = 1024;
  int64_t gemm_n = 4096;
  bool pedantic = false;
  std::string csv;
  bool example = false;
  int space = 0;  // --space=N: the best of N design-space samples per workload
};

// ---------------------------------------------------------------------------------------------
// Candidates: the lead plugs the generated kernels in here.

// One Tessel kernel to measure. `flops` (floating-point operations of one run) and `bytes` (the
// fewest bytes one run must move: each input read once, each output written once) give its
// GFLOP/s and GB/s; give 0 for what does not apply. With a reference (the untransformed lowering
// of the same workload), the candidate is verified before it is timed.
struct CandidateSpec {
  std::string name;
  GeneratedSource source;
  double flops = 0;
  double bytes = 0;
  std::optional<GeneratedSource> reference;
};

// The cuBLAS baseline's work (f32 GEMM).
double MatmulFlops(double m, double n, double k) { return 2 * m * n * k; }
double MatmulBytes(double m, double n, double k) { return 4 * (m * k + k * n + m * n); }

// The generated kernels of the quality table: the hand-written traces in `trace_dir`
// (tests/data) replayed on each workload's initial schedule, lowered and generated, each with the
// untransformed lowering as its reference. Matmul is compared by its arithmetic with cuBLAS, the
// memory-bound kernels by their compulsory traffic (Workload::CompulsoryBytes: every input read
// once, every output written once) with the copy.
absl::StatusOr<std::vector<CandidateSpec>> LoadTraceCandidates(const std::string& trace_dir) {
  if (trace_dir.empty()) return std::vector<CandidateSpec>{};
  struct Entry {
    const char* name;
    const char* spec;
    const char* file;
  };
  static const Entry kEntries[] = {
      {"tessel_matmul_4096_f32", "matmul(M=4096, N=4096, K=4096, dtype=f32)",
       "matmul_4096_f32.cuda.trace.json"},
      {"tessel_softmax_4096x65536_f32", "softmax(rows=4096, cols=65536, dtype=f32)",
       "softmax_4096x65536_f32.cuda.trace.json"},
      {"tessel_layernorm_16x4194304_f32", "layernorm(rows=16, cols=4194304, dtype=f32)",
       "layernorm_16x4194304_f32.cuda.trace.json"},
  };
  const schedules::Target target = schedules::CudaTarget("sm_90");
  std::vector<CandidateSpec> out;
  // Each entry's trace, and any variants beside it: files named <stem>.<variant>.cuda.trace.json
  // (variants of a schedule compared in one run).
  std::vector<std::pair<const Entry*, std::string>> files;
  for (const Entry& e : kEntries) {
    const std::string file = e.file;
    const std::string stem = file.substr(0, file.size() - std::string(".cuda.trace.json").size());
    files.emplace_back(&e, file);
    std::vector<std::string> variants;
    for (const auto& f : std::filesystem::directory_iterator(trace_dir)) {
      const std::string name = f.path().filename().string();
      if (name != file && name.rfind(stem + ".", 0) == 0 &&
          name.size() > std::string(".cuda.trace.json").size() &&
          name.substr(name.size() - 16) == ".cuda.trace.json") {
        variants.push_back(name);
      }
    }
    std::sort(variants.begin(), variants.end());
    for (const std::string& v : variants) files.emplace_back(&e, v);
  }
  for (const auto& [entry, file] : files) {
    const Entry& e = *entry;
    absl::StatusOr<schedules::Workload> w = schedules::ParseWorkloadSpec(e.spec);
    if (!w.ok()) return w.status();
    const std::string path = absl::StrCat(trace_dir, "/", file);
    std::ifstream in(path);
    if (!in) return absl::NotFoundError(absl::StrCat("cannot read trace ", path));
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    absl::StatusOr<schedules::Trace> trace = schedules::Trace::Parse(text);
    if (!trace.ok()) return trace.status();
    absl::StatusOr<schedules::Candidate> cand = schedules::BuildCandidate(*w, target, *trace);
    if (!cand.ok()) return cand.status();
    absl::StatusOr<schedules::Candidate> ref = schedules::BuildCandidate(*w, target, std::nullopt);
    if (!ref.ok()) return ref.status();
    CandidateSpec c;
    c.name = file == e.file
                 ? std::string(e.name)
                 : absl::StrCat(e.name, file.substr(std::string(e.file).size() - 16,
                                                    file.size() - std::string(e.file).size()));
    c.source = std::move(cand->source);
    c.reference = std::move(ref->source);
    // Matmul is compared by its arithmetic, the others by their compulsory traffic.
    const bool compute_bound = w->name == "matmul";
    c.flops = compute_bound ? w->Flops() : 0;
    c.bytes = compute_bound ? 0 : static_cast<double>(w->CompulsoryBytes());
    out.push_back(std::move(c));
  }
  return out;
}

// A hand-written candidate that shows the plumbing end to end (--example): y = 2 * x over
// 64M floats with 16-byte accesses, verified against a host loop. Memory-bound: compare with the
// copy.
std::vector<CandidateSpec> ExampleCandidates() {
  constexpr int64_t kN = int64_t{1} << 26;
  std::vector<ProgramBuffer> buffers = {
      {MakeBuffer("x", DType::kFloat32, {kN}), BufferRole::kInput},
      {MakeBuffer("y", DType::kFloat32, {kN}), BufferRole::kOutput}};
  CandidateSpec spec;
  spec.name = "example_scale_f32_256MiB";
  spec.source.target = schedules::TargetKind::kCuda;
  spec.source.code = R"(
extern "C" __global__ void __launch_bounds__(256) scale2(const float4* __restrict__ x,
                                                         float4* __restrict__ y) {
  const long i = blockIdx.x * 256L + threadIdx.x;
  float4 v = x[i];
  v.x *= 2.f; v.y *= 2.f; v.z *= 2.f; v.w *= 2.f;
  y[i] = v;
})";
  schedules::KernelSource k;
  k.entry = "scale2";
  k.params = {0, 1};
  k.launch.grid = {kN / 4 / 256, 1, 1};
  k.launch.block = {256, 1, 1};
  spec.source.kernels = {k};
  spec.source.buffers = buffers;
  GeneratedSource ref;
  ref.target = schedules::TargetKind::kHost;
  ref.code = R"(
extern "C" void scale2_ref(void* const* b) {
  const float* x = (const float*)b[0];
  float* y = (float*)b[1];
#pragma omp parallel for
  for (long i = 0; i < (1L << 26); ++i) y[i] = 2.f * x[i];
})";
  schedules::KernelSource rk;
  rk.entry = "scale2_ref";
  ref.kernels = {rk};
  ref.buffers = buffers;
  spec.reference = std::move(ref);
  spec.bytes = 2.0 * 4 * kN;
  spec.flops = 0;
  return {spec};
}

// ---------------------------------------------------------------------------------------------

struct Row {
  std::string name;
  std::string status;  // empty when it ran
  Timings timings;
  double flops = 0;
  double bytes = 0;
};

struct BenchContext {
  Flags flags;
  CudaDevice* device = nullptr;
  std::vector<Row> rows;
  double cublas_gflops = 0;  // 0 until measured
  double copy_gbps = 0;

  TimingOptions timing() const {
    TimingOptions t;
    t.warmup_runs = flags.warmup;
    t.min_total_ms = flags.min_ms;
    t.max_repeats = flags.max_repeats;
    t.min_repeats = std::min(5, flags.max_repeats);
    return t;
  }
  bool Selected(const std::string& name) const {
    if (flags.only.empty()) return true;
    for (const std::string& o : flags.only) {
      if (name.find(o) != std::string::npos) return true;
    }
    return false;
  }
};

void AddRow(BenchContext* ctx, std::string name, absl::StatusOr<Timings> t, double flops,
            double bytes) {
  Row row;
  row.name = std::move(name);
  row.flops = flops;
  row.bytes = bytes;
  if (t.ok()) {
    row.timings = *std::move(t);
  } else {
    row.status = std::string(t.status().message());
  }
  ctx->rows.push_back(std::move(row));
}

const char* CublasStatusName(cublasStatus_t s) {
  switch (s) {
    case CUBLAS_STATUS_SUCCESS:
      return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED:
      return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED:
      return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE:
      return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH:
      return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_EXECUTION_FAILED:
      return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR:
      return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED:
      return "CUBLAS_STATUS_NOT_SUPPORTED";
    default:
      return "CUBLAS_STATUS_?";
  }
}

absl::Status CublasCheck(cublasStatus_t s, const char* call) {
  if (s == CUBLAS_STATUS_SUCCESS) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(call, " failed: ", CublasStatusName(s)));
}

// (a) cuBLAS SGEMM n^3, row-major C = A * B computed as column-major C^T = B^T * A^T.
void BenchCublasSgemm(BenchContext* ctx) {
  const int64_t n = ctx->flags.gemm_n;
  const std::string name = absl::StrCat("cublas_sgemm_", n, "^3 (",
                                        ctx->flags.pedantic ? "pedantic" : "default", " math)");
  const double flops = MatmulFlops(n, n, n);
  const double bytes = MatmulBytes(n, n, n);
  auto fail = [&](const absl::Status& s) { AddRow(ctx, name, s, flops, bytes); };

  std::vector<ProgramBuffer> buffers = {
      {MakeBuffer("A", DType::kFloat32, {n, n}), BufferRole::kInput},
      {MakeBuffer("B", DType::kFloat32, {n, n}), BufferRole::kInput},
      {MakeBuffer("C", DType::kFloat32, {n, n}), BufferRole::kOutput}};
  absl::StatusOr<worker::HostBuffers> host = worker::MakeVerificationBuffers(buffers, 1);
  if (!host.ok()) return fail(host.status());
  auto dev = ctx->device->Allocate(buffers);
  if (!dev.ok()) return fail(dev.status());
  if (absl::Status s = ctx->device->Upload(*host, dev->get()); !s.ok()) return fail(s);

  cublasHandle_t handle = nullptr;
  if (absl::Status s = CublasCheck(cublasCreate(&handle), "cublasCreate"); !s.ok()) return fail(s);
  std::unique_ptr<cublasContext, void (*)(cublasHandle_t)> guard(
      handle, [](cublasHandle_t h) { cublasDestroy(h); });
  if (absl::Status s =
          CublasCheck(cublasSetStream(handle, ctx->device->stream()), "cublasSetStream");
      !s.ok()) {
    return fail(s);
  }
  if (absl::Status s =
          CublasCheck(cublasSetMathMode(
                          handle, ctx->flags.pedantic ? CUBLAS_PEDANTIC_MATH : CUBLAS_DEFAULT_MATH),
                      "cublasSetMathMode");
      !s.ok()) {
    return fail(s);
  }
  const float alpha = 1.0f, beta = 0.0f;
  const float* a = reinterpret_cast<const float*>((*dev)->ptr(0));
  const float* b = reinterpret_cast<const float*>((*dev)->ptr(1));
  float* c = reinterpret_cast<float*>((*dev)->ptr(2));
  const int ni = static_cast<int>(n);
  auto enqueue = [&]() {
    return CublasCheck(cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, ni, ni, ni, &alpha, b, ni, a,
                                   ni, &beta, c, ni),
                       "cublasSgemm");
  };

  // Correct first: a few elements against a float64 dot product on the host.
  if (absl::Status s = enqueue(); !s.ok()) return fail(s);
  if (absl::Status s = ctx->device->Synchronize(); !s.ok()) return fail(s);
  if (absl::Status s = ctx->device->Download(**dev, &*host); !s.ok()) return fail(s);
  const float* ha = reinterpret_cast<const float*>(host->data[0].data());
  const float* hb = reinterpret_cast<const float*>(host->data[1].data());
  const float* hc = reinterpret_cast<const float*>(host->data[2].data());
  // The error over sqrt(sum (a_k b_k)^2): ~1e-7 for float32 arithmetic, ~4e-4 for TF32.
  double worst = 0;
  for (int t = 0; t < 16; ++t) {
    const int64_t i = (t * 977) % n, j = (t * 1553 + 7) % n;
    double exact = 0, sum_sq = 0;
    for (int64_t k = 0; k < n; ++k) {
      const double p = static_cast<double>(ha[i * n + k]) * hb[k * n + j];
      exact += p;
      sum_sq += p * p;
    }
    worst = std::max(worst, std::fabs(hc[i * n + j] - exact) / std::sqrt(sum_sq));
  }
  if (!(worst < 2e-5)) {
    return fail(absl::InternalError(
        absl::StrCat("cuBLAS SGEMM is off by ", worst,
                     " of the product norm, more than float32 arithmetic "
                     "allows: TF32 in use (NVIDIA_TF32_OVERRIDE=1?) or a broken setup")));
  }
  absl::StatusOr<Timings> t = ctx->device->TimeRegion(enqueue, ctx->timing());
  if (t.ok()) ctx->cublas_gflops = flops / (t->median_ms * 1e6);
  AddRow(ctx, name, std::move(t), flops, bytes);
}

// (b) device-to-device copy; bytes read + bytes written.
void BenchCopy(BenchContext* ctx) {
  const int64_t bytes = ctx->flags.copy_mib << 20;
  const std::string name = absl::StrCat("memcpy_dtod_", ctx->flags.copy_mib, "MiB");
  const worker::CudaDriver& d = ctx->device->driver();
  std::vector<ProgramBuffer> buffers = {
      {MakeBuffer("src", DType::kFloat32, {bytes / 4}), BufferRole::kInput},
      {MakeBuffer("dst", DType::kFloat32, {bytes / 4}), BufferRole::kOutput}};
  auto dev = ctx->device->Allocate(buffers);
  if (!dev.ok()) return AddRow(ctx, name, dev.status(), 0, 2.0 * bytes);
  // Not zeros: 1.0f everywhere.
  const CUresult r = d.cuMemsetD32Async_((*dev)->ptr(0), 0x3F800000u,
                                         static_cast<size_t>(bytes / 4), ctx->device->stream());
  if (r != CUDA_SUCCESS)
    return AddRow(ctx, name, worker::CudaError(d, r, "cuMemsetD32Async"), 0, 0);
  auto enqueue = [&]() -> absl::Status {
    TESSEL_CU_RETURN_IF_ERROR(
        d, cuMemcpyDtoDAsync,
        ((*dev)->ptr(1), (*dev)->ptr(0), static_cast<size_t>(bytes), ctx->device->stream()));
    return absl::OkStatus();
  };
  absl::StatusOr<Timings> t = ctx->device->TimeRegion(enqueue, ctx->timing());
  if (t.ok()) ctx->copy_gbps = 2.0 * bytes / (t->median_ms * 1e6);
  AddRow(ctx, name, std::move(t), 0, 2.0 * bytes);
}

// (c) one Tessel kernel: compile for the device, verify against the reference, time.
void BenchCandidate(BenchContext* ctx, const std::string& name, const GeneratedSource& source,
                    double flops, double bytes, const GeneratedSource* reference = nullptr) {
  worker::RunOptions run;
  run.device = ctx->device;
  if (reference != nullptr && ctx->flags.verify) {
    worker::VerifyOptions verify;
    verify.run = run;
    if (absl::Status s = worker::RunAndVerify(source, *reference, 1, verify); !s.ok()) {
      return AddRow(ctx, name, absl::Status(s.code(), absl::StrCat("not verified: ", s.message())),
                    flops, bytes);
    }
  }
  worker::MeasureOptions measure;
  measure.run = run;
  measure.timing = ctx->timing();
  measure.seed = 2;
  AddRow(ctx, name, worker::Measure(source, measure), flops, bytes);
}

// (d) the design space: the best of `flags.space` samples of each workload.
void BenchSpace(BenchContext* ctx) {
  static const char* kSpecs[] = {"matmul(M=2048, N=2048, K=2048, dtype=f32)",
                                 "softmax(rows=4096, cols=65536, dtype=f32)",
                                 "layernorm(rows=16, cols=4194304, dtype=f32)"};
  schedules::Target target = schedules::CudaTarget("sm_90");
  target.sm_count = ctx->device->info().sm_count;
  for (const char* spec : kSpecs) {
    absl::StatusOr<schedules::Workload> w = schedules::ParseWorkloadSpec(spec);
    const std::string base = absl::StrCat("space_", w.ok() ? w->name : "?");
    if (!ctx->Selected(base)) continue;
    auto space = w.ok() ? schedules::SpaceGenerator::Create(*w, target)
                        : absl::StatusOr<schedules::SpaceGenerator>(w.status());
    if (!space.ok()) return AddRow(ctx, base, space.status(), 0, 0);
    const bool compute_bound = w->name == "matmul";
    const double flops = compute_bound ? w->Flops() : 0;
    const double bytes = compute_bound ? 0 : static_cast<double>(w->CompulsoryBytes());
    // Sample, then compile in parallel.
    std::vector<schedules::Candidate> cands;
    int invalid = 0;
    for (int seed = 0; seed < ctx->flags.space; ++seed) {
      auto c = space->Sample(static_cast<uint64_t>(seed));
      if (c.ok()) {
        cands.push_back(std::move(*c));
      } else {
        ++invalid;
      }
    }
    std::vector<absl::StatusOr<worker::CudaBinary>> bins(cands.size(),
                                                         absl::UnknownError("not compiled"));
    {
      std::vector<std::thread> pool;
      const size_t nthreads = std::max(1u, std::thread::hardware_concurrency());
      for (size_t t = 0; t < nthreads; ++t) {
        pool.emplace_back([&, t] {
          for (size_t i = t; i < cands.size(); i += nthreads) {
            worker::NvrtcOptions o;
            o.arch = ctx->device->info().arch;
            bins[i] = worker::CompileCuda(cands[i].source, o);
          }
        });
      }
      for (std::thread& th : pool) th.join();
    }
    // Screen: a short timing of each on constant inputs (1.0f).
    TimingOptions quick;
    quick.warmup_runs = 1;
    quick.min_repeats = 3;
    quick.max_repeats = 20;
    quick.min_total_ms = 2;
    std::vector<std::pair<double, size_t>> screened;
    int failed = 0;
    const worker::CudaDriver& d = ctx->device->driver();
    for (size_t i = 0; i < cands.size(); ++i) {
      if (!bins[i].ok()) {
        ++failed;
        continue;
      }
      auto program = ctx->device->Load(cands[i].source, *bins[i]);
      auto bufs = program.ok()
                      ? ctx->device->Allocate(cands[i].source.buffers)
                      : absl::StatusOr<std::unique_ptr<worker::CudaBuffers>>(program.status());
      if (!bufs.ok()) {
        ++failed;
        continue;
      }
      for (size_t b = 0; b < cands[i].source.buffers.size(); ++b) {
        d.cuMemsetD32Async_((*bufs)->ptr(b), 0x3F800000u,
                            static_cast<size_t>((*bufs)->bytes(b) / 4), ctx->device->stream());
      }
      auto t = ctx->device->Time(**program, **bufs, quick);
      if (!t.ok()) {
        ++failed;
        if (ctx->device->is_poisoned()) break;
        continue;
      }
      screened.emplace_back(t->median_ms, i);
    }
    std::sort(screened.begin(), screened.end());
    std::printf(
        "%s: %zu of %d samples valid (%d rejected before compiling), %d failed to "
        "compile or run, %zu timed; screening best %.4f ms\n",
        spec, cands.size(), ctx->flags.space, invalid, failed, screened.size(),
        screened.empty() ? 0.0 : screened[0].first);
    absl::StatusOr<schedules::Candidate> ref = schedules::BuildCandidate(*w, target, std::nullopt);
    for (size_t r = 0; r < std::min<size_t>(3, screened.size()); ++r) {
      const schedules::Candidate& c = cands[screened[r].second];
      const std::string name =
          absl::StrCat(base, "_best", r + 1, "_seed",
                       screened[r].second < cands.size() ? screened[r].second : 0);
      if (r == 0) {
        std::printf("  best trace: %s\n", c.trace->ToJsonString(-1).c_str());
      }
      BenchCandidate(ctx, name, c.source, flops, bytes, ref.ok() ? &ref->source : nullptr);
    }
  }
}

void PrintTable(const BenchContext& ctx) {
  std::printf("\n%-44s %10s %10s %7s %10s %9s %9s %8s\n", "name", "median_ms", "min_ms", "repeats",
              "GFLOP/s", "GB/s", "vs_cublas", "vs_copy");
  for (const Row& row : ctx.rows) {
    if (!row.status.empty()) {
      std::printf("%-44s FAILED: %s\n", row.name.c_str(), row.status.c_str());
      continue;
    }
    const double ms = row.timings.median_ms;
    const double gflops = row.flops > 0 ? row.flops / (ms * 1e6) : 0;
    const double gbps = row.bytes > 0 ? row.bytes / (ms * 1e6) : 0;
    auto cell = [](double v, const char* fmt) {
      if (v <= 0) return std::string("-");
      char buf[32];
      std::snprintf(buf, sizeof(buf), fmt, v);
      return std::string(buf);
    };
    std::printf(
        "%-44s %10.4f %10.4f %7zu %10s %9s %9s %8s\n", row.name.c_str(), ms, row.timings.min_ms,
        row.timings.repeats_ms.size(), cell(gflops, "%.1f").c_str(), cell(gbps, "%.1f").c_str(),
        cell(ctx.cublas_gflops > 0 && gflops > 0 ? gflops / ctx.cublas_gflops : 0, "%.3f").c_str(),
        cell(ctx.copy_gbps > 0 && gbps > 0 && row.flops <= 0 ? gbps / ctx.copy_gbps : 0, "%.3f")
            .c_str());
  }
}

bool WriteCsv(const BenchContext& ctx, const std::string& path) {
  std::ofstream out(path);
  out << "name,status,median_ms,flops,bytes,repeats_ms...\n";
  for (const Row& row : ctx.rows) {
    out << '"' << row.name << "\"," << (row.status.empty() ? "ok" : "failed") << ','
        << row.timings.median_ms << ',' << row.flops << ',' << row.bytes;
    for (double ms : row.timings.repeats_ms) out << ',' << ms;
    out << '\n';
  }
  return static_cast<bool>(out);
}

int Usage(const std::string& why) {
  std::fprintf(stderr,
               "%s\nusage: tessel_bench_kernels [--device=N] [--min-ms=MS] [--max-repeats=N] "
               "[--warmup=N] [--trace-dir=DIR] [--only=NAME,...] [--no-verify] [--no-baselines] "
               "[--copy-mib=MIB] [--gemm-n=N] [--cublas-math=default|pedantic] [--csv=FILE] "
               "[--example] [--space=N]\n",
               why.c_str());
  return 2;
}

int Main(int argc, char** argv) {
  Flags flags;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const size_t eq = arg.find('=');
    const std::string key = arg.substr(0, eq);
    const std::string value = eq == std::string::npos ? "" : arg.substr(eq + 1);
    bool ok = true;
    if (key == "--device") {
      ok = absl::SimpleAtoi(value, &flags.device);
    } else if (key == "--min-ms") {
      ok = absl::SimpleAtod(value, &flags.min_ms);
    } else if (key == "--max-repeats") {
      ok = absl::SimpleAtoi(value, &flags.max_repeats) && flags.max_repeats >= 1;
    } else if (key == "--warmup") {
      ok = absl::SimpleAtoi(value, &flags.warmup);
    } else if (key == "--trace-dir") {
      flags.trace_dir = value;
    } else if (key == "--only") {
      flags.only = absl::StrSplit(value, ',', absl::SkipEmpty());
    } else if (key == "--no-verify") {
      flags.verify = false;
    } else if (key == "--no-baselines") {
      flags.baselines = false;
    } else if (key == "--copy-mib") {
      ok = absl::SimpleAtoi(value, &flags.copy_mib) && flags.copy_mib > 0;
    } else if (key == "--gemm-n") {
      ok = absl::SimpleAtoi(value, &flags.gemm_n) && flags.gemm_n > 0;
    } else if (key == "--cublas-math") {
      ok = value == "default" || value == "pedantic";
      flags.pedantic = value == "pedantic";
    } else if (key == "--csv") {
      flags.csv = value;
    } else if (key == "--example") {
      flags.example = true;
    } else if (key == "--space") {
      ok = absl::SimpleAtoi(value, &flags.space) && flags.space > 0;
    } else if (key == "--help" || key == "-h") {
      return Usage("tessel_bench_kernels: kernel quality against cuBLAS and the copy bandwidth");
    } else {
      return Usage(absl::StrCat("unknown flag ", arg));
    }
    if (!ok) return Usage(absl::StrCat("bad value in ", arg));
  }

  absl::StatusOr<std::unique_ptr<CudaDevice>> device = CudaDevice::Open(flags.device);
  if (!device.ok()) {
    std::fprintf(stderr, "tessel_bench_kernels: no GPU: %s\n",
                 std::string(device.status().message()).c_str());
    return 1;
  }
  const worker::CudaDeviceInfo& info = (*device)->info();
  std::printf("device %d: %s (%s), %lld SMs, L2 %lld MiB, %lld MiB memory, driver CUDA %d.%d, %s\n",
              info.ordinal, info.name.c_str(), info.arch.c_str(),
              static_cast<long long>(info.sm_count), static_cast<long long>(info.l2_bytes >> 20),
              static_cast<long long>(info.total_memory_bytes >> 20), info.driver_version / 1000,
              (info.driver_version % 1000) / 10, worker::NvrtcVersionString().c_str());
  std::printf("timing: %d warm-up, repeats until %.0f ms (at most %d), L2 flushed, median\n",
              flags.warmup, flags.min_ms, flags.max_repeats);

  BenchContext ctx;
  ctx.flags = flags;
  ctx.device = device->get();
  if (flags.baselines) {
    BenchCublasSgemm(&ctx);
    BenchCopy(&ctx);
  }
  if (flags.space > 0) BenchSpace(&ctx);
  absl::StatusOr<std::vector<CandidateSpec>> candidates = LoadTraceCandidates(flags.trace_dir);
  if (!candidates.ok()) {
    std::fprintf(stderr, "loading candidates from '%s' failed: %s\n", flags.trace_dir.c_str(),
                 std::string(candidates.status().message()).c_str());
  } else {
    if (flags.example) {
      for (CandidateSpec& c : ExampleCandidates()) candidates->push_back(std::move(c));
    }
    for (const CandidateSpec& c : *candidates) {
      if (!ctx.Selected(c.name)) continue;
      BenchCandidate(&ctx, c.name, c.source, c.flops, c.bytes,
                     c.reference.has_value() ? &*c.reference : nullptr);
    }
  }
  PrintTable(ctx);
  if (!flags.csv.empty() && !WriteCsv(ctx, flags.csv)) {
    std::fprintf(stderr, "cannot write %s\n", flags.csv.c_str());
    return 1;
  }
  for (const Row& r : ctx.rows) {
    if (!r.status.empty()) return 1;
  }
  return 0;
}

}  // namespace
}  // namespace tessel::bench

int main(int argc, char** argv) { return tessel::bench::Main(argc, argv); }
