#pragma once

// Who a gRPC call comes from and whether that may do what it asks. The token comes in the call's
// metadata (`authorization: Bearer TOKEN`, proto/transport.h) and is looked up in the server's
// TokenStore. A server without a tokens file takes every call as an admin's (name empty): that
// is `tessel tune`, and `tessel serve` on loopback or with --insecure.
//
// Failures are gRPC-ready statuses: UNAUTHENTICATED for no token, a malformed one or one the
// server does not know (saying to pass --token or set TESSEL_TOKEN); PERMISSION_DENIED for a
// token of the wrong role (saying which role is needed).
//
// Threads: Check may be called from any thread (TokenStore locks).

#include <grpcpp/grpcpp.h>

#include <initializer_list>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "server/token_store.h"
#include "server/tokens_file.h"

namespace tessel::server {

class CallAuth {
 public:
  // `tokens` null: no tokens, every call is an admin's. Not owned; must outlive this.
  explicit CallAuth(TokenStore* tokens) : tokens_(tokens) {}

  bool enabled() const { return tokens_ != nullptr; }

  // The caller of `context` when its token has one of the `allowed` roles. `action` names what
  // the call does in the messages ("submitting a job").
  absl::StatusOr<Principal> Check(const grpc::ServerContext& context,
                                  std::initializer_list<Role> allowed,
                                  absl::string_view action) const;

 private:
  TokenStore* const tokens_;
};

}  // namespace tessel::server
