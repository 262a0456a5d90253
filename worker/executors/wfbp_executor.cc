#include "worker/executors/wfbp_executor.h"

#include "algorithms/collectives/run.h"
#include "worker/executors/bucket_reduce_executor.h"

namespace herd::worker {

absl::StatusOr<std::unique_ptr<Executor>> MakeWfbpExecutor(const ExecutorContext& context,
                                                           collectives::Algorithm algorithm) {
  BucketReduction r;
  r.mode = algorithm == collectives::Algorithm::kLinearPipeline ? "lp" : "allreduce";
  r.make_op = [context, algorithm](int bucket, float* data, size_t count, int64_t) {
    collectives::AllReduceOptions o;
    o.comm = context.comm;
    o.tag = static_cast<uint32_t>(bucket);
    o.timeout = context.timeout;
    o.data = data;
    o.count = count;
    o.op = ReduceOp::kAverage;
    if (context.plan.mode().block_bytes() > 0) {
      o.block_bytes = static_cast<size_t>(context.plan.mode().block_bytes());
    }
    return std::function<absl::Status()>(
        [o, algorithm] { return collectives::AllReduce(o, algorithm); });
  };
  return MakeBucketReduceExecutor(context, std::move(r));
}

}  // namespace herd::worker
