#pragma once

// The numeric comparison of a candidate's outputs with the reference's (DESIGN.md section 6),
// independent of the backend, and the host buffers it compares: host copies of a program's
// buffers, random inputs from a seeded engine, NaN-poisoned outputs, and the comparison under
// dtype-dependent tolerances. (The backends that run the programs: backend.h; the check against
// a target's limits: schedules/.)
//
// The tolerance rule, for each floating-point output buffer (f32, f16, bf16, f64):
//
//   s = rms(ref) = sqrt(mean(ref[i]^2)) over the buffer's finite reference elements
//   element i passes   iff  |cand[i] - ref[i]| <= atol_rms * s + rtol * |ref[i]|
//   the buffer passes  iff  every element passes  and  ||cand - ref||_2 <= norm_rtol * ||ref||_2
//   NaN never passes (in the candidate or the reference); an infinity passes only when both are
//   the same infinity; an element still holding the poison NaN is reported as never written.
//
// Defaults (DefaultTolerance):   rtol     atol_rms   norm_rtol
//                         f32    1e-4     2e-4       1e-4
//                         f16    1e-2     1e-2       1e-2
//                         bf16   2^-6     2^-6       2^-6     (two bf16 ulps at 1.0)
//                         f64    1e-10    1e-10      1e-10
//   integers and bool: bit-exact.
//
// Why an absolute term scaled by the rms: a candidate and a reference that sum K products in
// different orders differ by about eps * |terms| * sqrt(K) (tree sums) up to eps * |terms| * K
// (long sequential sums), which is not small relative to an output that happens to cancel to near
// zero (a pure relative test fails those elements), but is small relative to the typical output
// magnitude rms ~ sqrt(K) * |terms|. For f32 and uniform
// [-1, 1] inputs, two sequential f32 sums of K = 65536 products differ by ~9e-6 * rms per element
// (one standard deviation), ~5e-5 * rms in the worst of 16M elements: under 2e-4 * rms. A wrong
// answer of the smallest kind (one product of the K missing or duplicated) moves an element by
// |a * b| ~ 0.25, about 3e-3 * rms at K = 65536, 10x over the limit, and fails ~90% of the
// elements. The norm test catches errors that are small but everywhere (a TF32 product where f32
// was asked differs by ~3e-4 in norm).
//
// Threads: every function is safe to call from any thread on distinct HostBuffers.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <new>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "schedules/ir/dtype.h"
#include "schedules/lower/program.h"
#include "worker/input_gen.h"

namespace tessel::worker {

// 64-byte aligned storage, so that generated host code may use aligned vector loads.
template <typename T>
struct AlignedAllocator {
  using value_type = T;
  static constexpr std::size_t kAlignment = 64;
  AlignedAllocator() = default;
  template <typename U>
  AlignedAllocator(const AlignedAllocator<U>&) {}  // NOLINT: allocator conversion
  T* allocate(std::size_t n) {
    return static_cast<T*>(::operator new(n * sizeof(T), std::align_val_t(kAlignment)));
  }
  void deallocate(T* p, std::size_t) { ::operator delete(p, std::align_val_t(kAlignment)); }
  template <typename U>
  bool operator==(const AlignedAllocator<U>&) const {
    return true;
  }
  template <typename U>
  bool operator!=(const AlignedAllocator<U>&) const {
    return false;
  }
};
using ByteVector = std::vector<uint8_t, AlignedAllocator<uint8_t>>;

// One byte vector per buffer of a GeneratedSource (same order), each Buffer::AllocatedBytes()
// long (row padding included). Float16/bfloat16 elements are stored as their 16-bit patterns.
struct HostBuffers {
  std::vector<ByteVector> data;

  size_t size() const { return data.size(); }
  // data[i].data() for every buffer: what a host entry `void f(void* const*)` receives.
  std::vector<void*> Pointers();
};

// Zero-filled host buffers for `buffers`. Fails for a non-global buffer or a size over 2^40 bytes.
absl::StatusOr<HostBuffers> AllocateHostBuffers(
    const std::vector<schedules::ProgramBuffer>& buffers);

struct FillOptions {
  // Floats are uniform in (float_min, float_max), never exactly zero with the defaults.
  double float_min = -1.0;
  double float_max = 1.0;
  // Integers are uniform in [int_min, int_max]; bool is 0 or 1.
  int64_t int_min = 0;
  int64_t int_max = 7;
};

// Fills every kInput buffer with random values. Element i of buffer b depends only on (seed, b,
// i), so the values are the same for any thread count and any platform.
void FillInputs(const std::vector<schedules::ProgramBuffer>& buffers, uint64_t seed,
                HostBuffers* host, const FillOptions& options = {});

// Writes the poison pattern (a NaN for floats) into every kOutput and kWorkspace buffer.
void PoisonOutputs(const std::vector<schedules::ProgramBuffer>& buffers, HostBuffers* host);

// AllocateHostBuffers + FillInputs + PoisonOutputs.
absl::StatusOr<HostBuffers> MakeVerificationBuffers(
    const std::vector<schedules::ProgramBuffer>& buffers, uint64_t seed,
    const FillOptions& options = {});

// Poison patterns. Quiet NaNs with a payload that no arithmetic produces, so that an element still
// holding one was never written (a NaN computed by the program has another payload).
inline constexpr uint32_t kPoisonF32 = 0x7FC7E55Eu;
inline constexpr uint64_t kPoisonF64 = 0x7FF87E55E7E55E00ull;
inline constexpr uint16_t kPoisonF16 = 0x7E5Eu;
inline constexpr uint16_t kPoisonBF16 = 0x7FDEu;
inline constexpr uint8_t kPoisonIntByte = 0xA5;  // every byte of an integer or bool element

// IEEE binary16 and bfloat16 conversions (round to nearest even; NaN stays NaN).
uint16_t FloatToHalfBits(float value);
float HalfBitsToFloat(uint16_t bits);
uint16_t FloatToBFloat16Bits(float value);
float BFloat16BitsToFloat(uint16_t bits);

// See the rule at the top of this file.
struct Tolerance {
  double rtol = 0;       // per element, relative to |ref[i]|
  double atol_rms = 0;   // per element, relative to rms(ref) of the whole buffer
  double norm_rtol = 0;  // whole buffer: ||cand - ref||_2 <= norm_rtol * ||ref||_2
};
Tolerance DefaultTolerance(schedules::DType dtype);

struct CompareOptions {
  // Replaces DefaultTolerance for every floating-point buffer when set.
  std::optional<Tolerance> tolerance;
  // Also compare kWorkspace buffers (off: their contents are the program's business).
  bool compare_workspace = false;
};

// Compares every kOutput buffer of `candidate` with `reference`. OK when all pass; otherwise a
// status (with measure::MeasureStatus::kVerifyFailed) whose message names each failing buffer, how
// many elements differ, the first and the largest mismatch (index, multi-index, both values), how
// many elements were never written (still poisoned) and the relative L2 error. A reference that
// contains NaN or unwritten elements is an error too (the reference program is wrong).
absl::Status CompareOutputs(const std::vector<schedules::ProgramBuffer>& buffers,
                            const HostBuffers& reference, const HostBuffers& candidate,
                            const CompareOptions& options = {});

// One buffer: what CompareOutputs does for each output.
absl::Status CompareBuffer(const schedules::Buffer& buffer, const ByteVector& reference,
                           const ByteVector& candidate, const Tolerance& tolerance);

// ---- The comparison's pieces, shared by CompareBuffer (host) and the GPU verifier
// (worker/cuda/cuda_verifier.h), so that both apply the same rule and say the same thing.

// The generator's dtype code (input_gen.h) and parameters for FillOptions.
int GenDTypeOf(schedules::DType dtype);
tessel_gen::GenParams GenParamsOf(const FillOptions& options);
// The storage bits FillInputs writes for element `element` (in allocation order, padding
// included) of input buffer `buffer_index`; the low DTypeBytes bytes are the element.
uint64_t InputElementBits(const schedules::Buffer& buffer, uint64_t seed, int64_t buffer_index,
                          int64_t element, const FillOptions& options = {});
// Storage offset (in elements) of logical row-major element `index`, honouring padded strides.
int64_t StorageOffset(const schedules::Buffer& buffer, int64_t index);

// What one pass over (part of) a buffer found. Indices are logical element indices, -1 for none.
struct CompareStats {
  int64_t unwritten = 0, first_unwritten = -1;  // still the poison pattern
  int64_t nan = 0, first_nan = -1;              // a NaN the program computed
  int64_t wrong = 0, first_wrong = -1;          // a value outside the tolerance
  double worst_ratio = 0;                       // max |diff| / allowed over wrong values
  int64_t worst = -1;
  double sum_sq_diff = 0;  // over finite pairs
  double sum_sq_ref = 0;   // over finite reference values
  int64_t finite_ref = 0;

  int64_t bad() const { return unwritten + nan + wrong; }
  static void First(int64_t* into, int64_t from) {
    if (*into < 0) *into = from;
  }
  // Merges the stats of a later range of indices (ranges merged in index order).
  void Merge(const CompareStats& later);
  // Merges stats of interleaved indices: firsts are minima, the worst's ties go to the lower index.
  void MergeUnordered(const CompareStats& other);
};

// Pass 1 over a floating-point reference: InternalError when it holds unwritten elements or NaN.
absl::Status ReferenceVerdict(const schedules::Buffer& buffer, const CompareStats& reference);
// rms(ref) and the absolute tolerance atol_rms * rms(ref) of the rule.
double RmsOf(const CompareStats& reference);
double AbsoluteTolerance(const Tolerance& tolerance, const CompareStats& reference);
// Pass 2's verdict: OK, or FailedPrecondition with CompareBuffer's message. `value(of_candidate,
// index)` returns the candidate's (true) or the reference's (false) element at a logical index.
absl::Status FloatVerdict(const schedules::Buffer& buffer, const Tolerance& tolerance,
                          const CompareStats& reference, const CompareStats& candidate,
                          const std::function<double(bool, int64_t)>& value);
// Integers and bool (bit-exact).
absl::Status ExactVerdict(const schedules::Buffer& buffer, const CompareStats& candidate,
                          const std::function<int64_t(bool, int64_t)>& value);
// Attaches measure::MeasureStatus::kVerifyFailed to a FailedPrecondition (the candidate's
// mismatch).
absl::Status MarkVerifyFailed(absl::Status status);
// The verdict over all output buffers of a program, given how many were compared and each
// failing buffer's message: an error when there was no output to compare, kVerifyFailed with
// every failure when any buffer failed.
absl::Status OutputsVerdict(int compared, const std::vector<std::string>& failures);

}  // namespace tessel::worker
