#include "worker/local_optimizer.h"

namespace herd::worker {

LocalOptimizer::LocalOptimizer(optim::OptimizerConfig config,
                               const std::vector<ModelTensor>& tensors)
    : config_(config) {
  const int slots = optim::OptimizerSlots(config.kind);
  for (const ModelTensor& t : tensors) {
    State s{t.param, t.count, {}, {}, 0};
    if (slots >= 1) s.slot0.assign(t.count, 0.0f);
    if (slots >= 2) s.slot1.assign(t.count, 0.0f);
    states_.push_back(std::move(s));
  }
}

void LocalOptimizer::Step(int t, std::span<const float> grad) {
  State& s = states_[t];
  optim::ApplyOptimizer(config_, std::span<float>(s.param, s.count), grad.first(s.count), s.slot0,
                        s.slot1, ++s.step);
}

}  // namespace herd::worker
