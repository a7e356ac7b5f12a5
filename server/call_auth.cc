#include "server/call_auth.h"

#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "proto/transport.h"

namespace tessel::server {

absl::StatusOr<Principal> CallAuth::Check(const grpc::ServerContext& context,
                                          std::initializer_list<Role> allowed,
                                          absl::string_view action) const {
  if (tokens_ == nullptr) return Principal{"", Role::kAdmin};
  std::vector<std::string> roles;
  for (Role r : allowed) roles.push_back(RoleName(r));
  const std::string needed =
      absl::StrCat(roles.front() == "admin" ? "an " : "a ", absl::StrJoin(roles, " or "), " token");
  const std::string make = absl::StrCat("an admin makes one with `tessel token create --role ",
                                        roles.front(), " --tokens FILE`");
  const auto& metadata = context.client_metadata();
  auto it = metadata.find(proto::kAuthorizationKey);
  if (it == metadata.end()) {
    return absl::UnauthenticatedError(
        absl::StrCat(action, " needs ", needed,
                     ", and this call carried none: pass --token TOKEN or set "
                     "TESSEL_TOKEN (",
                     make, ")"));
  }
  const std::string value(it->second.data(), it->second.size());
  if (!absl::StartsWith(value, proto::kBearerPrefix) ||
      value.size() == sizeof(proto::kBearerPrefix) - 1) {
    return absl::UnauthenticatedError(
        absl::StrCat("the authorization metadata must be `Bearer TOKEN`: pass the token with "
                     "--token TOKEN or set TESSEL_TOKEN"));
  }
  std::optional<Principal> p =
      tokens_->Find(absl::string_view(value).substr(sizeof(proto::kBearerPrefix) - 1));
  if (!p.has_value()) {
    return absl::UnauthenticatedError(
        absl::StrCat(action,
                     ": this server does not know the token given (mistyped, revoked, or made for "
                     "another tokens file): pass ",
                     needed, " with --token TOKEN or set TESSEL_TOKEN (", make, ")"));
  }
  for (Role r : allowed) {
    if (p->role == r) return *p;
  }
  return absl::PermissionDeniedError(
      absl::StrCat(action, " needs ", needed, ", and token '", p->name, "' is a",
                   p->role == Role::kAdmin ? "n " : " ", RoleName(p->role), " token: pass ", needed,
                   " with --token or TESSEL_TOKEN"));
}

}  // namespace tessel::server
