#include "algorithms/compression/compressor.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

namespace herd::compression {
namespace {

std::vector<float> Random(size_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(gen);
  return v;
}

TEST(CompressorTest, ParsesNamesAndRejectsOthers) {
  EXPECT_EQ(*ParseCompressor("minmax_uint8"), Compressor::kMinMaxUInt8);
  EXPECT_EQ(*ParseCompressor("sign"), Compressor::kSign);
  auto bad = ParseCompressor("zip");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("minmax_uint8"), absl::string_view::npos);
}

TEST(CompressorTest, MinMaxErrorIsWithinHalfAStep) {
  for (size_t n : {0u, 1u, 7u, 1000u}) {
    auto in = Random(n, 1);
    std::string bytes;
    Compress(Compressor::kMinMaxUInt8, in, &bytes);
    ASSERT_EQ(bytes.size(), 8 + n);
    std::vector<float> out(n, -99.0f);
    ASSERT_TRUE(Decompress(Compressor::kMinMaxUInt8, bytes, out).ok());
    if (n == 0) continue;
    const float lo = *std::min_element(in.begin(), in.end());
    const float hi = *std::max_element(in.begin(), in.end());
    const float half_step = (hi - lo) / 510.0f + 1e-6f;
    for (size_t i = 0; i < n; ++i) EXPECT_NEAR(out[i], in[i], half_step) << i;
  }
}

TEST(CompressorTest, MinMaxIsExactForConstants) {
  std::vector<float> in(33, 2.5f), out(33);
  std::string bytes;
  Compress(Compressor::kMinMaxUInt8, in, &bytes);
  ASSERT_TRUE(Decompress(Compressor::kMinMaxUInt8, bytes, out).ok());
  for (float v : out) EXPECT_EQ(v, 2.5f);
}

TEST(CompressorTest, NonFiniteInputsKeepTheEncodingDecodable) {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> in = {1.0f, std::nanf(""), inf, -2.0f, -inf}, out(5);
  for (Compressor c : {Compressor::kMinMaxUInt8, Compressor::kSign}) {
    std::string bytes;
    Compress(c, in, &bytes);
    ASSERT_TRUE(Decompress(c, bytes, out).ok()) << CompressorName(c);
    for (float v : out) EXPECT_TRUE(std::isfinite(v)) << CompressorName(c);
  }
}

TEST(CompressorTest, SignKeepsSignsAndMeanMagnitude) {
  std::vector<float> in = {1.0f, -3.0f, 0.5f, -0.5f, 2.0f, -1.0f, 4.0f, -2.0f, 1.0f};
  std::string bytes;
  Compress(Compressor::kSign, in, &bytes);
  ASSERT_EQ(bytes.size(), 4u + 2u);
  std::vector<float> out(in.size());
  ASSERT_TRUE(Decompress(Compressor::kSign, bytes, out).ok());
  const float scale = 15.0f / 9.0f;
  for (size_t i = 0; i < in.size(); ++i) {
    EXPECT_FLOAT_EQ(out[i], in[i] >= 0 ? scale : -scale) << i;
  }
}

TEST(CompressorTest, DecompressAddAccumulates) {
  auto in = Random(100, 2);
  std::string bytes;
  Compress(Compressor::kSign, in, &bytes);
  std::vector<float> once(100), twice(100, 0.0f);
  ASSERT_TRUE(Decompress(Compressor::kSign, bytes, once).ok());
  ASSERT_TRUE(DecompressAdd(Compressor::kSign, bytes, twice).ok());
  ASSERT_TRUE(DecompressAdd(Compressor::kSign, bytes, twice).ok());
  for (size_t i = 0; i < 100; ++i) EXPECT_FLOAT_EQ(twice[i], 2 * once[i]);
}

TEST(CompressorTest, BadPayloadsAreRejectedAndOutputUntouched) {
  std::vector<float> out(10, 7.0f);
  // Wrong size.
  auto st = Decompress(Compressor::kMinMaxUInt8, std::string(17, '\0'), out);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("expected 18 bytes"), absl::string_view::npos) << st.message();
  // NaN header.
  std::string bytes(18, '\0');
  const float nan = std::nanf("");
  std::memcpy(bytes.data(), &nan, 4);
  EXPECT_EQ(Decompress(Compressor::kMinMaxUInt8, bytes, out).code(),
            absl::StatusCode::kInvalidArgument);
  // min > max.
  const float lo = 2.0f, hi = 1.0f;
  std::memcpy(bytes.data(), &lo, 4);
  std::memcpy(bytes.data() + 4, &hi, 4);
  EXPECT_EQ(Decompress(Compressor::kMinMaxUInt8, bytes, out).code(),
            absl::StatusCode::kInvalidArgument);
  // Negative sign scale.
  std::string sign(4 + 2, '\0');
  const float neg = -1.0f;
  std::memcpy(sign.data(), &neg, 4);
  EXPECT_EQ(Decompress(Compressor::kSign, sign, out).code(), absl::StatusCode::kInvalidArgument);
  for (float v : out) EXPECT_EQ(v, 7.0f);
}

}  // namespace
}  // namespace herd::compression

namespace herd::compression {
namespace {

TEST(CompressorNamesTest, ParsesTheParameterisedCompressors) {
  EXPECT_EQ(*ParseCompressor("fp16"), Compressor::kFp16);
  EXPECT_EQ(*ParseCompressor("bf16"), Compressor::kBf16);
  EXPECT_EQ(ParseCompressor("qsgd")->levels(), Compressor::kDefaultQsgdLevels);
  EXPECT_EQ(*ParseCompressor("qsgd:4"), *Compressor::Qsgd(4));
  EXPECT_EQ(ParseCompressor("topk")->density(), Compressor::kDefaultTopKDensity);
  EXPECT_EQ(*ParseCompressor("topk:0.25"), *Compressor::TopK(0.25));
  EXPECT_EQ(CompressorName(*ParseCompressor("qsgd")), "qsgd:127");
  EXPECT_EQ(CompressorName(*ParseCompressor("topk:0.001")), "topk:0.001");
  EXPECT_EQ(Compressor(), Compressor::kMinMaxUInt8);
  EXPECT_NE(*Compressor::Qsgd(4), *Compressor::Qsgd(5));
}

TEST(CompressorNamesTest, RefusesBadParameters) {
  for (const char* bad : {"qsgd:0", "qsgd:128", "qsgd:", "qsgd:x", "qsgd:4x", "topk:0", "topk:1.5",
                          "topk:", "topk:abc", "topk:nan", "topk:-0.1", "fp32", "QSGD"}) {
    auto c = ParseCompressor(bad);
    EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
  EXPECT_NE(ParseCompressor("zip").status().message().find("topk:D"), absl::string_view::npos);
}

}  // namespace
}  // namespace herd::compression
