#include "common/dtype.h"

#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace herd {

size_t DTypeSize(DType t) {
  switch (t) {
    case DType::kFloat32:
      return 4;
    case DType::kFloat64:
      return 8;
    case DType::kFloat16:
      return 2;
    case DType::kBFloat16:
      return 2;
    case DType::kInt32:
      return 4;
    case DType::kInt64:
      return 8;
    case DType::kUInt8:
      return 1;
  }
  return 0;
}

std::string_view DTypeName(DType t) {
  switch (t) {
    case DType::kFloat32:
      return "fp32";
    case DType::kFloat64:
      return "fp64";
    case DType::kFloat16:
      return "fp16";
    case DType::kBFloat16:
      return "bf16";
    case DType::kInt32:
      return "int32";
    case DType::kInt64:
      return "int64";
    case DType::kUInt8:
      return "uint8";
  }
  return "unknown";
}

absl::StatusOr<DType> ParseDType(std::string_view name) {
  std::string n = absl::AsciiStrToLower(std::string(name));
  if (n == "fp32" || n == "float32" || n == "float") return DType::kFloat32;
  if (n == "fp64" || n == "float64" || n == "double") return DType::kFloat64;
  if (n == "fp16" || n == "float16" || n == "half") return DType::kFloat16;
  if (n == "bf16" || n == "bfloat16") return DType::kBFloat16;
  if (n == "int32") return DType::kInt32;
  if (n == "int64") return DType::kInt64;
  if (n == "uint8") return DType::kUInt8;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown dtype '", std::string(name),
                   "'; expected one of fp32, fp64, fp16, bf16, int32, int64, uint8"));
}

bool IsFloating(DType t) {
  return t == DType::kFloat32 || t == DType::kFloat64 || t == DType::kFloat16 ||
         t == DType::kBFloat16;
}

}  // namespace herd
