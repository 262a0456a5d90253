#pragma once
// The model's tensors as one contiguous fp32 vector, for the modes that communicate the model
// itself rather than its gradients (decentralized, decentralized_lp): one collective carries the
// whole model, segmented by the algorithm, instead of one per tensor.

#include <span>
#include <vector>

#include "worker/executor.h"

namespace herd::worker {

class FlatModel {
 public:
  explicit FlatModel(const std::vector<ModelTensor>& tensors);

  float* data() { return flat_.data(); }
  size_t count() const { return flat_.size(); }

  void Gather();   // every tensor's parameters -> the flat vector (forward order)
  void Scatter();  // the flat vector -> every tensor's parameters

 private:
  std::vector<ModelTensor> tensors_;
  std::vector<float> flat_;
};

// The gradients of one iteration, per tensor, with the tensors backward never reached
// zero-filled (as the fused buckets of the dense modes do).
class IterationGradients {
 public:
  explicit IterationGradients(const std::vector<ModelTensor>& tensors);
  void Reset();
  void Store(int tensor, std::span<const float> grad);
  void FillMissing();
  std::span<const float> Of(int tensor) const { return grads_[tensor]; }

 private:
  std::vector<std::vector<float>> grads_;
  std::vector<bool> ready_;
};

}  // namespace herd::worker
