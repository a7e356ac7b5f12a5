#include "proto/protocol.h"

#include "absl/strings/str_cat.h"

namespace tessel::proto {

absl::Status CheckWorkerProtocol(uint32_t worker_version, const std::string& worker_id) {
  if (worker_version == kWorkerProtocolVersion) return absl::OkStatus();
  return absl::FailedPreconditionError(
      absl::StrCat("worker protocol version mismatch: worker '", worker_id, "' speaks version ",
                   worker_version, ", this server speaks version ", kWorkerProtocolVersion,
                   ": run the same Tessel release on the server and its workers"));
}

absl::Status CheckServerProtocol(uint32_t server_version, const std::string& server_address) {
  if (server_version == kWorkerProtocolVersion) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "worker protocol version mismatch: the server at ", server_address, " speaks version ",
      server_version, ", this worker speaks version ", kWorkerProtocolVersion,
      ": run the same Tessel release on the server and its workers"));
}

}  // namespace tessel::proto
