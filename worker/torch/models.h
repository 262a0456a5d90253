#pragma once
// The models herd trains on Fashion-MNIST, as a sequence of stages (layers with their
// activation and pooling). The training loop runs the stages one by one so that it can wait for
// a stage's parameters (dear's all-gather) just before that stage's forward.
//
//   mlp  784 -> 256 -> 10, ReLU
//   cnn  conv 5x5 1->16, ReLU, max-pool 2 -> conv 5x5 16->32, ReLU, max-pool 2
//        -> 1568 -> 128, ReLU -> 10            (two conv layers with pooling)

#include <torch/torch.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace herd::worker::torchnet {

struct Stage {
  std::string name;
  std::function<torch::Tensor(const torch::Tensor&)> forward;
  std::vector<int> tensors;  // indices into parameters(), forward order
};

class StagedNet : public torch::nn::Module {
 public:
  std::vector<Stage> stages;
};

// Builds model `name` (mlp | cnn) with parameters drawn from `seed`, identically on every
// worker. INVALID_ARGUMENT for another name.
absl::StatusOr<std::shared_ptr<StagedNet>> MakeModel(const std::string& name, uint64_t seed);

}  // namespace herd::worker::torchnet
