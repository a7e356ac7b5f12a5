#pragma once

// The parent's handle on one measuring child process (worker/isolation/child_main.h): spawns
// `<executable> __measure-child --target T --device N --fd 3` (exec'd, never a bare fork of a
// process with gRPC threads or CUDA state), talks to it over a socket pair with length-prefixed
// protobuf messages, and watches it:
// - a child that dies during a request (segfault, abort, a CUDA fault that kills it) gives a
//   runtime_error result naming the signal or exit status;
// - a child that does not answer within the request's time limit is killed (SIGKILL) and gives a
//   timeout result;
// - a child that reports its GPU unusable (a sticky CUDA error) exits by itself.
// In every case the next Measure starts a fresh child, so later candidates still measure.
//
// Threads: one thread at a time (each device of the worker daemon has its own MeasureChild).

#include <sys/types.h>

#include <string>

#include "absl/status/status.h"
#include "measure/measurement.h"
#include "proto/measure_child.pb.h"
#include "proto/tessel.pb.h"
#include "worker/compile_pool.h"

namespace tessel::worker {

struct MeasureChildOptions {
  std::string executable;       // the tessel binary; empty: this process's own (/proc/self/exe)
  std::string target = "host";  // host or cuda
  int device = 0;               // CUDA ordinal (0 for the host)
  double start_timeout_s = 60;  // for the child's hello (opening a GPU takes a while)
};

// What the parent compiled for a program, as a ChildMeasure carries it to the child (the CUBIN,
// or the host library's path, with the compile time and whether the cache had it).
void ToArtifact(const CompileOutput& out, proto::CompiledArtifact* artifact);

class MeasureChild {
 public:
  explicit MeasureChild(MeasureChildOptions options);
  MeasureChild(const MeasureChild&) = delete;
  MeasureChild& operator=(const MeasureChild&) = delete;
  ~MeasureChild();  // kills the child

  // Starts the child (if not running) and waits for its hello. Fails when it cannot be spawned or
  // cannot open its device (the message says why, e.g. no GPU).
  absl::Status Start();
  // The device the child opened (valid after a successful Start).
  const proto::Device& device() const { return device_; }
  // How many devices of its kind the child saw (GPUs; 1 for the host).
  int device_count() const { return device_count_; }

  // Measures one candidate. Never fails: problems of the child become the result's status
  // (runtime_error for a crash, timeout past `timeout_s`, worker_error when no child can start).
  measure::Measurement Measure(const proto::ChildMeasure& request, double timeout_s);

  // How many times a child was started (1 after the first Start).
  int starts() const { return starts_; }
  bool running() const { return pid_ > 0; }

 private:
  // Kills (when `kill`) and reaps the child; returns how it ended ("killed by signal 11
  // (Segmentation fault)", "exited with status 3").
  std::string Reap(bool kill);

  MeasureChildOptions options_;
  pid_t pid_ = -1;
  int fd_ = -1;
  int starts_ = 0;
  uint64_t next_token_ = 1;
  proto::Device device_;
  int device_count_ = 0;
};

}  // namespace tessel::worker
