#pragma once
// The optimizer a job's spec names, with every field of OptimizerSpec (AdamW's decoupled decay,
// Adam's betas and epsilon): what the built-in worker applies in the modes where the workers
// update, as the shards do in ps_sync and ps_async (server/shard_config.cc reads the same
// fields). Session::JobOptimizer reads the name, rate, momentum and decay only.

#include "absl/status/statusor.h"
#include "algorithms/optim/optimizer.h"
#include "herd/v1/job.pb.h"

namespace herd::worker {

absl::StatusOr<optim::OptimizerConfig> OptimizerOfJob(const herd::v1::JobSpec& spec);

}  // namespace herd::worker
