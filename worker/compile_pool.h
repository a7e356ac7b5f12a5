#pragma once

// The worker daemon's compile stage (DESIGN.md section 6): a pool of threads sized to the cores
// that compiles GeneratedSources ahead of measurement (host C++ with the system compiler into
// shared objects, CUDA with NVRTC into CUBINs), with a cache in memory and on disk keyed by
// (source, options, toolchain).
//
// Caches, by backend:
// - host: BuildHostObject's own on-disk cache (<cache_dir>/host, keyed by source, entry,
//   compiler, compiler version and flags); the pool adds the in-memory map in front of it.
// - CUDA: <cache_dir>/cuda/<hash>.cubin with <hash>.key holding the full key (compared on load,
//   so a hash collision is a miss, never a wrong binary); keyed by the source, every kernel entry,
//   the NVRTC options and NVRTC's version.
// The in-memory cache holds futures: concurrent requests for the same key compile once. It keeps
// results (compile errors included) up to `memory_cache_bytes`, dropping the oldest first.
//
// Threads: Compile and Stats may be called from any thread. The pool's own threads run the
// compilations; the destructor waits for the running ones and abandons queued ones (their futures
// report Cancelled).

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <future>
#include <list>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "schedules/codegen/source.h"
#include "worker/backend.h"
#include "worker/cuda/nvrtc_compiler.h"
#include "worker/host/host_compiler.h"

namespace tessel::worker {

struct CompilePoolOptions {
  int threads = 0;        // 0: one per core (std::thread::hardware_concurrency)
  std::string cache_dir;  // empty: host objects in HostCompileOptions' default, no CUDA disk cache
  HostCompileOptions host;
  NvrtcOptions nvrtc;  // `arch` is given per call
  size_t memory_cache_bytes = size_t{512} << 20;
};

struct CompileOutput {
  PrecompiledProgram program;
  double compile_ms = 0;  // the compilation's own time (also on a cache hit: the lookup's)
  bool cache_hit = false;
};

using CompileFuture = std::shared_future<absl::StatusOr<CompileOutput>>;

struct CompilePoolStats {
  int64_t compiled = 0;     // compilations run
  int64_t memory_hits = 0;  // answered from the in-memory cache (or joined a running one)
  int64_t disk_hits = 0;    // answered from the on-disk cache
};

class CompilePool {
 public:
  explicit CompilePool(CompilePoolOptions options);
  CompilePool(const CompilePool&) = delete;
  CompilePool& operator=(const CompilePool&) = delete;
  ~CompilePool();

  // Queues `source` (or finds it in the cache). `cuda_arch` ("sm_90") is required for CUDA
  // sources and ignored for host ones. Errors carry a measure::MeasureStatus (compile_error with
  // the log).
  CompileFuture Compile(const schedules::GeneratedSource& source, const std::string& cuda_arch);

  CompilePoolStats Stats() const;
  int threads() const { return static_cast<int>(threads_.size()); }

 private:
  struct Entry {
    CompileFuture future;
    size_t bytes = 0;
  };
  void Loop();
  absl::StatusOr<CompileOutput> Run(const schedules::GeneratedSource& source,
                                    const std::string& cuda_arch, const std::string& key);
  absl::StatusOr<CompileOutput> RunCuda(const schedules::GeneratedSource& source,
                                        const std::string& cuda_arch, const std::string& key);

  const CompilePoolOptions options_;
  mutable absl::Mutex mu_;
  absl::CondVar work_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::deque<std::function<void()>> queue_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, Entry> cache_ ABSL_GUARDED_BY(mu_);
  std::list<std::string> order_ ABSL_GUARDED_BY(mu_);  // keys, oldest first
  size_t cache_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  CompilePoolStats stats_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread> threads_;
};

}  // namespace tessel::worker
