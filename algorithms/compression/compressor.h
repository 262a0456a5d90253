#pragma once
// Lossy gradient compressors shared by the collectives (clps, decentralized_lp) and the
// parameter server (ps_ec). Each compressor turns `count` fp32 values into a byte string of a
// size that depends only on the compressor and `count`, and back. Pure functions: no state,
// thread-safe. Byte layouts (host byte order; herd runs on little-endian machines only):
//
//   minmax_uint8: [float min][float max][count x uint8]; value = min + q * (max - min) / 255,
//                 q rounded to nearest. Exact for constant inputs.
//   sign:         [float scale][ceil(count / 8) bytes of sign bits, LSB first]; value =
//                 +scale for a set bit, -scale otherwise, scale = mean |x| (scaled 1-bit sign).
//   qsgd:S        QSGD with S levels (1 <= S <= 127) and stochastic rounding, per bucket of
//                 kQsgdBucket values: [ceil(count / kQsgdBucket) x float L2 norm of the bucket]
//                 [count codes of W bits, packed LSB first], W = 2 (S = 1), 4 (S <= 7) or
//                 8 (S <= 127). A code is sign (its top bit) and level l in [0, S]; value =
//                 sign * norm * l / S. Unbiased: E[value] = x (over the rounding).
//   fp16, bf16:   [count x uint16]: IEEE binary16 / bfloat16 bits, round to nearest even.
//                 fp16 saturates at +-65504; neither may carry an infinity or a NaN.
//   topk:D        the k = max(1, round(D * count)) values of largest magnitude (k = 0 when count
//                 is 0; ties to the lower index): [k x uint32 index, strictly ascending]
//                 [k x float value]; every other value decodes to 0. count < 2^32.
//
// Names (ParseCompressor / CompressorName): "minmax_uint8", "sign", "qsgd" (= "qsgd:127", 8 bits
// a value), "qsgd:S", "fp16", "bf16", "topk" (= "topk:0.01"), "topk:D" with 0 < D <= 1.
//
// Compress clamps non-finite inputs first: NaN becomes 0, +-inf the largest finite value (of
// float; fp16 and bf16 saturate at their own), so every header stays finite and decodable.
// Decompress validates everything a peer can get wrong (size, non-finite headers, codes out of
// range, unsorted indices) and answers INVALID_ARGUMENT without touching `out`.

#include <cstddef>
#include <cstdint>
#include <iosfwd>
#include <span>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace herd::compression {

// A compressor and its parameters: a small value type, compared with ==. The parameterless
// ones are constants spelled like the enum values this type grew from
// (`Compressor::kMinMaxUInt8`); the others are made by Qsgd() and TopK() or parsed.
class Compressor {
 public:
  enum class Kind : uint8_t { kMinMaxUInt8, kSign, kQsgd, kFp16, kBf16, kTopK };

  static const Compressor kMinMaxUInt8;
  static const Compressor kSign;
  static const Compressor kFp16;
  static const Compressor kBf16;

  static constexpr int kDefaultQsgdLevels = 127;
  static constexpr int kMaxQsgdLevels = 127;
  static constexpr double kDefaultTopKDensity = 0.01;

  // QSGD with `levels` = S in [1, kMaxQsgdLevels]; top-k with density in (0, 1].
  // INVALID_ARGUMENT outside those ranges.
  static absl::StatusOr<Compressor> Qsgd(int levels);
  static absl::StatusOr<Compressor> TopK(double density);

  // minmax_uint8, as the enum's zero value was.
  constexpr Compressor() : Compressor(Kind::kMinMaxUInt8, 0, 0.0) {}

  constexpr Kind kind() const { return kind_; }
  constexpr int levels() const { return levels_; }       // qsgd's S; 0 for the others
  constexpr double density() const { return density_; }  // topk's D; 0 for the others

  friend constexpr bool operator==(const Compressor&, const Compressor&) = default;

 private:
  constexpr Compressor(Kind kind, int levels, double density)
      : kind_(kind), levels_(levels), density_(density) {}

  Kind kind_;
  int levels_;
  double density_;
};

inline constexpr Compressor Compressor::kMinMaxUInt8{Kind::kMinMaxUInt8, 0, 0.0};
inline constexpr Compressor Compressor::kSign{Kind::kSign, 0, 0.0};
inline constexpr Compressor Compressor::kFp16{Kind::kFp16, 0, 0.0};
inline constexpr Compressor Compressor::kBf16{Kind::kBf16, 0, 0.0};

// Values per QSGD bucket (one norm each): the bucketing of the QSGD paper, which keeps the
// variance bound min(d / S^2, sqrt(d) / S) small by keeping d small.
inline constexpr size_t kQsgdBucket = 512;

// The names above. INVALID_ARGUMENT names the accepted ones.
absl::StatusOr<Compressor> ParseCompressor(std::string_view name);
// The canonical name: ParseCompressor(CompressorName(c)) == c.
std::string CompressorName(Compressor c);
std::ostream& operator<<(std::ostream& os, Compressor c);  // its name (for test messages)

// The exact size of Compress's output for `count` values.
size_t CompressedBytes(Compressor c, size_t count);

// Writes Q(in) to `out` (resized to CompressedBytes). Non-finite inputs are clamped (above).
// `seed` drives qsgd's stochastic rounding, the others ignore it: the rounding of value i of a
// bucket draws from splitmix64(seed, bucket index, the bucket's norm bits, i), so the output is
// a pure function of (in, seed), reproducible, and different inputs round independently even
// under the same seed. Pass different seeds (e.g. per rank and iteration) to decorrelate the
// rounding of identical inputs.
void Compress(Compressor c, std::span<const float> in, std::string* out, uint64_t seed);
inline void Compress(Compressor c, std::span<const float> in, std::string* out) {
  Compress(c, in, out, /*seed=*/0);
}

// out = D(bytes). INVALID_ARGUMENT when `bytes` is not a valid encoding of out.size() values.
absl::Status Decompress(Compressor c, std::string_view bytes, std::span<float> out);

// Like Decompress but adds D(bytes) into `acc` (the parameter server's sum).
absl::Status DecompressAdd(Compressor c, std::string_view bytes, std::span<float> acc);

}  // namespace herd::compression
