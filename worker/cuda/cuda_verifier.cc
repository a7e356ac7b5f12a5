#include "worker/cuda/cuda_verifier.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/synchronization/mutex.h"
#include "measure/measurement.h"
#include "schedules/util/check.h"
#include "worker/cuda/nvrtc_compiler.h"

namespace tessel::worker {

// worker/input_gen.h's text, embedded at build time (worker/CMakeLists.txt).
extern const char kInputGenText[];

namespace {

using schedules::Buffer;
using schedules::BufferRole;
using schedules::DType;

constexpr int kThreads = 256;
constexpr int kMaxRank = 8;

// Mirrors of the kernels' parameter structs (same layout on both sides).
struct Layout {
  int rank = 0;
  int compact = 1;
  long long shape[kMaxRank] = {};
  long long strides[kMaxRank] = {};
};
struct DevStats {
  long long unwritten, first_unwritten, nan, first_nan, wrong, first_wrong, worst, finite_ref;
  double worst_ratio, sum_sq_diff, sum_sq_ref;
};
static_assert(sizeof(DevStats) == 88);
static_assert(sizeof(tessel_gen::GenParams) == 32);

const char kKernels[] = R"TESSELKERNELS(
namespace tessel_gen {

struct Layout {
  int rank;
  int compact;
  long long shape[8];
  long long strides[8];
};

struct Stats {
  long long unwritten, first_unwritten, nan, first_nan, wrong, first_wrong, worst, finite_ref;
  double worst_ratio, sum_sq_diff, sum_sq_ref;
};

__device__ __forceinline__ long long Offset(const Layout& l, long long index) {
  if (l.compact) return index;
  long long offset = 0;
  for (int d = l.rank - 1; d >= 0; --d) {
    offset += (index % l.shape[d]) * l.strides[d];
    index /= l.shape[d];
  }
  return offset;
}

__device__ __forceinline__ u64 LoadBits(const unsigned char* p, long long o, int size) {
  switch (size) {
    case 1: return p[o];
    case 2: return reinterpret_cast<const u16*>(p)[o];
    case 4: return reinterpret_cast<const u32*>(p)[o];
    default: return reinterpret_cast<const u64*>(p)[o];
  }
}

__device__ __forceinline__ void StoreBits(unsigned char* p, long long o, int size, u64 v) {
  switch (size) {
    case 1: p[o] = static_cast<unsigned char>(v); break;
    case 2: reinterpret_cast<u16*>(p)[o] = static_cast<u16>(v); break;
    case 4: reinterpret_cast<u32*>(p)[o] = static_cast<u32>(v); break;
    default: reinterpret_cast<u64*>(p)[o] = v; break;
  }
}

__device__ __forceinline__ float HalfBitsToFloat(u32 bits) {
  const u32 sign = (bits & 0x8000u) << 16;
  const u32 e = (bits >> 10) & 0x1Fu;
  const u32 m = bits & 0x3FFu;
  if (e == 0) {
    const float v = static_cast<float>(m) * (1.0f / 16777216.0f);
    return sign ? -v : v;
  }
  if (e == 31) return __uint_as_float(sign | 0x7F800000u | (m << 13));
  return __uint_as_float(sign | ((e - 15 + 127) << 23) | (m << 13));
}

// Element value as a double; *poison when it still holds the poison NaN.
__device__ __forceinline__ double Value(const unsigned char* p, long long o, int dtype,
                                        bool* poison) {
  switch (dtype) {
    case kGenF32: {
      const u32 b = reinterpret_cast<const u32*>(p)[o];
      *poison = b == 0x7FC7E55Eu;
      return static_cast<double>(__uint_as_float(b));
    }
    case kGenF64: {
      const u64 b = reinterpret_cast<const u64*>(p)[o];
      *poison = b == 0x7FF87E55E7E55E00ull;
      return __longlong_as_double(static_cast<long long>(b));
    }
    case kGenF16: {
      const u32 b = reinterpret_cast<const u16*>(p)[o];
      *poison = b == 0x7E5Eu;
      return static_cast<double>(HalfBitsToFloat(b));
    }
    default: {  // bf16
      const u32 b = reinterpret_cast<const u16*>(p)[o];
      *poison = b == 0x7FDEu;
      return static_cast<double>(__uint_as_float(b << 16));
    }
  }
}

__device__ __forceinline__ bool IsNan(double d) {
  return (static_cast<u64>(__double_as_longlong(d)) & 0x7FFFFFFFFFFFFFFFull) >
         0x7FF0000000000000ull;
}
__device__ __forceinline__ bool IsInf(double d) {
  return (static_cast<u64>(__double_as_longlong(d)) & 0x7FFFFFFFFFFFFFFFull) ==
         0x7FF0000000000000ull;
}
__device__ __forceinline__ double Inf() { return __longlong_as_double(0x7FF0000000000000ll); }

__device__ __forceinline__ void Clear(Stats* s) {
  s->unwritten = s->nan = s->wrong = s->finite_ref = 0;
  s->first_unwritten = s->first_nan = s->first_wrong = s->worst = -1;
  s->worst_ratio = s->sum_sq_diff = s->sum_sq_ref = 0;
}

__device__ __forceinline__ void MinIndex(long long* into, long long from) {
  if (from >= 0 && (*into < 0 || from < *into)) *into = from;
}

// CompareStats::MergeUnordered.
__device__ __forceinline__ void Merge(Stats* a, const Stats& b) {
  a->unwritten += b.unwritten;
  MinIndex(&a->first_unwritten, b.first_unwritten);
  a->nan += b.nan;
  MinIndex(&a->first_nan, b.first_nan);
  a->wrong += b.wrong;
  MinIndex(&a->first_wrong, b.first_wrong);
  if (b.worst >= 0 && (a->worst < 0 || b.worst_ratio > a->worst_ratio ||
                       (b.worst_ratio == a->worst_ratio && b.worst < a->worst))) {
    a->worst_ratio = b.worst_ratio;
    a->worst = b.worst;
  }
  a->sum_sq_diff += b.sum_sq_diff;
  a->sum_sq_ref += b.sum_sq_ref;
  a->finite_ref += b.finite_ref;
}

// Reduces the block's per-thread stats into out[blockIdx.x] (blockDim.x == 256).
__device__ void BlockReduce(const Stats& mine, Stats* out) {
  __shared__ Stats shared[256];
  shared[threadIdx.x] = mine;
  __syncthreads();
  for (unsigned step = blockDim.x / 2; step > 0; step >>= 1) {
    if (threadIdx.x < step) Merge(&shared[threadIdx.x], shared[threadIdx.x + step]);
    __syncthreads();
  }
  if (threadIdx.x == 0) out[blockIdx.x] = shared[0];
}

}  // namespace tessel_gen

using namespace tessel_gen;

extern "C" __global__ void tessel_verify_fill(unsigned char* p, long long n, int dtype, int size,
                                              u64 key, GenParams params) {
  const long long stride = static_cast<long long>(gridDim.x) * blockDim.x;
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < n;
       i += stride) {
    StoreBits(p, i, size, GenElement(dtype, key, i, params));
  }
}

extern "C" __global__ void tessel_verify_poison(unsigned char* p, long long n, int size,
                                                u64 pattern) {
  const long long stride = static_cast<long long>(gridDim.x) * blockDim.x;
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < n;
       i += stride) {
    StoreBits(p, i, size, pattern);
  }
}

// *first = min(*first, i) over the elements that differ from the generator's (init: ~0ull).
extern "C" __global__ void tessel_verify_check(const unsigned char* p, long long n, int dtype,
                                               int size, u64 key, GenParams params,
                                               unsigned long long* first) {
  const long long stride = static_cast<long long>(gridDim.x) * blockDim.x;
  const u64 mask = size == 8 ? ~0ull : ((1ull << (8 * size)) - 1);
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < n;
       i += stride) {
    if (LoadBits(p, i, size) != (GenElement(dtype, key, i, params) & mask)) {
      atomicMin(first, static_cast<unsigned long long>(i));
      return;  // later elements of this thread are larger
    }
  }
}

// Pass 1 of the floating-point rule over the reference.
extern "C" __global__ void tessel_verify_ref_stats(const unsigned char* ref, long long n,
                                                   int dtype, Layout layout, Stats* out) {
  Stats s;
  Clear(&s);
  const long long stride = static_cast<long long>(gridDim.x) * blockDim.x;
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < n;
       i += stride) {
    bool poison = false;
    const double r = Value(ref, Offset(layout, i), dtype, &poison);
    if (poison) {
      ++s.unwritten;
      if (s.first_unwritten < 0) s.first_unwritten = i;
    } else if (IsNan(r)) {
      ++s.nan;
      if (s.first_nan < 0) s.first_nan = i;
    } else if (!IsInf(r)) {
      s.sum_sq_ref += r * r;
      ++s.finite_ref;
    }
  }
  BlockReduce(s, out);
}

// Pass 2 of the floating-point rule over every element of the candidate.
extern "C" __global__ void tessel_verify_cand_stats(const unsigned char* ref,
                                                    const unsigned char* cand, long long n,
                                                    int dtype, Layout layout, double atol,
                                                    double rtol, Stats* out) {
  Stats s;
  Clear(&s);
  const long long stride = static_cast<long long>(gridDim.x) * blockDim.x;
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < n;
       i += stride) {
    const long long o = Offset(layout, i);
    bool poison = false, ref_poison = false;
    const double c = Value(cand, o, dtype, &poison);
    if (poison) {
      ++s.unwritten;
      if (s.first_unwritten < 0) s.first_unwritten = i;
      continue;
    }
    const double r = Value(ref, o, dtype, &ref_poison);
    if (IsNan(c)) {
      ++s.nan;
      if (s.first_nan < 0) s.first_nan = i;
      continue;
    }
    if (IsInf(c) || IsInf(r)) {
      if (c != r) {
        ++s.wrong;
        if (s.first_wrong < 0) s.first_wrong = i;
        if (s.worst < 0 || s.worst_ratio < Inf()) {
          s.worst_ratio = Inf();
          s.worst = i;
        }
      }
      continue;
    }
    const double diff = fabs(c - r);
    s.sum_sq_diff += diff * diff;
    const double allowed = atol + rtol * fabs(r);
    if (!(diff <= allowed)) {
      ++s.wrong;
      if (s.first_wrong < 0) s.first_wrong = i;
      const double ratio = allowed > 0 ? diff / allowed : Inf();
      if (s.worst < 0 || ratio > s.worst_ratio) {
        s.worst_ratio = ratio;
        s.worst = i;
      }
    }
  }
  BlockReduce(s, out);
}

// Integers and bool: bit-exact; an element whose every byte is 0xa5 was never written.
extern "C" __global__ void tessel_verify_exact_stats(const unsigned char* ref,
                                                     const unsigned char* cand, long long n,
                                                     int size, Layout layout, Stats* out) {
  Stats s;
  Clear(&s);
  const u64 poison = 0xA5A5A5A5A5A5A5A5ull >> (64 - 8 * size);
  const long long stride = static_cast<long long>(gridDim.x) * blockDim.x;
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < n;
       i += stride) {
    const long long o = Offset(layout, i);
    const u64 c = LoadBits(cand, o, size);
    if (c == LoadBits(ref, o, size)) continue;
    if (c == poison) {
      ++s.unwritten;
      if (s.first_unwritten < 0) s.first_unwritten = i;
    } else {
      ++s.wrong;
      if (s.first_wrong < 0) s.first_wrong = i;
    }
  }
  BlockReduce(s, out);
}
)TESSELKERNELS";

CompareStats FromDev(const DevStats& d) {
  CompareStats s;
  s.unwritten = d.unwritten;
  s.first_unwritten = d.first_unwritten;
  s.nan = d.nan;
  s.first_nan = d.first_nan;
  s.wrong = d.wrong;
  s.first_wrong = d.first_wrong;
  s.worst = d.worst;
  s.finite_ref = d.finite_ref;
  s.worst_ratio = d.worst_ratio;
  s.sum_sq_diff = d.sum_sq_diff;
  s.sum_sq_ref = d.sum_sq_ref;
  return s;
}

absl::StatusOr<Layout> LayoutOf(const Buffer& b) {
  if (b.shape.size() > static_cast<size_t>(kMaxRank)) {
    return absl::InvalidArgumentError(
        absl::StrCat("buffer '", b.name, "' has rank ", b.shape.size(),
                     ", over the GPU "
                     "verifier's ",
                     kMaxRank, ": verify it on the host (CompareBuffer)"));
  }
  Layout l;
  l.rank = static_cast<int>(b.shape.size());
  const std::vector<int64_t> strides = b.Strides();
  l.compact = strides == schedules::MakeBuffer("", b.dtype, b.shape)->Strides() ? 1 : 0;
  for (int d = 0; d < l.rank; ++d) {
    l.shape[d] = b.shape[static_cast<size_t>(d)];
    l.strides[d] = strides[static_cast<size_t>(d)];
  }
  return l;
}

uint64_t PoisonPattern(DType t) {
  switch (t) {
    case DType::kFloat32:
      return kPoisonF32;
    case DType::kFloat64:
      return kPoisonF64;
    case DType::kFloat16:
      return kPoisonF16;
    case DType::kBFloat16:
      return kPoisonBF16;
    default:
      return 0xA5A5A5A5A5A5A5A5ull;
  }
}

// The CUBIN per architecture, compiled once per process.
absl::StatusOr<CudaBinary> VerifierBinary(const std::string& arch) {
  static absl::Mutex mu(absl::kConstInit);
  static auto* cache = new std::map<std::string, CudaBinary>();
  absl::MutexLock lock(&mu);
  auto it = cache->find(arch);
  if (it != cache->end()) return it->second;
  absl::StatusOr<CudaBinary> bin =
      CompileCudaSource(CudaVerifierSource(), CudaVerifierNvrtcOptions(arch), "tessel_verifier.cu");
  if (!bin.ok()) {
    return absl::InternalError(absl::StrCat(
        "the GPU verifier's kernels do not compile (a bug in Tessel, not in the candidate; set "
        "TESSEL_VERIFY_ON_HOST=1 for the worker to verify on the host meanwhile): ",
        bin.status().message()));
  }
  cache->emplace(arch, *bin);
  return bin;
}

}  // namespace

const std::string& CudaVerifierSource() {
  static const std::string* source = new std::string(
      absl::StrCat(absl::StrReplaceAll(kInputGenText, {{"#pragma once", ""}}), kKernels));
  return *source;
}

NvrtcOptions CudaVerifierNvrtcOptions(const std::string& arch) {
  NvrtcOptions o;
  o.arch = arch;
  o.extra_options = {"--fmad=false"};
  return o;
}

absl::StatusOr<std::unique_ptr<CudaVerifier>> CudaVerifier::Create(CudaDevice* device) {
  absl::StatusOr<CudaBinary> bin = VerifierBinary(device->info().arch);
  if (!bin.ok()) return bin.status();
  if (absl::Status s = device->Usable(); !s.ok()) return s;
  auto v = std::unique_ptr<CudaVerifier>(new CudaVerifier(device));
  const CudaDriver& d = device->driver();
  if (absl::Status s =
          device->Check(d.cuModuleLoadDataEx_(&v->module_, bin->cubin.data(), 0, nullptr, nullptr),
                        "cuModuleLoadDataEx", "loading the GPU verifier's kernels");
      !s.ok()) {
    return s;
  }
  for (auto [fn, name] : std::vector<std::pair<CUfunction*, const char*>>{
           {&v->fill_, "tessel_verify_fill"},
           {&v->poison_, "tessel_verify_poison"},
           {&v->check_, "tessel_verify_check"},
           {&v->ref_stats_, "tessel_verify_ref_stats"},
           {&v->cand_stats_, "tessel_verify_cand_stats"},
           {&v->exact_stats_, "tessel_verify_exact_stats"}}) {
    if (absl::Status s = device->Check(d.cuModuleGetFunction_(fn, v->module_, name),
                                       "cuModuleGetFunction", name);
        !s.ok()) {
      return s;
    }
  }
  v->max_blocks_ = static_cast<int>(std::max<int64_t>(1, device->info().sm_count * 8));
  const size_t scratch = static_cast<size_t>(v->max_blocks_) * sizeof(DevStats);
  if (absl::Status s =
          device->Check(d.cuMemAlloc_(&v->scratch_, scratch), "cuMemAlloc", "verifier scratch");
      !s.ok()) {
    v->scratch_ = 0;
    return s;
  }
  return v;
}

CudaVerifier::~CudaVerifier() {
  const CudaDriver& d = device_->driver();
  (void)device_->MakeCurrent();
  if (scratch_ != 0) d.cuMemFree_(scratch_);
  if (module_ != nullptr) d.cuModuleUnload_(module_);
}

absl::Status CudaVerifier::Launch(CUfunction fn, int64_t n, std::vector<void*> args) {
  const int64_t blocks = std::clamp<int64_t>((n + kThreads - 1) / kThreads, 1, max_blocks_);
  return device_->Check(
      device_->driver().cuLaunchKernel_(fn, static_cast<unsigned>(blocks), 1, 1, kThreads, 1, 1, 0,
                                        device_->stream(), args.data(), nullptr),
      "cuLaunchKernel", "a GPU verifier kernel");
}

absl::Status CudaVerifier::Download(void* host, CUdeviceptr ptr, size_t bytes) {
  const CudaDriver& d = device_->driver();
  // The stream is non-blocking: wait for it before the (legacy-stream) copy.
  if (absl::Status s = device_->Check(d.cuStreamSynchronize_(device_->stream()),
                                      "cuStreamSynchronize", "GPU verification");
      !s.ok()) {
    return s;
  }
  return device_->Check(d.cuMemcpyDtoH_(host, ptr, bytes), "cuMemcpyDtoH", "GPU verification");
}

absl::StatusOr<CompareStats> CudaVerifier::Pass(CUfunction fn, int64_t n, std::vector<void*> args) {
  if (absl::Status s = Launch(fn, n, std::move(args)); !s.ok()) return s;
  const int64_t blocks = std::clamp<int64_t>((n + kThreads - 1) / kThreads, 1, max_blocks_);
  std::vector<DevStats> parts(static_cast<size_t>(blocks));
  if (absl::Status s = Download(parts.data(), scratch_, parts.size() * sizeof(DevStats)); !s.ok()) {
    return s;
  }
  CompareStats total;
  for (const DevStats& p : parts) total.MergeUnordered(FromDev(p));
  return total;
}

absl::Status CudaVerifier::FillInputs(const std::vector<schedules::ProgramBuffer>& buffers,
                                      uint64_t seed, const FillOptions& options,
                                      CudaBuffers* device) {
  if (absl::Status s = device_->Usable(); !s.ok()) return s;
  TESSEL_CHECK(device->size() == buffers.size());
  TESSEL_CHECK(options.int_max >= options.int_min) << "empty integer fill range";
  tessel_gen::GenParams params = GenParamsOf(options);
  for (size_t i = 0; i < buffers.size(); ++i) {
    if (buffers[i].role != BufferRole::kInput) continue;
    const Buffer& b = *buffers[i].buffer;
    long long n = b.AllocatedElements();
    if (n == 0) continue;
    CUdeviceptr p = device->ptr(i);
    int dtype = GenDTypeOf(b.dtype);
    int size = static_cast<int>(schedules::DTypeBytes(b.dtype));
    unsigned long long key = tessel_gen::GenKey(seed, static_cast<long long>(i));
    if (absl::Status s = Launch(fill_, n, {&p, &n, &dtype, &size, &key, &params}); !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

absl::Status CudaVerifier::Copy(CUdeviceptr to, CUdeviceptr from, size_t bytes) {
  if (bytes == 0) return absl::OkStatus();
  return device_->Check(device_->driver().cuMemcpyDtoDAsync_(to, from, bytes, device_->stream()),
                        "cuMemcpyDtoDAsync", "GPU verification");
}

absl::Status CudaVerifier::PoisonOutputs(const std::vector<schedules::ProgramBuffer>& buffers,
                                         CudaBuffers* device) {
  if (absl::Status s = device_->Usable(); !s.ok()) return s;
  TESSEL_CHECK(device->size() == buffers.size());
  for (size_t i = 0; i < buffers.size(); ++i) {
    if (buffers[i].role == BufferRole::kInput) continue;
    const Buffer& b = *buffers[i].buffer;
    long long n = b.AllocatedElements();
    if (n == 0) continue;
    CUdeviceptr p = device->ptr(i);
    int size = static_cast<int>(schedules::DTypeBytes(b.dtype));
    unsigned long long pattern = PoisonPattern(b.dtype);
    if (absl::Status s = Launch(poison_, n, {&p, &n, &size, &pattern}); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> CudaVerifier::FirstChangedElement(const Buffer& buffer,
                                                          int64_t buffer_index, uint64_t seed,
                                                          const FillOptions& options,
                                                          CUdeviceptr ptr) {
  if (absl::Status s = device_->Usable(); !s.ok()) return s;
  long long n = buffer.AllocatedElements();
  if (n == 0) return -1;
  const CudaDriver& d = device_->driver();
  if (absl::Status s =
          device_->Check(d.cuMemsetD32Async_(scratch_, 0xFFFFFFFFu, 2, device_->stream()),
                         "cuMemsetD32Async", "GPU verification");
      !s.ok()) {
    return s;
  }
  int dtype = GenDTypeOf(buffer.dtype);
  int size = static_cast<int>(schedules::DTypeBytes(buffer.dtype));
  unsigned long long key = tessel_gen::GenKey(seed, static_cast<long long>(buffer_index));
  tessel_gen::GenParams params = GenParamsOf(options);
  CUdeviceptr first = scratch_;
  if (absl::Status s = Launch(check_, n, {&ptr, &n, &dtype, &size, &key, &params, &first});
      !s.ok()) {
    return s;
  }
  unsigned long long found = 0;
  if (absl::Status s = Download(&found, scratch_, sizeof(found)); !s.ok()) return s;
  return found == ~0ull ? int64_t{-1} : static_cast<int64_t>(found);
}

absl::Status CudaVerifier::CompareBuffer(const Buffer& b, CUdeviceptr reference,
                                         CUdeviceptr candidate, const Tolerance& tol) {
  if (absl::Status s = device_->Usable(); !s.ok()) return s;
  absl::StatusOr<Layout> layout = LayoutOf(b);
  if (!layout.ok()) return layout.status();
  long long n = b.NumElements();
  const int64_t size = schedules::DTypeBytes(b.dtype);
  // One element, downloaded for the message.
  auto element = [&](bool of_candidate, int64_t index) -> absl::StatusOr<uint64_t> {
    uint64_t bits = 0;
    const CUdeviceptr at = (of_candidate ? candidate : reference) +
                           static_cast<CUdeviceptr>(StorageOffset(b, index) * size);
    if (absl::Status s = Download(&bits, at, static_cast<size_t>(size)); !s.ok()) return s;
    return bits;
  };
  absl::Status failed;  // a download that failed while formatting the message
  CUdeviceptr ref = reference, cand = candidate, out = scratch_;
  if (!schedules::IsFloat(b.dtype)) {
    int isize = static_cast<int>(size);
    absl::StatusOr<CompareStats> cs =
        Pass(exact_stats_, n, {&ref, &cand, &n, &isize, &*layout, &out});
    if (!cs.ok()) return cs.status();
    absl::Status s = ExactVerdict(b, *cs, [&](bool of_candidate, int64_t i) -> int64_t {
      absl::StatusOr<uint64_t> bits = element(of_candidate, i);
      if (!bits.ok()) {
        failed = bits.status();
        return 0;
      }
      switch (b.dtype) {
        case DType::kInt32:
          return static_cast<int32_t>(static_cast<uint32_t>(*bits));
        case DType::kInt64:
          return static_cast<int64_t>(*bits);
        default:
          return static_cast<uint8_t>(*bits);
      }
    });
    if (!failed.ok()) return failed;
    return MarkVerifyFailed(std::move(s));
  }
  int dtype = GenDTypeOf(b.dtype);
  absl::StatusOr<CompareStats> rs = Pass(ref_stats_, n, {&ref, &n, &dtype, &*layout, &out});
  if (!rs.ok()) return rs.status();
  if (absl::Status s = ReferenceVerdict(b, *rs); !s.ok()) return s;
  double atol = AbsoluteTolerance(tol, *rs);
  double rtol = tol.rtol;
  absl::StatusOr<CompareStats> cs =
      Pass(cand_stats_, n, {&ref, &cand, &n, &dtype, &*layout, &atol, &rtol, &out});
  if (!cs.ok()) return cs.status();
  absl::Status s = FloatVerdict(b, tol, *rs, *cs, [&](bool of_candidate, int64_t i) -> double {
    absl::StatusOr<uint64_t> bits = element(of_candidate, i);
    if (!bits.ok()) {
      failed = bits.status();
      return 0;
    }
    switch (b.dtype) {
      case DType::kFloat32: {
        float f;
        const uint32_t x = static_cast<uint32_t>(*bits);
        std::memcpy(&f, &x, 4);
        return f;
      }
      case DType::kFloat64: {
        double v;
        std::memcpy(&v, &*bits, 8);
        return v;
      }
      case DType::kFloat16:
        return HalfBitsToFloat(static_cast<uint16_t>(*bits));
      default:
        return BFloat16BitsToFloat(static_cast<uint16_t>(*bits));
    }
  });
  if (!failed.ok()) return failed;
  return MarkVerifyFailed(std::move(s));
}

}  // namespace tessel::worker
