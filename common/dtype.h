#pragma once
// Element types herd moves and reduces, with their sizes and names.

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "absl/status/statusor.h"

namespace herd {

enum class DType : uint8_t {
  kFloat32 = 0,
  kFloat64 = 1,
  kFloat16 = 2,   // IEEE 754 binary16
  kBFloat16 = 3,  // bfloat16: the top half of a float32
  kInt32 = 4,
  kInt64 = 5,
  kUInt8 = 6,
};

size_t DTypeSize(DType t);
std::string_view DTypeName(DType t);  // "fp32", "fp64", "fp16", "bf16", "int32", "int64", "uint8"
// Accepts the names above and the long forms ("float32", "float", "double", "half", "bfloat16").
absl::StatusOr<DType> ParseDType(std::string_view name);
bool IsFloating(DType t);

}  // namespace herd
