#pragma once
// The libtorch side of an executor: installs a gradient hook on every parameter, so each
// gradient goes to the executor the moment backward produces it (what lets WFBP and DeAR start
// a bucket's communication while backward continues), and a DistributedOptimizer whose step()
// ends the iteration's backward in the executor, which applies the update (at once, or, in
// dear, bucket by bucket before the next forward).
//
// The executor can change between iterations (a mode switch); hooks always reach the current
// one. A hook cannot return an error to autograd: the first error is kept and returned by
// TakeHookError() after backward.

#include <torch/torch.h>

#include <vector>

#include "absl/status/status.h"
#include "worker/executor.h"

namespace herd::worker::torchnet {

class DistributedOptimizer {
 public:
  // `parameters` in forward order, the order of the executor's tensors.
  explicit DistributedOptimizer(std::vector<torch::Tensor> parameters);

  void set_executor(Executor* executor) { executor_ = executor; }
  // Drops the gradients autograd accumulated into .grad (the executor got its own copy).
  void zero_grad();
  // The first error a gradient hook met during the last backward (then OK again).
  absl::Status TakeHookError();
  // Ends backward in the executor.
  absl::Status step();

 private:
  std::vector<torch::Tensor> parameters_;
  Executor* executor_ = nullptr;
  absl::Status hook_error_;
};

}  // namespace herd::worker::torchnet
