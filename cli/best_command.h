#pragma once

#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "proto/transport.h"
#include "schedules/target/target.h"
#include "schedules/workload/workload.h"
#include "store/tuning_log.h"

namespace tessel::cli {

// `tessel best (--db FILE | --server ADDR) --workload SPEC_OR_FILE --target host|cuda
//  [--arch sm_90] [--device NAME] [--emit cuda|cpp|json|summary|binary]`: the kernel to deploy
// for (workload, target) from a tuning log or kernel pack (store::FindDeployedKernel: the same
// device, else the same architecture), or asked of a server with QueryBest. It prints what was
// measured: the stored source (the default), the candidate JSON with the stored launch
// configuration and artifact, a summary, or the stored binary's bytes. stderr says which match
// answered and when the source had to be regenerated from the trace (a record stored without
// one) or was printed by another code generator version than this build's.
struct BestOptions {
  std::string db;
  std::string server;
  std::string workload;
  std::string target = "host";
  std::string arch = "sm_90";
  std::string device;  // the device to match first; default: this machine's CPU for the host
  std::string emit;    // default: cpp for host, cuda for cuda
  proto::TransportOptions transport;  // with --server: TLS and the token
};

void AddBestCommand(CLI::App& app);
int RunBest(const BestOptions& options);

// A best record and where it came from.
struct BestRecord {
  store::Record record;      // measurement.artifact: what was measured (or regenerated)
  int64_t ok_records = 0;    // ok records of the same workload and target
  std::string source;        // the log's path (or the server) it was found in, for messages
  bool regenerated = false;  // the artifact's source was regenerated from the trace
  std::string match;         // which match answered, in words (store::DeployedKernel)
};

// The kernel of (workload, target) in the log or pack at `db_path`, opened read-only
// (store::FindDeployedKernel, matching `device_name` first when it is not empty). Errors name
// the file and the fix; NotFound (when the log has no ok record on the target) also names the
// targets and devices it has records of.
absl::StatusOr<std::optional<BestRecord>> FetchBestFromDb(const std::string& db_path,
                                                          const schedules::Workload& workload,
                                                          const schedules::Target& target,
                                                          const std::string& device_name = "");

// The same asked of the server at `address` (QueryBest, with `device_name`); nullopt when it has
// none.
absl::StatusOr<std::optional<BestRecord>> FetchBestFromServer(
    const std::string& address, const proto::TransportOptions& transport,
    const std::string& workload_arg, const schedules::Target& target,
    const std::string& device_name = "");

// "no ok record of W (key K) for T in SOURCE; tune it first with tessel tune or tessel submit".
absl::Status NoBestRecordError(const schedules::Workload& workload, const schedules::Target& target,
                               const std::string& source);

// Checks `emit` (cuda, cpp, json, summary or binary; empty picks the target's source) against
// the target and returns the one to use.
absl::StatusOr<std::string> ResolveBestEmit(const std::string& emit,
                                            const schedules::Target& target);

// Prints the best record's artifact to `out` as `emit` (resolved): its source, the candidate JSON
// (schedules::CandidateToJson of the stored source and launch configuration, plus "artifact" and
// "record" objects), a one-paragraph summary, or the binary's bytes (FailedPrecondition when the
// record has none). Callable from any thread.
absl::Status PrintBestRecord(const schedules::Workload& workload, const schedules::Target& target,
                             const BestRecord& best, const std::string& emit, std::ostream& out);

}  // namespace tessel::cli
