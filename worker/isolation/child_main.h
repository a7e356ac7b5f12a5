#pragma once

// The measuring child process (`tessel __measure-child`): opens one device, says hello (the
// device's description), then measures one candidate per request until its socket closes.
// It runs candidates in its own address space so that one that crashes or hangs takes only the
// child down; the parent (MeasureChild) restarts it. DESIGN.md section 6.

#include <string>

namespace tessel::worker {

struct ChildMainOptions {
  std::string target = "host";  // host or cuda
  int device = 0;               // CUDA ordinal
  int fd = 3;                   // the socket to the parent
};

// Returns the process's exit status: 0 when the parent closed the socket, 3 after a request that
// left the GPU unusable (a sticky CUDA error), 1 on a broken socket.
int RunMeasureChild(const ChildMainOptions& options);

}  // namespace tessel::worker
