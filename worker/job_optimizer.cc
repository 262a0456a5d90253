#include "worker/job_optimizer.h"

namespace herd::worker {

absl::StatusOr<optim::OptimizerConfig> OptimizerOfJob(const herd::v1::JobSpec& spec) {
  const herd::v1::OptimizerSpec& o = spec.optimizer();
  optim::OptimizerConfig c;
  absl::StatusOr<optim::OptimizerConfig::Kind> kind = optim::ParseOptimizer(o.name());
  if (!kind.ok()) return kind.status();
  c.kind = *kind;
  if (c.kind == optim::OptimizerConfig::Kind::kAdam && o.decoupled_weight_decay()) {
    c.kind = optim::OptimizerConfig::Kind::kAdamW;
  }
  if (o.learning_rate() > 0) c.learning_rate = o.learning_rate();
  if (o.momentum() > 0) c.momentum = o.momentum();
  c.weight_decay = o.weight_decay();
  if (o.beta1() > 0) c.beta1 = o.beta1();
  if (o.beta2() > 0) c.beta2 = o.beta2();
  if (o.epsilon() > 0) c.epsilon = o.epsilon();
  return c;
}

}  // namespace herd::worker
