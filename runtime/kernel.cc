#include "runtime/kernel.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/runtime_status.h"
#include "schedules/codegen/source_json.h"
#include "schedules/target/target.h"

namespace tessel::runtime {
namespace {

std::string Shape(const int64_t* shape, int ndim) {
  std::vector<int64_t> dims(shape, shape + ndim);
  return absl::StrCat("[", absl::StrJoin(dims, ", "), "]");
}

absl::Status BadArgs(const std::string& message) {
  return WithRuntimeCode(absl::InvalidArgumentError(message), TESSEL_ERROR_INVALID_ARGUMENT);
}

}  // namespace

absl::StatusOr<std::unique_ptr<Kernel>> Kernel::Load(store::DeployedKernel deployed,
                                                     std::string match_description,
                                                     tessel_target target,
                                                     const std::string& cache_dir,
                                                     int cuda_device) {
  std::unique_ptr<Kernel> k(new Kernel());
  k->deployed_ = std::move(deployed);
  k->match_description_ = std::move(match_description);
  const measure::Artifact& a = k->deployed_.artifact;
  absl::StatusOr<schedules::GeneratedSource> source =
      schedules::SourceFromLaunchJson(a.launch_json, a.source);
  if (!source.ok()) {
    return WithRuntimeCode(
        absl::DataLossError(absl::StrCat("record ", k->deployed_.record.uid, " of ",
                                         k->deployed_.log_path, ": ", source.status().message())),
        TESSEL_ERROR_BAD_FILE);
  }
  k->source_ = *std::move(source);
  const bool want_cuda = target == TESSEL_TARGET_CUDA;
  if ((k->source_.target == schedules::TargetKind::kCuda) != want_cuda) {
    return WithRuntimeCode(
        absl::DataLossError(absl::StrCat("record ", k->deployed_.record.uid,
                                         " holds a program for another target than its ",
                                         k->deployed_.record.target_key)),
        TESSEL_ERROR_BAD_FILE);
  }
  for (size_t i = 0; i < k->source_.buffers.size(); ++i) {
    const schedules::ProgramBuffer& b = k->source_.buffers[i];
    if (b.role == schedules::BufferRole::kWorkspace) continue;
    const std::vector<int64_t> compact =
        schedules::MakeBuffer("", b.buffer->dtype, b.buffer->shape)->Strides();
    if (b.buffer->Strides() != compact) {
      // Padded rows would misread a caller's compact tensor.
      return WithRuntimeCode(
          absl::UnimplementedError(absl::StrCat(
              "record ", k->deployed_.record.uid, ": tensor ", b.buffer->name,
              " is padded in the tuned program, and the runtime takes compact tensors only")),
          TESSEL_ERROR_UNSUPPORTED);
    }
    k->args_.push_back(Arg{b.buffer->name, schedules::DTypeName(b.buffer->dtype), b.buffer->shape,
                           b.role == schedules::BufferRole::kOutput, i});
  }
  absl::StatusOr<std::unique_ptr<LoadedKernel>> loaded;
  if (want_cuda) {
    absl::StatusOr<schedules::Target> t = schedules::TargetOfKey(k->deployed_.record.target_key);
    if (!t.ok()) {
      return WithRuntimeCode(absl::DataLossError(absl::StrCat("record ", k->deployed_.record.uid,
                                                              ": ", t.status().message())),
                             TESSEL_ERROR_BAD_FILE);
    }
    loaded = LoadCudaKernel(k->source_, a, t->arch, cuda_device);
  } else {
    loaded = LoadHostKernel(k->source_, a, cache_dir);
  }
  if (!loaded.ok()) return loaded.status();
  k->loaded_ = *std::move(loaded);
  return k;
}

absl::Status Kernel::CheckArgs(const tessel_tensor* args, int num_args) const {
  const std::string what = absl::StrCat("the kernel of workload ", deployed_.record.workload_key);
  if (num_args != static_cast<int>(args_.size())) {
    std::vector<std::string> names;
    for (const Arg& a : args_) names.push_back(a.name);
    return BadArgs(absl::StrCat(what, " takes ", args_.size(), " tensors (",
                                absl::StrJoin(names, ", "), ": inputs, then outputs), not ",
                                num_args));
  }
  if (num_args > 0 && args == nullptr) return BadArgs("args is NULL; pass the kernel's tensors");
  for (int i = 0; i < num_args; ++i) {
    const Arg& want = args_[static_cast<size_t>(i)];
    const tessel_tensor& t = args[i];
    const std::string which = absl::StrCat("tensor ", i, " (", want.name, ")");
    if (t.data == nullptr) return BadArgs(absl::StrCat(which, ": data is NULL"));
    if (t.dtype == nullptr || want.dtype != t.dtype) {
      return BadArgs(absl::StrCat(which, ": dtype ", t.dtype == nullptr ? "NULL" : t.dtype,
                                  ", expected ", want.dtype));
    }
    if (t.ndim < 0 || (t.ndim > 0 && t.shape == nullptr)) {
      return BadArgs(absl::StrCat(which, ": ndim ", t.ndim, " with ",
                                  t.shape == nullptr ? "a NULL shape" : "a shape"));
    }
    const std::vector<int64_t> got(t.shape, t.shape + t.ndim);
    if (got != want.shape) {
      return BadArgs(absl::StrCat(which, ": shape ", Shape(t.shape, t.ndim), ", expected ",
                                  Shape(want.shape.data(), static_cast<int>(want.shape.size()))));
    }
  }
  return absl::OkStatus();
}

absl::Status Kernel::Launch(const tessel_tensor* args, int num_args, void* stream) const {
  if (absl::Status s = CheckArgs(args, num_args); !s.ok()) return s;
  std::vector<void*> buffers(source_.buffers.size(), nullptr);
  for (size_t i = 0; i < args_.size(); ++i) buffers[args_[i].buffer] = args[i].data;
  return loaded_->Launch(buffers, stream);
}

}  // namespace tessel::runtime
