#pragma once
// The optimizers of herd, on flat fp32 buffers: what a shard applies to a key after a round
// (ps_sync) or a push (ps_async), and what a worker applies after a collective mode averaged
// its gradients.
// Weight decay is L2: it is added to the gradient before the step, as in torch.optim.SGD.
//   sgd:      p -= lr * g
//   momentum: m = mu * m + g;  p -= lr * m
//   adam:     m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2;
//             p -= lr * (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps)

#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "absl/status/statusor.h"

namespace herd::optim {

struct OptimizerConfig {
  enum class Kind { kSgd, kMomentum, kAdam };
  Kind kind = Kind::kSgd;
  double learning_rate = 0.01;
  double momentum = 0.9;
  double weight_decay = 0.0;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double epsilon = 1e-8;
  // When set, a worker's local optimizer reads its learning rate from here at every step, so a
  // training program can change it between iterations (a torch LR scheduler in the Python
  // front end). Shards ignore it.
  std::shared_ptr<const std::atomic<double>> learning_rate_source;
};

// "sgd" | "momentum" | "adam" (empty: sgd). INVALID_ARGUMENT otherwise.
absl::StatusOr<OptimizerConfig::Kind> ParseOptimizer(const std::string& name);
std::string OptimizerName(OptimizerConfig::Kind kind);

// How many per-element state vectors the optimizer keeps (0, 1 or 2).
int OptimizerSlots(OptimizerConfig::Kind kind);
// The name of slot `slot` (0 or 1) in saved training state: "momentum" (momentum's slot0),
// "adam_m", "adam_v" (Adam's slot0, slot1). Named by what the values are, so Adam never loads
// momentum's values and a switch between them starts the new optimizer fresh.
const char* SlotKind(OptimizerConfig::Kind kind, int slot);

// One step on `params` with gradient `grad`. `slot0` / `slot1` hold the optimizer state (of
// params.size() values each, or empty when unused); `step` counts from 1 (Adam's bias
// correction).
void ApplyOptimizer(const OptimizerConfig& config, std::span<float> params,
                    std::span<const float> grad, std::span<float> slot0, std::span<float> slot1,
                    int64_t step);

}  // namespace herd::optim
