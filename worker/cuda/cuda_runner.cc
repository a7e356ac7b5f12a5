#include "worker/cuda/cuda_runner.h"

#include "worker/cuda/cupti_counters.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "schedules/codegen/source_json.h"
#include "schedules/target/target.h"
#include "worker/cuda/cuda_verifier.h"
#include "worker/cuda/cupti_kernel_timer.h"
#include "worker/cuda/nvml_device_monitor.h"
#include "worker/cuda/tensor_map.h"

namespace tessel::worker {
namespace {

using schedules::BufferRole;
using schedules::LaunchConfig;

constexpr int64_t kDefaultSharedLimit = 48 * 1024;
constexpr size_t kMaxBatch = 128;  // timed repeats enqueued before waiting for them
// The second batch of a timing with a median precision to reach (TimingOptions::median_precision):
// with the first repeat, enough for MedianHalfWidth to have an interval.
constexpr int64_t kFirstPreciseBatch = 15;
// A cooperative kernel's `tessel_grid_sync` words (two are used; the rest is room to grow).
constexpr int64_t kGridSyncBytes = 64;

// Errors that leave the context unusable: every later call fails with them too.
bool IsStickyError(CUresult r) {
  switch (r) {
    case CUDA_ERROR_ILLEGAL_ADDRESS:
    case CUDA_ERROR_LAUNCH_FAILED:
    case CUDA_ERROR_LAUNCH_TIMEOUT:
    case CUDA_ERROR_ASSERT:
    case CUDA_ERROR_HARDWARE_STACK_ERROR:
    case CUDA_ERROR_ILLEGAL_INSTRUCTION:
    case CUDA_ERROR_MISALIGNED_ADDRESS:
    case CUDA_ERROR_INVALID_ADDRESS_SPACE:
    case CUDA_ERROR_INVALID_PC:
    case CUDA_ERROR_ECC_UNCORRECTABLE:
    case CUDA_ERROR_CONTEXT_IS_DESTROYED:
      return true;
    default:
      return false;
  }
}

std::string Dims(const std::array<int64_t, 3>& d) { return absl::StrJoin(d, "x"); }

std::string LaunchString(const LaunchConfig& l) { return schedules::ToString(l); }

absl::Status DeviceLimit(const std::string& message) {
  return measure::WithMeasureStatus(absl::ResourceExhaustedError(message),
                                    measure::MeasureStatus::kDeviceLimitExceeded);
}

absl::Status CheckBufferCount(const CudaProgram& program, const CudaBuffers& buffers) {
  if (static_cast<int>(buffers.size()) == program.num_buffers()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("the program takes ", program.num_buffers(),
                                                 " buffers but got ", buffers.size(),
                                                 ": allocate them from the same GeneratedSource"));
}

}  // namespace

absl::Status CudaDeviceStatus() {
  absl::StatusOr<const CudaDriver*> driver = LoadCudaDriver();
  if (!driver.ok()) return driver.status();
  int count = 0;
  const CUresult r = (*driver)->cuDeviceGetCount_(&count);
  if (r != CUDA_SUCCESS) return CudaError(**driver, r, "cuDeviceGetCount");
  if (count <= 0) {
    return absl::FailedPreconditionError(
        "the NVIDIA driver sees no GPU: check nvidia-smi and CUDA_VISIBLE_DEVICES");
  }
  return absl::OkStatus();
}

bool CudaDeviceAvailable() { return CudaDeviceStatus().ok(); }

CudaProgram::~CudaProgram() {
  if (driver_ == nullptr) return;
  driver_->cuCtxSetCurrent_(context_);
  for (CUdeviceptr p : grid_syncs_) {
    if (p != 0) driver_->cuMemFree_(p);
  }
  if (module_ != nullptr) driver_->cuModuleUnload_(module_);
}

CudaBuffers::~CudaBuffers() {
  if (driver_ == nullptr) return;
  driver_->cuCtxSetCurrent_(context_);
  for (CUdeviceptr p : ptrs_) {
    if (p != 0) driver_->cuMemFree_(p);
  }
}

absl::StatusOr<std::unique_ptr<CudaDevice>> CudaDevice::Open(int ordinal) {
  absl::StatusOr<const CudaDriver*> loaded = LoadCudaDriver();
  if (!loaded.ok()) return loaded.status();
  const CudaDriver& d = **loaded;
  int count = 0;
  TESSEL_CU_RETURN_IF_ERROR(d, cuDeviceGetCount, (&count));
  if (ordinal < 0 || ordinal >= count) {
    return absl::InvalidArgumentError(
        absl::StrCat("GPU ", ordinal, " does not exist: this machine has ", count,
                     " GPU(s), numbered from 0 (check CUDA_VISIBLE_DEVICES)"));
  }
  auto device = std::unique_ptr<CudaDevice>(new CudaDevice());
  device->driver_ = &d;
  TESSEL_CU_RETURN_IF_ERROR(d, cuDeviceGet, (&device->device_, ordinal));
  TESSEL_CU_RETURN_IF_ERROR(d, cuDevicePrimaryCtxRetain, (&device->context_, device->device_));
  TESSEL_CU_RETURN_IF_ERROR(d, cuCtxSetCurrent, (device->context_));
  TESSEL_CU_RETURN_IF_ERROR(d, cuStreamCreate, (&device->stream_, CU_STREAM_NON_BLOCKING));

  CudaDeviceInfo& info = device->info_;
  info.ordinal = ordinal;
  info.driver_version = d.driver_version;
  char name[256] = {0};
  TESSEL_CU_RETURN_IF_ERROR(d, cuDeviceGetName, (name, sizeof(name) - 1, device->device_));
  info.name = name;
  auto attr = [&](CUdevice_attribute a, int64_t* out) -> absl::Status {
    int v = 0;
    TESSEL_CU_RETURN_IF_ERROR(d, cuDeviceGetAttribute, (&v, a, device->device_));
    *out = v;
    return absl::OkStatus();
  };
  int64_t major = 0, minor = 0, cooperative = 0;
  for (auto [a, out] : std::vector<std::pair<CUdevice_attribute, int64_t*>>{
           {CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, &major},
           {CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, &minor},
           {CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, &info.sm_count},
           {CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, &info.l2_bytes},
           {CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, &info.max_threads_per_block},
           {CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK, &info.max_shared_per_block},
           {CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
            &info.max_shared_per_block_optin},
           {CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X, &info.max_block[0]},
           {CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y, &info.max_block[1]},
           {CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z, &info.max_block[2]},
           {CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X, &info.max_grid[0]},
           {CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y, &info.max_grid[1]},
           {CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z, &info.max_grid[2]},
           {CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH, &cooperative}}) {
    if (absl::Status s = attr(a, out); !s.ok()) return s;
  }
  info.cc_major = static_cast<int>(major);
  info.cc_minor = static_cast<int>(minor);
  info.arch = absl::StrCat("sm_", major, minor);
  info.cooperative_launch = cooperative != 0;
  size_t total = 0;
  TESSEL_CU_RETURN_IF_ERROR(d, cuDeviceTotalMem, (&total, device->device_));
  info.total_memory_bytes = static_cast<int64_t>(total);
  char bus_id[64] = {0};
  TESSEL_CU_RETURN_IF_ERROR(d, cuDeviceGetPCIBusId,
                            (bus_id, static_cast<int>(sizeof(bus_id) - 1), device->device_));
  info.pci_bus_id = bus_id;
  // Without NVML the device times all the same; its timings then say why they have no clocks.
  absl::StatusOr<std::unique_ptr<NvmlDeviceMonitor>> nvml = NvmlDeviceMonitor::Create(bus_id);
  if (nvml.ok()) {
    device->nvml_ = *std::move(nvml);
  } else {
    device->nvml_missing_ = std::string(nvml.status().message());
  }
  return device;
}

CudaDevice::~CudaDevice() {
  verifier_.reset();  // its module and scratch buffer live in this device's context
  if (driver_ == nullptr || context_ == nullptr) return;
  driver_->cuCtxSetCurrent_(context_);
  for (CUevent e : events_) driver_->cuEventDestroy_(e);
  if (flush_buffer_ != 0) driver_->cuMemFree_(flush_buffer_);
  if (stream_ != nullptr) driver_->cuStreamDestroy_(stream_);
  driver_->cuDevicePrimaryCtxRelease_(device_);
}

absl::Status CudaDevice::Check(CUresult result, const char* call, const std::string& context) {
  if (result == CUDA_SUCCESS) return absl::OkStatus();
  absl::Status s = CudaError(*driver_, result, call, context);
  if (IsStickyError(result)) {
    poisoned_ = true;
    s = absl::InternalError(absl::StrCat(s.message(), "; the CUDA context of GPU ", info_.ordinal,
                                         " is unusable from now on: restart the process"));
    return measure::WithMeasureStatus(std::move(s), result == CUDA_ERROR_LAUNCH_TIMEOUT
                                                        ? measure::MeasureStatus::kTimeout
                                                        : measure::MeasureStatus::kRuntimeError);
  }
  return s;
}

absl::Status CudaDevice::Usable() const {
  if (poisoned_) {
    return measure::WithMeasureStatus(
        absl::FailedPreconditionError(
            absl::StrCat("GPU ", info_.ordinal,
                         "'s CUDA context was broken by an earlier kernel fault: "
                         "restart the process before running anything else on it")),
        measure::MeasureStatus::kRuntimeError);
  }
  return MakeCurrent();
}

absl::StatusOr<CudaVerifier*> CudaDevice::Verifier() {
  if (verifier_ == nullptr) {
    absl::StatusOr<std::unique_ptr<CudaVerifier>> v = CudaVerifier::Create(this);
    if (!v.ok()) return v.status();
    verifier_ = std::move(*v);
  }
  return verifier_.get();
}

absl::Status CudaDevice::MakeCurrent() const {
  TESSEL_CU_RETURN_IF_ERROR(*driver_, cuCtxSetCurrent, (context_));
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<CudaProgram>> CudaDevice::Load(
    const schedules::GeneratedSource& source, const CudaBinary& binary) {
  if (absl::Status s = Usable(); !s.ok()) return s;
  if (source.target != schedules::TargetKind::kCuda || source.kernels.empty()) {
    return absl::InvalidArgumentError(
        "CudaDevice::Load needs a CUDA GeneratedSource with at least one kernel");
  }
  if (!schedules::CudaArchRunsOn(binary.arch, info_.arch)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the CUBIN was built for ", binary.arch, " but GPU ", info_.ordinal, " (", info_.name,
        ") is ", info_.arch, ": compile with NvrtcOptions::arch = \"", info_.arch, "\""));
  }
  auto program = std::unique_ptr<CudaProgram>(new CudaProgram());
  program->driver_ = driver_;
  program->context_ = context_;
  program->num_buffers_ = static_cast<int>(source.buffers.size());
  if (absl::Status s = schedules::CheckTensorMaps(source); !s.ok()) return s;
  for (const schedules::ProgramBuffer& b : source.buffers) program->buffers_.push_back(b.buffer);
  if (absl::Status s = Check(
          driver_->cuModuleLoadDataEx_(&program->module_, binary.cubin.data(), 0, nullptr, nullptr),
          "cuModuleLoadDataEx", absl::StrCat("loading the ", binary.arch, " CUBIN"));
      !s.ok()) {
    return s;
  }
  for (const schedules::KernelSource& k : source.kernels) {
    CUfunction fn = nullptr;
    if (absl::Status s =
            Check(driver_->cuModuleGetFunction_(&fn, program->module_, k.entry.c_str()),
                  "cuModuleGetFunction",
                  absl::StrCat("kernel '", k.entry, "' (declare it extern \"C\")"));
        !s.ok()) {
      return s;
    }
    CudaKernelInfo ki;
    ki.entry = k.entry;
    ki.launch = k.launch;
    ki.params = k.params;
    auto fattr = [&](CUfunction_attribute a) -> absl::StatusOr<int> {
      int out = 0;
      if (absl::Status s = Check(driver_->cuFuncGetAttribute_(&out, a, fn), "cuFuncGetAttribute");
          !s.ok()) {
        return s;
      }
      return out;
    };
    absl::StatusOr<int> regs = fattr(CU_FUNC_ATTRIBUTE_NUM_REGS);
    absl::StatusOr<int> smem = fattr(CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES);
    absl::StatusOr<int> local = fattr(CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES);
    absl::StatusOr<int> max_threads = fattr(CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK);
    for (const auto* r : {&regs, &smem, &local, &max_threads}) {
      if (!r->ok()) return r->status();
    }
    ki.registers = *regs;
    ki.static_shared_bytes = *smem;
    ki.local_bytes = *local;
    ki.max_threads_per_block = *max_threads;

    const LaunchConfig& l = k.launch;
    const std::string where = absl::StrCat("kernel '", k.entry, "' (", LaunchString(l), ")");
    for (int i = 0; i < 3; ++i) {
      if (l.grid[i] < 1 || l.block[i] < 1) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, ": grid and block extents must be at least 1"));
      }
      if (l.grid[i] > info_.max_grid[i] || l.block[i] > info_.max_block[i]) {
        return DeviceLimit(absl::StrCat(where, ": over the device's limits (grid ",
                                        Dims(info_.max_grid), ", block ", Dims(info_.max_block),
                                        ")"));
      }
    }
    const int64_t threads = l.threads_per_block();
    if (threads > ki.max_threads_per_block) {
      return DeviceLimit(
          absl::StrCat(where, ": ", threads, " threads per block, but the kernel uses ",
                       ki.registers, " registers per thread, so at most ", ki.max_threads_per_block,
                       " threads fit in a block: use fewer threads or fewer registers"));
    }
    const int64_t shared = ki.static_shared_bytes + l.dynamic_shared_bytes;
    if (l.dynamic_shared_bytes < 0 || shared > info_.max_shared_per_block_optin) {
      return DeviceLimit(
          absl::StrCat(where, ": ", ki.static_shared_bytes, " bytes of static and ",
                       l.dynamic_shared_bytes, " of dynamic shared memory, over the device's ",
                       info_.max_shared_per_block_optin, " bytes per block: use smaller tiles"));
    }
    if (shared > kDefaultSharedLimit) {
      if (absl::Status s = Check(
              driver_->cuFuncSetAttribute_(fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                           static_cast<int>(l.dynamic_shared_bytes)),
              "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)", where);
          !s.ok()) {
        return s;
      }
    }
    if (l.cooperative) {
      // A grid barrier deadlocks unless every block is resident at once (checked after the
      // shared memory opt-in, which the occupancy calculation needs).
      if (!info_.cooperative_launch) {
        return DeviceLimit(absl::StrCat(
            where, ": synchronizes its whole grid, which needs cooperative launch, but GPU ",
            info_.ordinal, " (", info_.name,
            ") does not support it: tune without grid synchronization for this GPU"));
      }
      int per_sm = 0;
      if (absl::Status s = Check(driver_->cuOccupancyMaxActiveBlocksPerMultiprocessor_(
                                     &per_sm, fn, static_cast<int>(threads),
                                     static_cast<size_t>(l.dynamic_shared_bytes)),
                                 "cuOccupancyMaxActiveBlocksPerMultiprocessor", where);
          !s.ok()) {
        return s;
      }
      const int64_t blocks = l.grid[0] * l.grid[1] * l.grid[2];
      const int64_t resident = per_sm * info_.sm_count;
      if (blocks > resident) {
        return DeviceLimit(absl::StrCat(
            where, ": synchronizes its whole grid, so all ", blocks,
            " blocks must be resident at once, but GPU ", info_.ordinal, " holds at most ",
            resident, " (", per_sm, " per SM x ", info_.sm_count,
            " SMs): use fewer blocks, or fewer registers or less shared memory per block"));
      }
    }
    for (int p : k.params) {
      if (p < 0 || p >= static_cast<int>(source.buffers.size())) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, ": parameter refers to buffer ", p, " but the program has ",
                         source.buffers.size(), " buffers: fix KernelSource::params"));
      }
    }
    CUdeviceptr grid_sync = 0;
    if (l.cooperative) {
      // Ordered before every launch: they all go on stream_ (cuMemsetD8 would run on the legacy
      // stream, which the non-blocking stream_ does not wait for).
      if (absl::Status s = Check(driver_->cuMemAlloc_(&grid_sync, kGridSyncBytes), "cuMemAlloc",
                                 absl::StrCat(where, ": its grid barrier words"));
          !s.ok()) {
        return s;
      }
      program->grid_syncs_.push_back(grid_sync);  // owned by `program` from here on
      if (absl::Status s =
              Check(driver_->cuMemsetD32Async_(grid_sync, 0, kGridSyncBytes / 4, stream_),
                    "cuMemsetD32Async", absl::StrCat(where, ": its grid barrier words"));
          !s.ok()) {
        return s;
      }
    } else {
      program->grid_syncs_.push_back(0);
    }
    program->functions_.push_back(fn);
    program->kernels_.push_back(std::move(ki));
    program->tensor_maps_.emplace_back();
    program->tensor_map_addresses_.emplace_back();
  }
  return program;
}

absl::StatusOr<std::unique_ptr<CudaBuffers>> CudaDevice::Allocate(
    const std::vector<schedules::ProgramBuffer>& buffers) {
  if (absl::Status s = Usable(); !s.ok()) return s;
  auto out = std::unique_ptr<CudaBuffers>(new CudaBuffers());
  out->driver_ = driver_;
  out->context_ = context_;
  for (const schedules::ProgramBuffer& pb : buffers) {
    const int64_t bytes = pb.buffer->AllocatedBytes();
    CUdeviceptr p = 0;
    if (bytes > 0) {
      if (absl::Status s = Check(driver_->cuMemAlloc_(&p, static_cast<size_t>(bytes)), "cuMemAlloc",
                                 absl::StrCat("buffer '", pb.buffer->name, "' (", bytes,
                                              " bytes) on GPU ", info_.ordinal));
          !s.ok()) {
        return s;  // `out` frees what was allocated so far
      }
    }
    out->ptrs_.push_back(p);
    out->bytes_.push_back(bytes);
    out->roles_.push_back(pb.role);
    out->names_.push_back(pb.buffer->name);
  }
  return out;
}

absl::Status CudaDevice::Upload(const HostBuffers& host, CudaBuffers* device) {
  if (absl::Status s = Usable(); !s.ok()) return s;
  if (host.size() != device->size()) {
    return absl::InvalidArgumentError(
        absl::StrCat(host.size(), " host buffers for ", device->size(), " device buffers"));
  }
  for (size_t i = 0; i < host.size(); ++i) {
    if (static_cast<int64_t>(host.data[i].size()) != device->bytes_[i]) {
      return absl::InvalidArgumentError(absl::StrCat(
          "host buffer '", device->names_[i], "' has ", host.data[i].size(),
          " bytes, the device buffer ", device->bytes_[i], ": allocate both from one buffer list"));
    }
    if (device->bytes_[i] == 0) continue;
    if (absl::Status s = Check(
            driver_->cuMemcpyHtoD_(device->ptrs_[i], host.data[i].data(), host.data[i].size()),
            "cuMemcpyHtoD", absl::StrCat("buffer '", device->names_[i], "'"));
        !s.ok()) {
      return s;
    }
  }
  // cuMemcpyHtoD from pageable memory returns once the data is staged, before its DMA lands, and
  // stream() is non-blocking (it does not wait for the legacy stream the copies go on): without
  // this a kernel can read inputs and outputs as they were before the upload. (Not
  // cuCtxSynchronize: asked for by name at CUDA 13 the driver hands out cuCtxSynchronize_v2,
  // which takes a context.)
  return Check(driver_->cuStreamSynchronize_(CU_STREAM_LEGACY), "cuStreamSynchronize",
               "after the uploads");
}

absl::Status CudaDevice::Download(const CudaBuffers& device, HostBuffers* host,
                                  bool include_inputs) {
  if (absl::Status s = Usable(); !s.ok()) return s;
  if (host->size() != device.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat(host->size(), " host buffers for ", device.size(), " device buffers"));
  }
  for (size_t i = 0; i < device.size(); ++i) {
    if (device.roles_[i] == BufferRole::kInput && !include_inputs) continue;
    if (static_cast<int64_t>(host->data[i].size()) != device.bytes_[i]) {
      return absl::InvalidArgumentError(absl::StrCat(
          "host buffer '", device.names_[i], "' has ", host->data[i].size(),
          " bytes, the device buffer ", device.bytes_[i], ": allocate both from one buffer list"));
    }
    if (device.bytes_[i] == 0) continue;
    if (absl::Status s = Check(
            driver_->cuMemcpyDtoH_(host->data[i].data(), device.ptrs_[i], host->data[i].size()),
            "cuMemcpyDtoH", absl::StrCat("buffer '", device.names_[i], "'"));
        !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

absl::Status CudaDevice::LaunchKernel(const CudaProgram& program, size_t k,
                                      const CudaBuffers& buffers) {
  const CudaKernelInfo& ki = program.kernels_[k];
  const LaunchConfig& l = ki.launch;
  std::vector<CUdeviceptr> values;
  values.reserve(ki.params.size() + 1);
  for (int p : ki.params) values.push_back(buffers.ptrs_[static_cast<size_t>(p)]);
  // The tensor maps over this launch's buffers, encoded when they moved.
  std::vector<CUdeviceptr> addresses;
  for (const schedules::TensorMapSpec& m : l.tensor_maps) {
    addresses.push_back(buffers.ptrs_[static_cast<size_t>(m.buffer)]);
  }
  std::vector<CUtensorMap>& maps = program.tensor_maps_[k];
  if (addresses != program.tensor_map_addresses_[k]) {
    maps.clear();
    program.tensor_map_addresses_[k].clear();
    for (size_t i = 0; i < l.tensor_maps.size(); ++i) {
      const schedules::TensorMapSpec& m = l.tensor_maps[i];
      absl::StatusOr<CUtensorMap> map = EncodeTensorMap(
          *driver_, m, *program.buffers_[static_cast<size_t>(m.buffer)], addresses[i]);
      if (!map.ok()) return map.status();
      maps.push_back(*map);
    }
    program.tensor_map_addresses_[k] = std::move(addresses);
  }
  std::vector<void*> args;
  args.reserve(values.size() + maps.size() + 1);
  for (CUdeviceptr& v : values) args.push_back(&v);
  for (CUtensorMap& m : maps) args.push_back(&m);
  CUdeviceptr grid_sync = l.cooperative ? program.grid_syncs_[k] : 0;
  if (l.cooperative) args.push_back(&grid_sync);  // `tessel_grid_sync`
  const auto u = [](int64_t v) { return static_cast<unsigned>(v); };
  const CUresult r =
      l.cooperative ? driver_->cuLaunchCooperativeKernel_(
                          program.functions_[k], u(l.grid[0]), u(l.grid[1]), u(l.grid[2]),
                          u(l.block[0]), u(l.block[1]), u(l.block[2]), u(l.dynamic_shared_bytes),
                          stream_, args.empty() ? nullptr : args.data())
                    : driver_->cuLaunchKernel_(program.functions_[k], u(l.grid[0]), u(l.grid[1]),
                                               u(l.grid[2]), u(l.block[0]), u(l.block[1]),
                                               u(l.block[2]), u(l.dynamic_shared_bytes), stream_,
                                               args.empty() ? nullptr : args.data(), nullptr);
  absl::Status s = Check(r, l.cooperative ? "cuLaunchCooperativeKernel" : "cuLaunchKernel",
                         absl::StrCat("kernel '", ki.entry, "' (", LaunchString(l), ")"));
  return s.code() == absl::StatusCode::kInternal && !measure::AttachedMeasureStatus(s).has_value()
             ? measure::WithMeasureStatus(std::move(s), measure::MeasureStatus::kRuntimeError)
             : s;
}

absl::Status CudaDevice::LaunchAsync(const CudaProgram& program, const CudaBuffers& buffers) {
  if (absl::Status s = CheckBufferCount(program, buffers); !s.ok()) return s;
  for (size_t k = 0; k < program.functions_.size(); ++k) {
    if (absl::Status s = LaunchKernel(program, k, buffers); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status CudaDevice::Run(const CudaProgram& program, const CudaBuffers& buffers) {
  if (absl::Status s = Usable(); !s.ok()) return s;
  if (absl::Status s = CheckBufferCount(program, buffers); !s.ok()) return s;
  // One kernel at a time, so that an asynchronous fault is attributed to its kernel.
  for (size_t k = 0; k < program.functions_.size(); ++k) {
    if (absl::Status s = LaunchKernel(program, k, buffers); !s.ok()) return s;
    if (absl::Status s = Check(driver_->cuStreamSynchronize_(stream_), "cuStreamSynchronize",
                               absl::StrCat("running kernel '", program.kernels_[k].entry, "'"));
        !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

absl::Status CudaDevice::Synchronize() {
  if (absl::Status s = Usable(); !s.ok()) return s;
  return Check(driver_->cuStreamSynchronize_(stream_), "cuStreamSynchronize");
}

absl::Status CudaDevice::FlushL2Async() {
  if (flush_buffer_ == 0) {
    const int64_t bytes = std::max<int64_t>(2 * info_.l2_bytes, int64_t{8} << 20);
    flush_words_ = bytes / 4;
    if (absl::Status s = Check(driver_->cuMemAlloc_(&flush_buffer_, static_cast<size_t>(bytes)),
                               "cuMemAlloc", "the L2 flush buffer");
        !s.ok()) {
      flush_buffer_ = 0;
      return s;
    }
  }
  ++flush_value_;
  return Check(driver_->cuMemsetD32Async_(flush_buffer_, flush_value_,
                                          static_cast<size_t>(flush_words_), stream_),
               "cuMemsetD32Async", "flushing L2");
}

absl::Status CudaDevice::EnsureEvents(size_t pairs) {
  while (events_.size() < 2 * pairs) {
    CUevent e = nullptr;
    if (absl::Status s = Check(driver_->cuEventCreate_(&e, CU_EVENT_DEFAULT), "cuEventCreate");
        !s.ok()) {
      return s;
    }
    events_.push_back(e);
  }
  return absl::OkStatus();
}

absl::StatusOr<measure::Timings> CudaDevice::Time(const CudaProgram& program,
                                                  const CudaBuffers& buffers,
                                                  const measure::TimingOptions& options) {
  if (absl::Status s = CheckBufferCount(program, buffers); !s.ok()) return s;
  absl::StatusOr<measure::Timings> timings =
      TimeRegion([&] { return LaunchAsync(program, buffers); }, options);
  if (!timings.ok() || !options.hardware_counters) return timings;
  absl::StatusOr<measure::HardwareCounters> counters = CollectCounters(
      [&]() -> absl::Status {
        if (absl::Status s = LaunchAsync(program, buffers); !s.ok()) return s;
        return Synchronize();
      },
      options.flush_cache);
  if (counters.ok()) {
    timings->counters = *counters;
  } else {
    timings->note = absl::StrCat(timings->note, timings->note.empty() ? "" : "; ",
                                 "no hardware counters: ", counters.status().message());
  }
  return timings;
}

absl::StatusOr<measure::HardwareCounters> CudaDevice::CollectCounters(
    const std::function<absl::Status()>& run, bool flush_l2) {
  if (absl::Status s = MakeCurrent(); !s.ok()) return s;
  CUcontext ctx = nullptr;
  if (absl::Status s = Check(driver_->cuCtxGetCurrent_(&ctx), "cuCtxGetCurrent"); !s.ok()) {
    return s;
  }
  // The flush runs outside the profiled range: its own DRAM traffic is not the program's.
  std::function<absl::Status()> flush;
  if (flush_l2) {
    flush = [this]() -> absl::Status {
      if (absl::Status s = FlushL2Async(); !s.ok()) return s;
      return Synchronize();
    };
  }
  return CollectHardwareCounters(ctx, run, flush);
}

absl::StatusOr<measure::Timings> CudaDevice::TimeRegion(
    const std::function<absl::Status()>& enqueue, const measure::TimingOptions& options) {
  if (options.max_repeats < 1 || options.min_repeats > options.max_repeats) {
    return absl::InvalidArgumentError(
        absl::StrCat("timing repeats: min ", options.min_repeats, ", max ", options.max_repeats,
                     ": max_repeats must be at least 1 and at least min_repeats"));
  }
  if (absl::Status s = Usable(); !s.ok()) return s;
  for (int i = 0; i < options.warmup_runs; ++i) {
    if (absl::Status s = enqueue(); !s.ok()) return s;
  }
  if (absl::Status s =
          Check(driver_->cuStreamSynchronize_(stream_), "cuStreamSynchronize", "warm-up runs");
      !s.ok()) {
    return s;
  }
  // Kernel times from CUPTI alongside the events; a CUPTI failure only costs those.
  CuptiKernelTimer* cupti = nullptr;
  std::string note;
  if (options.kernel_times) {
    absl::StatusOr<CuptiKernelTimer*> timer = CuptiKernelTimer::Get();
    if (timer.ok()) {
      if (absl::Status s = (*timer)->Begin(context_, stream_); s.ok()) {
        cupti = *timer;
      } else {
        note = std::string(s.message());
      }
    } else {
      note = std::string(timer.status().message());
    }
  }
  std::vector<double> repeats;
  double total = 0;
  size_t batch = 1;  // the first repeat alone, to estimate how many more are needed
  while (true) {
    if (absl::Status s = EnsureEvents(batch); !s.ok()) return s;
    for (size_t i = 0; i < batch; ++i) {
      if (options.flush_cache) {
        if (absl::Status s = FlushL2Async(); !s.ok()) return s;
      }
      if (absl::Status s = Check(driver_->cuEventRecord_(events_[2 * i], stream_), "cuEventRecord");
          !s.ok()) {
        return s;
      }
      if (absl::Status s = enqueue(); !s.ok()) return s;
      if (absl::Status s =
              Check(driver_->cuEventRecord_(events_[2 * i + 1], stream_), "cuEventRecord");
          !s.ok()) {
        return s;
      }
    }
    if (absl::Status s = Check(driver_->cuEventSynchronize_(events_[2 * batch - 1]),
                               "cuEventSynchronize", "timed repeats");
        !s.ok()) {
      return s;
    }
    for (size_t i = 0; i < batch; ++i) {
      float ms = 0;
      if (absl::Status s =
              Check(driver_->cuEventElapsedTime_(&ms, events_[2 * i], events_[2 * i + 1]),
                    "cuEventElapsedTime");
          !s.ok()) {
        return s;
      }
      repeats.push_back(ms);
      total += ms;
    }
    if (measure::EnoughRepeats(options, repeats, total)) break;
    const int64_t n = static_cast<int64_t>(repeats.size());
    const double per = std::max(total / static_cast<double>(n), 1e-4);
    const double wanted_by_time = std::ceil(std::max(0.0, options.min_total_ms - total) / per);
    int64_t wanted =
        std::max<int64_t>(options.min_repeats - n, static_cast<int64_t>(wanted_by_time));
    // With a precision to reach, the count at most doubles per batch (1, 16, 32, 64, ...), so
    // that a stable kernel stops near the first count precise enough; the wait between batches
    // costs the GPU a few microseconds.
    if (options.median_precision > 0) {
      wanted = std::min(wanted, std::max<int64_t>(n, kFirstPreciseBatch));
    }
    batch = static_cast<size_t>(std::clamp<int64_t>(wanted, 1, options.max_repeats - n));
    batch = std::min(batch, kMaxBatch);
  }
  // The state the GPU was timed in: read before anything else runs on it.
  measure::DeviceState state;
  std::string no_state = nvml_missing_;
  if (nvml_ != nullptr) {
    absl::StatusOr<measure::DeviceState> read = nvml_->Read();
    if (read.ok()) {
      state = *read;
    } else {
      no_state = std::string(read.status().message());
    }
  }
  const size_t timed = repeats.size();
  measure::Timings timings = measure::MakeTimings(std::move(repeats));
  timings.device_state = state;
  if (cupti != nullptr) {
    absl::StatusOr<std::vector<CuptiKernelRecord>> kernels = cupti->End();
    absl::StatusOr<std::vector<double>> per_repeat =
        kernels.ok() ? KernelTimesPerRepeat(*kernels, timed)
                     : absl::StatusOr<std::vector<double>>(kernels.status());
    if (per_repeat.ok()) {
      timings.kernel_repeats_ms = std::move(*per_repeat);
      timings.kernel_median_ms = measure::MedianOf(timings.kernel_repeats_ms);
    } else {
      note = std::string(per_repeat.status().message());
    }
  }
  if (!no_state.empty()) {
    absl::StrAppend(&note, note.empty() ? "" : "; ", "no clocks or temperature: ", no_state);
  }
  timings.note = std::move(note);
  return timings;
}

}  // namespace tessel::worker
