#pragma once
// The skeleton every gradient-averaging mode with wait-free backpropagation shares (allreduce,
// lp, sparse, topk_allgather, clps): gradients are fused into buckets in ready order; a bucket
// goes to the communication thread as soon as it and every bucket before it are complete in
// backward (bucket order only, so every rank submits the same sequence); EndBackward waits for
// all of them and applies the optimizer to the averaged gradient in the buckets.
//
// What differs between the modes is the operation on one bucket: `BucketReduction` builds it.
// Every one of them saves the local optimizer's slots (replicated: the ranks apply the same
// update to the same averaged gradient) and whatever state its reduction keeps.

#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "worker/executor.h"
#include "worker/executor_state.h"
#include "worker/fused_buckets.h"

namespace herd::worker {

struct BucketReduction {
  std::string mode;         // the mode's name
  std::string description;  // what Describe() adds, e.g. "density 0.01, 1 team"
  // Called once with the bucket layout, before any operation: allocate per-bucket state.
  std::function<void(const FusedBuckets&)> prepare;
  // The operation that averages bucket `bucket` (`count` values at `data`, in place) in
  // iteration `iteration`; it runs on the communication thread. State it uses must be owned
  // by the closures (it outlives every operation).
  std::function<std::function<absl::Status()>(int bucket, float* data, size_t count,
                                              int64_t iteration)>
      make_op;
  // Optional: the state the closures carry from iteration to iteration (residuals, ...), for
  // ExportState / ImportState (worker/executor_state.h). Called between iterations only, with
  // the queue drained. `next_iteration` is the first iteration the state has not seen.
  std::function<void(const FusedBuckets&, int64_t next_iteration, checkpoint::ProcessState&)>
      export_state;
  std::function<absl::StatusOr<ImportStep>(const FusedBuckets&, const checkpoint::StateSource&,
                                           ImportWhere)>
      import_state;
};

std::unique_ptr<Executor> MakeBucketReduceExecutor(const ExecutorContext& context,
                                                   BucketReduction reduction);

}  // namespace herd::worker
