#pragma once
// Modes `sparse` (SparDL) and `topk_allgather` (TopA): wait-free backpropagation with a sparse
// all-reduce per bucket (algorithms/sparse/sparse_allreduce.h). Each bucket goes to the
// communication thread as soon as it and every bucket before it are complete in backward;
// EndBackward waits for all of them and applies the optimizer to the averaged sparse gradient.
// Adam runs as CatchUpAdam (catch_up_adam.h): an element delivered after n iterations takes the
// n steps its delivery covers; SGD and momentum run as in the dense modes (error feedback is
// exact for them).
//
// Error feedback: every bucket keeps its residual (what this worker has not delivered yet) from
// iteration to iteration, and for SparDL with B-SAG its extra top-k state; with Adam, the
// executor keeps its moments and each element's last delivery. All are saved by tensor, not by
// bucket (ExportState: "residual/<t>", "bsag/<t>", "adam_m/<t>", ...), so a checkpoint and a mode
// switch keep them (docs/checkpoint.md).
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
