#pragma once

// Compiles a host GeneratedSource (C++ with one entry `extern "C" void <entry>(void* const*)`)
// into a shared object with the system compiler, loads it with dlopen and resolves the entry.
//
// Compiled objects are cached on disk in the work directory, keyed by the FNV-1a hash of (source,
// entry, compiler, compiler version, flags): compiling the same source twice loads the first
// object. The source and the compiler's log are kept beside it (`<entry>_<hash>.cc`, `.log`).

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "schedules/codegen/source.h"

namespace tessel::worker {

struct HostCompileOptions {
  // The compiler driver, looked up on PATH (an absolute path works too).
  std::string compiler = "c++";
  // Flags for every compilation; the source file and `-o <object>` are added after them.
  std::vector<std::string> flags = {"-O3",     "-march=native", "-fopenmp",
                                    "-shared", "-fPIC",         "-std=c++17"};
  std::vector<std::string> extra_flags;  // appended to `flags`, e.g. {"-ffast-math"}
  // Where sources, objects and logs go. Empty: $TMPDIR (or /tmp) + "/tessel-host-<uid>".
  std::string work_dir;
  bool use_cache = true;   // reuse an object compiled earlier from the same key
  double timeout_s = 300;  // the compiler is killed after this long (a timeout error)
};

// A loaded shared object and its resolved entry. Move-only; unloads (dlclose) when destroyed.
// Threads: Call may run on any thread, concurrently (the generated code keeps no state).
struct HostObject;

class HostModule {
 public:
  using EntryFn = void (*)(void* const*);

  HostModule(HostModule&& other) noexcept;
  HostModule& operator=(HostModule&& other) noexcept;
  HostModule(const HostModule&) = delete;
  HostModule& operator=(const HostModule&) = delete;
  ~HostModule();

  // Runs the program: `buffers` holds one pointer per GeneratedSource::buffers entry, in order.
  void Call(void* const* buffers) const { entry_(buffers); }

  const std::string& entry_name() const { return entry_name_; }
  EntryFn entry() const { return entry_; }
  int num_buffers() const { return num_buffers_; }
  const std::string& library_path() const { return library_path_; }
  const std::string& compile_log() const { return compile_log_; }  // warnings, if any
  bool cache_hit() const { return cache_hit_; }  // loaded from the cache, not compiled now
  double compile_ms() const { return compile_ms_; }

 private:
  friend absl::StatusOr<HostModule> LoadHostModule(const schedules::GeneratedSource&,
                                                   const HostObject&);
  friend absl::StatusOr<HostModule> CompileHost(const schedules::GeneratedSource&,
                                                const HostCompileOptions&);
  HostModule() = default;

  void* handle_ = nullptr;
  EntryFn entry_ = nullptr;
  std::string entry_name_;
  int num_buffers_ = 0;
  std::string library_path_;
  std::string compile_log_;
  bool cache_hit_ = false;
  double compile_ms_ = 0;
};

// A compiled, not yet loaded, shared object (what BuildHostObject makes).
struct HostObject {
  std::string library_path;
  std::string compile_log;
  bool cache_hit = false;
  double compile_ms = 0;
};

// Compiles `source` into a shared object without loading it (the worker daemon compiles in its own
// process and loads in the measuring child). Errors as for CompileHost. Threads: any thread.
absl::StatusOr<HostObject> BuildHostObject(const schedules::GeneratedSource& source,
                                           const HostCompileOptions& options = {});

// Loads a shared object built by BuildHostObject for `source` and resolves its entry.
absl::StatusOr<HostModule> LoadHostModule(const schedules::GeneratedSource& source,
                                          const HostObject& object);

// Compiles and loads `source` (target kHost, exactly one kernel whose `entry` is the function).
// A compile error returns InvalidArgument with measure::MeasureStatus::kCompileError and the
// compiler's log in the message; a compiler that runs past the timeout returns DeadlineExceeded
// (kTimeout). Threads: safe to call concurrently (each compilation writes its own temporary files).
absl::StatusOr<HostModule> CompileHost(const schedules::GeneratedSource& source,
                                       const HostCompileOptions& options = {});

// First line of `<compiler> --version` (cached per compiler for the life of the process).
absl::StatusOr<std::string> HostCompilerVersion(const std::string& compiler);

}  // namespace tessel::worker
