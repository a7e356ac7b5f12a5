#pragma once

// An open tuning log or kernel pack (tessel_db of runtime.h): finds the kernel of a workload for
// a target on this machine's device (store::FindDeployedKernel: same device, else same
// architecture) and loads it, keeping every kernel it loaded so that the next lookup of the same
// workload and target returns the same loaded module.
//
// Threads: Find may be called from any number of threads at once; lookups and loads are
// serialized (a load compiles at most once).

#include <map>
#include <memory>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "runtime/include/tessel/runtime.h"
#include "runtime/kernel.h"
#include "store/tuning_log.h"

namespace tessel::runtime {

struct DatabaseOptions {
  std::string cache_dir;  // empty: DefaultCacheDir()
  int cuda_device = 0;
};

// $TESSEL_RUNTIME_CACHE, else $XDG_CACHE_HOME/tessel/runtime, else $HOME/.cache/tessel/runtime,
// else $TMPDIR (or /tmp)/tessel-runtime-<uid>.
std::string DefaultCacheDir();

class KernelDatabase {
 public:
  // Opens `path` read-only. NOT_FOUND when it does not exist, BAD_FILE when it is not a Tessel
  // tuning log or pack (or one this build cannot read).
  static absl::StatusOr<std::unique_ptr<KernelDatabase>> Open(const std::string& path,
                                                              const DatabaseOptions& options);

  // The kernel of `workload` (a spec, a definition, or a workload key of the file) for
  // `target`, loaded.
  absl::StatusOr<std::shared_ptr<const Kernel>> Find(const std::string& workload,
                                                     tessel_target target);

 private:
  KernelDatabase(std::unique_ptr<store::TuningLog> log, DatabaseOptions options)
      : log_(std::move(log)), options_(std::move(options)) {}

  absl::StatusOr<std::shared_ptr<const Kernel>> FindLocked(const std::string& workload,
                                                           tessel_target target)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::unique_ptr<store::TuningLog> log_;
  const DatabaseOptions options_;
  absl::Mutex mu_;
  // By (workload as given, target), and by (record uid, target): a spec and its key share one.
  std::map<std::pair<std::string, tessel_target>, std::shared_ptr<const Kernel>> by_workload_
      ABSL_GUARDED_BY(mu_);
  std::map<std::pair<std::string, tessel_target>, std::shared_ptr<const Kernel>> by_record_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace tessel::runtime
