#include "proto/protocol.h"

#include "absl/strings/numbers.h"
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

absl::Status CheckServerAddress(const std::string& address) {
  auto bad = [&](const std::string& why) {
    return absl::InvalidArgumentError(
        absl::StrCat("--server '", address, "' ", why,
                     ": pass the server's HOST:PORT, e.g. --server localhost:7070 or "
                     "--server [::1]:7070"));
  };
  const size_t colon = address.rfind(':');
  if (address.empty()) return bad("is empty");
  if (colon == std::string::npos) return bad("has no port");
  std::string host = address.substr(0, colon);
  const std::string port = address.substr(colon + 1);
  if (!host.empty() && host.front() == '[') {
    if (host.back() != ']' || host.size() < 3) return bad("has an unterminated [IPv6] address");
  } else if (host.find(':') != std::string::npos) {
    return bad("has an IPv6 address without brackets");
  }
  if (host.empty()) return bad("has no host");
  int p = 0;
  if (!absl::SimpleAtoi(port, &p) || p < 1 || p > 65535) {
    return bad(absl::StrCat("has port '", port, "', not a number from 1 to 65535"));
  }
  for (char c : host) {
    if (c == ' ' || c == '/' || c == '\t') return bad("has a host with spaces or slashes");
  }
  return absl::OkStatus();
}

}  // namespace tessel::proto
