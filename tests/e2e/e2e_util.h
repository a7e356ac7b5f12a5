#pragma once

// Shared by the end-to-end suites (host in CI, CUDA compile in CI, GPU on a device): the workload
// families on small shapes (tiles that do not divide included), and random legal schedules.

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "schedules/codegen/source.h"
#include "schedules/schedule/schedule.h"
#include "schedules/space/candidate.h"
#include "schedules/target/target.h"
#include "schedules/workload/workload.h"
#include "worker/backend.h"

namespace tessel::testing {

// One spec per family and layout/dtype variant, on shapes small enough for a reference run on
// one CPU core in well under a second; most extents are odd so that no tile divides them.
std::vector<std::string> SmallFamilySpecs();
// SmallFamilySpecs plus row reductions with enough rows to fill a GPU (the cross-thread path of
// the design space; the small ones take its split-over-blocks path).
std::vector<std::string> SpaceFamilySpecs();

// Contractions whose design space splits the reduction over blocks (split-K) on the host and on
// CUDA, small enough for a host reference run: a matrix-vector product (N=1), odd split factors
// (K=1152: 3 and 9 among the choices), batched and transposed, an epilogue, f16, and
// convolutions whose channel splits (NCHW, and NHWC with a bias + ReLU epilogue).
std::vector<std::string> SplitKSpecs();
// The split-K factor of a trace (the sampled number of chunks its rfactor's loop was split into),
// 1 when it does not split a reduction with rfactor.
int64_t SplitKFactor(const schedules::Trace& trace);

// Skinny contractions (the smaller of M and N at most 16, a long K) that skinny_contraction maps
// on CUDA, small enough for a reference run: matrix-vector products both ways (N = 1 with A
// row-major or transposed, M = 1 with B row-major or transposed), f32 and f16, batched, an
// epilogue, a few columns (N = 3, M = 8), a K no vector width divides.
std::vector<std::string> SkinnySpecs();
// Whether a CUDA sample of a contraction comes from skinny_contraction's sketches: they read
// their operands from global memory, so the trace caches none (cache_read), where every sketch of
// the tiling rules caches both operands in shared memory.
bool IsSkinnySample(const schedules::Trace& trace);
// Whether it comes from the one-kernel "columns" sketch (BlockColumns): a skinny sample whose
// partials are in shared memory (set_scope shared).
bool IsBlockColumnsSample(const schedules::Trace& trace);

// Contractions no CUDA-core tile divides (kPadTile: M, N and K prime or odd), small enough for a
// host reference run: f32 and f16, transposed operands, batched, an epilogue, a convolution.
std::vector<std::string> PaddedTileSpecs();
// The loops of a trace tiled as if padded past their extent: the sample_perfect_tile
// instructions with a padded extent whose sampled value exceeds the loop's own (the first
// candidate of its sample_categorical).
int PaddedLoops(const schedules::Trace& trace);

// Which samples a check takes (every valid one when empty).
// The value of the cost-model feature `name` (costmodel::FeatureNames) for a lowered program.
float FeatureOf(const schedules::Program& program, const schedules::Target& target,
                const std::string& name);
// The rounds of tiles each block of a candidate's persistent grid takes (log2_block_rounds;
// 1: a tile a block).
int64_t BlockRounds(const schedules::Candidate& c);

using SampleFilter = std::function<bool(const schedules::Candidate&)>;
// Verifies samples of `spec`'s design space (a spec or a definition: ParseWorkloadText) on
// `target` against the reference on random inputs
// (worker::RunAndVerify with `options`: the host, or the GPU `options.run.device`): the valid ones
// among seeds 0 to `seeds` - 1 that `keep` accepts, at most `most`. A mismatch fails the test with
// the seed, the trace and the source. Returns how many were checked (0, and a failure, when the
// spec or its space cannot be made).
int VerifySamples(const std::string& spec, const schedules::Target& target, uint64_t seeds,
                  int most, const SampleFilter& keep = nullptr,
                  const worker::VerifyOptions& options = {});
// The same choice of samples for CUDA `arch`, each compiled with NVRTC (a failure fails the test
// with the source). Returns how many were compiled; 0 in a build without the CUDA toolkit.
int CompileSamples(const std::string& spec, const std::string& arch, uint64_t seeds, int most,
                   const SampleFilter& keep = nullptr);

// The name of a test instantiated over SmallFamilySpecs: "<index>_<spec>", the spec with every
// character that is not a letter or digit as '_', cut to 40 characters.
std::string SpecTestName(const ::testing::TestParamInfo<std::string>& info);

// Applies `steps` random primitives (split, fuse, reorder, unroll, vectorize, parallel on the
// host, compute_inline, cache_read + compute_at, cache_write, decompose_reduction) to a fresh
// schedule; primitives that fail leave the state unchanged and are skipped. On CUDA every kernel
// is then bound (outer spatial loop to blocks, the next to threads) where the random steps left
// that possible.
absl::StatusOr<schedules::Schedule> RandomSchedule(const schedules::Workload& w,
                                                   const schedules::Target& t, uint64_t seed,
                                                   int steps);

// Lowers and generates source for a schedule (nullopt trace: the reference).
absl::StatusOr<schedules::GeneratedSource> Generate(const schedules::Schedule& s,
                                                    const schedules::Target& t);
absl::StatusOr<schedules::GeneratedSource> GenerateReference(const schedules::Workload& w,
                                                             const schedules::Target& t);

// Small helpers of the primitive suites; each records a test failure when the step fails.
// The workload of a spec (ParseWorkloadSpec).
schedules::Workload LoadSpec(const std::string& spec);
// The block of a stage by name.
schedules::BlockRV BlockNamed(schedules::Schedule* s, const std::string& name);
// Runs the schedule and the reference lowering on `t` with random inputs of `seed` and compares
// (worker::RunAndVerify); a mismatch fails the test with the generated code.
void ExpectMatchesReference(const schedules::Schedule& s, const schedules::Target& t,
                            uint64_t seed);

// matmul(M=4, N=128, K=256, f16) with B's k steps of 64 fetched by bulk copies (128-byte swizzle)
// in a 3-stage pipeline whose producer is a warp plane (pipeline_producer 2), inside the serial
// loop over C's rows; n on threadIdx.x. A producer plane's pipeline that runs several times.
schedules::Schedule PlanePipelineInsideALoop();

// A wgmma sample's schedule (`c`, cp.async operands) with an operand read from registers: the
// shared copy of `operand` ("A" or "B") cached into a fragment at the pipelined k step (ldmatrix,
// 16 x 16 tiles), which the warpgroup MMA then reads (for A: wgmma's register-A form; wgmma has
// none for B).
absl::StatusOr<schedules::Schedule> WgmmaWithRegisterOperand(const schedules::Candidate& c,
                                                             const std::string& operand = "A");

// How TurnsPipelineInsideALoop builds its pipeline.
enum class TurnsFetch {
  kBulk,         // bulk copies, pipeline_producer 0 (the turns take a plane whatever it says)
  kThreads,      // the threads' own copies (cp.async): refused inside a turns loop
  kLoopBetween,  // bulk copies, the serial loop over C's rows inside the turns loop: refused
};
// matmul(M=4, N=256, K=256, f16) whose n is split in two halves of 128 columns: the halves on
// threadIdx.z taking turns (kPipelineTurns), the columns of a half on threadIdx.x; B's k steps of
// 64 fetched into 128-byte swizzled shared memory in a 3-stage pipeline inside the serial loop over
// C's rows (or around it, kLoopBetween). A pipeline whose two thread groups take turns at one ring
// of slots, run several times.
schedules::Schedule TurnsPipelineInsideALoop(TurnsFetch fetch);

}  // namespace tessel::testing
