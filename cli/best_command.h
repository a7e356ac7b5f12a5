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
//  [--arch sm_90] [--emit cuda|cpp|json|summary]`: the fastest ok record of (workload, target)
// in a tuning log (read directly, or asked of a server with QueryBest), rebuilt from its trace
// and printed as source (the default for the target), the candidate JSON, or a summary.
struct BestOptions {
  std::string db;
  std::string server;
  std::string workload;
  std::string target = "host";
  std::string arch = "sm_90";
  std::string emit;                   // default: cpp for host, cuda for cuda
  proto::TransportOptions transport;  // with --server: TLS and the token
};

void AddBestCommand(CLI::App& app);
int RunBest(const BestOptions& options);

// A best record and where it came from.
struct BestRecord {
  store::Record record;
  int64_t ok_records = 0;  // ok records of the same workload and target
  std::string source;      // the log's path (or the server) it was found in, for messages
};

// The fastest ok record of (workload, target) in the log at `db_path`, opened read-only, whose
// trace replays here (store::BestReplayingRecord; a faster one that does not is passed over with
// a warning on stderr); nullopt when it has none. Errors name the file and the fix.
absl::StatusOr<std::optional<BestRecord>> FetchBestFromDb(const std::string& db_path,
                                                          const schedules::Workload& workload,
                                                          const schedules::Target& target);

// The same asked of the server at `address` (QueryBest); nullopt when it has none.
absl::StatusOr<std::optional<BestRecord>> FetchBestFromServer(
    const std::string& address, const proto::TransportOptions& transport,
    const std::string& workload_arg, const schedules::Target& target);

// "no ok record of W (key K) for T in SOURCE; tune it first with tessel tune or tessel submit".
absl::Status NoBestRecordError(const schedules::Workload& workload, const schedules::Target& target,
                               const std::string& source);

// Checks `emit` (cuda, cpp, json or summary; empty picks the target's source) against the
// target and returns the one to use.
absl::StatusOr<std::string> ResolveBestEmit(const std::string& emit,
                                            const schedules::Target& target);

// Rebuilds the best record's candidate (its trace replayed on `workload` for `target`; trace
// "null" is the reference lowering) and prints it to `out` as `emit` (resolved): the source,
// the candidate JSON (schedules::CandidateToJson), or a one-paragraph summary. Callable from any
// thread.
absl::Status PrintBestRecord(const schedules::Workload& workload, const schedules::Target& target,
                             const BestRecord& best, const std::string& emit, std::ostream& out);

}  // namespace tessel::cli
