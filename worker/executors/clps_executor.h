#pragma once
// Mode `clps` (BAGUA's C_LP_S, QSGD / 1-bit style training): wait-free backpropagation like
// `allreduce`, but each bucket of gradients is averaged by the centralized low-precision
// all-reduce (algorithms/lowprec/centralized_low_precision.h) with error feedback on both
// ends: each bucket keeps its sender residual (delta) and its reducer residual (epsilon) for
// the executor's lifetime. EndBackward waits for every bucket and applies the local optimizer;
// every worker decodes the same bytes, so the models stay identical. Compressor: the mode's
// `compressor` (default minmax_uint8).

#include <memory>

#include "absl/status/statusor.h"
#include "worker/executor.h"

namespace herd::worker {

absl::StatusOr<std::unique_ptr<Executor>> MakeClpsExecutor(const ExecutorContext& context);

}  // namespace herd::worker
