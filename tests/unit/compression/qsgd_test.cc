// QSGD: within one level of every value, unbiased over the rounding, reproducible per seed, and
// strict about payloads (norms, levels beyond S).

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "tests/unit/compression/compression_test_util.h"

namespace herd::compression::testing {
namespace {

// The L2 norm of each bucket of `in`.
std::vector<double> BucketNorms(const std::vector<float>& in) {
  std::vector<double> norms((in.size() + kQsgdBucket - 1) / kQsgdBucket, 0.0);
  for (size_t i = 0; i < in.size(); ++i) norms[i / kQsgdBucket] += double(in[i]) * in[i];
  for (double& n : norms) n = std::sqrt(n);
  return norms;
}

TEST(QsgdTest, EveryValueIsWithinOneLevel) {
  for (int s : {1, 2, 3, 7, 8, 127}) {
    for (size_t n : {1u, 100u, 511u, 513u, 5000u}) {
      auto in = Gaussian(n, 11, 3.0f);
      const Compressor c = *Compressor::Qsgd(s);
      std::vector<float> out(n);
      ASSERT_TRUE(Decompress(c, Encoded(c, in, 5), out).ok());
      const auto norms = BucketNorms(in);
      for (size_t i = 0; i < n; ++i) {
        const double level = norms[i / kQsgdBucket] / s;
        EXPECT_LE(std::fabs(out[i] - in[i]), level * (1 + 1e-6)) << "s=" << s << " i=" << i;
        if (out[i] != 0.0f) {
          EXPECT_EQ(std::signbit(out[i]), std::signbit(in[i])) << i;
        }
      }
    }
  }
}

TEST(QsgdTest, UnbiasedOverSeeds) {
  const Compressor c = *Compressor::Qsgd(2);
  auto in = Gaussian(64, 12);
  const double level = BucketNorms(in)[0] / 2;
  constexpr int kTrials = 20000;
  std::vector<double> mean(in.size(), 0.0);
  std::vector<float> out(in.size());
  for (int t = 0; t < kTrials; ++t) {
    ASSERT_TRUE(Decompress(c, Encoded(c, in, uint64_t(t)), out).ok());
    for (size_t i = 0; i < in.size(); ++i) mean[i] += out[i] / kTrials;
  }
  // One draw is within one level, so its standard deviation is at most level / 2; five
  // standard deviations of the mean of kTrials draws.
  const double tolerance = 5 * (level / 2) / std::sqrt(double(kTrials));
  for (size_t i = 0; i < in.size(); ++i) EXPECT_NEAR(mean[i], in[i], tolerance) << i;
}

TEST(QsgdTest, ReproduciblePerSeedAndDifferentAcrossSeeds) {
  const Compressor c = Parsed("qsgd:3");
  auto in = Gaussian(2000, 13);
  EXPECT_EQ(Encoded(c, in, 42), Encoded(c, in, 42));
  EXPECT_NE(Encoded(c, in, 42), Encoded(c, in, 43));
}

TEST(QsgdTest, ZeroBucketsAndExtremeLevelsAreExact) {
  const Compressor c = Parsed("qsgd");
  // Bucket 0 all zero; bucket 1 one non-zero value (its own norm: level S exactly).
  std::vector<float> in(2 * kQsgdBucket, 0.0f);
  in[kQsgdBucket + 3] = -4.25f;
  std::vector<float> out(in.size(), 1.0f);
  ASSERT_TRUE(Decompress(c, Encoded(c, in), out).ok());
  for (size_t i = 0; i < in.size(); ++i) EXPECT_EQ(out[i], in[i]) << i;
}

TEST(QsgdTest, HugeValuesSaturateTheNormAndKeepTheirSign) {
  constexpr float kMax = std::numeric_limits<float>::max();
  std::vector<float> in = {kMax, -kMax, kMax, 1.0f};
  std::vector<float> out(in.size());
  ASSERT_TRUE(Decompress(Parsed("qsgd"), Encoded(Parsed("qsgd"), in), out).ok());
  EXPECT_EQ(out[0], kMax);
  EXPECT_EQ(out[1], -kMax);
  EXPECT_GE(out[3], 0.0f);
}

TEST(QsgdTest, CodeWidthFollowsTheLevels) {
  // 1000 values: 2 norms, then 2, 4 or 8 bits a value.
  EXPECT_EQ(CompressedBytes(Parsed("qsgd:1"), 1000), 8u + 250u);
  EXPECT_EQ(CompressedBytes(Parsed("qsgd:7"), 1000), 8u + 500u);
  EXPECT_EQ(CompressedBytes(Parsed("qsgd:8"), 1000), 8u + 1000u);
  EXPECT_EQ(CompressedBytes(Parsed("qsgd"), 1000), 8u + 1000u);
}

TEST(QsgdTest, BadPayloadsAreRefusedAndOutputUntouched) {
  const Compressor c = Parsed("qsgd:5");  // 4-bit codes: magnitudes 6 and 7 are invalid
  auto in = Gaussian(600, 14);
  std::vector<float> out(in.size(), 7.0f);
  std::string bytes = Encoded(c, in);
  std::vector<float> scratch(in.size());
  ASSERT_TRUE(Decompress(c, bytes, scratch).ok());

  std::string nan_norm = bytes;
  Poke(nan_norm, 4, std::nanf(""));
  std::string negative_norm = bytes;
  Poke(negative_norm, 0, -1.0f);
  std::string bad_level = bytes;
  bad_level[2 * sizeof(float) + 299] = static_cast<char>(0x07);  // value 598: level 7 > 5
  for (const std::string* b : {&nan_norm, &negative_norm, &bad_level}) {
    auto st = Decompress(c, *b, out);
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
    EXPECT_EQ(DecompressAdd(c, *b, out).code(), absl::StatusCode::kInvalidArgument);
  }
  for (float v : out) EXPECT_EQ(v, 7.0f);
}

}  // namespace
}  // namespace herd::compression::testing
