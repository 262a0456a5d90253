#pragma once
// worker::Trainable with libtorch (CPU): a model of worker/torch/models.h trained on this
// worker's shard of an image dataset.

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "worker/data/idx_dataset.h"
#include "worker/trainable.h"

namespace herd::worker {

struct TorchTrainableOptions {
  std::string model = "cnn";
  uint64_t seed = 1;  // the job's: every worker draws the same initial parameters
  int rank = -1;      // informational: the model is built before the worker has its rank
  int world_size = 1;
  int batch_size = 64;  // this worker's part of each global batch
  int threads = 1;      // torch intra-op threads of this process
  ImageDataset train;   // the whole training set, in the order of worker/data/epoch_order.h
  ImageDataset test;    // evaluated by Evaluate()
};

absl::StatusOr<std::unique_ptr<Trainable>> MakeTorchTrainable(TorchTrainableOptions options);

// The tensor layout of model `name` (for a JobSpec), without data.
absl::StatusOr<std::vector<herd::v1::TensorSpec>> ModelLayout(const std::string& name);

}  // namespace herd::worker
