#pragma once

// The ask/tell interface of every search strategy (DESIGN.md section 5): the job manager asks a
// strategy for candidates of one task (GenerateCandidates), has them measured, and tells it the
// results (NotifyResults). A strategy never proposes a trace that is already measured (the
// records it starts from, when a job resumes) or that it proposed before.
//
// Candidate ids: a proposal's id is CandidateIdOf(its trace JSON), so the same trace has the
// same id in every process; the tuning log stores (task, candidate id) once.
//
// Threads: a SearchStrategy is not thread-safe; its owner serializes the calls (the job manager
// holds its lock). MakeSearchStrategy and the free functions may be called from any thread.

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "costmodel/cost_model.h"
#include "measure/measurement.h"
#include "schedules/space/candidate.h"
#include "schedules/target/target.h"
#include "schedules/workload/workload.h"

namespace tessel::search {

// A candidate to measure: its trace (compact JSON, the form the log stores) and the built
// candidate (program and source).
struct Proposal {
  uint64_t candidate_id = 0;
  std::string trace_json;
  schedules::Candidate candidate;
};

// What a measurement said about a candidate.
struct MeasuredResult {
  uint64_t candidate_id = 0;
  std::string trace_json;
  measure::Measurement measurement;
};

// Replay mode (search/replay.h): the candidates of a tuning log are the whole design space. A
// strategy given a pool draws its fresh samples from the pool's traces instead of the design
// space, and keeps a mutant only when its id is in the pool (the others cannot be answered).
struct CandidatePool {
  std::vector<std::string> trace_jsons;  // compact JSON, as TraceJsonOf
  absl::flat_hash_set<uint64_t> ids;     // CandidateIdOf of each
};

struct SearchContext {
  schedules::Workload workload;
  schedules::Target target;
  uint64_t seed = 0;    // the job's seed
  int64_t task_id = 0;  // mixed into the seed: two tasks of one job draw different samples
  // Results already in the log for this task (a resumed job): never proposed again.
  std::vector<MeasuredResult> measured;
  // The cost model the strategy consults and teaches; shared by the tasks of one job (all calls
  // are serialized by the job's owner). Null: a guided strategy makes its own cold model.
  std::shared_ptr<costmodel::CostModel> cost_model;
  // Replay mode only (above); null otherwise.
  std::shared_ptr<const CandidatePool> pool;
  // Threads a guided strategy builds candidates on (0: std::thread::hardware_concurrency()).
  // Results do not depend on it.
  int threads = 0;
  // True when `cost_model` was already trained on `measured` (e.g. a model loaded from the log
  // that saw these records): a guided strategy then does not give them to it again.
  bool model_has_measured = false;
};

class SearchStrategy {
 public:
  virtual ~SearchStrategy() = default;
  virtual std::string name() const = 0;
  // Up to `n` new proposals. Fewer (possibly none) when the design space seems exhausted: after
  // many draws that gave only rejected samples or traces already measured or proposed.
  virtual absl::StatusOr<std::vector<Proposal>> GenerateCandidates(int n) = 0;
  virtual void NotifyResults(const std::vector<MeasuredResult>& results) = 0;
  // Why samples were refused so far: rejection step ("replay", "lowering", "over_limits",
  // "codegen") or "duplicate", with counts.
  virtual std::map<std::string, int64_t> rejections() const = 0;
  // CPU time spent building candidates (lowering, checks, code generation) since it was made, in
  // milliseconds, summed over its threads; 0 where unknown. The live loop's "build" stage.
  virtual double build_ms() const { return 0; }
};

// The strategies MakeSearchStrategy knows, in the order the help texts list them.
std::vector<std::string> KnownStrategies();

// The strategy of an empty name.
inline constexpr char kDefaultStrategy[] = "evolutionary";

// OK for a known strategy name ("" means the default, evolutionary); otherwise InvalidArgument
// naming the strategy and the known ones.
absl::Status CheckStrategyName(const std::string& name);

// A strategy by name ("" means "evolutionary"). InvalidArgument for an unknown name (as
// CheckStrategyName) or a workload the design space cannot generate for.
absl::StatusOr<std::unique_ptr<SearchStrategy>> MakeSearchStrategy(const std::string& name,
                                                                   SearchContext context);

// The id of a trace: 64-bit FNV-1a of its compact JSON.
uint64_t CandidateIdOf(const std::string& trace_json);

// The compact JSON of `trace`; NormalizeTraceJson re-serializes stored JSON the same way (it
// returns the text unchanged when it does not parse, e.g. "null" for the reference).
std::string TraceJsonOf(const schedules::Trace& trace);
std::string NormalizeTraceJson(const std::string& trace_json);

}  // namespace tessel::search
