#include "cli/candidate.h"

#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "schedules/codegen/cuda_codegen.h"
#include "schedules/codegen/host_codegen.h"
#include "schedules/lower/lower.h"
#include "schedules/lower/verify.h"
#include "schedules/schedule/schedule.h"

namespace tessel::cli {

using schedules::Trace;

absl::StatusOr<Trace> ReadTraceFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    return absl::NotFoundError(absl::StrCat("cannot read trace file '", path,
                                            "'; check the path (traces are JSON files)"));
  }
  std::stringstream ss;
  ss << in.rdbuf();
  auto t = Trace::Parse(ss.str());
  if (!t.ok()) {
    return absl::Status(t.status().code(), absl::StrCat(path, ": ", t.status().message()));
  }
  return t;
}

absl::StatusOr<BuiltCandidate> BuildCandidate(const schedules::Workload& workload,
                                              const schedules::Target& target,
                                              std::optional<Trace> trace) {
  BuiltCandidate c{workload, target, trace, {}, {}};
  absl::StatusOr<schedules::Program> program = trace ? [&]() -> absl::StatusOr<schedules::Program> {
    auto sch = schedules::Replay(workload, *trace);
    if (!sch.ok()) return sch.status();
    return schedules::Lower(*sch, target);
  }()
      : schedules::LowerReference(workload, target);
  if (!program.ok()) return program.status();
  c.program = std::move(*program);
  if (auto st = schedules::VerifyProgram(c.program, target); !st.ok()) return st;
  auto source = target.is_cuda() ? schedules::GenerateCuda(c.program, target)
                                 : schedules::GenerateHost(c.program);
  if (!source.ok()) return source.status();
  c.source = std::move(*source);
  return c;
}

}  // namespace tessel::cli
