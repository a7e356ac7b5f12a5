// Which malloc this process allocates through: jemalloc when the build linked it (CMake's
// TESSEL_ALLOCATOR, see the top-level CMakeLists.txt), else the C library's.

#ifndef TESSEL_CLI_ALLOCATOR_H_
#define TESSEL_CLI_ALLOCATOR_H_

#include <string>

namespace tessel::cli {

// One line for `tessel --version`: "allocator: jemalloc 5.3.0-..." when `malloc` resolves into
// jemalloc, "allocator: <the library's file name>" otherwise (glibc's malloc: libc.so.6).
std::string AllocatorSummary();

}  // namespace tessel::cli

#endif  // TESSEL_CLI_ALLOCATOR_H_
