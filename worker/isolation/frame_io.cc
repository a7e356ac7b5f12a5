#include "worker/isolation/frame_io.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"

namespace tessel::worker {
namespace {

absl::Status SendAll(int fd, const char* data, size_t size) {
  while (size > 0) {
    const ssize_t n = send(fd, data, size, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      return absl::UnavailableError(
          absl::StrCat("writing to the measuring process failed: ", std::strerror(errno)));
    }
    data += n;
    size -= static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

absl::Status RecvAll(int fd, char* data, size_t size, absl::Time deadline) {
  while (size > 0) {
    int timeout_ms = -1;
    if (deadline != absl::InfiniteFuture()) {
      const absl::Duration left = deadline - absl::Now();
      if (left <= absl::ZeroDuration()) return absl::DeadlineExceededError("no reply in time");
      timeout_ms = static_cast<int>(absl::ToInt64Milliseconds(left)) + 1;
    }
    pollfd p{fd, POLLIN, 0};
    const int ready = poll(&p, 1, timeout_ms);
    if (ready < 0) {
      if (errno == EINTR) continue;
      return absl::InternalError(absl::StrCat("poll failed: ", std::strerror(errno)));
    }
    if (ready == 0) continue;  // the deadline check above decides
    const ssize_t n = recv(fd, data, size, 0);
    if (n == 0) return absl::UnavailableError("the peer closed the connection");
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return absl::UnavailableError(absl::StrCat("reading failed: ", std::strerror(errno)));
    }
    data += n;
    size -= static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status WriteFrame(int fd, const google::protobuf::MessageLite& message) {
  std::string bytes;
  if (!message.SerializeToString(&bytes)) {
    return absl::InternalError(absl::StrCat("cannot serialize ", message.GetTypeName()));
  }
  if (bytes.size() > kMaxFrameBytes) {
    return absl::ResourceExhaustedError(
        absl::StrCat(message.GetTypeName(), " is ", bytes.size(), " bytes, over the 1 GiB limit"));
  }
  const uint32_t n = static_cast<uint32_t>(bytes.size());
  const char header[4] = {static_cast<char>(n & 0xFF), static_cast<char>((n >> 8) & 0xFF),
                          static_cast<char>((n >> 16) & 0xFF), static_cast<char>(n >> 24)};
  if (absl::Status s = SendAll(fd, header, 4); !s.ok()) return s;
  return SendAll(fd, bytes.data(), bytes.size());
}

absl::Status ReadFrame(int fd, google::protobuf::MessageLite* message, absl::Time deadline) {
  unsigned char header[4];
  if (absl::Status s = RecvAll(fd, reinterpret_cast<char*>(header), 4, deadline); !s.ok()) {
    return s;
  }
  const uint32_t n =
      header[0] | (header[1] << 8) | (header[2] << 16) | (static_cast<uint32_t>(header[3]) << 24);
  if (n > kMaxFrameBytes) {
    return absl::DataLossError(absl::StrCat("frame of ", n, " bytes is over the 1 GiB limit"));
  }
  std::string bytes(n, '\0');
  if (absl::Status s = RecvAll(fd, bytes.data(), n, deadline); !s.ok()) return s;
  if (!message->ParseFromString(bytes)) {
    return absl::DataLossError(absl::StrCat("cannot parse a ", message->GetTypeName()));
  }
  return absl::OkStatus();
}

}  // namespace tessel::worker
