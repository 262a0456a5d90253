#include "worker/torch/torch_trainable.h"

#include <algorithm>
#include <chrono>

#include "absl/strings/str_format.h"
#include "common/status.h"
#include "worker/torch/distributed_optimizer.h"
#include "worker/torch/models.h"

namespace herd::worker {
namespace {

using Seconds = std::chrono::duration<double>;

class TorchTrainable final : public Trainable {
 public:
  TorchTrainable(TorchTrainableOptions o, std::shared_ptr<torchnet::StagedNet> net)
      : options_(std::move(o)), net_(std::move(net)), optimizer_(net_->parameters()) {
    for (const auto& item : net_->named_parameters()) {
      torch::Tensor p = item.value();
      tensors_.push_back({item.key(), p.data_ptr<float>(), static_cast<size_t>(p.numel())});
      herd::v1::TensorSpec spec;
      spec.set_name(item.key());
      for (int64_t d : p.sizes()) spec.add_shape(d);
      spec.set_dtype("fp32");
      layout_.push_back(spec);
    }
    const auto& tr = options_.train;
    train_images_ = torch::from_blob(const_cast<float*>(tr.images.data()),
                                     {tr.count, 1, tr.rows, tr.cols}, torch::kFloat32);
    train_labels_ =
        torch::from_blob(const_cast<int64_t*>(tr.labels.data()), {tr.count}, torch::kInt64);
    const auto& te = options_.test;
    test_images_ = torch::from_blob(const_cast<float*>(te.images.data()),
                                    {te.count, 1, te.rows, te.cols}, torch::kFloat32);
    test_labels_ =
        torch::from_blob(const_cast<int64_t*>(te.labels.data()), {te.count}, torch::kInt64);
  }

  const std::vector<ModelTensor>& tensors() const override { return tensors_; }
  std::vector<herd::v1::TensorSpec> Layout() const override { return layout_; }

  int64_t TrainSamples() const override { return options_.train.count; }

  absl::StatusOr<StepStats> Step(Executor& executor, const DataPosition& at,
                                 const BatchSlice& slice) override {
    if (at.epoch != order_epoch_) {
      order_ = EpochOrder(options_.train.count, options_.seed, at.epoch);
      order_epoch_ = at.epoch;
    }
    // This worker's part of the global batch (B samples at rank x B; after a shrink, its share).
    const int64_t B = slice.count;
    const int64_t n = options_.train.count;
    const int64_t first = at.offset + slice.first;
    if (B < 1) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "an empty part of the batch (samples from %d of the global batch)", slice.first));
    }
    std::vector<int64_t> idx(B);
    for (int64_t i = 0; i < B; ++i) idx[i] = order_[(first + i) % n];
    torch::Tensor index = torch::from_blob(idx.data(), {B}, torch::kInt64);
    torch::Tensor x = train_images_.index_select(0, index);
    torch::Tensor y = train_labels_.index_select(0, index);

    optimizer_.set_executor(&executor);
    optimizer_.zero_grad();
    StepStats stats;
    stats.samples = B;
    auto t0 = std::chrono::steady_clock::now();
    for (const torchnet::Stage& stage : net_->stages) {
      for (int t : stage.tensors) HERD_RETURN_IF_ERROR(executor.BeforeForward(t));
      x = stage.forward(x);
    }
    torch::Tensor loss = torch::nn::functional::cross_entropy(x, y);
    auto t1 = std::chrono::steady_clock::now();
    if (timeline_) timeline_->Add("forward", Timeline::Lane::kCompute, t0, t1);
    loss.backward();
    HERD_RETURN_IF_ERROR(optimizer_.TakeHookError());
    auto t2 = std::chrono::steady_clock::now();
    if (timeline_) timeline_->Add("backward", Timeline::Lane::kCompute, t1, t2);
    HERD_RETURN_IF_ERROR(optimizer_.step());
    stats.loss = loss.item<double>();
    stats.forward_seconds = Seconds(t1 - t0).count();
    stats.backward_seconds = Seconds(t2 - t1).count();
    return stats;
  }

  absl::StatusOr<double> Evaluate() override {
    torch::NoGradGuard no_grad;
    const int64_t n = options_.test.count;
    if (n == 0) return absl::FailedPreconditionError("the test set is empty");
    int64_t correct = 0;
    for (int64_t begin = 0; begin < n; begin += 1000) {
      const int64_t len = std::min<int64_t>(1000, n - begin);
      torch::Tensor x = test_images_.narrow(0, begin, len);
      for (const torchnet::Stage& stage : net_->stages) x = stage.forward(x);
      correct += x.argmax(1).eq(test_labels_.narrow(0, begin, len)).sum().item<int64_t>();
    }
    return static_cast<double>(correct) / static_cast<double>(n);
  }

 private:
  TorchTrainableOptions options_;
  std::shared_ptr<torchnet::StagedNet> net_;
  torchnet::DistributedOptimizer optimizer_;
  std::vector<ModelTensor> tensors_;
  std::vector<herd::v1::TensorSpec> layout_;
  torch::Tensor train_images_, train_labels_, test_images_, test_labels_;
  std::vector<int64_t> order_;
  int64_t order_epoch_ = -1;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Trainable>> MakeTorchTrainable(TorchTrainableOptions options) {
  if (options.train.count < 1) {
    return absl::FailedPreconditionError("the training set has no samples");
  }
  if (options.batch_size < 1) {
    return absl::InvalidArgumentError(
        absl::StrFormat("batch size must be >= 1, got %d", options.batch_size));
  }
  torch::set_num_threads(std::max(1, options.threads));
  HERD_ASSIGN_OR_RETURN(std::shared_ptr<torchnet::StagedNet> net,
                        torchnet::MakeModel(options.model, options.seed));
  for (const auto& p : net->parameters()) {
    if (!p.is_contiguous() || p.scalar_type() != torch::kFloat32) {
      return absl::InternalError("model parameters must be contiguous fp32");
    }
  }
  return std::unique_ptr<Trainable>(new TorchTrainable(std::move(options), std::move(net)));
}

absl::StatusOr<std::vector<herd::v1::TensorSpec>> ModelLayout(const std::string& name) {
  HERD_ASSIGN_OR_RETURN(std::shared_ptr<torchnet::StagedNet> net, torchnet::MakeModel(name, 1));
  std::vector<herd::v1::TensorSpec> out;
  for (const auto& item : net->named_parameters()) {
    herd::v1::TensorSpec spec;
    spec.set_name(item.key());
    for (int64_t d : item.value().sizes()) spec.add_shape(d);
    spec.set_dtype("fp32");
    out.push_back(spec);
  }
  return out;
}

}  // namespace herd::worker
