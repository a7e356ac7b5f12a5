#pragma once

// Workload + target + (optional) trace -> lowered, verified, generated candidate. Shared by the
// CLI commands.

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "schedules/codegen/source.h"
#include "schedules/lower/program.h"
#include "schedules/schedule/trace.h"
#include "schedules/target/target.h"
#include "schedules/workload/workload.h"

namespace tessel::cli {

struct BuiltCandidate {
  schedules::Workload workload;
  schedules::Target target;
  std::optional<schedules::Trace> trace;  // nullopt: the reference lowering
  schedules::Program program;
  schedules::GeneratedSource source;
};

absl::StatusOr<schedules::Trace> ReadTraceFile(const std::string& path);

// Lowers `trace` (or the reference when nullopt) for `target`, verifies it against the target's
// limits and generates its source.
absl::StatusOr<BuiltCandidate> BuildCandidate(const schedules::Workload& workload,
                                              const schedules::Target& target,
                                              std::optional<schedules::Trace> trace);

}  // namespace tessel::cli
