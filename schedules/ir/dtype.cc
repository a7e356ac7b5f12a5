#include "schedules/ir/dtype.h"

namespace tessel::schedules {

const char* DTypeName(DType t) {
  switch (t) {
    case DType::kBool:
      return "bool";
    case DType::kInt32:
      return "i32";
    case DType::kInt64:
      return "i64";
    case DType::kFloat16:
      return "f16";
    case DType::kBFloat16:
      return "bf16";
    case DType::kFloat32:
      return "f32";
    case DType::kFloat64:
      return "f64";
  }
  return "?";
}

std::optional<DType> ParseDType(std::string_view name) {
  for (DType t : {DType::kBool, DType::kInt32, DType::kInt64, DType::kFloat16, DType::kBFloat16,
                  DType::kFloat32, DType::kFloat64}) {
    if (DTypeName(t) == name) return t;
  }
  return std::nullopt;
}

int DTypeBytes(DType t) {
  switch (t) {
    case DType::kBool:
      return 1;
    case DType::kInt32:
      return 4;
    case DType::kInt64:
      return 8;
    case DType::kFloat16:
      return 2;
    case DType::kBFloat16:
      return 2;
    case DType::kFloat32:
      return 4;
    case DType::kFloat64:
      return 8;
  }
  return 0;
}

bool IsFloat(DType t) {
  return t == DType::kFloat16 || t == DType::kBFloat16 || t == DType::kFloat32 ||
         t == DType::kFloat64;
}
bool IsInt(DType t) { return t == DType::kInt32 || t == DType::kInt64; }

}  // namespace tessel::schedules
