#pragma once
// Modes `sparse` (SparDL) and `topk_allgather` (TopA): wait-free backpropagation with a sparse
// all-reduce per bucket (algorithms/sparse/sparse_allreduce.h). Each bucket goes to the
// communication thread as soon as it and every bucket before it are complete in backward;
// EndBackward waits for all of them and subtracts the averaged sparse step from the parameters.
//
// The optimizer runs on each rank before the sparse all-reduce (Deep Gradient Compression's
// momentum correction, generalised to the job's optimizer; docs/sparse.md, "In training"): a
// bucket's gradients become this rank's optimizer step, and error feedback accumulates steps.
// Per rank and carried from iteration to iteration: the optimizer's state (momentum, Adam's
// moments and step count; it differs between ranks), every bucket's residual (the steps this
// worker has not delivered yet) and, for SparDL with B-SAG, its extra top-k state. All are
// saved by tensor, not by bucket (ExportState: "momentum/<t>", "residual/<t>", "bsag/<t>"), so
// a checkpoint and a mode switch keep them (docs/checkpoint.md).
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
