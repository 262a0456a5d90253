#include "common/half.h"

#include <cmath>
#include <limits>

#include <gtest/gtest.h>

namespace herd {
namespace {

TEST(HalfTest, FP16RoundTripsEveryFiniteValue) {
  // Every fp16 bit pattern that is not NaN survives fp16 -> float -> fp16 exactly.
  for (uint32_t h = 0; h < 0x10000; ++h) {
    if ((h & 0x7c00u) == 0x7c00u && (h & 0x3ffu) != 0) continue;  // NaN
    ASSERT_EQ(FloatToFP16(FP16ToFloat(static_cast<uint16_t>(h))), h) << std::hex << h;
  }
}

TEST(HalfTest, FP16KnownValues) {
  EXPECT_EQ(FP16ToFloat(0x3c00), 1.0f);
  EXPECT_EQ(FP16ToFloat(0xc000), -2.0f);
  EXPECT_EQ(FP16ToFloat(0x7bff), 65504.0f);
  EXPECT_EQ(FP16ToFloat(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(FloatToFP16(65520.0f), 0x7c00);                          // rounds to infinity
  EXPECT_EQ(FloatToFP16(1.0f + std::ldexp(1.0f, -11)), 0x3c00);      // tie to even: stays 1.0
  EXPECT_EQ(FloatToFP16(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);  // tie to even: up
  EXPECT_TRUE(std::isnan(FP16ToFloat(FloatToFP16(std::numeric_limits<float>::quiet_NaN()))));
}

TEST(HalfTest, BF16RoundsToNearestEven) {
  EXPECT_EQ(BF16ToFloat(FloatToBF16(1.0f)), 1.0f);
  EXPECT_EQ(FloatToBF16(BitsToFloat(0x3f808000u)), 0x3f80);  // tie, even stays
  EXPECT_EQ(FloatToBF16(BitsToFloat(0x3f818000u)), 0x3f82);  // tie, odd rounds up
  EXPECT_EQ(FloatToBF16(BitsToFloat(0x3f808001u)), 0x3f81);  // above the tie
  EXPECT_TRUE(std::isnan(BF16ToFloat(FloatToBF16(std::numeric_limits<float>::quiet_NaN()))));
}

}  // namespace
}  // namespace herd
