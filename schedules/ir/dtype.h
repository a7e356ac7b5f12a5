#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace tessel::schedules {

// Scalar element types. Integers are used for indices (kInt32, kInt64) and predicates (kBool).
enum class DType : uint8_t { kBool, kInt32, kInt64, kFloat16, kBFloat16, kFloat32, kFloat64 };

// "f32", "f16", "bf16", "f64", "i32", "i64", "bool".
const char* DTypeName(DType t);
// Inverse of DTypeName; nullopt for an unknown name.
std::optional<DType> ParseDType(std::string_view name);
int DTypeBytes(DType t);
bool IsFloat(DType t);
bool IsInt(DType t);

}  // namespace tessel::schedules
