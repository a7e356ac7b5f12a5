#pragma once

// The runtime's error codes (tessel_status of runtime.h) carried on absl::Status: a status made
// by WithRuntimeCode keeps its code in a payload; others map from their canonical code.
//
// Threads: free functions, callable from any thread.

#include "absl/status/status.h"
#include "runtime/include/tessel/runtime.h"

namespace tessel::runtime {

absl::Status WithRuntimeCode(absl::Status status, tessel_status code);
// The payload's code, else: InvalidArgument/OutOfRange -> INVALID_ARGUMENT, NotFound ->
// NOT_FOUND, FailedPrecondition/DataLoss -> BAD_FILE, Unimplemented/Unavailable -> UNSUPPORTED,
// anything else -> INTERNAL; OK -> TESSEL_OK.
tessel_status RuntimeCodeOf(const absl::Status& status);

}  // namespace tessel::runtime
