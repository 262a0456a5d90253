#include "common/reduce.h"

#include <algorithm>
#include <cstddef>
#include <cstring>
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

// The fp32/fp64 kernels are cloned for AVX-512, AVX2 and the baseline (x86-64's SSE2) and picked
// once at load time (an ifunc); this file is built with -O3 (common/CMakeLists.txt) so that GCC
// vectorises the loops (its -O2 cost model leaves loops with a remainder scalar).
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define HERD_SIMD_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define HERD_SIMD_CLONES
#endif

// dst (op)= src and dst = a (op) b. min/max keep std::min/std::max's semantics (the first
// operand unless the second compares less/greater), written as selects so that they vectorise.
#define HERD_TWO_AND_THREE_OPERAND_KERNELS(T, NAME)                                     \
  HERD_SIMD_CLONES void NAME##Into(ReduceOp op, T* __restrict d, const T* __restrict s, \
                                   size_t n) {                                          \
    switch (op) {                                                                       \
      case ReduceOp::kSum:                                                              \
      case ReduceOp::kAverage:                                                          \
        for (size_t i = 0; i < n; ++i) d[i] += s[i];                                    \
        break;                                                                          \
      case ReduceOp::kMin:                                                              \
        for (size_t i = 0; i < n; ++i) d[i] = s[i] < d[i] ? s[i] : d[i];                \
        break;                                                                          \
      case ReduceOp::kMax:                                                              \
        for (size_t i = 0; i < n; ++i) d[i] = d[i] < s[i] ? s[i] : d[i];                \
        break;                                                                          \
    }                                                                                   \
  }                                                                                     \
  HERD_SIMD_CLONES void NAME##Of(ReduceOp op, T* __restrict d, const T* __restrict a,   \
                                 const T* __restrict b, size_t n) {                     \
    switch (op) {                                                                       \
      case ReduceOp::kSum:                                                              \
      case ReduceOp::kAverage:                                                          \
        for (size_t i = 0; i < n; ++i) d[i] = a[i] + b[i];                              \
        break;                                                                          \
      case ReduceOp::kMin:                                                              \
        for (size_t i = 0; i < n; ++i) d[i] = b[i] < a[i] ? b[i] : a[i];                \
        break;                                                                          \
      case ReduceOp::kMax:                                                              \
        for (size_t i = 0; i < n; ++i) d[i] = a[i] < b[i] ? b[i] : a[i];                \
        break;                                                                          \
    }                                                                                   \
  }

HERD_TWO_AND_THREE_OPERAND_KERNELS(float, F32)
HERD_TWO_AND_THREE_OPERAND_KERNELS(double, F64)
#undef HERD_TWO_AND_THREE_OPERAND_KERNELS

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

// The integer types: plain loops (exact, no rounding order to care about).
template <typename T>
void OfTyped(ReduceOp op, T* __restrict d, const T* __restrict a, const T* __restrict b, size_t n) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAverage:
      for (size_t i = 0; i < n; ++i) d[i] = static_cast<T>(a[i] + b[i]);
      break;
    case ReduceOp::kMin:
      for (size_t i = 0; i < n; ++i) d[i] = std::min(a[i], b[i]);
      break;
    case ReduceOp::kMax:
      for (size_t i = 0; i < n; ++i) d[i] = std::max(a[i], b[i]);
      break;
  }
}

void Of(DType dtype, ReduceOp op, void* d, const void* a, const void* b, size_t n) {
  switch (dtype) {
    case DType::kFloat32:
      return F32Of(op, static_cast<float*>(d), static_cast<const float*>(a),
                   static_cast<const float*>(b), n);
    case DType::kFloat64:
      return F64Of(op, static_cast<double*>(d), static_cast<const double*>(a),
                   static_cast<const double*>(b), n);
    case DType::kInt32:
      return OfTyped(op, static_cast<int32_t*>(d), static_cast<const int32_t*>(a),
                     static_cast<const int32_t*>(b), n);
    case DType::kInt64:
      return OfTyped(op, static_cast<int64_t*>(d), static_cast<const int64_t*>(a),
                     static_cast<const int64_t*>(b), n);
    case DType::kUInt8:
      return OfTyped(op, static_cast<uint8_t*>(d), static_cast<const uint8_t*>(a),
                     static_cast<const uint8_t*>(b), n);
    default:
      return;  // the 16-bit floats go through AccumulateHalf
  }
}

// --- fp16 / bf16 in ReduceMany: a block of fp32 accumulators, one rounding at the end.

void LoadBF16(float* acc, const uint16_t* src, size_t n) {
  for (size_t i = 0; i < n; ++i) acc[i] = BF16ToFloat(src[i]);
}
void AccumulateBF16(ReduceOp op, float* __restrict acc, const uint16_t* __restrict src, size_t n) {
  for (size_t i = 0; i < n; ++i) acc[i] = Apply(op, acc[i], BF16ToFloat(src[i]));
}
void StoreBF16(uint16_t* dst, const float* acc, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] = FloatToBF16(acc[i]);
}

void LoadFP16Scalar(float* acc, const uint16_t* src, size_t n) {
  for (size_t i = 0; i < n; ++i) acc[i] = FP16ToFloat(src[i]);
}
void AccumulateFP16Scalar(ReduceOp op, float* acc, const uint16_t* src, size_t n) {
  for (size_t i = 0; i < n; ++i) acc[i] = Apply(op, acc[i], FP16ToFloat(src[i]));
}
void StoreFP16Scalar(uint16_t* dst, const float* acc, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] = FloatToFP16(acc[i]);
}

#if defined(__x86_64__)
__attribute__((target("avx2,f16c"))) void LoadFP16F16C(float* acc, const uint16_t* src, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(acc + i,
                     _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i))));
  }
  LoadFP16Scalar(acc + i, src + i, n - i);
}
__attribute__((target("avx2,f16c"))) void AccumulateFP16F16C(ReduceOp op, float* acc,
                                                             const uint16_t* src, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 a = _mm256_loadu_ps(acc + i);
    __m256 b = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i)));
    // min/max as Apply: the accumulator unless the new value compares less/greater.
    __m256 r = op == ReduceOp::kMin   ? _mm256_blendv_ps(a, b, _mm256_cmp_ps(b, a, _CMP_LT_OQ))
               : op == ReduceOp::kMax ? _mm256_blendv_ps(a, b, _mm256_cmp_ps(a, b, _CMP_LT_OQ))
                                      : _mm256_add_ps(a, b);
    _mm256_storeu_ps(acc + i, r);
  }
  AccumulateFP16Scalar(op, acc + i, src + i, n - i);
}
__attribute__((target("avx2,f16c"))) void StoreFP16F16C(uint16_t* dst, const float* acc, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(acc + i), _MM_FROUND_TO_NEAREST_INT));
  }
  StoreFP16Scalar(dst + i, acc + i, n - i);
}
#endif

// ReduceMany for fp16/bf16: per block, the sources in index order into fp32, rounded once.
void ReduceManyHalf(DType dtype, ReduceOp op, uint16_t* dst, const void* const* srcs, int n,
                    size_t count) {
  constexpr size_t kBlock = 2048;  // 8 KiB of accumulators: stays in L1 with the sources' block
  float acc[kBlock];
  const bool fp16 = dtype == DType::kFloat16;
#if defined(__x86_64__)
  const bool f16c = fp16 && HasF16C();
#else
  const bool f16c = false;
#endif
  for (size_t b = 0; b < count; b += kBlock) {
    const size_t len = std::min(kBlock, count - b);
    auto src = [&](int k) { return static_cast<const uint16_t*>(srcs[k]) + b; };
    if (!fp16) {
      LoadBF16(acc, src(0), len);
      for (int k = 1; k < n; ++k) AccumulateBF16(op, acc, src(k), len);
      StoreBF16(dst + b, acc, len);
      continue;
    }
#if defined(__x86_64__)
    if (f16c) {
      LoadFP16F16C(acc, src(0), len);
      for (int k = 1; k < n; ++k) AccumulateFP16F16C(op, acc, src(k), len);
      StoreFP16F16C(dst + b, acc, len);
      continue;
    }
#endif
    LoadFP16Scalar(acc, src(0), len);
    for (int k = 1; k < n; ++k) AccumulateFP16Scalar(op, acc, src(k), len);
    StoreFP16Scalar(dst + b, acc, len);
  }
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
      return F32Into(op, static_cast<float*>(dst), static_cast<const float*>(src), count);
    case DType::kFloat64:
      return F64Into(op, static_cast<double*>(dst), static_cast<const double*>(src), count);
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

void ReduceMany(DType dtype, ReduceOp op, void* dst, const void* const* srcs, int n, size_t count) {
  if (count == 0 || n <= 0) return;
  if (dtype == DType::kFloat16 || dtype == DType::kBFloat16) {
    return ReduceManyHalf(dtype, op, static_cast<uint16_t*>(dst), srcs, n, count);
  }
  const size_t esize = DTypeSize(dtype);
  // The source dst aliases, if any: it is the accumulator, taken first.
  int first = -1;
  for (int k = 0; k < n && first < 0; ++k) {
    if (srcs[k] == dst) first = k;
  }
  // Blocks of 8 KiB: the accumulator block stays in L1 while every source's block is added.
  const size_t block = std::max<size_t>(1, 8192 / esize);
  auto* d = static_cast<std::byte*>(dst);
  for (size_t b = 0; b < count; b += block) {
    const size_t len = std::min(block, count - b);
    std::byte* db = d + b * esize;
    auto src = [&](int k) { return static_cast<const std::byte*>(srcs[k]) + b * esize; };
    int k = 0;
    if (first < 0) {
      if (n == 1) {
        std::memcpy(db, src(0), len * esize);
        continue;
      }
      Of(dtype, op, db, src(0), src(1), len);
      k = 2;
    }
    for (; k < n; ++k) {
      if (k != first) ReduceInto(dtype, op, db, src(k), len);
    }
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
