#pragma once

// The --listen address of a server, checked before gRPC binds it, so that a mistake gets a
// message that names it (and gRPC prints nothing): a HOST:PORT with a port from 0 to 65535, a
// host of this machine, and a port no other server or program holds (gRPC is told not to share
// ports: GRPC_ARG_ALLOW_REUSEPORT 0).
//
// Threads: a free function, callable from any thread.

#include <string>

#include "absl/status/status.h"

namespace tessel::server {

// InvalidArgument for a malformed address or port; Unavailable when the port is in use or the
// host is not of this machine. Port 0 (any free port) is only checked for its host.
// `flag` names the address in the messages ("--listen", "--http").
absl::Status CheckListenAddress(const std::string& listen, const std::string& flag = "--listen");

// True when the host of HOST:PORT is a loopback one (127.0.0.0/8, ::1, localhost): only this
// machine can connect. 0.0.0.0, [::] and every other address reach beyond it.
bool IsLoopbackListen(const std::string& listen);

}  // namespace tessel::server
