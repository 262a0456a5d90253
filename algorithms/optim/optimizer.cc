#include "algorithms/optim/optimizer.h"

#include <cmath>

namespace herd::optim {

absl::StatusOr<OptimizerConfig::Kind> ParseOptimizer(const std::string& name) {
  if (name.empty() || name == "sgd") return OptimizerConfig::Kind::kSgd;
  if (name == "momentum") return OptimizerConfig::Kind::kMomentum;
  if (name == "adam") return OptimizerConfig::Kind::kAdam;
  if (name == "adamw") return OptimizerConfig::Kind::kAdamW;
  if (name == "external") return OptimizerConfig::Kind::kExternal;
  return absl::InvalidArgumentError("unknown optimizer '" + name +
                                    "' (herd has: sgd, momentum, adam, adamw)");
}

std::string OptimizerName(OptimizerConfig::Kind kind) {
  switch (kind) {
    case OptimizerConfig::Kind::kSgd:
      return "sgd";
    case OptimizerConfig::Kind::kMomentum:
      return "momentum";
    case OptimizerConfig::Kind::kAdam:
      return "adam";
    case OptimizerConfig::Kind::kAdamW:
      return "adamw";
    case OptimizerConfig::Kind::kExternal:
      return "external";
  }
  return "?";
}

int OptimizerSlots(OptimizerConfig::Kind kind) {
  switch (kind) {
    case OptimizerConfig::Kind::kSgd:
      return 0;
    case OptimizerConfig::Kind::kMomentum:
      return 1;
    case OptimizerConfig::Kind::kAdam:
    case OptimizerConfig::Kind::kAdamW:
      return 2;
    case OptimizerConfig::Kind::kExternal:
      return 0;
  }
  return 0;
}

OptimizerConfig ForTensor(const OptimizerConfig& config, const TensorHyper& hyper) {
  OptimizerConfig c = config;
  c.learning_rate *= hyper.lr_scale;
  if (hyper.weight_decay) c.weight_decay = *hyper.weight_decay;
  return c;
}

const char* SlotKind(OptimizerConfig::Kind kind, int slot) {
  if (kind == OptimizerConfig::Kind::kMomentum) return "momentum";
  if (kind == OptimizerConfig::Kind::kAdam || kind == OptimizerConfig::Kind::kAdamW) {
    return slot == 0 ? "adam_m" : "adam_v";
  }
  return "none";
}

void ApplyOptimizer(const OptimizerConfig& config, std::span<float> params,
                    std::span<const float> grad, std::span<float> slot0, std::span<float> slot1,
                    int64_t step) {
  const float lr = static_cast<float>(config.learning_rate);
  const float wd = static_cast<float>(config.weight_decay);
  const size_t n = params.size();
  switch (config.kind) {
    case OptimizerConfig::Kind::kSgd:
      for (size_t i = 0; i < n; ++i) params[i] -= lr * (grad[i] + wd * params[i]);
      return;
    case OptimizerConfig::Kind::kMomentum: {
      const float mu = static_cast<float>(config.momentum);
      for (size_t i = 0; i < n; ++i) {
        slot0[i] = mu * slot0[i] + grad[i] + wd * params[i];
        params[i] -= lr * slot0[i];
      }
      return;
    }
    case OptimizerConfig::Kind::kExternal:
      return;
    case OptimizerConfig::Kind::kAdamW:
      // Decoupled decay (torch.optim.AdamW): the parameter shrinks before the step, and the
      // moments see the plain gradient.
      if (wd != 0) {
        const float keep = 1.0f - lr * wd;
        for (size_t i = 0; i < n; ++i) params[i] *= keep;
      }
      [[fallthrough]];
    case OptimizerConfig::Kind::kAdam: {
      const bool coupled = config.kind == OptimizerConfig::Kind::kAdam;
      const double b1 = config.beta1, b2 = config.beta2;
      const float c1 = static_cast<float>(1.0 / (1.0 - std::pow(b1, static_cast<double>(step))));
      const float c2 = static_cast<float>(1.0 / (1.0 - std::pow(b2, static_cast<double>(step))));
      const float fb1 = static_cast<float>(b1), fb2 = static_cast<float>(b2);
      const float eps = static_cast<float>(config.epsilon);
      for (size_t i = 0; i < n; ++i) {
        const float g = coupled ? grad[i] + wd * params[i] : grad[i];
        slot0[i] = fb1 * slot0[i] + (1.0f - fb1) * g;
        slot1[i] = fb2 * slot1[i] + (1.0f - fb2) * g * g;
        params[i] -= lr * (slot0[i] * c1) / (std::sqrt(slot1[i] * c2) + eps);
      }
      return;
    }
  }
}

}  // namespace herd::optim
