#pragma once
// The optimizer a worker applies to its own copy of the model after a collective mode averaged
// the gradients (every rank applies the same update to the same parameters, so the replicas
// stay identical). State (momentum, Adam moments, step) per tensor.
//
// With OptimizerConfig::Kind::kExternal the program applies the update: Step hands it the
// gradient (ExternalOptimizer::Deliver) and the saved state is the program's optimizer state,
// read from and written to its memory (ExternalOptimizer::Slots), under the same names.

#include <span>
#include <vector>

#include "algorithms/optim/optimizer.h"
#include "worker/executor.h"
#include "worker/executor_state.h"

namespace herd::worker {

class LocalOptimizer {
 public:
  LocalOptimizer(optim::OptimizerConfig config, const std::vector<ModelTensor>& tensors);
  // One step of tensor `t` with gradient `grad` (t's count values).
  void Step(int t, std::span<const float> grad);

  // Saved state: the slots as "<optim::SlotKind>/<tensor>" ("momentum/fc1.weight",
  // "adam_m/...", "adam_v/...") and the step count as the value "step/<tensor>" (Adam's bias
  // correction). SGD saves nothing.
  void ExportState(checkpoint::ProcessState& out) const;
  // Reads the slots by `rule` (kReplicated in the synchronous modes, kAverage in the
  // decentralized ones). A tensor whose slots `from` lacks (another optimizer, or a mode that
  // kept none) starts fresh, step 0.
  absl::StatusOr<ImportStep> ImportState(const checkpoint::StateSource& from, Reshard rule,
                                         ImportWhere where);

 private:
  void ExportExternal(checkpoint::ProcessState& out) const;
  absl::StatusOr<ImportStep> ImportExternal(const checkpoint::StateSource& from, Reshard rule,
                                            ImportWhere where);

  struct State {
    float* param;
    size_t count;
    std::vector<float> slot0, slot1;
    int64_t step = 0;
  };
  optim::OptimizerConfig config_;
  std::vector<ModelTensor> tensors_;
  std::vector<State> states_;
};

}  // namespace herd::worker
