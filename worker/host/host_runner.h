#pragma once

// Runs and times a compiled host program (HostModule) on host buffers.
//
// Timing follows DESIGN.md section 6 for the host: warm-up runs, then repeats, each timed alone
// with a steady clock, with the caches flushed before it (a buffer twice the size of all
// last-level caches is written by every core), until a minimum total time; every repeat and the
// median are returned. The program runs in this process: a crashing candidate takes the process
// down (the worker daemon runs measurements in a child process).

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "measure/measurement.h"
#include "worker/host/host_compiler.h"
#include "worker/output_compare.h"

namespace tessel::worker {

// Runs the program once on `buffers` (one per GeneratedSource::buffers entry; outputs are
// written in place). Fails when the buffer count does not match the program's.
// Threads: any thread; concurrent runs need distinct buffers.
absl::Status RunHostModule(const HostModule& module, HostBuffers* buffers);

// Times the program on `buffers` as described above. Outputs hold the last run's results.
absl::StatusOr<measure::Timings> TimeHostModule(const HostModule& module, HostBuffers* buffers,
                                                const measure::TimingOptions& options = {});

// Total size of the last-level caches of this machine (every instance, from
// /sys/devices/system/cpu), or 64 MiB when it cannot be read.
int64_t HostLastLevelCacheBytes();

// Evicts the caches: writes and reads a buffer of 2 * HostLastLevelCacheBytes() (at least
// 32 MiB) from every OpenMP thread. Keeps the buffer between calls. Threads: any thread.
void FlushHostCaches();

}  // namespace tessel::worker
