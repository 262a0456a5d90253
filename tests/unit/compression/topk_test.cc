// Top-k as a compressor: the k largest magnitudes exactly, zeros elsewhere, k by rounding, ties
// to the lower index, and payloads with bad indices or values refused.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "tests/unit/compression/compression_test_util.h"

namespace herd::compression::testing {
namespace {

TEST(TopKTest, KeepsTheLargestMagnitudesExactly) {
  const Compressor c = Parsed("topk:0.05");
  auto in = Gaussian(2000, 31);
  std::vector<float> out(in.size());
  ASSERT_TRUE(Decompress(c, Encoded(c, in), out).ok());
  size_t kept = 0;
  float smallest_kept = INFINITY, largest_dropped = 0.0f;
  for (size_t i = 0; i < in.size(); ++i) {
    if (out[i] != 0.0f) {
      EXPECT_EQ(out[i], in[i]) << i;
      ++kept;
      smallest_kept = std::min(smallest_kept, std::fabs(in[i]));
    } else {
      largest_dropped = std::max(largest_dropped, std::fabs(in[i]));
    }
  }
  EXPECT_EQ(kept, 100u);
  EXPECT_LE(largest_dropped, smallest_kept);
}

TEST(TopKTest, KIsTheRoundedShareAtLeastOne) {
  // 0.07 * 100 is 7.000000000000001 in double: rounding gives 7, a ceiling would give 8.
  EXPECT_EQ(CompressedBytes(Parsed("topk:0.07"), 100), 7u * 8u);
  EXPECT_EQ(CompressedBytes(Parsed("topk:0.001"), 10), 1u * 8u);
  EXPECT_EQ(CompressedBytes(Parsed("topk:1"), 10), 10u * 8u);
  EXPECT_EQ(CompressedBytes(Parsed("topk:0.5"), 0), 0u);
}

TEST(TopKTest, TiesGoToTheLowerIndex) {
  const Compressor c = Parsed("topk:0.5");
  std::vector<float> in = {1.0f, -2.0f, 2.0f, -2.0f}, out(4);
  ASSERT_TRUE(Decompress(c, Encoded(c, in), out).ok());
  EXPECT_EQ(out, (std::vector<float>{0.0f, -2.0f, 2.0f, 0.0f}));
}

TEST(TopKTest, DecompressAddTouchesOnlyTheKeptIndices) {
  const Compressor c = Parsed("topk:0.25");
  std::vector<float> in = {0.0f, 5.0f, 0.5f, 0.1f}, acc = {1.0f, 1.0f, 1.0f, 1.0f};
  ASSERT_TRUE(DecompressAdd(c, Encoded(c, in), acc).ok());
  EXPECT_EQ(acc, (std::vector<float>{1.0f, 6.0f, 1.0f, 1.0f}));
}

TEST(TopKTest, BadIndicesAndValuesAreRefusedAndOutputUntouched) {
  const Compressor c = Parsed("topk:0.5");
  std::vector<float> in = {4.0f, 1.0f, 3.0f, 2.0f};  // keeps indices 0 and 2
  const std::string good = Encoded(c, in);
  std::string unsorted = good, duplicate = good, beyond = good, nan_value = good;
  Poke(unsorted, 0, uint32_t{3});
  Poke(duplicate, 4, uint32_t{0});
  Poke(beyond, 4, uint32_t{4});
  Poke(nan_value, 8, std::nanf(""));
  std::vector<float> out(4, 7.0f);
  for (const std::string* b : {&unsorted, &duplicate, &beyond, &nan_value}) {
    EXPECT_EQ(Decompress(c, *b, out).code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(DecompressAdd(c, *b, out).code(), absl::StatusCode::kInvalidArgument);
  }
  EXPECT_EQ(out, std::vector<float>(4, 7.0f));
}

}  // namespace
}  // namespace herd::compression::testing
