#include "algorithms/optim/optimizer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace herd::optim {
namespace {

TEST(OptimizerTest, AdamFirstStepMovesByLearningRateTimesSign) {
  OptimizerConfig c;
  c.kind = OptimizerConfig::Kind::kAdam;
  c.learning_rate = 0.1;
  std::vector<float> p = {1, 1}, g = {0.5, -2}, m(2, 0), v(2, 0);
  ApplyOptimizer(c, p, g, m, v, 1);
  // Bias-corrected m / sqrt(v) is g / |g| on the first step.
  EXPECT_NEAR(p[0], 0.9f, 1e-6);
  EXPECT_NEAR(p[1], 1.1f, 1e-6);
}

TEST(OptimizerTest, SgdWithWeightDecay) {
  OptimizerConfig c;
  c.learning_rate = 0.1;
  c.weight_decay = 0.5;
  std::vector<float> p = {2}, g = {1};
  ApplyOptimizer(c, p, g, {}, {}, 1);
  EXPECT_FLOAT_EQ(p[0], 2 - 0.1f * (1 + 1));
}

TEST(OptimizerTest, ParsesNames) {
  EXPECT_EQ(*ParseOptimizer(""), OptimizerConfig::Kind::kSgd);
  EXPECT_EQ(*ParseOptimizer("adam"), OptimizerConfig::Kind::kAdam);
  EXPECT_EQ(ParseOptimizer("lamb").status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace herd::optim
