// The worker's local optimizer with a live learning rate (OptimizerConfig::learning_rate_source):
// what lets a training program's LR scheduler (the Python front end's) change the rate between
// steps. Each step must use the rate the source holds at that step, and nothing else changes.
#include "worker/local_optimizer.h"

#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <vector>

namespace herd::worker {
namespace {

TEST(LocalOptimizerTest, ReadsTheLearningRateSourceAtEveryStep) {
  std::vector<float> param = {1.0f, 2.0f};
  std::vector<ModelTensor> tensors = {{"w", param.data(), param.size()}};
  auto lr = std::make_shared<std::atomic<double>>(0.5);
  optim::OptimizerConfig config;
  config.kind = optim::OptimizerConfig::Kind::kSgd;
  config.learning_rate = 99;  // ignored: the source decides
  config.learning_rate_source = lr;
  LocalOptimizer opt(config, tensors);
  const std::vector<float> grad = {1.0f, -2.0f};
  opt.Step(0, grad);  // p -= 0.5 g
  EXPECT_FLOAT_EQ(param[0], 0.5f);
  EXPECT_FLOAT_EQ(param[1], 3.0f);
  lr->store(0.25);
  opt.Step(0, grad);  // p -= 0.25 g
  EXPECT_FLOAT_EQ(param[0], 0.25f);
  EXPECT_FLOAT_EQ(param[1], 3.5f);
}

TEST(LocalOptimizerTest, WithoutASourceTheConfiguredRateStays) {
  std::vector<float> param = {1.0f};
  std::vector<ModelTensor> tensors = {{"w", param.data(), param.size()}};
  optim::OptimizerConfig config;
  config.kind = optim::OptimizerConfig::Kind::kMomentum;
  config.learning_rate = 0.1;
  config.momentum = 0.5;
  LocalOptimizer opt(config, tensors);
  const std::vector<float> grad = {1.0f};
  opt.Step(0, grad);  // m = 1, p = 1 - 0.1
  opt.Step(0, grad);  // m = 1.5, p = 0.9 - 0.15
  EXPECT_FLOAT_EQ(param[0], 0.75f);
}

}  // namespace
}  // namespace herd::worker
