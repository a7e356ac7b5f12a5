#include "search/candidate_source.h"

#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "schedules/codegen/cuda_codegen.h"
#include "schedules/codegen/host_codegen.h"
#include "schedules/lower/check_limits.h"
#include "schedules/lower/lower.h"
#include "schedules/util/fnv1a.h"

namespace tessel::search {

absl::StatusOr<CandidateSource> CandidateSource::Create(const schedules::Workload& workload,
                                                        const schedules::Target& target,
                                                        std::shared_ptr<const CandidatePool> pool) {
  absl::StatusOr<schedules::SpaceGenerator> space =
      schedules::SpaceGenerator::Create(workload, target);
  if (!space.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("no design space for ", workload.spec, " on ",
                                                   target.ToString(), ": ",
                                                   space.status().message()));
  }
  if (pool && pool->trace_jsons.empty()) pool = nullptr;
  return CandidateSource(std::make_shared<const schedules::SpaceGenerator>(std::move(*space)),
                         std::move(pool));
}

absl::StatusOr<schedules::Candidate> CandidateSource::Sample(uint64_t seed,
                                                             schedules::Rejection* why,
                                                             bool codegen) const {
  if (pool_) return FromPool(static_cast<size_t>(seed % pool_size()), why, codegen);
  if (codegen) return space_->Sample(seed, why);
  // The space generator's draw without the source: the same sketch and decisions.
  std::mt19937_64 rng(seed);
  const size_t pick = static_cast<size_t>(rng() % space_->sketches().size());
  absl::StatusOr<schedules::Schedule> sch =
      schedules::Replay(space_->workload(), space_->sketches()[pick], rng());
  if (!sch.ok()) {
    if (why) *why = {"replay", std::string(sch.status().message())};
    return sch.status();
  }
  return Build(*sch, why, /*codegen=*/false);
}

absl::StatusOr<schedules::Candidate> CandidateSource::FromPool(size_t index,
                                                               schedules::Rejection* why,
                                                               bool codegen) const {
  if (!pool_ || index >= pool_size()) {
    return absl::OutOfRangeError(absl::StrCat("pool member ", index, " of ", pool_size()));
  }
  absl::StatusOr<schedules::Trace> trace = schedules::Trace::Parse(pool_->trace_jsons[index]);
  if (!trace.ok()) {
    if (why) *why = {"replay", absl::StrCat("pool trace ", index, ": ", trace.status().message())};
    return trace.status();
  }
  absl::StatusOr<schedules::Candidate> c = Build(*trace, why, codegen);
  // The stored trace stays the candidate's (its JSON is the pool's, so its id is the pool's).
  if (c.ok()) c->trace = std::move(*trace);
  return c;
}

absl::StatusOr<schedules::Schedule> CandidateSource::Replay(const schedules::Trace& trace,
                                                            schedules::Rejection* why,
                                                            uint64_t seed) const {
  absl::StatusOr<schedules::Schedule> sch = schedules::Replay(space_->workload(), trace, seed);
  if (!sch.ok() && why) *why = {"replay", std::string(sch.status().message())};
  return sch;
}

namespace {

// Adds the time from its construction to its destruction to a counter of nanoseconds.
class BuildTimer {
 public:
  explicit BuildTimer(std::atomic<int64_t>* ns)
      : ns_(ns), start_(std::chrono::steady_clock::now()) {}
  ~BuildTimer() {
    ns_->fetch_add(std::chrono::duration_cast<std::chrono::nanoseconds>(
                       std::chrono::steady_clock::now() - start_)
                       .count());
  }
  BuildTimer(const BuildTimer&) = delete;
  BuildTimer& operator=(const BuildTimer&) = delete;

 private:
  std::atomic<int64_t>* ns_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace

double CandidateSource::build_ms() const { return static_cast<double>(build_ns_->load()) / 1e6; }

absl::StatusOr<schedules::Candidate> CandidateSource::Build(const schedules::Schedule& schedule,
                                                            schedules::Rejection* why,
                                                            bool codegen) const {
  const BuildTimer timer(build_ns_.get());
  if (codegen) {
    schedules::BuildStep step = schedules::BuildStep::kLower;
    absl::StatusOr<schedules::Candidate> c = schedules::BuildCandidate(schedule, target(), &step);
    if (!c.ok() && why) *why = {schedules::BuildStepName(step), std::string(c.status().message())};
    return c;
  }
  absl::StatusOr<schedules::Program> program = schedules::Lower(schedule, target());
  if (!program.ok()) {
    if (why) *why = {"lowering", std::string(program.status().message())};
    return program.status();
  }
  if (absl::Status st = schedules::CheckTargetLimits(*program, target()); !st.ok()) {
    if (why) *why = {"over_limits", std::string(st.message())};
    return st;
  }
  return schedules::Candidate{
      schedule.workload(), target(), schedule.trace(), std::move(*program), {}};
}

absl::StatusOr<schedules::Candidate> CandidateSource::Build(const schedules::Trace& trace,
                                                            schedules::Rejection* why,
                                                            bool codegen) const {
  absl::StatusOr<schedules::Schedule> sch = Replay(trace, why);
  if (!sch.ok()) return sch.status();
  return Build(*sch, why, codegen);
}

absl::Status CandidateSource::AddSource(schedules::Candidate* candidate,
                                        schedules::Rejection* why) const {
  if (!candidate->source.code.empty()) return absl::OkStatus();
  const BuildTimer timer(build_ns_.get());
  absl::StatusOr<schedules::GeneratedSource> source =
      target().is_cuda() ? schedules::GenerateCuda(candidate->program, target())
                         : schedules::GenerateHost(candidate->program);
  if (!source.ok()) {
    if (why) *why = {"codegen", std::string(source.status().message())};
    return source.status();
  }
  candidate->source = std::move(*source);
  return absl::OkStatus();
}

uint64_t DrawSeed(uint64_t job_seed, int64_t task_id, uint64_t counter) {
  auto mix = [](uint64_t h, uint64_t v) {
    for (int i = 0; i < 8; ++i) {
      h ^= (v >> (8 * i)) & 0xff;
      h *= schedules::kFnv1a64Prime;
    }
    return h;
  };
  uint64_t h = schedules::kFnv1a64Offset;
  h = mix(h, job_seed);
  h = mix(h, static_cast<uint64_t>(task_id));
  h = mix(h, counter);
  return h;
}

uint64_t MeasuredId(const MeasuredResult& m) {
  return m.candidate_id != 0 ? m.candidate_id : CandidateIdOf(NormalizeTraceJson(m.trace_json));
}

}  // namespace tessel::search
