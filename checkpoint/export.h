#pragma once
// The trained model out of a checkpoint: its parameters as whole, shaped tensors, for
// `herd checkpoint export` (which saves them in torch's format: checkpoint/torch/).

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "checkpoint/reader.h"

namespace herd::checkpoint {

struct ModelTensor {
  std::string name;            // "fc1.weight" (the "param/" prefix dropped)
  std::vector<int64_t> shape;  // from the manifest's layout; [count] when it has none
  std::vector<float> values;
};

// Every "param/<tensor>" of the checkpoint, whole: worker 0's copy (or the first worker's
// that has it: state_source.h, ReadReplicated); when no worker holds a tensor, the extents of
// every process that holds part of it (a parameter server's shards), which must cover it.
// In the layout's order, then any others in the order the files hold them. NOT_FOUND when the
// checkpoint has no parameters, DATA_LOSS / OUT_OF_RANGE when a tensor is not whole.
absl::StatusOr<std::vector<ModelTensor>> ModelParameters(const CheckpointReader& reader);

}  // namespace herd::checkpoint
