#pragma once

// The tokens file of `tessel serve --tokens FILE`: one token a line, stored as the SHA-256 of the
// token (hex), its role and its name; `#` starts a comment. The token itself is never stored:
// `tessel token create` prints it once. Revoking a token is deleting its line.
//
//   # Tessel tokens (sha256 role name): made by `tessel token create`; delete a line to revoke
//   3f1c...e9 client alice
//
// Roles: client (submits jobs, reads and cancels its own, asks for the best kernels), worker (the
// worker stream only), admin (everything: any job, the worker list, the worker stream).
//
// Threads: free functions, callable from any thread; CreateToken appends to the file and is not
// meant to race another CreateToken on the same file.

#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tessel::server {

enum class Role { kClient, kWorker, kAdmin };

const char* RoleName(Role role);  // "client", "worker", "admin"
// InvalidArgument naming the roles for anything else.
absl::StatusOr<Role> ParseRole(absl::string_view name);

// Who a call comes from: the name of its token and its role.
struct Principal {
  std::string name;
  Role role = Role::kAdmin;
};

// SHA-256 of `token` as 64 lowercase hex digits (OpenSSL).
std::string HashToken(absl::string_view token);

// The tokens of a file's text, by hash. A malformed line is reported with its number and `path`;
// a name or a hash given twice too.
absl::StatusOr<std::map<std::string, Principal>> ParseTokensFile(const std::string& text,
                                                                 const std::string& path);

// Reads and parses the file at `path`; a file that cannot be read is named with the fix.
absl::StatusOr<std::map<std::string, Principal>> ReadTokensFile(const std::string& path);

struct CreatedToken {
  std::string token;  // shown once; only its hash is stored
  Principal principal;
};

// Makes a random token (32 bytes from OpenSSL's RAND_bytes, "tsl_" and hex), appends its line to
// `path` (created with mode 0600 when missing) and returns it. `name` empty: ROLE-N, the first
// free N. A name must be 1-64 of [A-Za-z0-9._@-] and not in the file yet.
absl::StatusOr<CreatedToken> CreateToken(const std::string& path, Role role, std::string name);

}  // namespace tessel::server
