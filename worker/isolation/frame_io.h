#pragma once

// Length-prefixed protobuf messages over a stream socket (the worker daemon and its measuring
// children): a 4-byte little-endian length, then the serialized message. Writes use MSG_NOSIGNAL,
// so a peer that died gives an error, never SIGPIPE.
// Threads: one reader and one writer per socket at a time.

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "google/protobuf/message_lite.h"

namespace tessel::worker {

inline constexpr uint32_t kMaxFrameBytes = 1u << 30;

absl::Status WriteFrame(int fd, const google::protobuf::MessageLite& message);

// Reads one message. DeadlineExceeded when none is complete by `deadline`; Unavailable when the
// peer closed its end (or died); DataLoss for a frame that does not parse.
absl::Status ReadFrame(int fd, google::protobuf::MessageLite* message,
                       absl::Time deadline = absl::InfiniteFuture());

}  // namespace tessel::worker
