// CatchUpAdam: delivered every iteration it is Adam bitwise; an element delivered after n
// iterations takes the n steps its delivery covers (worked out by hand), so a steady gradient
// delivered in bursts moves the parameter as far as dense Adam, where Adam on the bursts falls
// far behind; an element not delivered does not move.
#include "worker/executors/catch_up_adam.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace herd::worker {
namespace {

optim::OptimizerConfig Adam(double lr, double weight_decay = 0) {
  optim::OptimizerConfig c;
  c.kind = optim::OptimizerConfig::Kind::kAdam;
  c.learning_rate = lr;
  c.weight_decay = weight_decay;
  return c;
}

TEST(CatchUpAdamTest, DeliveredEveryIterationIsAdam) {
  std::vector<float> p = {0.5f, -1.0f, 2.0f, 0.0f}, q = p;
  std::vector<float> m(4, 0.0f), v(4, 0.0f);
  const optim::OptimizerConfig c = Adam(0.01, 0.1);
  CatchUpAdam adam(c, {{"w", p.data(), p.size()}});
  for (int step = 1; step <= 6; ++step) {
    std::vector<float> g = {0.3f * step, -0.2f, 1.5f / step, 0.01f};
    optim::ApplyOptimizer(c, q, g, m, v, step);
    adam.ToStep(0, g, step);
    for (size_t i = 0; i < p.size(); ++i) p[i] -= g[i];
    ASSERT_EQ(p, q) << "step " << step;
  }
}

TEST(CatchUpAdamTest, ADeliveryAfterNIterationsTakesNSteps) {
  std::vector<float> p = {1.0f, 1.0f};
  const double lr = 0.001, b1 = 0.9, b2 = 0.999;
  CatchUpAdam adam(Adam(lr), {{"w", p.data(), p.size()}});
  // Element 0 delivered at step 1 (g = 2); element 1 first at step 3, the sum of 3 iterations.
  std::vector<float> d = {2.0f, 0.0f};
  adam.ToStep(0, d, 1);
  EXPECT_NEAR(d[0], lr, 2e-5 * lr);  // Adam's first step: lr sign(g)
  EXPECT_EQ(d[1], 0.0f);             // not delivered: no move
  d = {0.0f, 0.0f};
  adam.ToStep(0, d, 2);
  EXPECT_EQ(d, (std::vector<float>{0.0f, 0.0f}));
  d = {0.0f, -6.0f};  // element 1: g = -2 for each of 3 iterations
  adam.ToStep(0, d, 3);
  // m = (1 - b1^3) g, v = (1 - b2^3) g^2; bias-corrected at step 3 both are exact: 3 lr sign(g).
  EXPECT_EQ(d[0], 0.0f);
  EXPECT_NEAR(d[1], -3 * lr, 6e-5 * lr);
  // Element 0 again at step 5 with the sum of 4 iterations of g = 1 (n = 4, since step 1).
  d = {4.0f, 0.0f};
  adam.ToStep(0, d, 5);
  const double m = std::pow(b1, 4) * (1 - b1) * 2 + (1 - std::pow(b1, 4)) * 1;
  const double v = std::pow(b2, 4) * (1 - b2) * 4 + (1 - std::pow(b2, 4)) * 1;
  const double want = 4 * lr * (m / (1 - std::pow(b1, 5))) / std::sqrt(v / (1 - std::pow(b2, 5)));
  EXPECT_NEAR(d[0], want, 1e-5 * want);  // fp32 state
}

// A steady gradient that error feedback delivers every 20 iterations as the sum of 20: catch-up
// Adam moves the parameter as far as dense Adam (within 10 %); Adam applied to the bursts moves
// it less than half as far, which is why the sparse modes use catch-up Adam.
TEST(CatchUpAdamTest, BurstsOfASteadyGradientMoveAsFarAsDenseAdam) {
  const optim::OptimizerConfig c = Adam(0.001);
  constexpr int kSteps = 400, kEvery = 20;
  const float g = 0.05f;
  std::vector<float> dense = {0.0f}, burst = {0.0f}, caught = {0.0f};
  std::vector<float> m(1), v(1), bm(1), bv(1);
  CatchUpAdam adam(c, {{"w", caught.data(), 1}});
  for (int step = 1; step <= kSteps; ++step) {
    const std::vector<float> one = {g};
    optim::ApplyOptimizer(c, dense, one, m, v, step);
    std::vector<float> delivered = {step % kEvery == 0 ? g * kEvery : 0.0f};
    optim::ApplyOptimizer(c, burst, delivered, bm, bv, step);
    adam.ToStep(0, delivered, step);
    caught[0] -= delivered[0];
  }
  EXPECT_NEAR(caught[0], dense[0], 0.1 * std::fabs(dense[0]));
  EXPECT_LT(std::fabs(burst[0]), 0.5 * std::fabs(dense[0]));
}

}  // namespace
}  // namespace herd::worker
