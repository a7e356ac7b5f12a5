#pragma once

// The worker protocol's version and the checks the peers make (proto/tessel.proto).

#include <cstdint>
#include <string>

#include "absl/status/status.h"

namespace tessel::proto {

// Bumped on every incompatible change of the worker messages in tessel.proto. 2: cooperative
// kernels (LaunchConfig.cooperative), which a version-1 worker would launch without their grid
// barrier's words. 3: MeasureBatch.cuda_arch (sm_90a jobs), which a version-2 worker would ignore,
// building Hopper's architecture-specific code for sm_90, where it does not compile.
inline constexpr uint32_t kWorkerProtocolVersion = 3;

// The server's check of a registering worker. OK when `worker_version` is ours; otherwise a
// FailedPrecondition naming both versions, the worker and the fix.
absl::Status CheckWorkerProtocol(uint32_t worker_version, const std::string& worker_id);

// The worker's check of the server's Registered message, likewise.
absl::Status CheckServerProtocol(uint32_t server_version, const std::string& server_address);

// How a client or a worker checks the server address it was given (--server) before dialling
// it: OK when `address` is HOST:PORT (a name or IPv4 address, or [IPv6], and a port 1-65535);
// otherwise InvalidArgument saying what is wrong and what to pass.
absl::Status CheckServerAddress(const std::string& address);

}  // namespace tessel::proto
