#include "proto/convert.h"

#include <cmath>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "schedules/codegen/source_json.h"
#include "schedules/workload/parser.h"

namespace tessel::proto {
namespace {

using DomainRole = schedules::BufferRole;

DomainRole FromProtoRole(proto::BufferRole r, bool* ok) {
  *ok = true;
  switch (r) {
    case BUFFER_ROLE_INPUT:
      return DomainRole::kInput;
    case BUFFER_ROLE_OUTPUT:
      return DomainRole::kOutput;
    case BUFFER_ROLE_WORKSPACE:
      return DomainRole::kWorkspace;
    default:
      *ok = false;
      return DomainRole::kInput;
  }
}

proto::BufferRole ToProtoRole(DomainRole r) {
  switch (r) {
    case DomainRole::kInput:
      return BUFFER_ROLE_INPUT;
    case DomainRole::kOutput:
      return BUFFER_ROLE_OUTPUT;
    case DomainRole::kWorkspace:
      return BUFFER_ROLE_WORKSPACE;
  }
  return BUFFER_ROLE_UNSPECIFIED;
}

}  // namespace

void ToProto(const schedules::GeneratedSource& in, Source* out) {
  out->Clear();
  out->set_target(in.target == schedules::TargetKind::kCuda ? TARGET_KIND_CUDA : TARGET_KIND_HOST);
  out->set_code(in.code);
  for (const schedules::KernelSource& k : in.kernels) {
    Kernel* pk = out->add_kernels();
    pk->set_entry(k.entry);
    LaunchConfig* l = pk->mutable_launch();
    for (int64_t g : k.launch.grid) l->add_grid(g);
    for (int64_t b : k.launch.block) l->add_block(b);
    l->set_dynamic_shared_bytes(k.launch.dynamic_shared_bytes);
    l->set_cooperative(k.launch.cooperative);
    for (const schedules::TensorMapSpec& m : k.launch.tensor_maps) {
      TensorMap* pm = l->add_tensor_maps();
      pm->set_buffer(m.buffer);
      for (int64_t e : m.box) pm->add_box(e);
      pm->set_swizzle_bytes(m.swizzle_bytes);
    }
    for (int p : k.params) pk->add_params(p);
  }
  for (const schedules::ProgramBuffer& pb : in.buffers) {
    Buffer* b = out->add_buffers();
    b->set_name(pb.buffer->name);
    b->set_dtype(schedules::DTypeName(pb.buffer->dtype));
    for (int64_t d : pb.buffer->shape) b->add_shape(d);
    for (int64_t s : pb.buffer->strides) b->add_strides(s);
    b->set_role(ToProtoRole(pb.role));
  }
}

absl::StatusOr<schedules::GeneratedSource> FromProto(const Source& in) {
  schedules::GeneratedSource out;
  switch (in.target()) {
    case TARGET_KIND_HOST:
      out.target = schedules::TargetKind::kHost;
      break;
    case TARGET_KIND_CUDA:
      out.target = schedules::TargetKind::kCuda;
      break;
    default:
      return absl::InvalidArgumentError(
          "Source.target is unset: set it to TARGET_KIND_HOST or TARGET_KIND_CUDA");
  }
  out.code = in.code();
  for (int i = 0; i < in.buffers_size(); ++i) {
    const Buffer& b = in.buffers(i);
    const std::optional<schedules::DType> dtype = schedules::ParseDType(b.dtype());
    if (!dtype.has_value()) {
      return absl::InvalidArgumentError(
          absl::StrCat("Source.buffers[", i, "] ('", b.name(), "') has unknown dtype '", b.dtype(),
                       "': use f32, f16, bf16, f64, i32, i64 or bool"));
    }
    bool ok = false;
    const DomainRole role = FromProtoRole(b.role(), &ok);
    if (!ok) {
      return absl::InvalidArgumentError(
          absl::StrCat("Source.buffers[", i, "] ('", b.name(),
                       "') has no role: set input, output or workspace"));
    }
    if (b.strides_size() != 0 && b.strides_size() != b.shape_size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("Source.buffers[", i, "] ('", b.name(), "') has ", b.shape_size(),
                       " dimensions but ", b.strides_size(), " strides: give one per dimension"));
    }
    // The sizes the worker allocates by: positive extents, strides >= 0, and an element count and
    // span a 64-bit integer can hold and the limit allows (a peer's shape is not trusted).
    for (int d = 0; d < b.shape_size(); ++d) {
      if (b.shape(d) <= 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("Source.buffers[", i, "] ('", b.name(), "') has extent ", b.shape(d),
                         " in dimension ", d, ": extents must be positive"));
      }
    }
    const std::vector<int64_t> shape(b.shape().begin(), b.shape().end());
    if (absl::Status s = schedules::CheckTensorElements(b.name(), shape); !s.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("Source.buffers[", i, "] ('", b.name(), "'): ", s.message()));
    }
    int64_t span = 1;  // elements the allocation spans: 1 + sum of (extent - 1) * stride
    for (int d = 0; d < b.strides_size(); ++d) {
      int64_t reach = 0;
      if (b.strides(d) < 0 || __builtin_mul_overflow(b.shape(d) - 1, b.strides(d), &reach) ||
          __builtin_add_overflow(span, reach, &span) || span > schedules::kMaxTensorElements) {
        return absl::InvalidArgumentError(absl::StrCat(
            "Source.buffers[", i, "] ('", b.name(), "') has stride ", b.strides(d),
            " in dimension ", d, ": strides must be >= 0 and span at most 2^40 elements"));
      }
    }
    out.buffers.push_back(schedules::ProgramBuffer{
        schedules::MakeBuffer(b.name(), *dtype, {b.shape().begin(), b.shape().end()},
                              schedules::MemScope::kGlobal,
                              {b.strides().begin(), b.strides().end()}),
        role});
  }
  for (int i = 0; i < in.kernels_size(); ++i) {
    const Kernel& k = in.kernels(i);
    schedules::KernelSource ks;
    ks.entry = k.entry();
    if (k.has_launch()) {
      const LaunchConfig& l = k.launch();
      if (l.grid_size() != 3 || l.block_size() != 3) {
        return absl::InvalidArgumentError(
            absl::StrCat("Source.kernels[", i, "] ('", k.entry(), "') has ", l.grid_size(),
                         " grid and ", l.block_size(), " block extents: give 3 of each"));
      }
      for (int d = 0; d < 3; ++d) {
        ks.launch.grid[d] = l.grid(d);
        ks.launch.block[d] = l.block(d);
      }
      ks.launch.dynamic_shared_bytes = l.dynamic_shared_bytes();
      ks.launch.cooperative = l.cooperative();
      for (const TensorMap& m : l.tensor_maps()) {
        ks.launch.tensor_maps.push_back(
            {m.buffer(), {m.box().begin(), m.box().end()}, m.swizzle_bytes()});
      }
    }
    for (int p : k.params()) {
      if (p < 0 || p >= in.buffers_size()) {
        return absl::InvalidArgumentError(
            absl::StrCat("Source.kernels[", i, "] ('", k.entry(), "') names buffer ", p, " of ",
                         in.buffers_size(), ": parameter indices index Source.buffers"));
      }
      ks.params.push_back(p);
    }
    out.kernels.push_back(std::move(ks));
  }
  if (absl::Status s = schedules::CheckTensorMaps(out); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("Source: ", s.message()));
  }
  return out;
}

void ToProto(const measure::TimingOptions& in, TimingOptions* out) {
  out->set_warmup_runs(in.warmup_runs);
  out->set_min_repeats(in.min_repeats);
  out->set_max_repeats(in.max_repeats);
  out->set_min_total_ms(in.min_total_ms);
  out->set_flush_cache(in.flush_cache);
  out->set_max_wall_ms(in.max_wall_ms);
  out->set_no_kernel_times(!in.kernel_times);
  out->set_hardware_counters(in.hardware_counters);
  out->set_median_precision(in.median_precision);
}

absl::StatusOr<measure::TimingOptions> FromProto(const TimingOptions& in) {
  if (in.max_repeats() < 1 || in.min_repeats() > in.max_repeats() || in.warmup_runs() < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "TimingOptions: warmup_runs ", in.warmup_runs(), ", min_repeats ", in.min_repeats(),
        ", max_repeats ", in.max_repeats(),
        ": max_repeats must be at least 1 and at least min_repeats, warmup_runs at least 0"));
  }
  if (!measure::ValidMedianPrecision(in.median_precision())) {
    return absl::InvalidArgumentError(
        absl::StrCat("TimingOptions: median_precision ", in.median_precision(),
                     " is not a fraction: give 0 (off) or a value in (0, 1), e.g. 0.005"));
  }
  measure::TimingOptions out;
  out.warmup_runs = in.warmup_runs();
  out.min_repeats = in.min_repeats();
  out.max_repeats = in.max_repeats();
  out.min_total_ms = in.min_total_ms();
  out.flush_cache = in.flush_cache();
  if (in.max_wall_ms() > 0) out.max_wall_ms = in.max_wall_ms();
  out.kernel_times = !in.no_kernel_times();
  out.hardware_counters = in.hardware_counters();
  out.median_precision = in.median_precision();
  return out;
}

void ToProto(const measure::ScreenOptions& in, ScreenOptions* out) {
  ToProto(in.timing, out->mutable_timing());
  out->set_best_ms(in.best_ms);
  out->set_margin(in.margin);
}

absl::StatusOr<measure::ScreenOptions> FromProto(const ScreenOptions& in) {
  absl::StatusOr<measure::TimingOptions> timing = FromProto(in.timing());
  if (!timing.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("ScreenOptions.timing: ", timing.status().message()));
  }
  if (!(in.best_ms() >= 0 && std::isfinite(in.best_ms())) ||
      !(in.margin() >= 0 && std::isfinite(in.margin()))) {
    return absl::InvalidArgumentError(absl::StrCat("ScreenOptions: best_ms ", in.best_ms(),
                                                   ", margin ", in.margin(),
                                                   ": both must be finite and at least 0"));
  }
  measure::ScreenOptions out;
  out.enabled = true;
  out.timing = *timing;
  out.best_ms = in.best_ms();
  out.margin = in.margin();
  return out;
}

TimingKind ToProto(measure::TimingKind in) {
  return in == measure::TimingKind::kScreened ? TIMING_KIND_SCREENED : TIMING_KIND_CONFIRMED;
}

// Unspecified (a worker from before screening) and unknown values read as confirmed: until
// screening, every timing was a full one.
measure::TimingKind FromProto(TimingKind in) {
  return in == TIMING_KIND_SCREENED ? measure::TimingKind::kScreened
                                    : measure::TimingKind::kConfirmed;
}

MeasureStatus ToProto(measure::MeasureStatus in) {
  switch (in) {
    case measure::MeasureStatus::kOk:
      return MEASURE_STATUS_OK;
    case measure::MeasureStatus::kCompileError:
      return MEASURE_STATUS_COMPILE_ERROR;
    case measure::MeasureStatus::kVerifyFailed:
      return MEASURE_STATUS_VERIFY_FAILED;
    case measure::MeasureStatus::kRuntimeError:
      return MEASURE_STATUS_RUNTIME_ERROR;
    case measure::MeasureStatus::kTimeout:
      return MEASURE_STATUS_TIMEOUT;
    case measure::MeasureStatus::kDeviceLimitExceeded:
      return MEASURE_STATUS_DEVICE_LIMIT_EXCEEDED;
    case measure::MeasureStatus::kWorkerError:
      return MEASURE_STATUS_WORKER_ERROR;
  }
  return MEASURE_STATUS_UNSPECIFIED;
}

measure::MeasureStatus FromProto(MeasureStatus in) {
  switch (in) {
    case MEASURE_STATUS_OK:
      return measure::MeasureStatus::kOk;
    case MEASURE_STATUS_COMPILE_ERROR:
      return measure::MeasureStatus::kCompileError;
    case MEASURE_STATUS_VERIFY_FAILED:
      return measure::MeasureStatus::kVerifyFailed;
    case MEASURE_STATUS_RUNTIME_ERROR:
      return measure::MeasureStatus::kRuntimeError;
    case MEASURE_STATUS_TIMEOUT:
      return measure::MeasureStatus::kTimeout;
    case MEASURE_STATUS_DEVICE_LIMIT_EXCEEDED:
      return measure::MeasureStatus::kDeviceLimitExceeded;
    default:
      return measure::MeasureStatus::kWorkerError;
  }
}

absl::Status ToProto(const measure::Artifact& in, Artifact* out) {
  absl::StatusOr<schedules::GeneratedSource> source =
      schedules::SourceFromLaunchJson(in.launch_json, in.source);
  if (!source.ok()) return source.status();
  out->set_codegen_version(in.codegen_version);
  ToProto(*source, out->mutable_source());
  out->set_binary_format(in.binary_format);
  out->set_binary_arch(in.binary_arch);
  out->set_binary(in.binary);
  out->set_compile_options(in.compile_options);
  out->set_compiler_version(in.compiler_version);
  out->set_driver_version(in.driver_version);
  out->set_device_arch(in.device_arch);
  out->set_multiprocessor_count(in.multiprocessor_count);
  return absl::OkStatus();
}

absl::StatusOr<measure::Artifact> FromProto(const Artifact& in) {
  if (in.codegen_version() <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("artifact: codegen_version ", in.codegen_version(), " is not positive"));
  }
  absl::StatusOr<schedules::GeneratedSource> source = FromProto(in.source());
  if (!source.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("artifact: its source: ", source.status().message()));
  }
  measure::Artifact out;
  out.codegen_version = in.codegen_version();
  out.source = source->code;
  out.launch_json = schedules::SourceLaunchToJson(*source);
  out.binary_format = in.binary_format();
  out.binary_arch = in.binary_arch();
  out.binary = in.binary();
  out.compile_options = in.compile_options();
  out.compiler_version = in.compiler_version();
  out.driver_version = in.driver_version();
  out.device_arch = in.device_arch();
  out.multiprocessor_count = in.multiprocessor_count();
  return out;
}

void ToProto(const measure::Measurement& in, MeasureResult* out) {
  out->set_status(ToProto(in.status));
  out->set_error(in.error);
  out->clear_repeats_ms();
  for (double ms : in.timings.repeats_ms) out->add_repeats_ms(ms);
  out->set_median_ms(in.timings.median_ms);
  out->set_min_ms(in.timings.min_ms);
  out->set_max_ms(in.timings.max_ms);
  out->clear_kernel_repeats_ms();
  for (double ms : in.timings.kernel_repeats_ms) out->add_kernel_repeats_ms(ms);
  out->set_kernel_median_ms(in.timings.kernel_median_ms);
  out->set_timing_note(in.timings.note);
  out->set_timing_kind(in.ok() ? ToProto(in.timings.kind) : TIMING_KIND_UNSPECIFIED);
  out->set_screen_median_ms(in.timings.screen_median_ms);
  out->set_screen_repeats(in.timings.screen_repeats);
  if (in.worker_times != measure::WorkerTimes()) {
    WorkerTimes* w = out->mutable_worker_times();
    w->set_queue_ms(in.worker_times.queue_ms);
    w->set_compile_wait_ms(in.worker_times.compile_wait_ms);
    w->set_timing_ms(in.worker_times.timing_ms);
    w->set_device_ms(in.worker_times.device_ms);
  }
  if (in.timings.counters) {
    HardwareCounters* c = out->mutable_counters();
    c->set_dram_read_bytes(in.timings.counters->dram_read_bytes);
    c->set_dram_write_bytes(in.timings.counters->dram_write_bytes);
    c->set_achieved_occupancy(in.timings.counters->achieved_occupancy);
  }
  out->clear_device_state();
  if (in.timings.device_state.known()) {
    DeviceState* d = out->mutable_device_state();
    d->set_sm_clock_mhz(in.timings.device_state.sm_clock_mhz);
    d->set_memory_clock_mhz(in.timings.device_state.memory_clock_mhz);
    d->set_temperature_c(in.timings.device_state.temperature_c);
  }
  out->set_compile_ms(in.compile_ms);
  out->set_compile_cache_hit(in.compile_cache_hit);
  out->set_verify_ms(in.verify_ms);
  out->clear_kernels();
  for (const measure::KernelResources& k : in.kernels) {
    KernelResources* pk = out->add_kernels();
    pk->set_entry(k.entry);
    pk->set_registers(k.registers);
    pk->set_static_shared_bytes(k.static_shared_bytes);
    pk->set_dynamic_shared_bytes(k.dynamic_shared_bytes);
    pk->set_local_bytes_per_thread(k.local_bytes_per_thread);
  }
  out->set_worker_id(in.worker_id);
  out->set_device(in.device);
  out->set_device_name(in.device_name);
  out->clear_artifact();
  if (in.artifact.stored() && !ToProto(in.artifact, out->mutable_artifact()).ok()) {
    out->clear_artifact();
  }
}

measure::Measurement FromProto(const MeasureResult& in) {
  measure::Measurement out;
  out.status = FromProto(in.status());
  out.error = in.error();
  out.timings.repeats_ms.assign(in.repeats_ms().begin(), in.repeats_ms().end());
  out.timings.median_ms = in.median_ms();
  out.timings.min_ms = in.min_ms();
  out.timings.max_ms = in.max_ms();
  out.timings.kernel_repeats_ms.assign(in.kernel_repeats_ms().begin(),
                                       in.kernel_repeats_ms().end());
  out.timings.kernel_median_ms = in.kernel_median_ms();
  out.timings.note = in.timing_note();
  out.timings.kind = FromProto(in.timing_kind());
  out.timings.screen_median_ms = in.screen_median_ms();
  out.timings.screen_repeats = in.screen_repeats();
  if (in.has_worker_times()) {
    out.worker_times =
        measure::WorkerTimes{in.worker_times().queue_ms(), in.worker_times().compile_wait_ms(),
                             in.worker_times().timing_ms(), in.worker_times().device_ms()};
  }
  if (in.has_counters()) {
    out.timings.counters =
        measure::HardwareCounters{in.counters().dram_read_bytes(), in.counters().dram_write_bytes(),
                                  in.counters().achieved_occupancy()};
  }
  if (in.has_device_state()) {
    out.timings.device_state =
        measure::DeviceState{in.device_state().sm_clock_mhz(), in.device_state().memory_clock_mhz(),
                             in.device_state().temperature_c()};
  }
  out.compile_ms = in.compile_ms();
  out.compile_cache_hit = in.compile_cache_hit();
  out.verify_ms = in.verify_ms();
  for (const KernelResources& k : in.kernels()) {
    out.kernels.push_back(
        measure::KernelResources{k.entry(), k.registers(), k.static_shared_bytes(),
                                 k.dynamic_shared_bytes(), k.local_bytes_per_thread()});
  }
  out.worker_id = in.worker_id();
  out.device = in.device();
  out.device_name = in.device_name();
  if (in.has_artifact()) {
    absl::StatusOr<measure::Artifact> artifact = FromProto(in.artifact());
    if (!artifact.ok()) {
      measure::Measurement refused;
      refused.status = measure::MeasureStatus::kWorkerError;
      refused.error =
          absl::StrCat("the worker sent a malformed artifact: ", artifact.status().message());
      refused.worker_id = out.worker_id;
      refused.device = out.device;
      refused.device_name = out.device_name;
      return refused;
    }
    out.artifact = *std::move(artifact);
  }
  return out;
}

}  // namespace tessel::proto
