#pragma once
// Modes `sparse` (SparDL) and `topk_allgather` (TopA): wait-free backpropagation with a sparse
// all-reduce per bucket (algorithms/sparse/sparse_allreduce.h). Each bucket goes to the
// communication thread as soon as it and every bucket before it are complete in backward;
// EndBackward waits for all of them and applies the optimizer to the averaged sparse gradient.
//
// Error feedback: every bucket keeps its residual (what this worker has not delivered yet) from
// iteration to iteration, and for SparDL with B-SAG its extra top-k state. Both are saved by
// tensor, not by bucket (ExportState: "residual/<t>", "bsag/<t>"), so a checkpoint and a mode
// switch keep them, like the optimizer's state (docs/checkpoint.md).
//
// Parameters: plan.mode().density() (0: 0.01), reached after a warm-up of higher densities
// (density_warmup.h); SparDL teams = the plan's teams (the scheduler's
// effective count; each must be a block of consecutive ranks), else plan.mode().teams(), else 1.
// R-SAG when the teams are a power of two, B-SAG otherwise.

#include <memory>

#include "absl/status/statusor.h"
#include "worker/executor.h"

namespace herd::worker {

// For mode "sparse" or "topk_allgather"; INVALID_ARGUMENT for teams that do not fit the
// communicator.
absl::StatusOr<std::unique_ptr<Executor>> MakeSparseExecutor(const ExecutorContext& context);

}  // namespace herd::worker
