#include "worker/cuda/tensor_map.h"

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace tessel::worker {

namespace {

bool TensorMapType(schedules::DType t, CUtensorMapDataType* out) {
  switch (t) {
    case schedules::DType::kFloat16:
      *out = CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
      return true;
    case schedules::DType::kBFloat16:
      *out = CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
      return true;
    case schedules::DType::kFloat32:
      *out = CU_TENSOR_MAP_DATA_TYPE_FLOAT32;
      return true;
    case schedules::DType::kFloat64:
      *out = CU_TENSOR_MAP_DATA_TYPE_FLOAT64;
      return true;
    case schedules::DType::kInt32:
      *out = CU_TENSOR_MAP_DATA_TYPE_INT32;
      return true;
    case schedules::DType::kInt64:
      *out = CU_TENSOR_MAP_DATA_TYPE_INT64;
      return true;
    case schedules::DType::kBool:
      return false;
  }
  return false;
}

CUtensorMapSwizzle Swizzle(int64_t bytes) {
  switch (bytes) {
    case 32:
      return CU_TENSOR_MAP_SWIZZLE_32B;
    case 64:
      return CU_TENSOR_MAP_SWIZZLE_64B;
    case 128:
      return CU_TENSOR_MAP_SWIZZLE_128B;
    default:
      return CU_TENSOR_MAP_SWIZZLE_NONE;
  }
}

}  // namespace

absl::StatusOr<CUtensorMap> EncodeTensorMap(const CudaDriver& driver,
                                            const schedules::TensorMapSpec& spec,
                                            const schedules::Buffer& buffer, CUdeviceptr address) {
  const std::string what = absl::StrCat("the tensor map over buffer '", buffer.name, "'");
  CUtensorMapDataType type{};
  if (!TensorMapType(buffer.dtype, &type)) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": ", schedules::DTypeName(buffer.dtype),
                     " elements have no tensor-map form; fetch this buffer with threads instead"));
  }
  const size_t rank = buffer.shape.size();
  if (rank < 1 || rank > 5 || spec.box.size() != rank) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": a box of ", spec.box.size(),
                                                   " extents over a buffer of rank ", rank,
                                                   "; give one extent per axis, rank 1 to 5"));
  }
  if (address % 16 != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": its address 0x", absl::Hex(address),
        " is not 16-byte aligned, which the copy engine needs; pass a 16-byte aligned buffer"));
  }
  // The driver takes the innermost axis first; strides in bytes, of every axis but it.
  const int64_t eb = schedules::DTypeBytes(buffer.dtype);
  const std::vector<int64_t> strides = buffer.Strides();
  std::array<cuuint64_t, 5> dims{}, steps{};
  std::array<cuuint32_t, 5> box{}, element_strides{};
  for (size_t i = 0; i < rank; ++i) {
    const size_t axis = rank - 1 - i;
    dims[i] = static_cast<cuuint64_t>(buffer.shape[axis]);
    box[i] = static_cast<cuuint32_t>(spec.box[axis]);
    element_strides[i] = 1;
    if (i > 0) steps[i - 1] = static_cast<cuuint64_t>(strides[axis] * eb);
  }
  CUtensorMap map{};
  const CUresult r = driver.cuTensorMapEncodeTiled_(
      &map, type, static_cast<cuuint32_t>(rank), reinterpret_cast<void*>(address), dims.data(),
      steps.data(), box.data(), element_strides.data(), CU_TENSOR_MAP_INTERLEAVE_NONE,
      Swizzle(spec.swizzle_bytes), CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
      CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) {
    return absl::InvalidArgumentError(
        CudaError(driver, r, "cuTensorMapEncodeTiled",
                  absl::StrCat(what, " (shape [", absl::StrJoin(buffer.shape, ", "), "], box [",
                               absl::StrJoin(spec.box, ", "), "], swizzle ", spec.swizzle_bytes,
                               " bytes); the buffer's rows must be 16-byte aligned"))
            .message());
  }
  return map;
}

}  // namespace tessel::worker
