// The host target of the runtime (runtime/loaded_kernel.h): the stored C++ compiled once into a
// shared object (worker/host/host_compiler.h: cached on disk by source, compiler and flags) and
// called through its entry with the caller's buffers.

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "runtime/loaded_kernel.h"
#include "runtime/runtime_status.h"
#include "worker/host/host_compiler.h"

namespace tessel::runtime {
namespace {

class HostKernel final : public LoadedKernel {
 public:
  HostKernel(worker::HostModule module, std::vector<int64_t> workspace_bytes)
      : module_(std::move(module)), workspace_bytes_(std::move(workspace_bytes)) {}

  absl::Status Launch(const std::vector<void*>& buffers, void* stream) override {
    if (stream != nullptr) {
      return absl::InvalidArgumentError(
          "a host kernel runs on the calling thread: pass a NULL stream");
    }
    std::vector<void*> args = buffers;
    // Scratch space of this launch: launches on several threads do not share it.
    std::vector<std::unique_ptr<char[]>> workspace;
    for (size_t i = 0; i < args.size(); ++i) {
      if (args[i] == nullptr && workspace_bytes_[i] > 0) {
        workspace.push_back(std::make_unique<char[]>(static_cast<size_t>(workspace_bytes_[i])));
        args[i] = workspace.back().get();
      }
    }
    module_.Call(args.data());
    return absl::OkStatus();
  }

  bool compiled_here() const override { return true; }

 private:
  const worker::HostModule module_;
  const std::vector<int64_t> workspace_bytes_;  // per buffer; 0 for inputs and outputs
};

}  // namespace

absl::StatusOr<std::unique_ptr<LoadedKernel>> LoadHostKernel(
    const schedules::GeneratedSource& source, const measure::Artifact& artifact,
    const std::string& cache_dir) {
  worker::HostCompileOptions options;
  options.work_dir = cache_dir;
  if (!artifact.compile_options.empty()) {
    options.flags = absl::StrSplit(artifact.compile_options, ' ', absl::SkipEmpty());
  }
  absl::StatusOr<worker::HostModule> module = worker::CompileHost(source, options);
  if (!module.ok()) {
    return WithRuntimeCode(
        absl::Status(module.status().code(),
                     absl::StrCat("compiling the stored host source with ", options.compiler,
                                  " failed: ", module.status().message())),
        TESSEL_ERROR_COMPILE);
  }
  std::vector<int64_t> workspace_bytes;
  for (const schedules::ProgramBuffer& b : source.buffers) {
    workspace_bytes.push_back(
        b.role == schedules::BufferRole::kWorkspace ? b.buffer->AllocatedBytes() : 0);
  }
  return std::unique_ptr<LoadedKernel>(
      new HostKernel(*std::move(module), std::move(workspace_bytes)));
}

}  // namespace tessel::runtime
