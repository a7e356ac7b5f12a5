#include "absl/strings/str_cat.h"
#include "schedules/lower/passes.h"

namespace tessel::schedules {

// An attached shared or local stage computes its region (schedules/schedule/region.h) into a buffer
// of the region's shape (with storage_align strides), whose origin is the region's minimum.
absl::Status RealizeBuffers(LoweringState* state_ptr) {
  LoweringState& state = *state_ptr;
  for (size_t i = 0; i < state.stages.size(); ++i) {
    const Stage& s = state.stages[i];
    if (s.inlined()) continue;
    const bool attached = s.attach.kind == AttachPoint::Kind::kAt;
    if (!attached || s.buffer->scope == MemScope::kGlobal) {
      if (!s.aligns.empty()) {
        return absl::FailedPreconditionError(absl::StrCat(
            "stage ", s.name, " is in global memory; storage_align applies to shared/local"));
      }
      continue;
    }
    const StageBound& b = state.bounds[i];
    std::vector<int64_t> shape(b.root_extent.begin(), b.root_extent.begin() + s.axes.size());
    std::vector<int64_t> strides;
    if (!s.aligns.empty()) {
      strides.assign(shape.size(), 1);
      for (int d = static_cast<int>(shape.size()) - 2; d >= 0; --d) {
        int64_t st = strides[d + 1] * shape[d + 1];
        for (const StorageAlign& a : s.aligns) {
          if (a.axis == d) {
            int64_t rem = ((st - a.offset) % a.factor + a.factor) % a.factor;
            if (rem != 0) st += a.factor - rem;
          }
        }
        strides[d] = st;
      }
    }
    Realized r;
    r.buffer = MakeBuffer(s.buffer->name, s.buffer->dtype, shape, s.buffer->scope, strides);
    r.offset.assign(b.root_min.begin(), b.root_min.begin() + s.axes.size());
    state.realized[s.buffer.get()] = r;
  }
  return absl::OkStatus();
}

}  // namespace tessel::schedules
