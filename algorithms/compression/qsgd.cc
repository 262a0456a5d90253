// QSGD (Alistarh et al., 2017) with the paper's bucketing: in each bucket of kQsgdBucket values
// with L2 norm n, value x becomes n * sign(x) * l / S, where l is |x| / n * S rounded up with
// probability equal to its fractional part and down otherwise. So E[decoded] = x (unbiased) and
// every value is less than one level, n / S, away from x.
//
// The random draws come from a counter-based generator (splitmix64 of a per-bucket key and the
// value's index), not from a stream, so encoding stays a pure function and needs no state.

#include <cmath>
#include <cstring>
#include <limits>

#include "absl/strings/str_format.h"
#include "algorithms/compression/codecs.h"
#include "algorithms/compression/compressor.h"
#include "common/half.h"
#include "common/splitmix.h"

namespace herd::compression::internal {
namespace {

// Bits per code: a sign bit above enough bits for the level 0..S (2, 4 or 8 so codes never
// straddle a byte).
int CodeBits(int levels) { return levels <= 1 ? 2 : levels <= 7 ? 4 : 8; }
size_t Buckets(size_t count) { return (count + kQsgdBucket - 1) / kQsgdBucket; }

// Uniform in [0, 1) with 24 random bits, for value i of the bucket keyed `key`.
double Uniform(uint64_t key, size_t i) {
  return static_cast<double>(Mix64(key + (uint64_t{i} + 1) * SplitMix64::kGolden) >> 40) * 0x1p-24;
}

// The bucket's norm as a float no smaller than the exact one (so |x| / norm <= 1 and no level
// exceeds S), saturated at FLT_MAX.
float NormUp(double norm) {
  constexpr float kMax = std::numeric_limits<float>::max();
  if (!(norm < kMax)) return kMax;
  float f = static_cast<float>(norm);
  if (static_cast<double>(f) < norm) f = std::nextafter(f, kMax);
  return f;
}

}  // namespace

size_t QsgdBytes(size_t count, int levels) {
  return Buckets(count) * sizeof(float) + (count * CodeBits(levels) + 7) / 8;
}

void QsgdEncode(std::span<const float> in, int levels, uint64_t seed, uint8_t* out) {
  const size_t n = in.size(), buckets = Buckets(n);
  const int bits = CodeBits(levels);
  const unsigned sign_bit = 1u << (bits - 1);
  uint8_t* codes = out + buckets * sizeof(float);
  std::memset(codes, 0, (n * bits + 7) / 8);
  for (size_t b = 0; b < buckets; ++b) {
    const size_t lo = b * kQsgdBucket, hi = std::min(n, lo + kQsgdBucket);
    // In double: squares of values near FLT_MAX overflow float, not double.
    double squares = 0.0;
    for (size_t i = lo; i < hi; ++i) {
      const double f = Finite(in[i]);
      squares += f * f;
    }
    const float norm = NormUp(std::sqrt(squares));
    std::memcpy(out + b * sizeof(float), &norm, sizeof(float));
    if (norm == 0.0f) continue;  // every level is 0
    const uint64_t key = Mix64(seed ^ Mix64((uint64_t{b} << 32) ^ FloatToBits(norm)));
    const double scale = levels / static_cast<double>(norm);
    for (size_t i = lo; i < hi; ++i) {
      const float f = Finite(in[i]);
      const double p = std::fabs(f) * scale;  // in [0, S] unless the norm saturated
      const double floor = std::floor(p);
      unsigned level = static_cast<unsigned>(std::min<double>(floor, levels));
      if (level < static_cast<unsigned>(levels) && Uniform(key, i - lo) < p - floor) ++level;
      const unsigned code = level | (f < 0.0f ? sign_bit : 0u);
      codes[i * bits / 8] |= static_cast<uint8_t>(code << (i * bits % 8));
    }
  }
}

absl::Status QsgdDecode(const uint8_t* in, int levels, std::span<float> out, bool add) {
  const size_t n = out.size(), buckets = Buckets(n);
  const int bits = CodeBits(levels);
  const unsigned mask = (1u << bits) - 1, sign_bit = 1u << (bits - 1);
  const uint8_t* codes = in + buckets * sizeof(float);
  auto code = [&](size_t i) { return (codes[i * bits / 8] >> (i * bits % 8)) & mask; };
  auto norm = [&](size_t b) {
    float v;
    std::memcpy(&v, in + b * sizeof(float), sizeof(float));
    return v;
  };
  // Check everything first so that a bad payload leaves `out` untouched.
  for (size_t b = 0; b < buckets; ++b) {
    if (const float v = norm(b); !std::isfinite(v) || v < 0.0f) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "qsgd:%d payload: bucket %d has an invalid norm %g (want finite, >= 0)", levels, b, v));
    }
  }
  if (sign_bit - 1 > static_cast<unsigned>(levels)) {  // the code width admits levels above S
    for (size_t i = 0; i < n; ++i) {
      if (const unsigned l = code(i) & (sign_bit - 1); l > static_cast<unsigned>(levels)) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "qsgd:%d payload: value %d has level %d (want <= %d)", levels, i, l, levels));
      }
    }
  }
  for (size_t b = 0; b < buckets; ++b) {
    const double step = static_cast<double>(norm(b)) / levels;
    const size_t lo = b * kQsgdBucket, hi = std::min(n, lo + kQsgdBucket);
    for (size_t i = lo; i < hi; ++i) {
      const unsigned c = code(i);
      const float mag = static_cast<float>((c & (sign_bit - 1)) * step);
      const float v = (c & sign_bit) ? -mag : mag;
      out[i] = add ? out[i] + v : v;
    }
  }
  return absl::OkStatus();
}

}  // namespace herd::compression::internal
