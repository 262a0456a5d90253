// MinMaxUInt8: each value becomes the nearest of 256 levels spread evenly over [min, max] of
// the buffer. The error of one value is at most (max - min) / 510.

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "absl/strings/str_format.h"
#include "algorithms/compression/codecs.h"

namespace herd::compression::internal {
namespace {

constexpr size_t kHeader = 2 * sizeof(float);

}  // namespace

size_t MinMaxBytes(size_t count) { return kHeader + count; }

void MinMaxEncode(std::span<const float> in, uint8_t* out) {
  float lo = 0.0f, hi = 0.0f;
  if (!in.empty()) {
    lo = hi = Finite(in[0]);
    // NaNs lose every comparison and so never become an end of the range; infinities are
    // clamped below.
    for (float v : in) {
      lo = v < lo ? v : lo;
      hi = v > hi ? v : hi;
    }
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
