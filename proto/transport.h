#pragma once

// How a Tessel client (the client commands, the worker daemon) reaches a server: plain gRPC on a
// trusted network, or TLS with the CA that signed the server's certificate (and, when the server
// requires one, a client certificate); and the token it sends as call metadata
// (`authorization: Bearer TOKEN`), which the server checks against its tokens file.
//
// Threads: free functions and a plain struct, callable from any thread.

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace tessel::proto {

// The call metadata key a token travels in, and the scheme before it.
inline constexpr char kAuthorizationKey[] = "authorization";
inline constexpr char kBearerPrefix[] = "Bearer ";

struct TransportOptions {
  std::string tls_ca;     // PEM file: the CA of the server's certificate; set: TLS
  std::string tls_cert;   // PEM file: this client's certificate (a server that requires one)
  std::string tls_key;    // PEM file: its private key
  std::string token;      // sent with every call; empty: none
  double timeout_s = 30;  // the client commands' deadline for a call (not for watching a job)
  bool Tls() const { return !tls_ca.empty() || !tls_cert.empty() || !tls_key.empty(); }
};

// $TESSEL_TOKEN, or empty.
std::string TokenFromEnvironment();

// Insecure credentials without TLS; else TLS credentials from the PEM files, read now. A file
// that cannot be read or holds no PEM block is named with the flag that gave it; a client
// certificate needs its key (and the other way round) and TLS needs --tls-ca.
absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> MakeChannelCredentials(
    const TransportOptions& options);

// Adds the token (when there is one) to a call's metadata.
void AttachToken(const TransportOptions& options, grpc::ClientContext* context);

// A failed call's status as the user should read it: UNAUTHENTICATED and PERMISSION_DENIED keep
// the server's message (it says what to pass); a connection that failed in the TLS handshake, or
// a plain connection to what may be a TLS server, gets a hint about --tls-ca. Empty when there is
// nothing to add.
std::string TransportHint(const TransportOptions& options, const grpc::Status& status);

// Reads a PEM file given by `flag` (e.g. "--tls-ca"): its text, or an error naming the flag and
// the file.
absl::StatusOr<std::string> ReadPemFile(const std::string& flag, const std::string& path);

}  // namespace tessel::proto
