#include "worker/daemon/worker_metrics.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace tessel::worker {
namespace {

std::string Label(const std::string& value) {
  std::string out;
  for (char c : value) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

void Metric(std::string* out, const char* name, const char* type, const char* help) {
  absl::StrAppend(out, "# HELP ", name, " ", help, "\n# TYPE ", name, " ", type, "\n");
}

void Value(std::string* out, const std::string& series, double v) {
  absl::StrAppend(out, series, " ", absl::StrFormat("%.10g", v), "\n");
}

}  // namespace

void WorkerMetrics::SetIdentity(const std::string& worker_id, const std::string& server) {
  absl::MutexLock lock(&mu_);
  worker_id_ = worker_id;
  server_ = server;
}

void WorkerMetrics::SetDevices(std::vector<WorkerDeviceInfo> devices) {
  absl::MutexLock lock(&mu_);
  devices_ = std::move(devices);
}

void WorkerMetrics::SetCompileThreads(int threads) {
  absl::MutexLock lock(&mu_);
  compile_threads_ = threads;
}

void WorkerMetrics::SetConnected(bool connected) {
  absl::MutexLock lock(&mu_);
  if (connected && !connected_) ++connects_;
  connected_ = connected;
}

void WorkerMetrics::SetBatchesHeld(int batches) {
  absl::MutexLock lock(&mu_);
  batches_held_ = batches;
}

void WorkerMetrics::OnResult(int ordinal, const measure::Measurement& result,
                             const CompilePoolStats& pool, int child_starts) {
  absl::MutexLock lock(&mu_);
  ++results_[measure::MeasureStatusName(result.status)];
  pool_ = pool;
  child_starts_[ordinal] = child_starts;
  compile_s_sum_ += result.compile_ms / 1000;
  measure_s_sum_ += (result.compile_ms + result.verify_ms) / 1000;
  for (double ms : result.timings.repeats_ms) measure_s_sum_ += ms / 1000;
}

std::string WorkerMetrics::Render() {
  absl::MutexLock lock(&mu_);
  std::string out;
  Metric(&out, "tessel_worker_info", "gauge", "The worker's id and the server it serves.");
  Value(&out,
        absl::StrCat("tessel_worker_info{worker=\"", Label(worker_id_), "\",server=\"",
                     Label(server_), "\"}"),
        1);
  Metric(&out, "tessel_worker_connected", "gauge", "1 while registered with the server.");
  Value(&out, "tessel_worker_connected", connected_ ? 1 : 0);
  Metric(&out, "tessel_worker_connects_total", "counter",
         "Registrations with the server (reconnections included).");
  Value(&out, "tessel_worker_connects_total", static_cast<double>(connects_));
  Metric(&out, "tessel_worker_device_info", "gauge", "The devices the worker measures on.");
  for (const WorkerDeviceInfo& d : devices_) {
    Value(
        &out,
        absl::StrCat("tessel_worker_device_info{device=\"", d.ordinal, "\",kind=\"", Label(d.kind),
                     "\",name=\"", Label(d.name), "\",arch=\"", Label(d.arch), "\"}"),
        1);
  }
  Metric(&out, "tessel_worker_batches_held", "gauge",
         "Batches held (queued and in progress), as of the last heartbeat.");
  Value(&out, "tessel_worker_batches_held", batches_held_);
  Metric(&out, "tessel_worker_compile_threads", "gauge", "Threads of the compile pool.");
  Value(&out, "tessel_worker_compile_threads", compile_threads_);
  Metric(&out, "tessel_worker_compilations_total", "counter", "Compilations run (cache misses).");
  Value(&out, "tessel_worker_compilations_total", static_cast<double>(pool_.compiled));
  Metric(&out, "tessel_worker_compile_cache_hits_total", "counter",
         "Compilations answered from the cache, in memory or on disk.");
  Value(&out, "tessel_worker_compile_cache_hits_total{cache=\"memory\"}",
        static_cast<double>(pool_.memory_hits));
  Value(&out, "tessel_worker_compile_cache_hits_total{cache=\"disk\"}",
        static_cast<double>(pool_.disk_hits));
  const double lookups = static_cast<double>(pool_.compiled + pool_.memory_hits + pool_.disk_hits);
  Metric(&out, "tessel_worker_compile_cache_hit_ratio", "gauge",
         "Share of compile requests answered from the cache.");
  Value(&out, "tessel_worker_compile_cache_hit_ratio",
        lookups > 0 ? (pool_.memory_hits + pool_.disk_hits) / lookups : 0);
  Metric(&out, "tessel_worker_child_restarts_total", "counter",
         "Restarts of each device's measuring process (after a crash, a hang or a poisoned "
         "context).");
  for (const WorkerDeviceInfo& d : devices_) {
    auto it = child_starts_.find(d.ordinal);
    const int starts = it == child_starts_.end() ? 1 : it->second;
    Value(&out, absl::StrCat("tessel_worker_child_restarts_total{device=\"", d.ordinal, "\"}"),
          starts > 1 ? starts - 1 : 0);
  }
  Metric(&out, "tessel_worker_results_total", "counter", "Results sent, by status.");
  for (auto s : {measure::MeasureStatus::kOk, measure::MeasureStatus::kCompileError,
                 measure::MeasureStatus::kVerifyFailed, measure::MeasureStatus::kRuntimeError,
                 measure::MeasureStatus::kTimeout, measure::MeasureStatus::kDeviceLimitExceeded,
                 measure::MeasureStatus::kWorkerError}) {
    auto it = results_.find(measure::MeasureStatusName(s));
    Value(
        &out,
        absl::StrCat("tessel_worker_results_total{status=\"", measure::MeasureStatusName(s), "\"}"),
        it == results_.end() ? 0 : static_cast<double>(it->second));
  }
  Metric(&out, "tessel_worker_measure_seconds_total", "counter",
         "Seconds spent on the candidates sent: compiling, verifying and the timed repeats.");
  Value(&out, "tessel_worker_measure_seconds_total", measure_s_sum_);
  Metric(&out, "tessel_worker_compile_seconds_total", "counter", "Seconds compiling them.");
  Value(&out, "tessel_worker_compile_seconds_total", compile_s_sum_);
  return out;
}

}  // namespace tessel::worker
