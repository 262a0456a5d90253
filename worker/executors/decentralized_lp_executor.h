#pragma once
// Mode `decentralized_lp` (BAGUA's low-precision decentralized SGD, D_LP_S): the local
// optimizer step first, then the exchange of compressed model differences with the ring
// neighbours, whose replicas every worker keeps (algorithms/decentralized/low_precision.h):
//
//   y = x_t - lr * g (the local optimizer);   x_{t+1} = x_t + D(Q(avg(replicas) - x_t + y - x_t))
//
// EndBackward runs both (the exchange needs the updated model, so it cannot overlap backward).
// On creation the executor exchanges the full-precision model once with its peers to start
// the replicas. The peers must stay fixed, so the mode runs on the ring topology only: a plan
// asking for `random` is refused (INVALID_ARGUMENT). Compressor: the mode's `compressor`
// (default minmax_uint8).

#include <memory>

#include "absl/status/statusor.h"
#include "worker/executor.h"

namespace herd::worker {

absl::StatusOr<std::unique_ptr<Executor>> MakeDecentralizedLpExecutor(
    const ExecutorContext& context);

}  // namespace herd::worker
