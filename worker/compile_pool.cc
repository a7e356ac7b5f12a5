#include "worker/compile_pool.h"

#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "schedules/util/elapsed.h"
#include "schedules/util/fnv1a.h"

namespace tessel::worker {
namespace {

using schedules::MsSince;

namespace fs = std::filesystem;

bool ReadWholeFile(const std::string& path, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::ostringstream ss;
  ss << in.rdbuf();
  *out = ss.str();
  return static_cast<bool>(in) || in.eof();
}

// Writes aside and renames, so that a reader never sees half a file.
void WriteWholeFile(const std::string& path, const std::string& data) {
  static std::atomic<uint64_t> counter{0};
  const std::string tmp = absl::StrCat(path, ".tmp", getpid(), "_", counter.fetch_add(1));
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << data;
    if (!out) return;  // the cache is best-effort
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) fs::remove(tmp, ec);
}

std::string Nul() { return std::string("\0", 1); }

}  // namespace

CompilePool::CompilePool(CompilePoolOptions options) : options_(std::move(options)) {
  int n = options_.threads;
  if (n <= 0) n = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  for (int i = 0; i < n; ++i) threads_.emplace_back([this] { Loop(); });
}

CompilePool::~CompilePool() {
  std::deque<std::function<void()>> abandoned;
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    abandoned.swap(queue_);
    work_.SignalAll();
  }
  for (std::thread& t : threads_) t.join();
  // Queued tasks hold promises: destroying them makes their futures throw broken_promise, so
  // run them in "cancelled" mode instead. Each task checks stopping_.
  for (std::function<void()>& task : abandoned) task();
}

void CompilePool::Loop() {
  while (true) {
    std::function<void()> task;
    {
      absl::MutexLock lock(&mu_);
      while (!stopping_ && queue_.empty()) work_.Wait(&mu_);
      if (stopping_) return;
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    task();
  }
}

CompileFuture CompilePool::Compile(const schedules::GeneratedSource& source,
                                   const std::string& cuda_arch) {
  const bool cuda = source.target == schedules::TargetKind::kCuda;
  std::string key = absl::StrCat(cuda ? "cuda" : "host", Nul(), source.code, Nul());
  for (const schedules::KernelSource& k : source.kernels) absl::StrAppend(&key, k.entry, Nul());
  if (cuda) {
    const NvrtcOptions& o = options_.nvrtc;
#ifdef TESSEL_HAVE_CUDA
    absl::StrAppend(&key, NvrtcVersionString(), Nul());
#endif
    absl::StrAppend(&key, cuda_arch, Nul(), o.fast_math, o.line_info, o.max_registers, Nul(),
                    absl::StrJoin(o.extra_options, " "));
  } else {
    const HostCompileOptions& o = options_.host;
    absl::StrAppend(&key, o.compiler, Nul(), absl::StrJoin(o.flags, " "), Nul(),
                    absl::StrJoin(o.extra_flags, " "));
  }

  absl::MutexLock lock(&mu_);
  auto it = cache_.find(key);
  if (it != cache_.end()) {
    ++stats_.memory_hits;
    return it->second.future;
  }
  auto promise = std::make_shared<std::promise<absl::StatusOr<CompileOutput>>>();
  CompileFuture future = promise->get_future().share();
  cache_[key] = Entry{future, key.size()};
  order_.push_back(key);
  cache_bytes_ += key.size();
  queue_.push_back([this, promise, source, cuda_arch, key] {
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) {
        promise->set_value(absl::CancelledError("the compile pool is shutting down"));
        return;
      }
    }
    absl::StatusOr<CompileOutput> out = Run(source, cuda_arch, key);
    size_t bytes = key.size();
    if (out.ok()) bytes += out->program.cuda.cubin.size() + out->program.host.library_path.size();
    promise->set_value(std::move(out));
    absl::MutexLock lock(&mu_);
    auto e = cache_.find(key);
    if (e != cache_.end()) {
      cache_bytes_ += bytes - e->second.bytes;
      e->second.bytes = bytes;
    }
    // Evict the oldest entries that are done (a running one stays: others may join it).
    for (auto o = order_.begin();
         cache_bytes_ > options_.memory_cache_bytes && o != order_.end();) {
      auto c = cache_.find(*o);
      if (c == cache_.end()) {
        o = order_.erase(o);
        continue;
      }
      if (c->second.future.wait_for(std::chrono::seconds(0)) != std::future_status::ready) {
        ++o;
        continue;
      }
      cache_bytes_ -= c->second.bytes;
      cache_.erase(c);
      o = order_.erase(o);
    }
  });
  work_.Signal();
  return future;
}

CompilePoolStats CompilePool::Stats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

absl::StatusOr<CompileOutput> CompilePool::Run(const schedules::GeneratedSource& source,
                                               const std::string& cuda_arch,
                                               const std::string& key) {
  if (source.target == schedules::TargetKind::kCuda) return RunCuda(source, cuda_arch, key);
  HostCompileOptions host = options_.host;
  if (!options_.cache_dir.empty()) host.work_dir = options_.cache_dir + "/host";
  absl::StatusOr<HostObject> object = BuildHostObject(source, host);
  if (!object.ok()) return object.status();
  {
    absl::MutexLock lock(&mu_);
    ++(object->cache_hit ? stats_.disk_hits : stats_.compiled);
  }
  CompileOutput out;
  out.compile_ms = object->compile_ms;
  out.cache_hit = object->cache_hit;
  out.program.host = std::move(*object);
  return out;
}

absl::StatusOr<CompileOutput> CompilePool::RunCuda(const schedules::GeneratedSource& source,
                                                   const std::string& cuda_arch,
                                                   const std::string& key) {
#ifdef TESSEL_HAVE_CUDA
  if (cuda_arch.empty()) {
    return absl::InvalidArgumentError(
        "CompilePool::Compile needs the device's architecture (e.g. sm_90) for a CUDA source");
  }
  const auto start = std::chrono::steady_clock::now();
  std::string base;
  if (!options_.cache_dir.empty()) {
    const std::string dir = options_.cache_dir + "/cuda";
    std::error_code ec;
    fs::create_directories(dir, ec);
    base = absl::StrFormat("%s/%016x", dir, schedules::Fnv1a64(key));
    std::string stored_key, cubin;
    if (ReadWholeFile(base + ".key", &stored_key) && stored_key == key &&
        ReadWholeFile(base + ".cubin", &cubin) && !cubin.empty()) {
      CompileOutput out;
      out.program.cuda.arch = cuda_arch;
      out.program.cuda.cubin = std::move(cubin);
      ReadWholeFile(base + ".log", &out.program.cuda.log);
      out.cache_hit = true;
      out.compile_ms = MsSince(start);
      out.program.cuda.compile_ms = out.compile_ms;
      absl::MutexLock lock(&mu_);
      ++stats_.disk_hits;
      return out;
    }
  }
  NvrtcOptions nvrtc = options_.nvrtc;
  nvrtc.arch = cuda_arch;
  absl::StatusOr<CudaBinary> binary = CompileCuda(source, nvrtc);
  {
    absl::MutexLock lock(&mu_);
    ++stats_.compiled;
  }
  if (!binary.ok()) return binary.status();
  if (!base.empty()) {
    WriteWholeFile(base + ".cubin", binary->cubin);
    WriteWholeFile(base + ".log", binary->log);
    WriteWholeFile(base + ".key", key);  // last: its presence means the rest is complete
  }
  CompileOutput out;
  out.compile_ms = binary->compile_ms;
  out.program.cuda = std::move(*binary);
  return out;
#else
  return absl::UnimplementedError(
      "this Tessel was built without the CUDA toolkit: rebuild with CUDA 13 at /usr/local/cuda "
      "to compile CUDA candidates");
#endif
}

}  // namespace tessel::worker
