#include "server/tokens_file.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"

namespace tessel::server {
namespace {

constexpr size_t kMaxNameBytes = 64;

bool ValidName(absl::string_view name) {
  if (name.empty() || name.size() > kMaxNameBytes) return false;
  for (char c : name) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '@' &&
        c != '-') {
      return false;
    }
  }
  return true;
}

bool ValidHash(absl::string_view hash) {
  if (hash.size() != 64) return false;
  for (char c : hash) {
    if (!absl::ascii_isxdigit(static_cast<unsigned char>(c)) || absl::ascii_isupper(c)) {
      return false;
    }
  }
  return true;
}

}  // namespace

const char* RoleName(Role role) {
  switch (role) {
    case Role::kClient:
      return "client";
    case Role::kWorker:
      return "worker";
    case Role::kAdmin:
      return "admin";
  }
  return "unknown";
}

absl::StatusOr<Role> ParseRole(absl::string_view name) {
  for (Role r : {Role::kClient, Role::kWorker, Role::kAdmin}) {
    if (name == RoleName(r)) return r;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown role '", name, "'; use client, worker or admin"));
}

std::string HashToken(absl::string_view token) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  EVP_Digest(token.data(), token.size(), digest, &size, EVP_sha256(), nullptr);
  return absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(digest), static_cast<size_t>(size)));
}

absl::StatusOr<std::map<std::string, Principal>> ParseTokensFile(const std::string& text,
                                                                 const std::string& path) {
  std::map<std::string, Principal> out;
  std::map<std::string, int> names;
  int line_number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_number;
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || line.front() == '#') continue;
    std::vector<absl::string_view> fields = absl::StrSplit(line, ' ', absl::SkipEmpty());
    auto bad = [&](const std::string& why) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, " line ", line_number, ": ", why,
                       "; each line is `SHA256 ROLE NAME` as `tessel token create` writes it"));
    };
    if (fields.size() != 3) return bad(absl::StrCat(fields.size(), " fields instead of 3"));
    if (!ValidHash(fields[0])) return bad("the first field is not 64 lowercase hex digits");
    absl::StatusOr<Role> role = ParseRole(fields[1]);
    if (!role.ok()) return bad(std::string(role.status().message()));
    if (!ValidName(fields[2])) {
      return bad(absl::StrCat("name '", fields[2].substr(0, kMaxNameBytes),
                              "' is not 1-64 of the characters A-Z a-z 0-9 . _ @ -"));
    }
    const std::string name(fields[2]);
    if (auto it = names.find(name); it != names.end()) {
      return bad(absl::StrCat("name '", name, "' is on line ", it->second,
                              " too; give every token its own name"));
    }
    names[name] = line_number;
    if (!out.emplace(std::string(fields[0]), Principal{name, *role}).second) {
      return bad("this hash is on an earlier line too; delete one of them");
    }
  }
  return out;
}

namespace {

absl::StatusOr<std::string> ReadText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::NotFoundError(
        absl::StrCat("cannot read the tokens file ", path, " (", std::strerror(errno),
                     "); make it with `tessel token create --role admin --tokens ", path, "`"));
  }
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

absl::StatusOr<std::map<std::string, Principal>> ReadTokensFile(const std::string& path) {
  absl::StatusOr<std::string> text = ReadText(path);
  if (!text.ok()) return text.status();
  return ParseTokensFile(*text, path);
}

absl::StatusOr<CreatedToken> CreateToken(const std::string& path, Role role, std::string name) {
  std::map<std::string, Principal> existing;
  struct stat st;
  const bool exists = stat(path.c_str(), &st) == 0;
  bool ends_in_newline = true;
  if (exists) {
    absl::StatusOr<std::string> old = ReadText(path);
    if (!old.ok()) return old.status();
    absl::StatusOr<std::map<std::string, Principal>> read = ParseTokensFile(*old, path);
    if (!read.ok()) return read.status();
    existing = std::move(*read);
    ends_in_newline = old->empty() || old->back() == '\n';
  }
  auto taken = [&](const std::string& n) {
    for (const auto& [hash, p] : existing) {
      if (p.name == n) return true;
    }
    return false;
  };
  if (name.empty()) {
    for (int i = 1;; ++i) {
      name = absl::StrCat(RoleName(role), "-", i);
      if (!taken(name)) break;
    }
  } else if (!ValidName(name)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--name '", name.substr(0, kMaxNameBytes),
                     "': give 1-64 of the characters A-Z a-z 0-9 . _ @ -"));
  } else if (taken(name)) {
    return absl::AlreadyExistsError(absl::StrCat(
        "a token named '", name, "' is in ", path,
        " already; pass another --name (or delete its line there to revoke it first)"));
  }
  unsigned char bytes[32];
  if (RAND_bytes(bytes, sizeof(bytes)) != 1) {
    return absl::InternalError("OpenSSL could not draw random bytes for the token");
  }
  CreatedToken created;
  created.token = absl::StrCat("tsl_", absl::BytesToHexString(absl::string_view(
                                           reinterpret_cast<const char*>(bytes), sizeof(bytes))));
  created.principal = Principal{name, role};
  std::string text = ends_in_newline ? "" : "\n";
  if (!exists) {
    text =
        "# Tessel tokens (sha256 role name), made by `tessel token create`; delete a line to "
        "revoke its token\n";
  }
  absl::StrAppend(&text, HashToken(created.token), " ", RoleName(role), " ", name, "\n");
  const int fd = open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) {
    return absl::PermissionDeniedError(absl::StrCat("cannot write the tokens file ", path, " (",
                                                    std::strerror(errno),
                                                    "); pass a --tokens path you can write"));
  }
  const ssize_t written = write(fd, text.data(), text.size());
  const int err = errno;
  close(fd);
  if (written != static_cast<ssize_t>(text.size())) {
    return absl::InternalError(
        absl::StrCat("writing the tokens file ", path, " failed (", std::strerror(err), ")"));
  }
  return created;
}

}  // namespace tessel::server
