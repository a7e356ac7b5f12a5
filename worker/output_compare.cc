#include "worker/output_compare.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "measure/measurement.h"
#include "schedules/util/check.h"
#include "worker/input_gen.h"

namespace tessel::worker {
namespace {

using schedules::Buffer;
using schedules::BufferRole;
using schedules::DType;
using schedules::ProgramBuffer;

constexpr int64_t kMaxBufferBytes = int64_t{1} << 40;
constexpr int64_t kChunk = int64_t{1} << 18;  // elements per parallel work item

std::string ShapeString(const Buffer& b) {
  return absl::StrCat(schedules::DTypeName(b.dtype), "[", absl::StrJoin(b.shape, ", "), "]");
}

// Multi-index of logical (row-major) element `index`.
std::string MultiIndex(const Buffer& b, int64_t index) {
  std::vector<int64_t> idx(b.shape.size(), 0);
  for (int i = static_cast<int>(b.shape.size()) - 1; i >= 0; --i) {
    if (b.shape[i] <= 0) continue;
    idx[i] = index % b.shape[i];
    index /= b.shape[i];
  }
  return absl::StrCat("[", absl::StrJoin(idx, ", "), "]");
}

// Maps logical (row-major) element indices to storage offsets, honouring padded strides.
class OffsetMap {
 public:
  explicit OffsetMap(const Buffer& b) : shape_(b.shape), strides_(b.Strides()) {
    std::vector<int64_t> compact = schedules::MakeBuffer("", b.dtype, b.shape)->Strides();
    compact_ = strides_ == compact;
  }
  int64_t operator()(int64_t index) const {
    if (compact_) return index;
    int64_t offset = 0;
    for (int i = static_cast<int>(shape_.size()) - 1; i >= 0; --i) {
      offset += (index % shape_[i]) * strides_[i];
      index /= shape_[i];
    }
    return offset;
  }

 private:
  std::vector<int64_t> shape_;
  std::vector<int64_t> strides_;
  bool compact_ = true;
};

template <typename T>
T LoadAs(const uint8_t* base, int64_t offset) {
  T v;
  std::memcpy(&v, base + offset * static_cast<int64_t>(sizeof(T)), sizeof(T));
  return v;
}

// Per-dtype element access for the floating-point comparison.
template <DType T>
struct FloatElem;
template <>
struct FloatElem<DType::kFloat32> {
  static double Value(const uint8_t* p, int64_t o) { return LoadAs<float>(p, o); }
  static bool Poison(const uint8_t* p, int64_t o) { return LoadAs<uint32_t>(p, o) == kPoisonF32; }
};
template <>
struct FloatElem<DType::kFloat64> {
  static double Value(const uint8_t* p, int64_t o) { return LoadAs<double>(p, o); }
  static bool Poison(const uint8_t* p, int64_t o) { return LoadAs<uint64_t>(p, o) == kPoisonF64; }
};
template <>
struct FloatElem<DType::kFloat16> {
  static double Value(const uint8_t* p, int64_t o) {
    return HalfBitsToFloat(LoadAs<uint16_t>(p, o));
  }
  static bool Poison(const uint8_t* p, int64_t o) { return LoadAs<uint16_t>(p, o) == kPoisonF16; }
};
template <>
struct FloatElem<DType::kBFloat16> {
  static double Value(const uint8_t* p, int64_t o) {
    return BFloat16BitsToFloat(LoadAs<uint16_t>(p, o));
  }
  static bool Poison(const uint8_t* p, int64_t o) { return LoadAs<uint16_t>(p, o) == kPoisonBF16; }
};

using Stats = CompareStats;

// Runs `body(begin, end, &stats)` over [0, n) in parallel chunks and merges in order.
template <typename Body>
Stats ParallelStats(int64_t n, const Body& body) {
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  std::vector<Stats> parts(static_cast<size_t>(chunks));
#pragma omp parallel for schedule(dynamic, 1)
  for (int64_t c = 0; c < chunks; ++c) {
    body(c * kChunk, std::min(n, (c + 1) * kChunk), &parts[static_cast<size_t>(c)]);
  }
  Stats total;
  for (const Stats& s : parts) total.Merge(s);
  return total;
}

std::string Fmt(double v) { return absl::StrFormat("%.9g", v); }

template <DType T>
absl::Status CompareFloat(const Buffer& b, const ByteVector& reference, const ByteVector& candidate,
                          const Tolerance& tol) {
  using E = FloatElem<T>;
  const int64_t n = b.NumElements();
  const OffsetMap offset(b);
  const uint8_t* ref = reference.data();
  const uint8_t* cand = candidate.data();

  // Pass 1: the reference must be complete and NaN-free; its rms sets the absolute tolerance.
  Stats rs = ParallelStats(n, [&](int64_t begin, int64_t end, Stats* s) {
    for (int64_t i = begin; i < end; ++i) {
      const int64_t o = offset(i);
      if (E::Poison(ref, o)) {
        ++s->unwritten;
        Stats::First(&s->first_unwritten, i);
        continue;
      }
      const double r = E::Value(ref, o);
      if (std::isnan(r)) {
        ++s->nan;
        Stats::First(&s->first_nan, i);
      } else if (std::isfinite(r)) {
        s->sum_sq_ref += r * r;
        ++s->finite_ref;
      }
    }
  });
  if (absl::Status st = ReferenceVerdict(b, rs); !st.ok()) return st;
  const double atol = AbsoluteTolerance(tol, rs);

  // Pass 2: every element of the candidate.
  Stats cs = ParallelStats(n, [&](int64_t begin, int64_t end, Stats* s) {
    for (int64_t i = begin; i < end; ++i) {
      const int64_t o = offset(i);
      if (E::Poison(cand, o)) {
        ++s->unwritten;
        Stats::First(&s->first_unwritten, i);
        continue;
      }
      const double c = E::Value(cand, o);
      const double r = E::Value(ref, o);
      if (std::isnan(c)) {
        ++s->nan;
        Stats::First(&s->first_nan, i);
        continue;
      }
      if (std::isinf(c) || std::isinf(r)) {
        if (c != r) {
          ++s->wrong;
          Stats::First(&s->first_wrong, i);
          if (s->worst < 0 || s->worst_ratio < HUGE_VAL) {
            s->worst_ratio = HUGE_VAL;
            s->worst = i;
          }
        }
        continue;
      }
      const double diff = std::fabs(c - r);
      s->sum_sq_diff += diff * diff;
      const double allowed = atol + tol.rtol * std::fabs(r);
      if (!(diff <= allowed)) {
        ++s->wrong;
        Stats::First(&s->first_wrong, i);
        const double ratio = allowed > 0 ? diff / allowed : HUGE_VAL;
        if (s->worst < 0 || ratio > s->worst_ratio) {
          s->worst_ratio = ratio;
          s->worst = i;
        }
      }
    }
  });

  return FloatVerdict(b, tol, rs, cs, [&](bool of_candidate, int64_t i) {
    return E::Value(of_candidate ? cand : ref, offset(i));
  });
}

int64_t IntValue(DType t, const uint8_t* p, int64_t o) {
  switch (t) {
    case DType::kInt32:
      return LoadAs<int32_t>(p, o);
    case DType::kInt64:
      return LoadAs<int64_t>(p, o);
    case DType::kBool:
      return LoadAs<uint8_t>(p, o);
    default:
      return 0;
  }
}

absl::Status CompareExact(const Buffer& b, const ByteVector& reference,
                          const ByteVector& candidate) {
  const int64_t n = b.NumElements();
  const int64_t size = schedules::DTypeBytes(b.dtype);
  const OffsetMap offset(b);
  auto poisoned = [&](const uint8_t* p, int64_t o) {
    for (int64_t k = 0; k < size; ++k) {
      if (p[o * size + k] != kPoisonIntByte) return false;
    }
    return true;
  };
  Stats cs = ParallelStats(n, [&](int64_t begin, int64_t end, Stats* s) {
    for (int64_t i = begin; i < end; ++i) {
      const int64_t o = offset(i);
      if (std::memcmp(reference.data() + o * size, candidate.data() + o * size, size) == 0) {
        continue;
      }
      if (poisoned(candidate.data(), o)) {
        ++s->unwritten;
        Stats::First(&s->first_unwritten, i);
      } else {
        ++s->wrong;
        Stats::First(&s->first_wrong, i);
      }
    }
  });
  return ExactVerdict(b, cs, [&](bool of_candidate, int64_t i) {
    return IntValue(b.dtype, (of_candidate ? candidate : reference).data(), offset(i));
  });
}

void FillBuffer(const Buffer& b, uint64_t seed, int64_t buffer_index, const FillOptions& opt,
                ByteVector* out) {
  const int64_t n = b.AllocatedElements();  // padding too: harmless, and never uninitialized
  const uint64_t key = tessel_gen::GenKey(seed, buffer_index);
  const tessel_gen::GenParams params = GenParamsOf(opt);
  const int dtype = GenDTypeOf(b.dtype);
  const int64_t size = schedules::DTypeBytes(b.dtype);
  uint8_t* p = out->data();
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const uint64_t bits = tessel_gen::GenElement(dtype, key, i, params);
    std::memcpy(p + i * size, &bits, static_cast<size_t>(size));  // little-endian: the low bytes
  }
}

void PoisonBuffer(const Buffer& b, ByteVector* out) {
  const int64_t n = b.AllocatedElements();
  uint8_t* p = out->data();
  switch (b.dtype) {
    case DType::kFloat32:
#pragma omp parallel for schedule(static)
      for (int64_t i = 0; i < n; ++i) std::memcpy(p + i * 4, &kPoisonF32, 4);
      break;
    case DType::kFloat64:
#pragma omp parallel for schedule(static)
      for (int64_t i = 0; i < n; ++i) std::memcpy(p + i * 8, &kPoisonF64, 8);
      break;
    case DType::kFloat16:
#pragma omp parallel for schedule(static)
      for (int64_t i = 0; i < n; ++i) std::memcpy(p + i * 2, &kPoisonF16, 2);
      break;
    case DType::kBFloat16:
#pragma omp parallel for schedule(static)
      for (int64_t i = 0; i < n; ++i) std::memcpy(p + i * 2, &kPoisonBF16, 2);
      break;
    case DType::kInt32:
    case DType::kInt64:
    case DType::kBool:
      std::memset(p, kPoisonIntByte, out->size());
      break;
  }
}

}  // namespace

int GenDTypeOf(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
      return tessel_gen::kGenF32;
    case DType::kFloat64:
      return tessel_gen::kGenF64;
    case DType::kFloat16:
      return tessel_gen::kGenF16;
    case DType::kBFloat16:
      return tessel_gen::kGenBF16;
    case DType::kInt32:
      return tessel_gen::kGenI32;
    case DType::kInt64:
      return tessel_gen::kGenI64;
    case DType::kBool:
      return tessel_gen::kGenBool;
  }
  return tessel_gen::kGenBool;
}

tessel_gen::GenParams GenParamsOf(const FillOptions& options) {
  tessel_gen::GenParams p;
  p.lo = options.float_min;
  p.span = options.float_max - options.float_min;
  p.int_min = options.int_min;
  p.int_span = static_cast<uint64_t>(options.int_max - options.int_min) + 1;
  return p;
}

uint64_t InputElementBits(const Buffer& buffer, uint64_t seed, int64_t buffer_index,
                          int64_t element, const FillOptions& options) {
  return tessel_gen::GenElement(GenDTypeOf(buffer.dtype), tessel_gen::GenKey(seed, buffer_index),
                                element, GenParamsOf(options));
}

void CompareStats::Merge(const CompareStats& s) {
  unwritten += s.unwritten;
  First(&first_unwritten, s.first_unwritten);
  nan += s.nan;
  First(&first_nan, s.first_nan);
  wrong += s.wrong;
  First(&first_wrong, s.first_wrong);
  if (s.worst >= 0 && (worst < 0 || s.worst_ratio > worst_ratio)) {
    worst_ratio = s.worst_ratio;
    worst = s.worst;
  }
  sum_sq_diff += s.sum_sq_diff;
  sum_sq_ref += s.sum_sq_ref;
  finite_ref += s.finite_ref;
}

void CompareStats::MergeUnordered(const CompareStats& s) {
  auto min_index = [](int64_t* into, int64_t from) {
    if (from >= 0 && (*into < 0 || from < *into)) *into = from;
  };
  unwritten += s.unwritten;
  min_index(&first_unwritten, s.first_unwritten);
  nan += s.nan;
  min_index(&first_nan, s.first_nan);
  wrong += s.wrong;
  min_index(&first_wrong, s.first_wrong);
  if (s.worst >= 0 && (worst < 0 || s.worst_ratio > worst_ratio ||
                       (s.worst_ratio == worst_ratio && s.worst < worst))) {
    worst_ratio = s.worst_ratio;
    worst = s.worst;
  }
  sum_sq_diff += s.sum_sq_diff;
  sum_sq_ref += s.sum_sq_ref;
  finite_ref += s.finite_ref;
}

absl::Status ReferenceVerdict(const Buffer& b, const CompareStats& rs) {
  if (rs.unwritten == 0 && rs.nan == 0) return absl::OkStatus();
  const std::string what = absl::StrCat("output '", b.name, "' (", ShapeString(b), ")");
  const int64_t first = rs.first_unwritten >= 0 ? rs.first_unwritten : rs.first_nan;
  return absl::InternalError(absl::StrCat(
      "the reference's ", what, " is not usable: ", rs.unwritten, " elements never written and ",
      rs.nan, " NaN, first at index ", first, " ", MultiIndex(b, first),
      "; the reference program is wrong (or the inputs overflow it): fix the reference "
      "before verifying candidates against it"));
}

double RmsOf(const CompareStats& rs) {
  return rs.finite_ref > 0 ? std::sqrt(rs.sum_sq_ref / static_cast<double>(rs.finite_ref)) : 0.0;
}

double AbsoluteTolerance(const Tolerance& tol, const CompareStats& rs) {
  const double rms = RmsOf(rs);
  return tol.atol_rms * (rms > 0 ? rms : 1e-30);
}

absl::Status FloatVerdict(const Buffer& b, const Tolerance& tol, const CompareStats& rs,
                          const CompareStats& cs,
                          const std::function<double(bool, int64_t)>& value) {
  const double ref_norm = std::sqrt(rs.sum_sq_ref);
  const double diff_norm = std::sqrt(cs.sum_sq_diff);
  const bool norm_ok = diff_norm <= tol.norm_rtol * ref_norm;
  if (cs.bad() == 0 && norm_ok) return absl::OkStatus();
  const int64_t n = b.NumElements();
  const double rms = RmsOf(rs);
  const double atol = AbsoluteTolerance(tol, rs);
  const std::string what = absl::StrCat("output '", b.name, "' (", ShapeString(b), ")");
  auto describe = [&](int64_t i) {
    const double c = value(true, i);
    const double r = value(false, i);
    return absl::StrCat("index ", i, " ", MultiIndex(b, i), ": candidate ", Fmt(c), ", reference ",
                        Fmt(r), " (|diff| ", Fmt(std::fabs(c - r)), ", allowed ",
                        Fmt(atol + tol.rtol * std::fabs(r)), ")");
  };
  std::vector<std::string> parts;
  parts.push_back(
      absl::StrCat(what, ": ", cs.bad(), " of ", n, " elements differ from the reference"));
  if (cs.unwritten > 0) {
    parts.push_back(absl::StrCat(cs.unwritten,
                                 " never written (still the NaN poison written before the run), "
                                 "first at index ",
                                 cs.first_unwritten, " ", MultiIndex(b, cs.first_unwritten)));
  }
  if (cs.nan > 0) {
    parts.push_back(absl::StrCat(cs.nan, " NaN computed by the program, first at index ",
                                 cs.first_nan, " ", MultiIndex(b, cs.first_nan), " (reference ",
                                 Fmt(value(false, cs.first_nan)), ")"));
  }
  if (cs.wrong > 0) {
    parts.push_back(absl::StrCat(cs.wrong, " wrong values, first at ", describe(cs.first_wrong)));
    if (cs.worst != cs.first_wrong)
      parts.push_back(absl::StrCat("largest at ", describe(cs.worst)));
  }
  parts.push_back(absl::StrFormat(
      "relative L2 error of the finite elements %.3g (limit %.3g); rule |cand - ref| <= %.3g * "
      "rms(ref) + %.3g * |ref| "
      "with rms(ref) = %.6g",
      ref_norm > 0 ? diff_norm / ref_norm : diff_norm, tol.norm_rtol, tol.atol_rms, tol.rtol, rms));
  return absl::FailedPreconditionError(absl::StrJoin(parts, "; "));
}

absl::Status ExactVerdict(const Buffer& b, const CompareStats& cs,
                          const std::function<int64_t(bool, int64_t)>& value) {
  if (cs.bad() == 0) return absl::OkStatus();
  const int64_t n = b.NumElements();
  std::vector<std::string> parts;
  parts.push_back(absl::StrCat("output '", b.name, "' (", ShapeString(b), "): ", cs.bad(), " of ",
                               n,
                               " elements differ from the reference (integers must match "
                               "exactly)"));
  if (cs.unwritten > 0) {
    parts.push_back(absl::StrCat(cs.unwritten,
                                 " still hold the poison bytes 0xa5 (probably never "
                                 "written), first at index ",
                                 cs.first_unwritten, " ", MultiIndex(b, cs.first_unwritten)));
  }
  if (cs.wrong > 0) {
    parts.push_back(absl::StrCat(
        "first wrong value at index ", cs.first_wrong, " ", MultiIndex(b, cs.first_wrong),
        ": candidate ", value(true, cs.first_wrong), ", reference ", value(false, cs.first_wrong)));
  }
  return absl::FailedPreconditionError(absl::StrJoin(parts, "; "));
}

absl::Status OutputsVerdict(int compared, const std::vector<std::string>& failures) {
  if (compared == 0) {
    return absl::InvalidArgumentError(
        "the program has no output buffer to compare: mark the results with BufferRole::kOutput");
  }
  if (failures.empty()) return absl::OkStatus();
  return measure::WithMeasureStatus(absl::FailedPreconditionError(absl::StrCat(
                                        "verification failed: ", absl::StrJoin(failures, " | "))),
                                    measure::MeasureStatus::kVerifyFailed);
}

absl::Status MarkVerifyFailed(absl::Status s) {
  if (s.code() == absl::StatusCode::kFailedPrecondition) {
    s = measure::WithMeasureStatus(std::move(s), measure::MeasureStatus::kVerifyFailed);
  }
  return s;
}

int64_t StorageOffset(const Buffer& b, int64_t index) { return OffsetMap(b)(index); }

std::vector<void*> HostBuffers::Pointers() {
  std::vector<void*> ptrs;
  ptrs.reserve(data.size());
  for (ByteVector& d : data) ptrs.push_back(d.data());
  return ptrs;
}

absl::StatusOr<HostBuffers> AllocateHostBuffers(const std::vector<ProgramBuffer>& buffers) {
  HostBuffers host;
  host.data.resize(buffers.size());
  for (size_t i = 0; i < buffers.size(); ++i) {
    const Buffer& b = *buffers[i].buffer;
    if (b.scope != schedules::MemScope::kGlobal) {
      return absl::InvalidArgumentError(absl::StrCat(
          "buffer ", i, " '", b.name, "' has scope ", schedules::MemScopeName(b.scope),
          ": only global buffers are program arguments; fix the GeneratedSource's buffer list"));
    }
    for (int64_t d : b.shape) {
      if (d < 0) {
        return absl::InvalidArgumentError(absl::StrCat("buffer '", b.name,
                                                       "' has a negative "
                                                       "extent in shape ",
                                                       ShapeString(b)));
      }
    }
    const int64_t bytes = b.AllocatedBytes();
    if (bytes > kMaxBufferBytes) {
      return absl::ResourceExhaustedError(
          absl::StrCat("buffer '", b.name, "' ", ShapeString(b), " needs ", bytes,
                       " bytes, over the 1 TiB limit of host buffers: use a smaller workload"));
    }
    host.data[i].resize(static_cast<size_t>(bytes));
  }
  return host;
}

void FillInputs(const std::vector<ProgramBuffer>& buffers, uint64_t seed, HostBuffers* host,
                const FillOptions& options) {
  TESSEL_CHECK(host->size() == buffers.size())
      << host->size() << " host buffers for " << buffers.size() << " program buffers";
  TESSEL_CHECK(options.int_max >= options.int_min) << "empty integer fill range";
  for (size_t i = 0; i < buffers.size(); ++i) {
    if (buffers[i].role != BufferRole::kInput) continue;
    const Buffer& b = *buffers[i].buffer;
    TESSEL_CHECK(static_cast<int64_t>(host->data[i].size()) == b.AllocatedBytes())
        << "host buffer " << i << " '" << b.name << "' has the wrong size";
    FillBuffer(b, seed, static_cast<int64_t>(i), options, &host->data[i]);
  }
}

void PoisonOutputs(const std::vector<ProgramBuffer>& buffers, HostBuffers* host) {
  TESSEL_CHECK(host->size() == buffers.size())
      << host->size() << " host buffers for " << buffers.size() << " program buffers";
  for (size_t i = 0; i < buffers.size(); ++i) {
    if (buffers[i].role == BufferRole::kInput) continue;
    const Buffer& b = *buffers[i].buffer;
    TESSEL_CHECK(static_cast<int64_t>(host->data[i].size()) == b.AllocatedBytes())
        << "host buffer " << i << " '" << b.name << "' has the wrong size";
    PoisonBuffer(b, &host->data[i]);
  }
}

absl::StatusOr<HostBuffers> MakeVerificationBuffers(const std::vector<ProgramBuffer>& buffers,
                                                    uint64_t seed, const FillOptions& options) {
  absl::StatusOr<HostBuffers> host = AllocateHostBuffers(buffers);
  if (!host.ok()) return host.status();
  FillInputs(buffers, seed, &*host, options);
  PoisonOutputs(buffers, &*host);
  return host;
}

uint16_t FloatToHalfBits(float value) {
  uint32_t x;
  std::memcpy(&x, &value, 4);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t ax = x & 0x7FFFFFFFu;
  if (ax > 0x7F800000u) return static_cast<uint16_t>(sign | 0x7E00u | ((ax >> 13) & 0x3FFu));
  if (ax >= 0x477FF000u) return static_cast<uint16_t>(sign | 0x7C00u);  // rounds to infinity
  if (ax < 0x38800000u) {  // under 2^-14: a half subnormal (or zero) in units of 2^-24
    float af;
    std::memcpy(&af, &ax, 4);
    const uint32_t m = static_cast<uint32_t>(std::nearbyint(af * 16777216.0f));
    return static_cast<uint16_t>(sign | m);  // m == 1024 is correctly the smallest normal
  }
  const uint32_t mant = ax & 0x7FFFFFu;
  uint32_t h = ((((ax >> 23) - 127 + 15) << 10) | (mant >> 13));
  const uint32_t rest = mant & 0x1FFFu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;  // a carry into the exponent is right
  return static_cast<uint16_t>(sign | h);
}

float HalfBitsToFloat(uint16_t bits) {
  const uint32_t sign = static_cast<uint32_t>(bits & 0x8000u) << 16;
  const uint32_t e = (bits >> 10) & 0x1Fu;
  const uint32_t m = bits & 0x3FFu;
  uint32_t x;
  if (e == 0) {
    const float v = static_cast<float>(m) * (1.0f / 16777216.0f);
    return sign ? -v : v;
  } else if (e == 31) {
    x = sign | 0x7F800000u | (m << 13);
  } else {
    x = sign | ((e - 15 + 127) << 23) | (m << 13);
  }
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

uint16_t FloatToBFloat16Bits(float value) {
  uint32_t x;
  std::memcpy(&x, &value, 4);
  if ((x & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((x >> 16) | 0x0040u);
  x += 0x7FFFu + ((x >> 16) & 1u);
  return static_cast<uint16_t>(x >> 16);
}

float BFloat16BitsToFloat(uint16_t bits) {
  const uint32_t x = static_cast<uint32_t>(bits) << 16;
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

Tolerance DefaultTolerance(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
      return {1e-4, 2e-4, 1e-4};
    case DType::kFloat16:
      return {1e-2, 1e-2, 1e-2};
    case DType::kBFloat16:
      return {0.015625, 0.015625, 0.015625};
    case DType::kFloat64:
      return {1e-10, 1e-10, 1e-10};
    default:
      return {0, 0, 0};
  }
}

absl::Status CompareBuffer(const Buffer& buffer, const ByteVector& reference,
                           const ByteVector& candidate, const Tolerance& tolerance) {
  const int64_t bytes = buffer.AllocatedBytes();
  if (static_cast<int64_t>(reference.size()) != bytes ||
      static_cast<int64_t>(candidate.size()) != bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("buffer '", buffer.name, "' ", ShapeString(buffer), " needs ", bytes,
                     " bytes, but the reference has ", reference.size(), " and the candidate ",
                     candidate.size(), ": allocate both with AllocateHostBuffers"));
  }
  absl::Status s;
  switch (buffer.dtype) {
    case DType::kFloat32:
      s = CompareFloat<DType::kFloat32>(buffer, reference, candidate, tolerance);
      break;
    case DType::kFloat64:
      s = CompareFloat<DType::kFloat64>(buffer, reference, candidate, tolerance);
      break;
    case DType::kFloat16:
      s = CompareFloat<DType::kFloat16>(buffer, reference, candidate, tolerance);
      break;
    case DType::kBFloat16:
      s = CompareFloat<DType::kBFloat16>(buffer, reference, candidate, tolerance);
      break;
    case DType::kInt32:
    case DType::kInt64:
    case DType::kBool:
      s = CompareExact(buffer, reference, candidate);
      break;
  }
  // FailedPrecondition is the candidate's mismatch; other codes are about the reference or sizes.
  return MarkVerifyFailed(std::move(s));
}

absl::Status CompareOutputs(const std::vector<ProgramBuffer>& buffers, const HostBuffers& reference,
                            const HostBuffers& candidate, const CompareOptions& options) {
  if (reference.size() != buffers.size() || candidate.size() != buffers.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the program has ", buffers.size(), " buffers but the reference has ",
                     reference.size(), " host buffers and the candidate ", candidate.size(),
                     ": allocate both with AllocateHostBuffers from the same buffer list"));
  }
  std::vector<std::string> failures;
  int compared = 0;
  for (size_t i = 0; i < buffers.size(); ++i) {
    const BufferRole role = buffers[i].role;
    if (role == BufferRole::kInput) continue;
    if (role == BufferRole::kWorkspace && !options.compare_workspace) continue;
    const Buffer& b = *buffers[i].buffer;
    const Tolerance tol = options.tolerance.value_or(DefaultTolerance(b.dtype));
    absl::Status s = CompareBuffer(b, reference.data[i], candidate.data[i], tol);
    ++compared;
    if (s.ok()) continue;
    // A broken reference or bad sizes are not the candidate's failure: report at once.
    if (s.code() != absl::StatusCode::kFailedPrecondition) return s;
    failures.push_back(std::string(s.message()));
  }
  return OutputsVerdict(compared, failures);
}

}  // namespace tessel::worker
