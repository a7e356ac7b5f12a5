#include "schedules/ir/buffer.h"

namespace tessel::schedules {

const char* MemScopeName(MemScope s) {
  switch (s) {
    case MemScope::kGlobal:
      return "global";
    case MemScope::kShared:
      return "shared";
    case MemScope::kLocal:
      return "local";
    case MemScope::kFragment:
      return "fragment";
  }
  return "?";
}

bool ParseMemScope(std::string_view name, MemScope* out) {
  for (MemScope s : {MemScope::kGlobal, MemScope::kShared, MemScope::kLocal, MemScope::kFragment}) {
    if (MemScopeName(s) == name) {
      *out = s;
      return true;
    }
  }
  return false;
}

int64_t Buffer::NumElements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::vector<int64_t> Buffer::Strides() const {
  if (!strides.empty()) return strides;
  std::vector<int64_t> s(shape.size(), 1);
  for (int i = static_cast<int>(shape.size()) - 2; i >= 0; --i) s[i] = s[i + 1] * shape[i + 1];
  return s;
}

int64_t Buffer::AllocatedElements() const {
  if (shape.empty()) return 1;
  std::vector<int64_t> s = Strides();
  int64_t last = 0;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == 0) return 0;
    last += (shape[i] - 1) * s[i];
  }
  return last + 1;
}

BufferPtr MakeBuffer(std::string name, DType dtype, std::vector<int64_t> shape, MemScope scope,
                     std::vector<int64_t> strides) {
  auto b = std::make_shared<Buffer>();
  b->name = std::move(name);
  b->dtype = dtype;
  b->shape = std::move(shape);
  b->scope = scope;
  b->strides = std::move(strides);
  return b;
}

BufferPtr Reshaped(const Buffer& b, std::vector<int64_t> shape, std::vector<int64_t> strides) {
  auto out = std::make_shared<Buffer>(b);
  out->shape = std::move(shape);
  out->strides = std::move(strides);
  return out;
}

int64_t SwizzleAtomElements(const Buffer& b) {
  return b.swizzle_bytes > 0 ? b.swizzle_bytes / DTypeBytes(b.dtype) : 0;
}

bool IsLoweringTemporary(std::string_view name) { return name.rfind("tessel_", 0) == 0; }

bool IsRegister(const Buffer& b) {
  return b.scope == MemScope::kLocal && b.shape.empty() && IsLoweringTemporary(b.name);
}

}  // namespace tessel::schedules
