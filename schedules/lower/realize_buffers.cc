#include "absl/strings/str_cat.h"
#include "schedules/lower/passes.h"

namespace tessel::schedules {

namespace {

// The swizzle width a stage annotated kStorageSwizzle gets, checked against its realized shape
// (0: none; with kSwizzleWidest, where no width fits).
absl::StatusOr<int64_t> SwizzleOf(const Stage& s, const std::vector<int64_t>& shape, bool cuda,
                                  int64_t bytes) {
  auto refuse = [&](const std::string& why) {
    return absl::FailedPreconditionError(absl::StrCat(
        "stage ", s.name, " is annotated ", kStorageSwizzle, " = ", bytes, ", but ", why));
  };
  if (bytes == 0) return 0;
  if (!cuda) return refuse("the swizzle is a layout of CUDA shared memory; drop it on the host");
  if (bytes != 32 && bytes != 64 && bytes != 128 && bytes != kSwizzleWidest) {
    return refuse(absl::StrCat("the tensor cores' swizzle widths are 32, 64 and 128 bytes (",
                               kSwizzleWidest, ": the widest that fits)"));
  }
  if (s.buffer->scope != MemScope::kShared) {
    return refuse(absl::StrCat("it is in ", MemScopeName(s.buffer->scope),
                               " memory; only shared buffers are swizzled"));
  }
  if (bytes == kSwizzleWidest) {
    if (shape.size() < 2) return 0;
    for (int64_t w : {128, 64, 32}) {
      if (shape.back() % (w / DTypeBytes(s.buffer->dtype)) == 0) return w;
    }
    return 0;
  }
  if (!s.aligns.empty()) {
    return refuse("it is also padded with storage_align; a buffer is padded or swizzled");
  }
  const int64_t atom = bytes / DTypeBytes(s.buffer->dtype);
  if (shape.size() < 2 || atom == 0 || shape.back() % atom != 0) {
    return refuse(absl::StrCat("its region's contiguous extent (", shape.empty() ? 0 : shape.back(),
                               ") is no multiple of the ", atom,
                               " elements of a swizzle row; swizzle a narrower width or tile "
                               "the contiguous axis to a multiple"));
  }
  return bytes;
}

}  // namespace

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
    int64_t swizzle = 0;
    if (auto it = s.annotations.find(kStorageSwizzle); it != s.annotations.end()) {
      absl::StatusOr<int64_t> bytes = SwizzleOf(s, shape, state.target.is_cuda(), it->second);
      if (!bytes.ok()) return bytes.status();
      swizzle = *bytes;
    }
    // A swizzled buffer is compact (kSwizzleWidest replaces the padding).
    std::vector<int64_t> strides;
    if (!s.aligns.empty() && swizzle == 0) {
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
    if (swizzle != 0) {
      auto b = std::make_shared<Buffer>(*r.buffer);
      b->swizzle_bytes = swizzle;
      r.buffer = b;
    }
    r.offset.assign(b.root_min.begin(), b.root_min.begin() + s.axes.size());
    state.realized[s.buffer.get()] = r;
  }
  return absl::OkStatus();
}

}  // namespace tessel::schedules
