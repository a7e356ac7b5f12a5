#pragma once

// A kernel the runtime found and loaded (tessel_kernel of runtime.h): what the lookup answered
// (store::DeployedKernel), the program it describes, its launch arguments (the inputs and outputs
// of the program, in order), and the loaded module. Launch checks the caller's tensors against
// the arguments (count, dtype, shape) before anything runs.
//
// Threads: immutable once made; Launch may be called from several threads at once.

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/include/tessel/runtime.h"
#include "runtime/loaded_kernel.h"
#include "schedules/codegen/source.h"
#include "store/deploy_lookup.h"

namespace tessel::runtime {

class Kernel {
 public:
  struct Arg {
    std::string name;
    std::string dtype;
    std::vector<int64_t> shape;
    bool is_output = false;
    size_t buffer = 0;  // index into the program's buffers
  };

  // Loads `deployed` for `target` (the host compiles into `cache_dir`; CUDA loads on
  // `cuda_device`).
  static absl::StatusOr<std::unique_ptr<Kernel>> Load(store::DeployedKernel deployed,
                                                      std::string match_description,
                                                      tessel_target target,
                                                      const std::string& cache_dir,
                                                      int cuda_device);

  absl::Status Launch(const tessel_tensor* args, int num_args, void* stream) const;

  const store::DeployedKernel& deployed() const { return deployed_; }
  const std::string& match_description() const { return match_description_; }
  const std::vector<Arg>& args() const { return args_; }
  bool compiled_here() const { return loaded_->compiled_here(); }

 private:
  Kernel() = default;
  absl::Status CheckArgs(const tessel_tensor* args, int num_args) const;

  store::DeployedKernel deployed_;
  std::string match_description_;
  std::string workload_label_;
  schedules::GeneratedSource source_;
  std::vector<Arg> args_;
  std::unique_ptr<LoadedKernel> loaded_;
};

}  // namespace tessel::runtime
