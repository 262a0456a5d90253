#include "common/reduce.h"

#include <algorithm>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/half.h"

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#endif

namespace herd {
namespace {

template <typename T>
void ReduceTyped(ReduceOp op, T* __restrict dst, const T* __restrict src, size_t n) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAverage:
      for (size_t i = 0; i < n; ++i) dst[i] += src[i];
      break;
    case ReduceOp::kMin:
      for (size_t i = 0; i < n; ++i) dst[i] = std::min(dst[i], src[i]);
      break;
    case ReduceOp::kMax:
      for (size_t i = 0; i < n; ++i) dst[i] = std::max(dst[i], src[i]);
      break;
  }
}

inline float Apply(ReduceOp op, float a, float b) {
  switch (op) {
    case ReduceOp::kMin:
      return std::min(a, b);
    case ReduceOp::kMax:
      return std::max(a, b);
    default:
      return a + b;
  }
}

void ReduceBF16(ReduceOp op, uint16_t* __restrict dst, const uint16_t* __restrict src, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    dst[i] = FloatToBF16(Apply(op, BF16ToFloat(dst[i]), BF16ToFloat(src[i])));
  }
}

void ReduceFP16Scalar(ReduceOp op, uint16_t* dst, const uint16_t* src, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    dst[i] = FloatToFP16(Apply(op, FP16ToFloat(dst[i]), FP16ToFloat(src[i])));
  }
}

#if defined(__x86_64__)
__attribute__((target("avx2,f16c"))) void ReduceFP16F16C(ReduceOp op, uint16_t* dst,
                                                         const uint16_t* src, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 a = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(dst + i)));
    __m256 b = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i)));
    __m256 r = op == ReduceOp::kMin   ? _mm256_min_ps(a, b)
               : op == ReduceOp::kMax ? _mm256_max_ps(a, b)
                                      : _mm256_add_ps(a, b);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i),
                     _mm256_cvtps_ph(r, _MM_FROUND_TO_NEAREST_INT));
  }
  ReduceFP16Scalar(op, dst + i, src + i, n - i);
}

bool HasF16C() {
  // F16C through cpuid: clang's __builtin_cpu_supports does not know "f16c".
  static const bool has = [] {
    unsigned a = 0, b = 0, c = 0, d = 0;
    return __get_cpuid(1, &a, &b, &c, &d) != 0 && (c & bit_F16C) != 0 &&
           __builtin_cpu_supports("avx2");
  }();
  return has;
}
#endif

void ReduceFP16(ReduceOp op, uint16_t* dst, const uint16_t* src, size_t n) {
#if defined(__x86_64__)
  if (HasF16C()) return ReduceFP16F16C(op, dst, src, n);
#endif
  ReduceFP16Scalar(op, dst, src, n);
}

template <typename T>
void ScaleTyped(T* data, size_t n, T factor) {
  for (size_t i = 0; i < n; ++i) data[i] *= factor;
}

}  // namespace

std::string_view ReduceOpName(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return "sum";
    case ReduceOp::kAverage:
      return "avg";
    case ReduceOp::kMin:
      return "min";
    case ReduceOp::kMax:
      return "max";
  }
  return "unknown";
}

absl::StatusOr<ReduceOp> ParseReduceOp(std::string_view name) {
  std::string n = absl::AsciiStrToLower(std::string(name));
  if (n == "sum") return ReduceOp::kSum;
  if (n == "avg" || n == "average" || n == "mean") return ReduceOp::kAverage;
  if (n == "min") return ReduceOp::kMin;
  if (n == "max") return ReduceOp::kMax;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown reduce op '", std::string(name), "'; expected sum, avg, min or max"));
}

void ReduceInto(DType dtype, ReduceOp op, void* dst, const void* src, size_t count) {
  if (count == 0 || dst == src) {
    if (dst == src && count != 0 && (op == ReduceOp::kSum || op == ReduceOp::kAverage)) {
      ScaleInPlace(dtype, dst, count, 2.0);  // x + x
    }
    return;
  }
  switch (dtype) {
    case DType::kFloat32:
      return ReduceTyped(op, static_cast<float*>(dst), static_cast<const float*>(src), count);
    case DType::kFloat64:
      return ReduceTyped(op, static_cast<double*>(dst), static_cast<const double*>(src), count);
    case DType::kInt32:
      return ReduceTyped(op, static_cast<int32_t*>(dst), static_cast<const int32_t*>(src), count);
    case DType::kInt64:
      return ReduceTyped(op, static_cast<int64_t*>(dst), static_cast<const int64_t*>(src), count);
    case DType::kUInt8:
      return ReduceTyped(op, static_cast<uint8_t*>(dst), static_cast<const uint8_t*>(src), count);
    case DType::kFloat16:
      return ReduceFP16(op, static_cast<uint16_t*>(dst), static_cast<const uint16_t*>(src), count);
    case DType::kBFloat16:
      return ReduceBF16(op, static_cast<uint16_t*>(dst), static_cast<const uint16_t*>(src), count);
  }
}

void ScaleInPlace(DType dtype, void* data, size_t count, double factor) {
  switch (dtype) {
    case DType::kFloat32:
      return ScaleTyped(static_cast<float*>(data), count, static_cast<float>(factor));
    case DType::kFloat64:
      return ScaleTyped(static_cast<double*>(data), count, factor);
    case DType::kFloat16: {
      auto* p = static_cast<uint16_t*>(data);
      for (size_t i = 0; i < count; ++i) p[i] = FloatToFP16(FP16ToFloat(p[i]) * float(factor));
      return;
    }
    case DType::kBFloat16: {
      auto* p = static_cast<uint16_t*>(data);
      for (size_t i = 0; i < count; ++i) p[i] = FloatToBF16(BF16ToFloat(p[i]) * float(factor));
      return;
    }
    case DType::kInt32: {
      auto* p = static_cast<int32_t*>(data);
      for (size_t i = 0; i < count; ++i) p[i] = static_cast<int32_t>(p[i] * factor);
      return;
    }
    case DType::kInt64: {
      auto* p = static_cast<int64_t*>(data);
      for (size_t i = 0; i < count; ++i) p[i] = static_cast<int64_t>(p[i] * factor);
      return;
    }
    case DType::kUInt8: {
      auto* p = static_cast<uint8_t*>(data);
      for (size_t i = 0; i < count; ++i) p[i] = static_cast<uint8_t>(p[i] * factor);
      return;
    }
  }
}

}  // namespace herd
