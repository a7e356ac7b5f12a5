#include "server/listen_address.h"

#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace tessel::server {

absl::Status CheckListenAddress(const std::string& listen, const std::string& flag) {
  const size_t colon = listen.rfind(':');
  int port = -1;
  if (colon == std::string::npos || colon == 0 ||
      !absl::SimpleAtoi(listen.substr(colon + 1), &port) || port < 0 || port > 65535 ||
      listen.find_first_not_of("0123456789", colon + 1) != std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, " ", listen,
                     ": give HOST:PORT with a port from 0 (any free port) to 65535, e.g. "
                     "127.0.0.1:7070"));
  }
  std::string host = listen.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* addrs = nullptr;
  if (getaddrinfo(host.c_str(), listen.substr(colon + 1).c_str(), &hints, &addrs) != 0 ||
      addrs == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        flag, " ", listen, ": host ", host,
        " is not a name or address this machine can resolve; pass an address such as 127.0.0.1"));
  }
  // Bound as gRPC binds it (SO_REUSEADDR, no SO_REUSEPORT), then let go.
  const int fd = socket(addrs->ai_family, addrs->ai_socktype, addrs->ai_protocol);
  int err = 0;
  if (fd < 0) {
    err = errno;
  } else {
    const int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, addrs->ai_addr, addrs->ai_addrlen) != 0) err = errno;
    close(fd);
  }
  freeaddrinfo(addrs);
  if (err == 0) return absl::OkStatus();
  if (err == EADDRINUSE) {
    return absl::UnavailableError(absl::StrCat(
        "cannot listen on ", listen, ": port ", port,
        " is in use (another tessel serve or another program holds it); stop that one or pass "
        "another ",
        flag, " HOST:PORT"));
  }
  if (err == EADDRNOTAVAIL) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", listen, ": ", host,
                                               " is not an address of this machine; pass one of "
                                               "its addresses, e.g. 127.0.0.1"));
  }
  return absl::UnavailableError(absl::StrCat("cannot listen on ", listen, ": ", std::strerror(err),
                                             "; pass another ", flag, " HOST:PORT"));
}

bool IsLoopbackListen(const std::string& listen) {
  const size_t colon = listen.rfind(':');
  std::string host = colon == std::string::npos ? listen : listen.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  return host == "localhost" || host == "::1" || absl::StartsWith(host, "127.");
}

}  // namespace tessel::server
