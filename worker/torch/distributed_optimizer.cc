#include "worker/torch/distributed_optimizer.h"

#include <span>

#include "absl/strings/str_format.h"

namespace herd::worker::torchnet {

DistributedOptimizer::DistributedOptimizer(std::vector<torch::Tensor> parameters)
    : parameters_(std::move(parameters)) {
  for (size_t t = 0; t < parameters_.size(); ++t) {
    const int index = static_cast<int>(t);
    parameters_[t].register_hook([this, index](torch::Tensor grad) {
      if (executor_ == nullptr || !hook_error_.ok()) return;
      torch::Tensor g = grad.contiguous();
      if (g.scalar_type() != torch::kFloat32) {
        hook_error_ = absl::InvalidArgumentError(
            absl::StrFormat("tensor %d has a gradient of type %s; executors take fp32", index,
                            std::string(c10::toString(g.scalar_type()))));
        return;
      }
      hook_error_ = executor_->GradientReady(
          index, std::span<const float>(g.data_ptr<float>(), static_cast<size_t>(g.numel())));
    });
  }
}

void DistributedOptimizer::zero_grad() {
  for (torch::Tensor& p : parameters_) p.mutable_grad() = torch::Tensor();
}

absl::Status DistributedOptimizer::TakeHookError() {
  absl::Status st = hook_error_;
  hook_error_ = absl::OkStatus();
  return st;
}

absl::Status DistributedOptimizer::step() {
  if (executor_ == nullptr) return absl::FailedPreconditionError("no executor to step");
  return executor_->EndBackward();
}

}  // namespace herd::worker::torchnet
