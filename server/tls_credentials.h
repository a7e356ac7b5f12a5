#pragma once

// The server side of TLS (`tessel serve --tls-cert FILE --tls-key FILE [--tls-ca FILE]
// [--require-client-cert]`): gRPC server credentials from PEM files, checked first with OpenSSL
// so that a wrong file is named with the fix (gRPC itself would only fail to listen).
//
// Threads: a free function, callable from any thread.

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace tessel::server {

struct TlsOptions {
  std::string cert;  // PEM: the server's certificate (chain); empty with key: no TLS
  std::string key;   // PEM: its private key
  std::string ca;    // PEM: the CA that signs client certificates (with require_client_cert)
  bool require_client_cert = false;  // refuse clients without a certificate signed by `ca`
  bool enabled() const { return !cert.empty() || !key.empty() || !ca.empty(); }
};

// Insecure credentials when !options.enabled(); else TLS credentials. Fails naming the flag and
// file for a file that cannot be read, is not a PEM certificate or key, or a key that is not the
// certificate's; and for flags that do not go together (a certificate without its key, a CA or
// --require-client-cert without a certificate, --require-client-cert without --tls-ca).
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(
    const TlsOptions& options);

}  // namespace tessel::server
