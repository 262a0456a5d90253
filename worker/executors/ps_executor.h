#pragma once
// Modes `ps_sync`, `ps_async` and `ps_ec`: the gradients go to the parameter-server shards of
// the plan and the parameters come back.
//
//  ps_sync   EndBackward pushes every gradient as round r (the shards' version) and pulls the
//            parameters after round r: the shards averaged the M pushes and ran the optimizer.
//  ps_async  the same, with the round being this worker's clock: a shard applies each push at
//            once and answers when the staleness bound allows.
//  ps_ec     gradients are pushed compressed with this worker's error feedback; the shards sum,
//            compress the sum with their own error feedback and answer it; the worker averages
//            it and applies the optimizer locally (the shards keep no parameters).
//
// On creation the executor offers the worker's current parameters as the keys' initial values
// (the first offer of a key wins on the shard) and, in ps_sync and ps_async, pulls what the
// shards hold, so every worker starts from the same model.

#include <memory>

#include "absl/status/statusor.h"
#include "worker/executor.h"

namespace herd::worker {

absl::StatusOr<std::unique_ptr<Executor>> MakePsExecutor(const ExecutorContext& context);

}  // namespace herd::worker
