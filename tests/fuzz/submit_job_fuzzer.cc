// Fuzz target: the server's reading of a SubmitJob request (server/job_request.h): the proto
// turned into a JobRequest (JobRequestFromProto), then checked (CheckJobRequest: limits, each
// workload parsed and given a design space and a reference kernel, the target, budgets,
// strategy). Input: the serialized SubmitJobRequest, as a client sends it.
//
// Properties: a refused request says why in a message of bounded length (errors quote long inputs
// short: issue 20, point 9); an accepted one has one distinct key and a positive budget within
// the limit per workload.

#include <cstddef>
#include <cstdint>
#include <set>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/stubs/logging.h"
#include "proto/tessel.pb.h"
#include "server/job_request.h"
#include "tests/fuzz/fuzz_util.h"

namespace {

using tessel::fuzz::Require;
namespace ts = tessel::server;

// The longest message a refusal may have: the quoted parts are cut short, whatever the input.
constexpr size_t kMaxMessageBytes = 4096;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Parsing garbage is expected here: protobuf's complaints (invalid UTF-8, ...) are not wanted.
  static const bool quiet = [] {
    google::protobuf::SetLogHandler(nullptr);
    return true;
  }();
  (void)quiet;
  const int n = static_cast<int>(size);
  if (static_cast<size_t>(n) != size) return 0;
  tessel::proto::SubmitJobRequest request;
  if (!request.ParseFromArray(data, n)) return 0;
  const ts::JobRequest r = ts::JobRequestFromProto(request, "fuzz");
  Require(r.workloads.size() == static_cast<size_t>(request.workloads_size()) &&
              r.name == request.name() && r.target_kind == request.target().kind() &&
              r.submitted_by == "fuzz",
          "the conversion lost a field");
  absl::StatusOr<ts::CheckedJob> job = ts::CheckJobRequest(r);
  if (!job.ok()) {
    Require(!job.status().message().empty(), "a refusal without a reason");
    Require(job.status().message().size() <= kMaxMessageBytes,
            absl::StrCat("a refusal of ", job.status().message().size(),
                         " bytes echoes its input: ", job.status().message().substr(0, 200)));
    return 0;
  }
  Require(!job->workloads.empty() && job->workloads.size() <= ts::kMaxWorkloadsPerJob,
          "an accepted job with no workload or too many");
  Require(job->keys.size() == job->workloads.size() && job->budgets.size() == job->workloads.size(),
          "keys and budgets do not match the workloads");
  Require(std::set<std::string>(job->keys.begin(), job->keys.end()).size() == job->keys.size(),
          "an accepted job lists a workload twice");
  for (int64_t b : job->budgets) {
    Require(b >= 1 && b <= ts::kMaxTrials, absl::StrCat("an accepted task budget of ", b));
  }
  return 0;
}
