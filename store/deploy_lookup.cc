#include "store/deploy_lookup.h"

#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "schedules/codegen/codegen_version.h"
#include "schedules/codegen/source_json.h"
#include "schedules/util/check.h"
#include "schedules/util/status_macros.h"
#include "schedules/workload/key.h"
#include "store/record_check.h"

namespace tessel::store {
namespace {

constexpr int kFastest = 64;  // how far down a level's ranking a usable record is looked for

// The artifact of a record stored without one: the source regenerated from its trace by this
// build's code generator.
absl::StatusOr<measure::Artifact> Regenerate(const DeployQuery& q, const Record& r) {
  absl::StatusOr<schedules::Candidate> c = ReplayTrace(q.workload, q.target, r.trace_json);
  if (!c.ok()) return c.status();
  measure::Artifact a;
  a.codegen_version = schedules::kCodegenVersion;
  a.source = c->source.code;
  a.launch_json = schedules::SourceLaunchToJson(c->source);
  a.device_arch = q.target.arch;
  return a;
}

std::string ExistingRecords(const std::vector<RecordGroup>& groups) {
  if (groups.empty()) return "it has no ok record of this workload on any target";
  std::vector<std::string> parts;
  for (const RecordGroup& g : groups) {
    parts.push_back(absl::StrCat(g.target_key, " on ",
                                 g.device_name.empty() ? "an unnamed device" : g.device_name, " (",
                                 g.ok_records, " ok record", g.ok_records == 1 ? "" : "s", ")"));
  }
  return absl::StrCat("it has ok records of this workload for ", absl::StrJoin(parts, ", "));
}

}  // namespace

const char* DeployMatchName(DeployMatch m) {
  return m == DeployMatch::kDevice ? "same device" : "same architecture";
}

std::string WorkloadLabel(const schedules::Workload& w) {
  if (w.spec.find('\n') == std::string::npos && !w.spec.empty()) return w.spec;
  return w.name.empty() || w.name == "custom" ? "custom workload" : w.name;
}

std::string DeployedKernel::MatchDescription(const DeployQuery& query) const {
  const std::string& measured_on = record.measurement.device_name;
  if (match == DeployMatch::kDevice) return absl::StrCat("same device (", measured_on, ")");
  std::string s = absl::StrCat("same architecture (", record.target_key, "), measured on ",
                               measured_on.empty() ? "an unnamed device" : measured_on);
  if (!query.device_name.empty()) absl::StrAppend(&s, "; no record of ", query.device_name);
  return s;
}

absl::StatusOr<DeployedKernel> FindDeployedKernel(TuningLog* log, const DeployQuery& q) {
  const std::string key = schedules::WorkloadKey(q.workload);
  const std::string target_key = q.target.ToString();
  int64_t ranked = 0;        // ok records looked at, at the widest level
  absl::Status first_error;  // why the fastest unusable record could not be used
  std::set<int64_t> passed_over;
  for (DeployMatch level : {DeployMatch::kDevice, DeployMatch::kArchitecture}) {
    std::vector<Record> top;
    if (level == DeployMatch::kDevice) {
      if (q.device_name.empty()) continue;
      TESSEL_ASSIGN_OR_RETURN(top, log->TopKOnDevice(key, target_key, q.device_name, kFastest));
    } else {
      TESSEL_ASSIGN_OR_RETURN(top, log->TopK(key, target_key, kFastest));
      ranked = static_cast<int64_t>(top.size());
    }
    for (Record& r : top) {
      if (passed_over.count(r.id) > 0) continue;  // tried on the device level
      DeployedKernel out;
      out.log_path = log->path();
      out.match = level;
      TESSEL_ASSIGN_OR_RETURN(std::optional<measure::Artifact> stored, log->GetArtifact(r.id));
      if (stored) {
        out.artifact = *std::move(stored);
      } else {
        absl::StatusOr<measure::Artifact> regenerated = Regenerate(q, r);
        if (!regenerated.ok()) {
          if (first_error.ok()) first_error = regenerated.status();
          passed_over.insert(r.id);
          if (q.skipped) {
            q.skipped(absl::StrCat("record ", r.uid, " of ", log->path(),
                                   " is passed over: ", regenerated.status().message()));
          }
          continue;
        }
        out.artifact = *std::move(regenerated);
        out.regenerated = true;
      }
      out.record = std::move(r);
      out.record.measurement.artifact = out.artifact;
      TESSEL_ASSIGN_OR_RETURN(out.ok_records, log->CountOk(key, target_key));
      return out;
    }
  }
  if (ranked > 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "none of the ", ranked, " fastest ok records of ", q.workload.spec, " on ", target_key,
        " in ", log->path(), " replays here; the fastest: ", first_error.message(),
        "; none has its source stored (a log from before Tessel kept them); tune it again with "
        "this release"));
  }
  TESSEL_ASSIGN_OR_RETURN(std::vector<RecordGroup> groups, log->OkRecordGroups(key));
  return absl::NotFoundError(absl::StrCat(
      "no ok record of ", WorkloadLabel(q.workload), " (key ", key, ") for ", target_key,
      q.device_name.empty() ? "" : absl::StrCat(" (device ", q.device_name, ")"), " in ",
      log->path(), ": neither on the same device nor on the same architecture; ",
      ExistingRecords(groups), ". Tune it on this target first (tessel tune or tessel submit)"));
}

absl::StatusOr<DeployedKernel> FindDeployedKernelOfAny(TuningLog* log,
                                                       const std::vector<DeployQuery>& queries) {
  TESSEL_CHECK(!queries.empty()) << "FindDeployedKernelOfAny needs at least one query";
  std::optional<DeployedKernel> best;
  absl::Status first_error;
  for (const DeployQuery& q : queries) {
    absl::StatusOr<DeployedKernel> found = FindDeployedKernel(log, q);
    if (!found.ok()) {
      const bool more_telling =
          first_error.ok() || (absl::IsNotFound(first_error) && !absl::IsNotFound(found.status()));
      if (more_telling) first_error = found.status();
      continue;
    }
    const auto rank = [](const DeployedKernel& k) {
      return std::make_pair(k.match == DeployMatch::kDevice ? 0 : 1,
                            k.record.measurement.latency_ms());
    };
    if (!best || rank(*found) < rank(*best)) best = *std::move(found);
  }
  if (best) return *std::move(best);
  if (!absl::IsNotFound(first_error) || queries.size() == 1) return first_error;
  std::vector<std::string> others;
  for (size_t i = 1; i < queries.size(); ++i) others.push_back(queries[i].target.ToString());
  return absl::NotFoundError(
      absl::StrCat(first_error.message(), "; this device also runs the records of ",
                   absl::StrJoin(others, ", "), ", and the log has none of those either"));
}

}  // namespace tessel::store
