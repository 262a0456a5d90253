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
  int rank = 0;
  int world_size = 1;
  int batch_size = 64;
  int threads = 1;  // torch intra-op threads of this process
  ImageDataset train;  // this worker's shard
  ImageDataset test;   // evaluated by Evaluate()
  int64_t global_train_count = 0;  // samples of all shards (fixes BatchesPerEpoch for all)
};

absl::StatusOr<std::unique_ptr<Trainable>> MakeTorchTrainable(TorchTrainableOptions options);

// The tensor layout of model `name` (for a JobSpec), without data.
absl::StatusOr<std::vector<herd::v1::TensorSpec>> ModelLayout(const std::string& name);

}  // namespace herd::worker
