#include "worker/cuda/cupti_kernel_timer.h"

#include <algorithm>
#include <cstdlib>
#include <utility>

#include "absl/strings/str_cat.h"
#ifdef TESSEL_HAVE_CUPTI
#include <cupti.h>
#endif

namespace tessel::worker {
namespace {

#ifdef TESSEL_HAVE_CUPTI
constexpr size_t kBufferBytes = 4 << 20;  // about 15,000 kernel records
constexpr size_t kAlign = 8;

std::string CuptiResultString(CUptiResult r) {
  const char* s = nullptr;
  cuptiGetResultString(r, &s);
  return s != nullptr ? s : absl::StrCat("CUptiResult ", static_cast<int>(r));
}

absl::Status CuptiError(CUptiResult r, const char* call) {
  return absl::UnavailableError(absl::StrCat(
      call, " failed: ", CuptiResultString(r),
      " (CUPTI kernel times are unavailable; the CUDA-event times are still measured: check that "
      "no other profiler such as ncu or nsys is attached and that libcupti matches the driver)"));
}

CuptiKernelTimer* g_timer = nullptr;

void CUPTIAPI BufferRequested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(kAlign, kBufferBytes));
  *size = *buffer != nullptr ? kBufferBytes : 0;
  *max_records = 0;  // as many as fit
}

void CUPTIAPI BufferCompleted(CUcontext context, uint32_t stream_id, uint8_t* buffer, size_t size,
                              size_t valid) {
  CUpti_Activity* record = nullptr;
  while (valid > 0 && cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS) {
    if (record->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL &&
        record->kind != CUPTI_ACTIVITY_KIND_KERNEL) {
      continue;
    }
    const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
    CuptiKernelRecord r;
    r.stream_id = k->streamId;
    r.correlation_id = k->correlationId;
    r.start_ns = k->start;
    r.end_ns = k->end;
    if (g_timer != nullptr) g_timer->Add(r, 0);
  }
  size_t dropped = 0;
  if (cuptiActivityGetNumDroppedRecords(context, stream_id, &dropped) == CUPTI_SUCCESS &&
      dropped > 0 && g_timer != nullptr) {
    g_timer->Add(CuptiKernelRecord{}, dropped);
  }
  (void)size;
  std::free(buffer);
}

absl::StatusOr<CuptiKernelTimer*> Create(CuptiKernelTimer* timer) {
  if (const char* off = std::getenv("TESSEL_NO_CUPTI"); off != nullptr && off[0] == '1') {
    return absl::UnavailableError(
        "CUPTI kernel times are turned off by TESSEL_NO_CUPTI=1 (unset it to collect them)");
  }
  g_timer = timer;
  if (CUptiResult r = cuptiActivityRegisterCallbacks(BufferRequested, BufferCompleted);
      r != CUPTI_SUCCESS) {
    return CuptiError(r, "cuptiActivityRegisterCallbacks");
  }
  if (CUptiResult r = cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
      r != CUPTI_SUCCESS) {
    return CuptiError(r, "cuptiActivityEnable(CONCURRENT_KERNEL)");
  }
  return timer;
}
#endif

}  // namespace

absl::StatusOr<CuptiKernelTimer*> CuptiKernelTimer::Get() {
#ifdef TESSEL_HAVE_CUPTI
  static auto* timer = new CuptiKernelTimer();
  static const absl::StatusOr<CuptiKernelTimer*>* created =
      new absl::StatusOr<CuptiKernelTimer*>(Create(timer));
  return *created;
#else
  return absl::UnimplementedError(
      "this Tessel was built without CUPTI, so there are no kernel times (only CUDA-event times): "
      "rebuild with the CUDA 13 toolkit's CUPTI (cupti.h, libcupti) installed");
#endif
}

void CuptiKernelTimer::Add(const CuptiKernelRecord& record, uint64_t dropped) {
  absl::MutexLock lock(&mu_);
  if (!collecting_) return;
  dropped_ += dropped;
  if (dropped == 0 && record.stream_id == stream_id_) records_.push_back(record);
}

absl::Status CuptiKernelTimer::Begin(CUcontext context, CUstream stream) {
#ifdef TESSEL_HAVE_CUPTI
  uint32_t id = 0;
  if (CUptiResult r = cuptiGetStreamIdEx(context, stream, 0, &id); r != CUPTI_SUCCESS) {
    return CuptiError(r, "cuptiGetStreamIdEx");
  }
  // Deliver (and drop) whatever ran before: verification runs, warm-ups.
  if (CUptiResult r = cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED); r != CUPTI_SUCCESS) {
    return CuptiError(r, "cuptiActivityFlushAll");
  }
  absl::MutexLock lock(&mu_);
  collecting_ = true;
  stream_id_ = id;
  records_.clear();
  dropped_ = 0;
  return absl::OkStatus();
#else
  (void)context;
  (void)stream;
  return Get().status();
#endif
}

absl::StatusOr<std::vector<CuptiKernelRecord>> CuptiKernelTimer::End() {
#ifdef TESSEL_HAVE_CUPTI
  const CUptiResult r = cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  absl::MutexLock lock(&mu_);
  collecting_ = false;
  std::vector<CuptiKernelRecord> out = std::move(records_);
  records_.clear();
  if (r != CUPTI_SUCCESS) return CuptiError(r, "cuptiActivityFlushAll");
  if (dropped_ > 0) {
    return absl::DataLossError(absl::StrCat("CUPTI dropped ", dropped_,
                                            " activity records: kernel times are incomplete and "
                                            "left out (the CUDA-event times are complete)"));
  }
  std::sort(out.begin(), out.end(), [](const CuptiKernelRecord& a, const CuptiKernelRecord& b) {
    return a.start_ns < b.start_ns;
  });
  return out;
#else
  return Get().status();
#endif
}

absl::StatusOr<std::vector<double>> KernelTimesPerRepeat(
    const std::vector<CuptiKernelRecord>& kernels, size_t repeats) {
  if (repeats == 0) return std::vector<double>{};
  if (kernels.empty() || kernels.size() % repeats != 0) {
    return absl::DataLossError(absl::StrCat(
        "CUPTI recorded ", kernels.size(), " kernels for ", repeats,
        " timed repeats, not a multiple: kernel times are left out (the CUDA-event times stand)"));
  }
  const size_t per = kernels.size() / repeats;
  std::vector<double> out(repeats, 0.0);
  for (size_t i = 0; i < kernels.size(); ++i) out[i / per] += kernels[i].duration_ms();
  return out;
}

}  // namespace tessel::worker
