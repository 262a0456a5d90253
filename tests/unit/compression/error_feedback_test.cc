#include "algorithms/compression/error_feedback.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

namespace herd::compression {
namespace {

// Over many steps, sum of decoded outputs + final residual == sum of inputs (float rounding).
void CheckNothingLost(Compressor c) {
  constexpr size_t kN = 257;
  std::mt19937 gen(7);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> residual(kN, 0.0f), scratch, decoded(kN);
  std::vector<double> meant(kN, 0.0), sent(kN, 0.0);
  std::string bytes;
  for (int step = 0; step < 50; ++step) {
    std::vector<float> x(kN);
    for (auto& v : x) v = dist(gen);
    for (size_t i = 0; i < kN; ++i) meant[i] += x[i];
    CompressWithFeedback(c, x, residual, &bytes, &scratch);
    ASSERT_TRUE(Decompress(c, bytes, decoded).ok());
    for (size_t i = 0; i < kN; ++i) sent[i] += decoded[i];
  }
  double worst = 0.0, lost_without = 0.0;
  for (size_t i = 0; i < kN; ++i) {
    worst = std::max(worst, std::fabs(sent[i] + residual[i] - meant[i]));
    lost_without += std::fabs(sent[i] - meant[i]);
  }
  EXPECT_LT(worst, 1e-3) << CompressorName(c);
  // The residual is what makes the books balance: without it they would not.
  EXPECT_GT(lost_without, 1e-2) << CompressorName(c);
}

TEST(ErrorFeedbackTest, MinMaxLosesNothing) { CheckNothingLost(Compressor::kMinMaxUInt8); }
TEST(ErrorFeedbackTest, SignLosesNothing) { CheckNothingLost(Compressor::kSign); }

}  // namespace
}  // namespace herd::compression
