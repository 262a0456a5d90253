// fp16 and bf16 casts: relative error bounds of their significands, saturation instead of
// infinities, exact representable values, and payloads carrying infinities or NaNs refused.

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>

#include "common/half.h"
#include "tests/unit/compression/compression_test_util.h"

namespace herd::compression::testing {
namespace {

float BF16Max() { return BF16ToFloat(0x7f7f); }

void CheckRelativeError(Compressor c, double relative, double absolute) {
  std::vector<float> in = Gaussian(4000, 21);
  // Magnitudes spread over many binades, from fp16's subnormals to a few thousand.
  for (size_t i = 0; i < in.size(); ++i) in[i] *= std::ldexp(1.0f, int(i % 30) - 20);
  std::vector<float> out(in.size());
  ASSERT_TRUE(Decompress(c, Encoded(c, in), out).ok());
  for (size_t i = 0; i < in.size(); ++i) {
    EXPECT_LE(std::fabs(double(out[i]) - in[i]), relative * std::fabs(in[i]) + absolute)
        << c << " " << in[i] << " -> " << out[i];
  }
}

TEST(HalfCastTest, Fp16IsWithinHalfAnUlp) {
  // 11 significant bits: 2^-11 relative; below 2^-14 subnormal steps of 2^-24 (half: 2^-25).
  CheckRelativeError(Compressor::kFp16, 0x1p-11, 0x1p-25);
}

TEST(HalfCastTest, Bf16IsWithinHalfAnUlp) { CheckRelativeError(Compressor::kBf16, 0x1p-8, 0.0); }

TEST(HalfCastTest, RepresentableValuesAreExact) {
  std::vector<float> in = {0.0f, 0.5f, -3.0f, 1024.0f, -0.25f, 65504.0f}, out(in.size());
  for (Compressor c : {Compressor::kFp16, Compressor::kBf16}) {
    if (c == Compressor::kBf16) in.back() = 65536.0f;
    ASSERT_TRUE(Decompress(c, Encoded(c, in), out).ok());
    for (size_t i = 0; i < in.size(); ++i) EXPECT_EQ(out[i], in[i]) << c << " " << i;
  }
}

TEST(HalfCastTest, OutOfRangeValuesSaturate) {
  constexpr float kMax = std::numeric_limits<float>::max();
  std::vector<float> in = {1e6f, -70000.0f, kMax, -kMax}, out(in.size());
  ASSERT_TRUE(Decompress(Compressor::kFp16, Encoded(Compressor::kFp16, in), out).ok());
  EXPECT_EQ(out, (std::vector<float>{65504.0f, -65504.0f, 65504.0f, -65504.0f}));
  ASSERT_TRUE(Decompress(Compressor::kBf16, Encoded(Compressor::kBf16, in), out).ok());
  EXPECT_EQ(out[2], BF16Max());
  EXPECT_EQ(out[3], -BF16Max());
}

TEST(HalfCastTest, InfinitiesAndNaNsInPayloadsAreRefused) {
  struct Case {
    Compressor c;
    uint16_t bits;
  };
  for (Case k : {Case{Compressor::kFp16, 0x7c00}, Case{Compressor::kFp16, 0xfe00},
                 Case{Compressor::kBf16, 0x7f80}, Case{Compressor::kBf16, 0xffc1}}) {
    std::string bytes = Encoded(k.c, {1.0f, 2.0f, 3.0f});
    Poke(bytes, 4, k.bits);
    std::vector<float> out(3, 7.0f);
    EXPECT_EQ(Decompress(k.c, bytes, out).code(), absl::StatusCode::kInvalidArgument) << k.c;
    EXPECT_EQ(DecompressAdd(k.c, bytes, out).code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(out, std::vector<float>(3, 7.0f));
  }
}

}  // namespace
}  // namespace herd::compression::testing
