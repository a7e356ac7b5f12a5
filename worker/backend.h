#pragma once

// One interface over the worker's backends, and the two conveniences built on it that tests, the
// CLI and benchmarks use: RunAndVerify (does a candidate compute what the reference computes?)
// and Measure (how long does it take?).
//
// Each GeneratedSource runs on the backend of its own target (host C++ through the system
// compiler, CUDA through NVRTC and the driver API), so a CUDA candidate can be verified against a
// host reference as well as against a GPU one.

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "measure/measurement.h"
#include "schedules/codegen/source.h"
#include "worker/cuda/nvrtc_compiler.h"
#include "worker/host/host_compiler.h"
#include "worker/output_compare.h"

namespace tessel::worker {

class CudaDevice;  // worker/cuda/cuda_runner.h (only in builds with the CUDA toolkit)

enum class Backend : uint8_t { kHost, kCuda };
const char* BackendName(Backend backend);  // "host", "cuda"
Backend BackendOf(const schedules::GeneratedSource& source);

struct RunOptions {
  HostCompileOptions host;
  // NVRTC options; an empty `arch` means the device's own (sm_90 on an H100).
  NvrtcOptions nvrtc;
  // The GPU to use: `device` when set (opened by the caller and kept open across calls; not
  // owned), otherwise device number `cuda_ordinal`, opened for the call.
  CudaDevice* device = nullptr;
  int cuda_ordinal = 0;
};

// A compiled program bound to its backend, ready to run on host buffers.
// Threads: one thread at a time.
class Executable {
 public:
  virtual ~Executable() = default;
  virtual Backend backend() const = 0;
  virtual double compile_ms() const = 0;
  // Runs the program once. Reads every buffer of `buffers` (inputs, and the poisoned outputs and
  // workspace) and writes the results back into it; on the GPU the inputs are copied back too, so
  // that a program that writes into its inputs can be caught.
  virtual absl::Status Run(HostBuffers* buffers) = 0;
  // Times the program on `buffers` (TimeHostModule / CudaDevice::Time). The host copies of the
  // outputs are left as they were on the GPU, and hold the last run's results on the host.
  virtual absl::StatusOr<measure::Timings> Time(HostBuffers* buffers,
                                                const measure::TimingOptions& options) = 0;
  // Registers, shared and local memory per kernel where the backend knows them (CUDA).
  virtual std::vector<measure::KernelResources> Resources() const { return {}; }
};

// Compiles `source` for its backend (and loads it onto the GPU). Errors carry a
// measure::MeasureStatus.
absl::StatusOr<std::unique_ptr<Executable>> Prepare(const schedules::GeneratedSource& source,
                                                    const RunOptions& options = {});

// What was compiled ahead of Prepare (by the worker daemon's compile pool, in another process).
struct PrecompiledProgram {
  HostObject host;  // the host backend: a shared object built by BuildHostObject
  CudaBinary cuda;  // the CUDA backend: NVRTC's CUBIN (CompileCuda)
};

// Prepare without compiling: loads `compiled` (the member of `source`'s backend).
absl::StatusOr<std::unique_ptr<Executable>> PrepareCompiled(
    const schedules::GeneratedSource& source, const PrecompiledProgram& compiled,
    const RunOptions& options = {});

// Where the time of one verification went (VerifyPrepared), in milliseconds.
struct VerifyProfile {
  double fill_ms = 0;       // buffers allocated, inputs filled, outputs poisoned
  double upload_ms = 0;     // host to GPU copies (host comparison only)
  double reference_ms = 0;  // the reference program's run
  double candidate_ms = 0;  // the candidate's run
  double download_ms = 0;   // GPU to host copies (host comparison only)
  double compare_ms = 0;    // the input check and the comparison of every output
  bool on_device = false;   // filled, poisoned and compared on the GPU
};

struct VerifyOptions {
  RunOptions run;
  FillOptions fill;
  CompareOptions compare;
  // When the candidate and the reference are both CUDA programs on one device: fill the inputs,
  // poison the outputs and compare on the GPU (CudaVerifier; the same values, rule and messages
  // as the host functions) instead of moving every buffer through the host.
  bool on_device = true;
  // Filled in when set.
  VerifyProfile* profile = nullptr;
};

// Fills the inputs once from `seed` (random, never zeros), poisons the outputs, runs the
// reference and the candidate each on its own copy, checks that the candidate left its inputs
// alone, and compares every output (CompareOutputs; see output_compare.h for the tolerance rule).
// OK when the candidate passes. Candidate failures carry a measure::MeasureStatus (compile_error,
// verify_failed, runtime_error, device_limit_exceeded, timeout); problems of the reference or of
// the setup (different buffer lists, no GPU) carry none and say so.
absl::Status RunAndVerify(const schedules::GeneratedSource& candidate,
                          const schedules::GeneratedSource& reference, uint64_t seed,
                          const VerifyOptions& options = {});

// RunAndVerify on programs already prepared (reused across candidates by the worker daemon).
// `candidate_exe` and `reference_exe` must come from `candidate` and `reference`.
absl::Status VerifyPrepared(const schedules::GeneratedSource& candidate, Executable& candidate_exe,
                            const schedules::GeneratedSource& reference, Executable& reference_exe,
                            uint64_t seed, const VerifyOptions& options = {});

struct MeasureOptions {
  RunOptions run;
  measure::TimingOptions timing;
  uint64_t seed = 0;  // the inputs are random (timing on zeros flatters some kernels)
  FillOptions fill;
};

// Times a prepared program on fresh inputs from `seed` (filled on the GPU for CUDA programs, as
// FillInputs would on the host) and poisoned outputs. `fill_ms`, when set, receives the time spent
// allocating and filling.
absl::StatusOr<measure::Timings> TimePrepared(const schedules::GeneratedSource& source,
                                              Executable& exe, uint64_t seed,
                                              const FillOptions& fill,
                                              const measure::TimingOptions& timing,
                                              double* fill_ms = nullptr);

// TimePrepared with screening (measure::ScreenOptions, when enabled): times `screen.timing` first
// and, when measure::ShouldConfirm says so, `timing` after it on the same inputs. Returns the full
// measurement (kind confirmed) or the screening one (kind screened), with the screen's median and
// repeats either way. Hardware counters come from the screening run (one profiled run per
// candidate). Disabled: exactly TimePrepared.
absl::StatusOr<measure::Timings> TimeScreened(const schedules::GeneratedSource& source,
                                              Executable& exe, uint64_t seed,
                                              const FillOptions& fill,
                                              const measure::TimingOptions& timing,
                                              const measure::ScreenOptions& screen,
                                              double* fill_ms = nullptr);

// Compiles `source`, fills its inputs, and times it (every repeat and the median).
absl::StatusOr<measure::Timings> Measure(const schedules::GeneratedSource& source,
                                         const MeasureOptions& options = {});

}  // namespace tessel::worker
