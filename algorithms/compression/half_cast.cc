// fp16 and bf16 casts: 16 bits a value, round to nearest even (common/half.h). fp16 keeps 11
// significant bits over [6.1e-5, 65504] (relative error <= 2^-11) and saturates beyond;
// bf16 keeps 8 significant bits over the whole float range (relative error <= 2^-8).
// Neither encoding may carry an infinity or a NaN: encoders saturate, decoders refuse them.

#include <cstring>

#include "absl/strings/str_format.h"
#include "algorithms/compression/codecs.h"
#include "common/half.h"

namespace herd::compression::internal {
namespace {

constexpr float kFp16Max = 65504.0f;
constexpr uint16_t kFp16ExpMask = 0x7c00;  // all ones: infinity or NaN
constexpr uint16_t kBf16ExpMask = 0x7f80;
constexpr uint16_t kBf16MaxFinite = 0x7f7f;

uint16_t Load16(const uint8_t* in, size_t i) {
  uint16_t h;
  std::memcpy(&h, in + 2 * i, sizeof h);
  return h;
}

// Checks every value before any is written (a bad payload leaves `out` untouched).
absl::Status CheckFinite(const uint8_t* in, size_t n, uint16_t exp_mask, const char* name) {
  for (size_t i = 0; i < n; ++i) {
    if ((Load16(in, i) & exp_mask) == exp_mask) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s payload: value %d is an infinity or a NaN (bits 0x%04x)", name, i, Load16(in, i)));
    }
  }
  return absl::OkStatus();
}

template <typename ToFloat>
void Decode(const uint8_t* in, std::span<float> out, bool add, ToFloat to_float) {
  for (size_t i = 0; i < out.size(); ++i) {
    const float v = to_float(Load16(in, i));
    out[i] = add ? out[i] + v : v;
  }
}

}  // namespace

size_t HalfBytes(size_t count) { return 2 * count; }

void Fp16Encode(std::span<const float> in, uint8_t* out) {
  for (size_t i = 0; i < in.size(); ++i) {
    const uint16_t h = FloatToFP16(std::clamp(Finite(in[i]), -kFp16Max, kFp16Max));
    std::memcpy(out + 2 * i, &h, sizeof h);
  }
}

absl::Status Fp16Decode(const uint8_t* in, std::span<float> out, bool add) {
  if (auto st = CheckFinite(in, out.size(), kFp16ExpMask, "fp16"); !st.ok()) return st;
  Decode(in, out, add, FP16ToFloat);
  return absl::OkStatus();
}

void Bf16Encode(std::span<const float> in, uint8_t* out) {
  for (size_t i = 0; i < in.size(); ++i) {
    uint16_t h = FloatToBF16(Finite(in[i]));
    // Values within half a bf16 step of FLT_MAX round up to infinity: saturate instead.
    if ((h & kBf16ExpMask) == kBf16ExpMask)
      h = static_cast<uint16_t>((h & 0x8000u) | kBf16MaxFinite);
    std::memcpy(out + 2 * i, &h, sizeof h);
  }
}

absl::Status Bf16Decode(const uint8_t* in, std::span<float> out, bool add) {
  if (auto st = CheckFinite(in, out.size(), kBf16ExpMask, "bf16"); !st.ok()) return st;
  Decode(in, out, add, BF16ToFloat);
  return absl::OkStatus();
}

}  // namespace herd::compression::internal
