#include "server/job_timeline.h"

#include <algorithm>
#include <cmath>
#include <cstddef>

namespace tessel::server {
namespace {

enum Stage {
  kSample,
  kBuild,
  kServerQueue,
  kInFlight,
  kWorkerQueue,
  kDevice,
  kTransit,
  kCompile,
  kCompileWait,
  kVerify,
  kTime,
  kStore,
  kLearn,
  kTotal,
  kStages
};

struct StageName {
  const char* name;
  const char* what;
};

constexpr StageName kNames[kStages] = {
    {"sample", "search: sampling, mutation, lowering, codegen, cost model (per candidate)"},
    {"  build", "of sample: lowering, limit checks, codegen (CPU time over its threads)"},
    {"server queue", "queued at the dispatcher until its batch was sent"},
    {"in flight", "batch sent until the result arrived at the server"},
    {"  worker queue", "batch arrived at the worker until its device started on it"},
    {"  device", "the device's time on it: compile wait, verify, time, child overhead"},
    {"  transit", "in flight - worker queue - device: the stream"},
    {"compile", "the compilation (on the worker's pool, overlapped with measuring)"},
    {"  compile wait", "of device: waiting for the compilation"},
    {"  verify", "of device: checking the output against the reference"},
    {"  time", "of device: screening and, when confirmed, the full measurement"},
    {"store", "the result's transaction in the tuning log"},
    {"learn", "the strategy hearing the result (cost model training included)"},
    {"total", "sample + enqueued until learn ended"},
};

}  // namespace

void JobTimeline::Put(int stage, double ms) {
  if (!(ms >= 0) || !std::isfinite(ms)) return;  // unknown, or a worker's nonsense
  if (values_.empty()) values_.resize(kStages);
  Values& v = values_[static_cast<size_t>(stage)];
  ++v.count;
  v.sum_ms += ms;
  if (v.kept.size() < kMaxValues) v.kept.push_back(static_cast<float>(ms));
}

void JobTimeline::Add(const CandidateStages& c) {
  ++candidates_;
  Put(kSample, c.sample_ms);
  Put(kBuild, c.build_ms);
  Put(kServerQueue, c.server_queue_ms);
  Put(kInFlight, c.in_flight_ms);
  Put(kStore, c.store_ms);
  Put(kLearn, c.learn_ms);
  Put(kTotal, c.total_ms);
  if (c.result == nullptr) return;
  const measure::Measurement& m = *c.result;
  const measure::WorkerTimes& w = m.worker_times;
  if (w.device_ms > 0) {
    Put(kWorkerQueue, w.queue_ms);
    Put(kDevice, w.device_ms);
    Put(kCompileWait, w.compile_wait_ms);
    if (c.in_flight_ms >= 0)
      Put(kTransit, std::max(0.0, c.in_flight_ms - w.queue_ms - w.device_ms));
  }
  if (m.compile_ms > 0 && !m.compile_cache_hit) Put(kCompile, m.compile_ms);
  if (m.verify_ms > 0) Put(kVerify, m.verify_ms);
  if (w.timing_ms > 0) Put(kTime, w.timing_ms);
}

std::vector<TimelineStage> JobTimeline::Stages() const {
  std::vector<TimelineStage> out;
  for (int s = 0; s < kStages; ++s) {
    TimelineStage t;
    t.name = kNames[s].name;
    t.what = kNames[s].what;
    if (!values_.empty()) {
      const Values& v = values_[static_cast<size_t>(s)];
      t.count = v.count;
      t.sum_ms = v.sum_ms;
      if (!v.kept.empty()) {
        std::vector<float> sorted = v.kept;
        const size_t mid = sorted.size() / 2;
        std::nth_element(sorted.begin(), sorted.begin() + static_cast<ptrdiff_t>(mid),
                         sorted.end());
        t.median_ms = sorted[mid];
      }
    }
    out.push_back(std::move(t));
  }
  return out;
}

}  // namespace tessel::server
