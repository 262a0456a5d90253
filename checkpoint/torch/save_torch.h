#pragma once
// The model in torch's own format: a dict of tensors, {"fc1.weight": Tensor, ...}, written
// with torch::pickle_save, which Python's `torch.load(path)` reads (and
// `model.load_state_dict(torch.load(path))` loads into the same model). The only torch code
// of checkpoint/ (target herd_checkpoint_torch), so the library itself does not link libtorch.

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "checkpoint/env.h"
#include "checkpoint/export.h"

namespace herd::checkpoint {

// Writes `tensors` (fp32, shaped) to `path`: to `path`.tmp, synced, then renamed, so `path` is
// never half written.
absl::Status SaveTorchStateDict(Env& env, const std::vector<ModelTensor>& tensors,
                                const std::string& path);

}  // namespace herd::checkpoint
