#include "runtime/kernel_database.h"

#include <unistd.h>

#include <cstdlib>
#include <optional>

#include "absl/strings/str_cat.h"
#include "runtime/loaded_kernel.h"
#include "runtime/runtime_status.h"
#include "schedules/target/target.h"
#include "schedules/workload/builtins.h"
#include "store/deploy_lookup.h"
#include "store/measured_traces.h"

namespace tessel::runtime {
namespace {

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? "" : v;
}

}  // namespace

std::string DefaultCacheDir() {
  if (std::string d = Env("TESSEL_RUNTIME_CACHE"); !d.empty()) return d;
  if (std::string d = Env("XDG_CACHE_HOME"); !d.empty()) return d + "/tessel/runtime";
  if (std::string d = Env("HOME"); !d.empty()) return d + "/.cache/tessel/runtime";
  const std::string tmp = Env("TMPDIR").empty() ? "/tmp" : Env("TMPDIR");
  return absl::StrCat(tmp, "/tessel-runtime-", getuid());
}

absl::StatusOr<std::unique_ptr<KernelDatabase>> KernelDatabase::Open(
    const std::string& path, const DatabaseOptions& options) {
  store::TuningLogOptions lo;
  lo.read_only = true;
  lo.on_bad_row = [](const std::string&) {};  // a bad row is passed over; the next one answers
  absl::StatusOr<std::unique_ptr<store::TuningLog>> log = store::OpenTuningLog(path, lo);
  if (!log.ok()) {
    // The store's own message names the file and the fix.
    if (absl::IsNotFound(log.status())) return log.status();
    if (absl::IsInvalidArgument(log.status())) return log.status();
    return WithRuntimeCode(log.status(), TESSEL_ERROR_BAD_FILE);
  }
  DatabaseOptions o = options;
  if (o.cache_dir.empty()) o.cache_dir = DefaultCacheDir();
  return std::unique_ptr<KernelDatabase>(new KernelDatabase(*std::move(log), std::move(o)));
}

absl::StatusOr<std::shared_ptr<const Kernel>> KernelDatabase::Find(const std::string& workload,
                                                                   tessel_target target) {
  absl::MutexLock lock(&mu_);
  auto it = by_workload_.find({workload, target});
  if (it != by_workload_.end()) return it->second;
  absl::StatusOr<std::shared_ptr<const Kernel>> k = FindLocked(workload, target);
  if (k.ok()) by_workload_[{workload, target}] = *k;
  return k;
}

absl::StatusOr<std::shared_ptr<const Kernel>> KernelDatabase::FindLocked(
    const std::string& workload, tessel_target target) {
  if (target != TESSEL_TARGET_HOST && target != TESSEL_TARGET_CUDA) {
    return WithRuntimeCode(
        absl::InvalidArgumentError(absl::StrCat("unknown target ", static_cast<int>(target),
                                                "; pass TESSEL_TARGET_HOST or TESSEL_TARGET_CUDA")),
        TESSEL_ERROR_INVALID_ARGUMENT);
  }
  // A workload key of the file, else a spec or definition.
  store::DeployQuery query;
  absl::StatusOr<std::optional<store::WorkloadRow>> row = log_->GetWorkload(workload);
  if (!row.ok()) return WithRuntimeCode(row.status(), TESSEL_ERROR_BAD_FILE);
  if (row->has_value()) {
    absl::StatusOr<schedules::Workload> w = store::WorkloadOfRow(**row);
    if (!w.ok()) return WithRuntimeCode(w.status(), TESSEL_ERROR_BAD_FILE);
    query.workload = *std::move(w);
  } else {
    absl::StatusOr<schedules::Workload> w = schedules::ParseWorkloadText(workload);
    if (!w.ok()) {
      return WithRuntimeCode(absl::NotFoundError(absl::StrCat(
                                 "unknown workload '", workload, "': it is no workload key of ",
                                 log_->path(), ", and as a spec: ", w.status().message())),
                             TESSEL_ERROR_NOT_FOUND);
    }
    query.workload = *std::move(w);
  }
  // This machine's device.
  std::vector<store::DeployQuery> queries;
  if (target == TESSEL_TARGET_HOST) {
    query.target = schedules::HostTarget();
    query.device_name = query.target.device_name;
  } else {
    absl::StatusOr<CudaDeviceIdentity> device = IdentifyCudaDevice(options_.cuda_device);
    if (!device.ok()) return device.status();
    // The records of every target whose code runs here: sm_90 and sm_90a on a 9.0 GPU.
    const std::vector<std::string> archs = schedules::KnownCudaArchsRunnableOn(device->arch);
    if (archs.empty()) {
      absl::StatusOr<schedules::Target> t = schedules::MakeTarget("cuda", device->arch);
      return WithRuntimeCode(
          absl::UnimplementedError(absl::StrCat(
              "CUDA device ", options_.cuda_device, " (", device->name, ") is ", device->arch,
              ", which Tessel does not tune for: ", t.status().message())),
          TESSEL_ERROR_UNSUPPORTED);
    }
    query.device_name = device->name;
    for (const std::string& arch : archs) {
      query.target = schedules::CudaTarget(arch);
      queries.push_back(query);
    }
  }
  if (queries.empty()) queries.push_back(query);
  absl::StatusOr<store::DeployedKernel> found = store::FindDeployedKernelOfAny(log_.get(), queries);
  if (!found.ok()) return found.status();
  const std::pair<std::string, tessel_target> record_key{found->record.uid, target};
  if (auto it = by_record_.find(record_key); it != by_record_.end()) return it->second;
  std::string match = found->MatchDescription(query);
  absl::StatusOr<std::unique_ptr<Kernel>> k = Kernel::Load(
      *std::move(found), std::move(match), target, options_.cache_dir, options_.cuda_device);
  if (!k.ok()) return k.status();
  std::shared_ptr<const Kernel> shared = *std::move(k);
  by_record_[record_key] = shared;
  return shared;
}

}  // namespace tessel::runtime
