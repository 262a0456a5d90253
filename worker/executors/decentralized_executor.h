#pragma once
// Mode `decentralized` (D-PSGD with BAGUA's D_FP_S): each iteration every worker averages its
// model with the plan's peers of that iteration (ring: left and right; random: a fresh
// pairing) and steps with its own gradient:
//
//   x_{t+1} = (x_t + sum_{j in N(i,t)} x_{j,t}) / (|N| + 1)  - lr * g_i(x_t)   (sgd; any optimizer)
//
// The averaging of x_t starts on the communication thread at BeginIteration, on a copy of the
// model, and overlaps the whole forward and backward pass (the gradient is taken at x_t, the
// same point, so nothing waits for it); EndBackward waits for it, writes the average into the
// parameters and applies the local optimizer with the local gradient. The models of the
// workers differ between iterations: that is the point of the mode.
//
// Decentralized, low precision (`decentralized_lp`) is in decentralized_lp_executor.h.

#include <memory>

#include "absl/status/statusor.h"
#include "worker/executor.h"

namespace herd::worker {

absl::StatusOr<std::unique_ptr<Executor>> MakeDecentralizedExecutor(const ExecutorContext& context);

}  // namespace herd::worker
