// Scaled 1-bit sign: one bit per value and one scale for the buffer, the mean absolute value,
// so that the decoded buffer keeps the L1 norm of the input.

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "absl/strings/str_format.h"
#include "algorithms/compression/codecs.h"

namespace herd::compression::internal {

size_t SignBytes(size_t count) { return sizeof(float) + (count + 7) / 8; }

void SignEncode(std::span<const float> in, uint8_t* out) {
  double l1 = 0.0;
  for (float v : in) {
    if (std::isfinite(v)) l1 += std::fabs(static_cast<double>(v));
  }
  double mean = in.empty() ? 0.0 : l1 / static_cast<double>(in.size());
  const float scale = static_cast<float>(std::min<double>(mean, std::numeric_limits<float>::max()));
  std::memcpy(out, &scale, sizeof(float));
  uint8_t* bits = out + sizeof(float);
  std::memset(bits, 0, (in.size() + 7) / 8);
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] >= 0.0f) bits[i / 8] |= static_cast<uint8_t>(1u << (i % 8));
  }
}

absl::Status SignDecode(const uint8_t* in, std::span<float> out, bool add) {
  float scale;
  std::memcpy(&scale, in, sizeof(float));
  if (!std::isfinite(scale) || scale < 0.0f) {
    return absl::InvalidArgumentError(
        absl::StrFormat("sign payload has an invalid scale %g (want finite, >= 0)", scale));
  }
  const uint8_t* bits = in + sizeof(float);
  for (size_t i = 0; i < out.size(); ++i) {
    const float v = (bits[i / 8] >> (i % 8)) & 1u ? scale : -scale;
    out[i] = add ? out[i] + v : v;
  }
  return absl::OkStatus();
}

}  // namespace herd::compression::internal
