#include "worker/executors/flat_model.h"

#include <algorithm>

namespace herd::worker {

FlatModel::FlatModel(const std::vector<ModelTensor>& tensors) : tensors_(tensors) {
  size_t total = 0;
  for (const ModelTensor& t : tensors_) total += t.count;
  flat_.resize(total);
}

void FlatModel::Gather() {
  float* at = flat_.data();
  for (const ModelTensor& t : tensors_) at = std::copy(t.param, t.param + t.count, at);
}

void FlatModel::Scatter() {
  const float* at = flat_.data();
  for (const ModelTensor& t : tensors_) {
    std::copy(at, at + t.count, t.param);
    at += t.count;
  }
}

IterationGradients::IterationGradients(const std::vector<ModelTensor>& tensors)
    : ready_(tensors.size(), false) {
  for (const ModelTensor& t : tensors) grads_.emplace_back(t.count, 0.0f);
}

void IterationGradients::Reset() { std::fill(ready_.begin(), ready_.end(), false); }

void IterationGradients::Store(int tensor, std::span<const float> grad) {
  auto& g = grads_[tensor];
  std::copy(grad.begin(), grad.begin() + std::min(grad.size(), g.size()), g.begin());
  ready_[tensor] = true;
}

void IterationGradients::FillMissing() {
  for (size_t t = 0; t < grads_.size(); ++t) {
    if (!ready_[t]) std::fill(grads_[t].begin(), grads_[t].end(), 0.0f);
  }
}

}  // namespace herd::worker
