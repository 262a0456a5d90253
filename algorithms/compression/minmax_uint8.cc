// MinMaxUInt8: each value becomes the nearest of 256 levels spread evenly over [min, max] of
// the buffer. The error of one value is at most (max - min) / 510.

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "absl/strings/str_format.h"
#include "algorithms/compression/codecs.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace herd::compression::internal {
namespace {

constexpr size_t kHeader = 2 * sizeof(float);

// The smallest and largest value of a non-empty buffer. NaNs lose every comparison and so never
// become an end of the range. A single running minimum is a loop-carried dependence that GCC
// does not vectorise without -ffast-math, so the scan keeps eight lanes in SSE registers:
// _mm_min_ps(v, l) is exactly `v < l ? v : l` (it returns l when either is NaN). Only the sign
// of a zero end may depend on the folding order.
void Range(std::span<const float> in, float* lo, float* hi) {
  const size_t n = in.size();
  float l = Finite(in[0]), h = l;
  size_t i = 0;
#if defined(__SSE2__)
  __m128 l0 = _mm_set1_ps(l), l1 = l0, h0 = l0, h1 = l0;
  for (; i + 8 <= n; i += 8) {
    const __m128 a = _mm_loadu_ps(in.data() + i), b = _mm_loadu_ps(in.data() + i + 4);
    l0 = _mm_min_ps(a, l0);
    l1 = _mm_min_ps(b, l1);
    h0 = _mm_max_ps(a, h0);
    h1 = _mm_max_ps(b, h1);
  }
  alignas(16) float ls[8], hs[8];
  _mm_store_ps(ls, l0);
  _mm_store_ps(ls + 4, l1);
  _mm_store_ps(hs, h0);
  _mm_store_ps(hs + 4, h1);
  for (int k = 0; k < 8; ++k) {
    l = ls[k] < l ? ls[k] : l;
    h = hs[k] > h ? hs[k] : h;
  }
#endif
  for (; i < n; ++i) {
    l = in[i] < l ? in[i] : l;
    h = in[i] > h ? in[i] : h;
  }
  *lo = l;
  *hi = h;
}

}  // namespace

size_t MinMaxBytes(size_t count) { return kHeader + count; }

void MinMaxEncode(std::span<const float> in, uint8_t* out) {
  float lo = 0.0f, hi = 0.0f;
  if (!in.empty()) {
    Range(in, &lo, &hi);  // infinities are clamped below
    lo = Finite(lo);
    hi = Finite(hi);
  }
  std::memcpy(out, &lo, sizeof(float));
  std::memcpy(out + sizeof(float), &hi, sizeof(float));
  uint8_t* q = out + kHeader;
  // The range in double: hi - lo can overflow float when it spans most of it.
  const double range = static_cast<double>(hi) - lo;
  const float scale = range > 0 ? static_cast<float>(255.0 / range) : 0.0f;
  // Float arithmetic and branch-free clamps so the compiler vectorises the loop; + 0.5 and
  // truncation round to the nearest level. NaN fails `t > 0` and becomes level 0.
  for (size_t i = 0; i < in.size(); ++i) {
    float t = (in[i] - lo) * scale + 0.5f;
    t = t > 0.0f ? t : 0.0f;
    t = t < 255.0f ? t : 255.0f;
    q[i] = static_cast<uint8_t>(t);
  }
}

absl::Status MinMaxDecode(const uint8_t* in, std::span<float> out, bool add) {
  float lo, hi;
  std::memcpy(&lo, in, sizeof(float));
  std::memcpy(&hi, in + sizeof(float), sizeof(float));
  if (!std::isfinite(lo) || !std::isfinite(hi) || lo > hi) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "minmax_uint8 payload has an invalid range [%g, %g] (want finite min <= max)", lo, hi));
  }
  const uint8_t* q = in + kHeader;
  const double step = (static_cast<double>(hi) - lo) / 255.0;
  for (size_t i = 0; i < out.size(); ++i) {
    const float v = static_cast<float>(lo + q[i] * step);
    out[i] = add ? out[i] + v : v;
  }
  return absl::OkStatus();
}

}  // namespace herd::compression::internal
