#pragma once
// The optimizers of herd, on flat fp32 buffers: what a shard applies to a key after a round
// (ps_sync) or a push (ps_async), and what a worker applies after a collective mode averaged
// its gradients.
// Weight decay is L2 (added to the gradient before the step, as in torch.optim.SGD and Adam),
// except for adamw, whose decay is decoupled from the gradient (torch.optim.AdamW).
//   sgd:      p -= lr * g
//   momentum: m = mu * m + g;  p -= lr * m
//   adam:     m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2;
//             p -= lr * (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps)
//   adamw:    p -= lr * wd * p; then adam's step without the decay in g
//   external: the training program applies the update with its own optimizer (the Python
//             front end's torch optimizer): a worker hands it each averaged gradient and
//             carries its state (ExternalOptimizer); a shard never runs it

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace herd::optim {

// The optimizer of a training program that applies its updates itself (Kind::kExternal). A
// worker's LocalOptimizer (worker/local_optimizer.h) calls Deliver with each tensor's gradient
// where it would have applied its own step, and reads and writes the program's optimizer
// state through Slots() for checkpoints, mode switches and elastic rollbacks, under herd's
// names (SlotKind: "momentum", "adam_m", "adam_v"; "step" holds the step count, one value).
// Called on the thread that drives the session.
class ExternalOptimizer {
 public:
  struct Slot {
    std::string kind;         // "momentum", "adam_m", "adam_v", "step", or the program's own
    int tensor = 0;           // the model tensor it belongs to
    float* values = nullptr;  // the program's memory, `count` fp32 values, valid until the
    size_t count = 0;         // program registers its slots again
  };
  virtual ~ExternalOptimizer() = default;
  // The gradient of `tensor` to apply (the mean over the workers in the collective modes),
  // copied before the call returns.
  virtual void Deliver(int tensor, std::span<const float> grad) = 0;
  virtual std::vector<Slot> Slots() = 0;
};

// Hyperparameters of one tensor where they differ from the optimizer's (a torch parameter
// group's): its learning rate as a multiple of the optimizer's (which each push carries), and
// its own weight decay. They travel with the job's layout (TensorSpec.lr_scale, weight_decay),
// so a shard applies them to the tensor's keys.
struct TensorHyper {
  double lr_scale = 1.0;
  std::optional<double> weight_decay;
};

struct OptimizerConfig {
  enum class Kind { kSgd, kMomentum, kAdam, kAdamW, kExternal };
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
  // Kind::kExternal: the program's optimizer.
  std::shared_ptr<ExternalOptimizer> external;
};

// The config with `hyper` applied: the learning rate scaled, the tensor's own weight decay.
OptimizerConfig ForTensor(const OptimizerConfig& config, const TensorHyper& hyper);

// "sgd" | "momentum" | "adam" | "adamw" | "external" (empty: sgd). INVALID_ARGUMENT otherwise.
absl::StatusOr<OptimizerConfig::Kind> ParseOptimizer(const std::string& name);
std::string OptimizerName(OptimizerConfig::Kind kind);

// How many per-element state vectors the optimizer keeps (0, 1 or 2; 0 for kExternal, whose
// state is the program's).
int OptimizerSlots(OptimizerConfig::Kind kind);
// The name of slot `slot` (0 or 1) in saved training state: "momentum" (momentum's slot0),
// "adam_m", "adam_v" (Adam's slot0, slot1). Named by what the values are, so Adam never loads
// momentum's values and a switch between them starts the new optimizer fresh. AdamW's slots
// are Adam's (the moments mean the same; only the decay differs).
const char* SlotKind(OptimizerConfig::Kind kind, int slot);

// One step on `params` with gradient `grad`. `slot0` / `slot1` hold the optimizer state (of
// params.size() values each, or empty when unused); `step` counts from 1 (Adam's bias
// correction). kExternal applies nothing here (LocalOptimizer delivers the gradient).
void ApplyOptimizer(const OptimizerConfig& config, std::span<float> params,
                    std::span<const float> grad, std::span<float> slot0, std::span<float> slot1,
                    int64_t step);

}  // namespace herd::optim
