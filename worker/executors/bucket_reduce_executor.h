#pragma once
// The skeleton every gradient-averaging mode with wait-free backpropagation shares (allreduce,
// lp, sparse, topk_allgather, clps): gradients are fused into buckets in ready order; a bucket
// goes to the communication thread as soon as it and every bucket before it are complete in
// backward (bucket order only, so every rank submits the same sequence); EndBackward waits for
// all of them and applies the optimizer to the averaged gradient in the buckets (or subtracts
// the step the operation computed: the sparse modes with Adam, `BucketReduction::reduces_steps`).
//
// What differs between the modes is the operation on one bucket: `BucketReduction` builds it.

#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "worker/executor.h"
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
  // Where the job's optimizer runs. false: EndBackward applies it to the averaged gradient (the
  // same update on every rank). true (the sparse modes with Adam, catch_up_adam.h): the
  // operation itself turned the averaged gradient into the optimizer's step (the same on every
  // rank), so EndBackward subtracts the buckets from the parameters.
  bool reduces_steps = false;
};

std::unique_ptr<Executor> MakeBucketReduceExecutor(const ExecutorContext& context,
                                                   BucketReduction reduction);

}  // namespace herd::worker
