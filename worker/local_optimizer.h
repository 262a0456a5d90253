#pragma once
// The optimizer a worker applies to its own copy of the model after a collective mode averaged
// the gradients (every rank applies the same update to the same parameters, so the replicas
// stay identical). State (momentum, Adam moments, step) per tensor. The sparse modes run one per
// rank before error feedback instead (ToStep; docs/sparse.md, "In training").

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
  // The step of tensor `t` without applying it: replaces `grad` (t's count values) by what Step
  // would subtract from the parameters, advancing the state the same way.
  void ToStep(int t, std::span<float> grad);
  // Zeroes the first slot (momentum; Adam's first moment) of tensor `t` at every element where
  // `where` is non-zero.
  void MaskMomentum(int t, std::span<const float> where);

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
