#pragma once

// The artifact (measure/artifact.h) a worker attaches to an ok result: the source it compiled,
// byte for byte, with its launch configuration; the CUDA binary (the host's shared object is not
// kept: it is built for this machine's CPU with -march=native, and recompiling the stored source
// with the recorded compiler and flags is cheap); the toolchain, driver and device.
//
// Threads: a free function, callable from any thread.

#include "measure/artifact.h"
#include "proto/tessel.pb.h"
#include "schedules/codegen/source.h"
#include "worker/backend.h"
#include "worker/host/host_compiler.h"

namespace tessel::worker {

measure::Artifact ResultArtifact(const schedules::GeneratedSource& source,
                                 const PrecompiledProgram& compiled, const proto::Device& device,
                                 const HostCompileOptions& host);

}  // namespace tessel::worker
