#include "worker/torch/models.h"

#include "absl/strings/str_format.h"

namespace herd::worker::torchnet {
namespace {

namespace F = torch::nn::functional;

std::shared_ptr<StagedNet> MakeMlp() {
  auto net = std::make_shared<StagedNet>();
  auto fc1 = net->register_module("fc1", torch::nn::Linear(784, 256));
  auto fc2 = net->register_module("fc2", torch::nn::Linear(256, 10));
  net->stages.push_back(
      {"fc1", [fc1](const torch::Tensor& x) { return torch::relu(fc1->forward(x.flatten(1))); }, {0, 1}});
  net->stages.push_back({"fc2", [fc2](const torch::Tensor& x) { return fc2->forward(x); }, {2, 3}});
  return net;
}

std::shared_ptr<StagedNet> MakeCnn() {
  auto net = std::make_shared<StagedNet>();
  auto conv1 = net->register_module(
      "conv1", torch::nn::Conv2d(torch::nn::Conv2dOptions(1, 16, 5).padding(2)));
  auto conv2 = net->register_module(
      "conv2", torch::nn::Conv2d(torch::nn::Conv2dOptions(16, 32, 5).padding(2)));
  auto fc1 = net->register_module("fc1", torch::nn::Linear(32 * 7 * 7, 128));
  auto fc2 = net->register_module("fc2", torch::nn::Linear(128, 10));
  net->stages.push_back({"conv1",
                         [conv1](const torch::Tensor& x) {
                           return torch::max_pool2d(torch::relu(conv1->forward(x)), 2);
                         },
                         {0, 1}});
  net->stages.push_back({"conv2",
                         [conv2](const torch::Tensor& x) {
                           return torch::max_pool2d(torch::relu(conv2->forward(x)), 2).flatten(1);
                         },
                         {2, 3}});
  net->stages.push_back(
      {"fc1", [fc1](const torch::Tensor& x) { return torch::relu(fc1->forward(x)); }, {4, 5}});
  net->stages.push_back({"fc2", [fc2](const torch::Tensor& x) { return fc2->forward(x); }, {6, 7}});
  return net;
}

}  // namespace

absl::StatusOr<std::shared_ptr<StagedNet>> MakeModel(const std::string& name, uint64_t seed) {
  torch::manual_seed(seed);
  if (name == "mlp") return MakeMlp();
  if (name == "cnn") return MakeCnn();
  return absl::InvalidArgumentError(
      absl::StrFormat("unknown model '%s'; herd trains mlp or cnn", name));
}

}  // namespace herd::worker::torchnet
