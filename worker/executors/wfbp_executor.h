#pragma once
// Modes `allreduce` and `lp`: wait-free backpropagation. Each bucket of gradients is all-reduced
// (averaged) on the communication thread as soon as it and every bucket before it are complete
// in backward, overlapping the rest of backward; EndBackward waits for all of them and applies
// the optimizer to every tensor. `allreduce` runs the ring (reduce-scatter then all-gather),
// `lp` the Linear-Pipeline chain with the plan's block size.

#include <memory>

#include "absl/status/statusor.h"
#include "algorithms/collectives/options.h"
#include "worker/executor.h"

namespace herd::worker {

absl::StatusOr<std::unique_ptr<Executor>> MakeWfbpExecutor(const ExecutorContext& context,
                                                           collectives::Algorithm algorithm);

}  // namespace herd::worker
