#pragma once
// The byte layouts of the compressors (compressor.h documents them). Decoders assume the
// caller checked the size; they still check everything else a peer controls, and check it all
// before writing, so that a bad payload leaves `out` untouched.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>

#include "absl/status/status.h"

namespace herd::compression::internal {

// The clamp every encoder applies first: NaN -> 0, +-inf -> +-FLT_MAX.
inline float Finite(float v) {
  constexpr float kMax = std::numeric_limits<float>::max();
  if (std::isnan(v)) return 0.0f;
  return std::clamp(v, -kMax, kMax);
}

size_t MinMaxBytes(size_t count);
void MinMaxEncode(std::span<const float> in, uint8_t* out);
absl::Status MinMaxDecode(const uint8_t* in, std::span<float> out, bool add);

size_t SignBytes(size_t count);
void SignEncode(std::span<const float> in, uint8_t* out);
absl::Status SignDecode(const uint8_t* in, std::span<float> out, bool add);

size_t QsgdBytes(size_t count, int levels);
void QsgdEncode(std::span<const float> in, int levels, uint64_t seed, uint8_t* out);
absl::Status QsgdDecode(const uint8_t* in, int levels, std::span<float> out, bool add);

size_t HalfBytes(size_t count);
void Fp16Encode(std::span<const float> in, uint8_t* out);
absl::Status Fp16Decode(const uint8_t* in, std::span<float> out, bool add);
void Bf16Encode(std::span<const float> in, uint8_t* out);
absl::Status Bf16Decode(const uint8_t* in, std::span<float> out, bool add);

size_t TopKCount(size_t count, double density);
size_t TopKBytes(size_t count, double density);
void TopKEncode(std::span<const float> in, double density, uint8_t* out);
absl::Status TopKDecode(const uint8_t* in, double density, std::span<float> out, bool add);

}  // namespace herd::compression::internal
