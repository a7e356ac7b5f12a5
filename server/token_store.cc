#include "server/token_store.h"

#include <sys/stat.h>

#include "absl/strings/str_cat.h"

namespace tessel::server {

std::optional<TokenStore::Stamp> TokenStore::StampOf(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) return std::nullopt;
  return Stamp{st.st_mtim, st.st_size, st.st_ino};
}

absl::StatusOr<std::unique_ptr<TokenStore>> TokenStore::Open(const std::string& path,
                                                             const EventLog* events) {
  std::unique_ptr<TokenStore> store(new TokenStore(path, events));
  const std::optional<Stamp> stamp = StampOf(path);
  absl::StatusOr<std::map<std::string, Principal>> tokens = ReadTokensFile(path);
  if (!tokens.ok()) return tokens.status();
  absl::MutexLock lock(&store->mu_);
  store->by_hash_ = std::move(*tokens);
  store->stamp_ = stamp;
  return store;
}

void TokenStore::ReloadIfChanged() {
  const std::optional<Stamp> now = StampOf(path_);
  if (now == stamp_) return;
  stamp_ = now;
  absl::StatusOr<std::map<std::string, Principal>> tokens = ReadTokensFile(path_);
  if (!tokens.ok()) {
    if (events_ != nullptr) {
      events_->Log(absl::StrCat("the tokens file changed but cannot be used (",
                                tokens.status().message(), "): the ", by_hash_.size(),
                                " tokens read before stay in force"));
    }
    return;
  }
  by_hash_ = std::move(*tokens);
  if (events_ != nullptr) {
    events_->Log(absl::StrCat("tokens file ", path_, " read again: ", by_hash_.size(), " tokens"));
  }
}

std::optional<Principal> TokenStore::Find(absl::string_view token) {
  const std::string hash = HashToken(token);
  absl::MutexLock lock(&mu_);
  ReloadIfChanged();
  auto it = by_hash_.find(hash);
  if (it == by_hash_.end()) return std::nullopt;
  return it->second;
}

}  // namespace tessel::server
