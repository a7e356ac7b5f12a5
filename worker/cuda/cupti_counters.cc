#include "worker/cuda/cupti_counters.h"

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "schedules/util/status_macros.h"
#ifdef TESSEL_HAVE_CUPTI
#include <cupti.h>
#include <cupti_profiler_host.h>
#include <cupti_profiler_target.h>
#include <cupti_range_profiler.h>
#include <cupti_target.h>
#endif

namespace tessel::worker {

std::vector<std::string> HardwareCounterMetrics() {
  return {kDramReadBytesMetric, kDramWriteBytesMetric, kAchievedOccupancyMetric};
}

absl::StatusOr<measure::HardwareCounters> HardwareCountersFromValues(
    const std::map<std::string, double>& values) {
  auto get = [&](const char* metric) -> absl::StatusOr<double> {
    auto it = values.find(metric);
    if (it == values.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("hardware counter '", metric,
                       "' was not collected: create the CuptiCounters with "
                       "HardwareCounterMetrics()"));
    }
    if (!std::isfinite(it->second)) {
      return absl::DataLossError(absl::StrCat("hardware counter '", metric, "' is ", it->second,
                                              ", not a number of the region: collect it again"));
    }
    return it->second;
  };
  measure::HardwareCounters c;
  TESSEL_ASSIGN_OR_RETURN(c.dram_read_bytes, get(kDramReadBytesMetric));
  TESSEL_ASSIGN_OR_RETURN(c.dram_write_bytes, get(kDramWriteBytesMetric));
  TESSEL_ASSIGN_OR_RETURN(c.achieved_occupancy, get(kAchievedOccupancyMetric));
  return c;
}

#ifdef TESSEL_HAVE_CUPTI

struct CuptiCounters::Cupti {
  CUpti_Profiler_Host_Object* host = nullptr;
  CUpti_RangeProfiler_Object* profiler = nullptr;
  std::vector<uint8_t> availability;
  std::vector<uint8_t> config;
  std::vector<uint8_t> counter_data;
  std::vector<const char*> names;  // into CuptiCounters::metrics_
};

namespace {

// A CUPTI parameter struct, zeroed, with its size set.
template <typename T>
T Params(size_t struct_size) {
  T p{};
  p.structSize = struct_size;
  return p;
}

std::string ResultString(CUptiResult r) {
  const char* s = nullptr;
  cuptiGetResultString(r, &s);
  return s != nullptr ? s : absl::StrCat("CUptiResult ", static_cast<int>(r));
}

// A failed CUPTI call as a Status whose message says what to do.
absl::Status CuptiCallError(CUptiResult r, const char* call) {
  const std::string what =
      absl::StrCat("CUPTI hardware counters: ", call, " failed: ", ResultString(r));
  switch (r) {
    case CUPTI_ERROR_INSUFFICIENT_PRIVILEGES:
      return absl::PermissionDeniedError(absl::StrCat(
          what,
          " (this user may not read GPU performance counters: run as root, or let every user "
          "profile by loading the nvidia module with NVreg_RestrictProfilingToAdminUsers=0, see "
          "https://developer.nvidia.com/ERR_NVGPUCTRPERM; in a container also add "
          "--cap-add=SYS_ADMIN)"));
    case CUPTI_ERROR_NOT_SUPPORTED:
    case CUPTI_ERROR_VIRTUALIZED_DEVICE_NOT_SUPPORTED:
    case CUPTI_ERROR_CMP_DEVICE_NOT_SUPPORTED:
    case CUPTI_ERROR_NOT_COMPATIBLE:
      return absl::FailedPreconditionError(absl::StrCat(
          what, " (this GPU or its setup cannot be profiled; measure without hardware counters)"));
    case CUPTI_ERROR_INVALID_METRIC_NAME:
      return absl::InvalidArgumentError(
          absl::StrCat(what, " (a metric name is not known on this GPU)"));
    default:
      return absl::UnavailableError(absl::StrCat(
          what,
          " (check that no other profiler such as ncu or nsys holds the GPU and that libcupti "
          "and libnvperf_host from the CUDA toolkit match the driver)"));
  }
}

#define TESSEL_CUPTI_RETURN_IF_ERROR(call, params)        \
  do {                                                    \
    const CUptiResult tessel_cupti_result = call(params); \
    if (tessel_cupti_result != CUPTI_SUCCESS) {           \
      return CuptiCallError(tessel_cupti_result, #call);  \
    }                                                     \
  } while (false)

const char* SupportLevel(CUpti_Profiler_Support_Level level) {
  switch (level) {
    case CUPTI_PROFILER_CONFIGURATION_SUPPORTED:
      return "supported";
    case CUPTI_PROFILER_CONFIGURATION_DISABLED:
      return "disabled";
    case CUPTI_PROFILER_CONFIGURATION_UNSUPPORTED:
      return "unsupported";
    default:
      return "unknown";
  }
}

// Whether range profiling works on `device`; FailedPrecondition naming what does not, if not.
absl::Status CheckDeviceSupported(CUdevice device) {
  auto p = Params<CUpti_Profiler_DeviceSupported_Params>(
      CUpti_Profiler_DeviceSupported_Params_STRUCT_SIZE);
  p.cuDevice = device;
  p.api = CUPTI_PROFILER_RANGE_PROFILING;
  TESSEL_CUPTI_RETURN_IF_ERROR(cuptiProfilerDeviceSupported, &p);
  if (p.isSupported == CUPTI_PROFILER_CONFIGURATION_SUPPORTED) return absl::OkStatus();
  std::vector<std::string> why;
  auto add = [&](const char* what, CUpti_Profiler_Support_Level level) {
    if (level != CUPTI_PROFILER_CONFIGURATION_SUPPORTED) {
      why.push_back(absl::StrCat(what, " ", SupportLevel(level)));
    }
  };
  add("architecture", p.architecture);
  add("SLI", p.sli);
  add("vGPU", p.vGpu);
  add("confidential compute", p.confidentialCompute);
  add("CMP", p.cmp);
  add("WSL", p.wsl);
  return absl::FailedPreconditionError(absl::StrCat(
      "CUPTI hardware counters: GPU ", device, " cannot be range-profiled (",
      why.empty() ? "no reason given" : absl::StrJoin(why, ", "),
      "); measure without hardware counters, or on a GPU of compute capability 7.5 or newer "
      "without vGPU, SLI, confidential compute or WSL"));
}

// The part of a metric before its first '.', e.g. "dram__bytes_read" of "dram__bytes_read.sum".
std::string BaseName(const std::string& metric) { return metric.substr(0, metric.find('.')); }

// Fails with InvalidArgument, listing the chip's base metrics of the same unit (the prefix before
// "__"), when `metric` is not known on the chip.
absl::Status CheckMetric(CUpti_Profiler_Host_Object* host, const std::string& chip,
                         const std::string& metric) {
  auto p = Params<CUpti_Profiler_Host_GetMetricProperties_Params>(
      CUpti_Profiler_Host_GetMetricProperties_Params_STRUCT_SIZE);
  p.pHostObject = host;
  p.pMetricName = metric.c_str();
  if (cuptiProfilerHostGetMetricProperties(&p) == CUPTI_SUCCESS) return absl::OkStatus();
  const std::string unit = metric.substr(
      0, metric.find("__") == std::string::npos ? BaseName(metric).size() : metric.find("__") + 2);
  std::vector<std::string> similar;
  for (CUpti_MetricType type :
       {CUPTI_METRIC_TYPE_COUNTER, CUPTI_METRIC_TYPE_RATIO, CUPTI_METRIC_TYPE_THROUGHPUT}) {
    auto b = Params<CUpti_Profiler_Host_GetBaseMetrics_Params>(
        CUpti_Profiler_Host_GetBaseMetrics_Params_STRUCT_SIZE);
    b.pHostObject = host;
    b.metricType = type;
    if (cuptiProfilerHostGetBaseMetrics(&b) != CUPTI_SUCCESS) continue;
    for (size_t i = 0; i < b.numMetrics; ++i) {
      if (!unit.empty() && absl::StartsWith(b.ppMetricNames[i], unit)) {
        similar.push_back(b.ppMetricNames[i]);
      }
    }
  }
  constexpr size_t kMaxListed = 24;
  const size_t listed = std::min(similar.size(), kMaxListed);
  return absl::InvalidArgumentError(absl::StrCat(
      "CUPTI hardware counters: unknown metric '", metric, "' on chip ", chip, "; ",
      similar.empty() ? "no base metric of this chip starts with '" + unit + "'"
                      : absl::StrCat("base metrics starting with '", unit, "': ",
                                     absl::StrJoin(similar.begin(), similar.begin() + listed, ", "),
                                     similar.size() > listed ? ", ..." : ""),
      " (append a rollup such as .sum, .avg or .max, or a submetric such as "
      ".pct_of_peak_sustained_active)"));
}

absl::Status InitializeProfilerOnce() {
  static const absl::Status* status = [] {
    auto p = Params<CUpti_Profiler_Initialize_Params>(CUpti_Profiler_Initialize_Params_STRUCT_SIZE);
    const CUptiResult r = cuptiProfilerInitialize(&p);
    return new absl::Status(r == CUPTI_SUCCESS ? absl::OkStatus()
                                               : CuptiCallError(r, "cuptiProfilerInitialize"));
  }();
  return *status;
}

}  // namespace

CuptiCounters::CuptiCounters() : cupti_(std::make_unique<Cupti>()) {}

CuptiCounters::~CuptiCounters() {
  if (cupti_ == nullptr) return;
  if (cupti_->profiler != nullptr) {
    if (in_pass_) {
      auto pop = Params<CUpti_RangeProfiler_PopRange_Params>(
          CUpti_RangeProfiler_PopRange_Params_STRUCT_SIZE);
      pop.pRangeProfilerObject = cupti_->profiler;
      cuptiRangeProfilerPopRange(&pop);
      auto stop =
          Params<CUpti_RangeProfiler_Stop_Params>(CUpti_RangeProfiler_Stop_Params_STRUCT_SIZE);
      stop.pRangeProfilerObject = cupti_->profiler;
      cuptiRangeProfilerStop(&stop);
    }
    auto p =
        Params<CUpti_RangeProfiler_Disable_Params>(CUpti_RangeProfiler_Disable_Params_STRUCT_SIZE);
    p.pRangeProfilerObject = cupti_->profiler;
    cuptiRangeProfilerDisable(&p);
  }
  if (cupti_->host != nullptr) {
    auto p = Params<CUpti_Profiler_Host_Deinitialize_Params>(
        CUpti_Profiler_Host_Deinitialize_Params_STRUCT_SIZE);
    p.pHostObject = cupti_->host;
    cuptiProfilerHostDeinitialize(&p);
  }
}

absl::StatusOr<std::unique_ptr<CuptiCounters>> CuptiCounters::Create(
    CUcontext ctx, const std::vector<std::string>& metrics) {
  if (const char* off = std::getenv("TESSEL_NO_CUPTI"); off != nullptr && off[0] == '1') {
    return absl::UnavailableError(
        "CUPTI hardware counters are turned off by TESSEL_NO_CUPTI=1 (unset it to collect them)");
  }
  if (ctx == nullptr) {
    return absl::InvalidArgumentError(
        "CUPTI hardware counters need a CUDA context: pass the context the region's kernels run "
        "in (current on this thread), not null");
  }
  if (metrics.empty()) {
    return absl::InvalidArgumentError(
        "CUPTI hardware counters: no metric asked for; name at least one, e.g. "
        "HardwareCounterMetrics()");
  }
  for (const std::string& m : metrics) {
    if (m.empty()) {
      return absl::InvalidArgumentError(
          "CUPTI hardware counters: an empty metric name was asked for; remove it");
    }
  }
  TESSEL_RETURN_IF_ERROR(InitializeProfilerOnce());

  std::unique_ptr<CuptiCounters> c(new CuptiCounters());
  c->ctx_ = ctx;
  c->metrics_ = metrics;
  Cupti& k = *c->cupti_;
  for (const std::string& m : c->metrics_) k.names.push_back(m.c_str());

  uint32_t device = 0;
  if (CUptiResult r = cuptiGetDeviceId(ctx, &device); r != CUPTI_SUCCESS) {
    return CuptiCallError(r, "cuptiGetDeviceId");
  }
  TESSEL_RETURN_IF_ERROR(CheckDeviceSupported(static_cast<CUdevice>(device)));

  auto chip = Params<CUpti_Device_GetChipName_Params>(CUpti_Device_GetChipName_Params_STRUCT_SIZE);
  chip.deviceIndex = device;
  TESSEL_CUPTI_RETURN_IF_ERROR(cuptiDeviceGetChipName, &chip);
  c->chip_ = chip.pChipName != nullptr ? chip.pChipName : "";

  auto avail = Params<CUpti_Profiler_GetCounterAvailability_Params>(
      CUpti_Profiler_GetCounterAvailability_Params_STRUCT_SIZE);
  avail.ctx = ctx;
  TESSEL_CUPTI_RETURN_IF_ERROR(cuptiProfilerGetCounterAvailability, &avail);
  k.availability.resize(avail.counterAvailabilityImageSize);
  avail.pCounterAvailabilityImage = k.availability.data();
  TESSEL_CUPTI_RETURN_IF_ERROR(cuptiProfilerGetCounterAvailability, &avail);

  auto host = Params<CUpti_Profiler_Host_Initialize_Params>(
      CUpti_Profiler_Host_Initialize_Params_STRUCT_SIZE);
  host.profilerType = CUPTI_PROFILER_TYPE_RANGE_PROFILER;
  host.pChipName = c->chip_.c_str();
  host.pCounterAvailabilityImage = k.availability.data();
  TESSEL_CUPTI_RETURN_IF_ERROR(cuptiProfilerHostInitialize, &host);
  k.host = host.pHostObject;

  for (const std::string& m : c->metrics_) {
    TESSEL_RETURN_IF_ERROR(CheckMetric(k.host, c->chip_, m));
  }

  auto add = Params<CUpti_Profiler_Host_ConfigAddMetrics_Params>(
      CUpti_Profiler_Host_ConfigAddMetrics_Params_STRUCT_SIZE);
  add.pHostObject = k.host;
  add.ppMetricNames = k.names.data();
  add.numMetrics = k.names.size();
  TESSEL_CUPTI_RETURN_IF_ERROR(cuptiProfilerHostConfigAddMetrics, &add);

  auto size = Params<CUpti_Profiler_Host_GetConfigImageSize_Params>(
      CUpti_Profiler_Host_GetConfigImageSize_Params_STRUCT_SIZE);
  size.pHostObject = k.host;
  TESSEL_CUPTI_RETURN_IF_ERROR(cuptiProfilerHostGetConfigImageSize, &size);
  k.config.resize(size.configImageSize);
  auto image = Params<CUpti_Profiler_Host_GetConfigImage_Params>(
      CUpti_Profiler_Host_GetConfigImage_Params_STRUCT_SIZE);
  image.pHostObject = k.host;
  image.configImageSize = k.config.size();
  image.pConfigImage = k.config.data();
  TESSEL_CUPTI_RETURN_IF_ERROR(cuptiProfilerHostGetConfigImage, &image);

  auto passes = Params<CUpti_Profiler_Host_GetNumOfPasses_Params>(
      CUpti_Profiler_Host_GetNumOfPasses_Params_STRUCT_SIZE);
  passes.configImageSize = k.config.size();
  passes.pConfigImage = k.config.data();
  TESSEL_CUPTI_RETURN_IF_ERROR(cuptiProfilerHostGetNumOfPasses, &passes);
  c->passes_ = static_cast<int>(passes.numOfPasses);

  auto enable =
      Params<CUpti_RangeProfiler_Enable_Params>(CUpti_RangeProfiler_Enable_Params_STRUCT_SIZE);
  enable.ctx = ctx;
  TESSEL_CUPTI_RETURN_IF_ERROR(cuptiRangeProfilerEnable, &enable);
  k.profiler = enable.pRangeProfilerObject;

  auto data = Params<CUpti_RangeProfiler_GetCounterDataSize_Params>(
      CUpti_RangeProfiler_GetCounterDataSize_Params_STRUCT_SIZE);
  data.pRangeProfilerObject = k.profiler;
  data.pMetricNames = k.names.data();
  data.numMetrics = k.names.size();
  data.maxNumOfRanges = 1;
  data.maxNumRangeTreeNodes = 1;
  TESSEL_CUPTI_RETURN_IF_ERROR(cuptiRangeProfilerGetCounterDataSize, &data);
  k.counter_data.resize(data.counterDataSize);
  return c;
}

absl::Status CuptiCounters::Begin() {
  if (in_pass_) {
    return absl::FailedPreconditionError(
        "CuptiCounters::Begin called twice without End; end the pass first");
  }
  if (done_) {
    return absl::FailedPreconditionError(
        "CuptiCounters::Begin after the last pass; call Values() before collecting again");
  }
  Cupti& k = *cupti_;
  if (pass_ == 0) {
    // A new collection: an empty counter data image, and the configuration from pass 0.
    auto init = Params<CUpti_RangeProfiler_CounterDataImage_Initialize_Params>(
        CUpti_RangeProfiler_CounterDataImage_Initialize_Params_STRUCT_SIZE);
    init.pRangeProfilerObject = k.profiler;
    init.counterDataSize = k.counter_data.size();
    init.pCounterData = k.counter_data.data();
    TESSEL_CUPTI_RETURN_IF_ERROR(cuptiRangeProfilerCounterDataImageInitialize, &init);

    auto config = Params<CUpti_RangeProfiler_SetConfig_Params>(
        CUpti_RangeProfiler_SetConfig_Params_STRUCT_SIZE);
    config.pRangeProfilerObject = k.profiler;
    config.configSize = k.config.size();
    config.pConfig = k.config.data();
    config.counterDataImageSize = k.counter_data.size();
    config.pCounterDataImage = k.counter_data.data();
    config.range = CUPTI_UserRange;
    config.replayMode = CUPTI_UserReplay;
    config.maxRangesPerPass = 1;
    config.numNestingLevels = 1;
    config.minNestingLevel = 1;
    config.passIndex = 0;
    config.targetNestingLevel = 1;
    TESSEL_CUPTI_RETURN_IF_ERROR(cuptiRangeProfilerSetConfig, &config);
  }
  auto start =
      Params<CUpti_RangeProfiler_Start_Params>(CUpti_RangeProfiler_Start_Params_STRUCT_SIZE);
  start.pRangeProfilerObject = k.profiler;
  TESSEL_CUPTI_RETURN_IF_ERROR(cuptiRangeProfilerStart, &start);
  auto push = Params<CUpti_RangeProfiler_PushRange_Params>(
      CUpti_RangeProfiler_PushRange_Params_STRUCT_SIZE);
  push.pRangeProfilerObject = k.profiler;
  push.pRangeName = "tessel_region";
  if (CUptiResult r = cuptiRangeProfilerPushRange(&push); r != CUPTI_SUCCESS) {
    auto stop =
        Params<CUpti_RangeProfiler_Stop_Params>(CUpti_RangeProfiler_Stop_Params_STRUCT_SIZE);
    stop.pRangeProfilerObject = k.profiler;
    cuptiRangeProfilerStop(&stop);
    return CuptiCallError(r, "cuptiRangeProfilerPushRange");
  }
  in_pass_ = true;
  return absl::OkStatus();
}

absl::Status CuptiCounters::End() {
  if (!in_pass_) {
    return absl::FailedPreconditionError("CuptiCounters::End without Begin; begin a pass first");
  }
  in_pass_ = false;
  Cupti& k = *cupti_;
  auto pop =
      Params<CUpti_RangeProfiler_PopRange_Params>(CUpti_RangeProfiler_PopRange_Params_STRUCT_SIZE);
  pop.pRangeProfilerObject = k.profiler;
  const CUptiResult popped = cuptiRangeProfilerPopRange(&pop);
  auto stop = Params<CUpti_RangeProfiler_Stop_Params>(CUpti_RangeProfiler_Stop_Params_STRUCT_SIZE);
  stop.pRangeProfilerObject = k.profiler;
  const CUptiResult stopped = cuptiRangeProfilerStop(&stop);
  if (popped != CUPTI_SUCCESS || stopped != CUPTI_SUCCESS) {
    pass_ = 0;  // start the collection over
    return popped != CUPTI_SUCCESS ? CuptiCallError(popped, "cuptiRangeProfilerPopRange")
                                   : CuptiCallError(stopped, "cuptiRangeProfilerStop");
  }
  ++pass_;
  if (stop.isAllPassSubmitted != 0) done_ = true;
  return absl::OkStatus();
}

absl::StatusOr<std::map<std::string, double>> CuptiCounters::Values() {
  if (!done_) {
    return absl::FailedPreconditionError(
        absl::StrCat("CuptiCounters::Values before every pass ran (", pass_, " of ", passes_,
                     "): run the region between Begin and End until done()"));
  }
  done_ = false;
  pass_ = 0;
  Cupti& k = *cupti_;
  auto decode = Params<CUpti_RangeProfiler_DecodeData_Params>(
      CUpti_RangeProfiler_DecodeData_Params_STRUCT_SIZE);
  decode.pRangeProfilerObject = k.profiler;
  TESSEL_CUPTI_RETURN_IF_ERROR(cuptiRangeProfilerDecodeData, &decode);
  if (decode.numOfRangeDropped > 0) {
    return absl::DataLossError(
        absl::StrCat("CUPTI hardware counters: ", decode.numOfRangeDropped,
                     " range(s) dropped while decoding; collect the region again"));
  }
  auto info = Params<CUpti_RangeProfiler_GetCounterDataInfo_Params>(
      CUpti_RangeProfiler_GetCounterDataInfo_Params_STRUCT_SIZE);
  info.pCounterDataImage = k.counter_data.data();
  info.counterDataImageSize = k.counter_data.size();
  TESSEL_CUPTI_RETURN_IF_ERROR(cuptiRangeProfilerGetCounterDataInfo, &info);
  if (info.numTotalRanges < 1) {
    return absl::DataLossError(
        "CUPTI hardware counters: the region recorded no range; launch its kernels on the "
        "profiled context between Begin and End");
  }
  std::vector<double> values(k.names.size(), 0.0);
  auto eval = Params<CUpti_Profiler_Host_EvaluateToGpuValues_Params>(
      CUpti_Profiler_Host_EvaluateToGpuValues_Params_STRUCT_SIZE);
  eval.pHostObject = k.host;
  eval.pCounterDataImage = k.counter_data.data();
  eval.counterDataImageSize = k.counter_data.size();
  eval.rangeIndex = 0;
  eval.ppMetricNames = k.names.data();
  eval.numMetrics = k.names.size();
  eval.pMetricValues = values.data();
  TESSEL_CUPTI_RETURN_IF_ERROR(cuptiProfilerHostEvaluateToGpuValues, &eval);
  std::map<std::string, double> out;
  for (size_t i = 0; i < metrics_.size(); ++i) out[metrics_[i]] = values[i];
  return out;
}

#else  // !TESSEL_HAVE_CUPTI

struct CuptiCounters::Cupti {};

CuptiCounters::CuptiCounters() = default;
CuptiCounters::~CuptiCounters() = default;

namespace {
absl::Status NoCupti() {
  return absl::UnimplementedError(
      "this Tessel was built without CUPTI, so there are no hardware counters: rebuild with the "
      "CUDA 13 toolkit's CUPTI (cupti.h, libcupti) installed");
}
}  // namespace

absl::StatusOr<std::unique_ptr<CuptiCounters>> CuptiCounters::Create(
    CUcontext, const std::vector<std::string>&) {
  return NoCupti();
}
absl::Status CuptiCounters::Begin() { return NoCupti(); }
absl::Status CuptiCounters::End() { return NoCupti(); }
absl::StatusOr<std::map<std::string, double>> CuptiCounters::Values() { return NoCupti(); }

#endif  // TESSEL_HAVE_CUPTI

absl::StatusOr<std::map<std::string, double>> CuptiCounters::Collect(
    const std::function<absl::Status()>& region, const std::function<absl::Status()>& before_pass) {
  // Bounded: CUPTI reports the last pass by isAllPassSubmitted; never loop past what it planned.
  for (int i = 0; i < passes_ + 1 && !done_; ++i) {
    if (before_pass) TESSEL_RETURN_IF_ERROR(before_pass());
    TESSEL_RETURN_IF_ERROR(Begin());
    absl::Status ran = region();
    absl::Status ended = End();
    if (!ran.ok() || !ended.ok()) {  // the next collection starts over
      pass_ = 0;
      done_ = false;
    }
    TESSEL_RETURN_IF_ERROR(ran);
    TESSEL_RETURN_IF_ERROR(ended);
  }
  if (!done_) {
    return absl::InternalError(absl::StrCat(
        "CUPTI hardware counters: the region ran ", passes_ + 1, " times but CUPTI planned ",
        passes_, " pass(es) and has not finished; ask for fewer metrics"));
  }
  return Values();
}

absl::StatusOr<measure::HardwareCounters> CollectHardwareCounters(
    CUcontext ctx, const std::function<absl::Status()>& region,
    const std::function<absl::Status()>& before_pass) {
  TESSEL_ASSIGN_OR_RETURN(std::unique_ptr<CuptiCounters> counters,
                          CuptiCounters::Create(ctx, HardwareCounterMetrics()));
  TESSEL_ASSIGN_OR_RETURN(auto values, counters->Collect(region, before_pass));
  return HardwareCountersFromValues(values);
}

}  // namespace tessel::worker
