#include "worker/executors/wfbp_executor.h"

#include "common/status.h"
#include "absl/strings/str_format.h"
#include "algorithms/collectives/run.h"
#include "worker/comm_queue.h"
#include "worker/executors/wait_timer.h"
#include "worker/fused_buckets.h"
#include "worker/local_optimizer.h"

namespace herd::worker {
namespace {

class WfbpExecutor final : public Executor {
 public:
  WfbpExecutor(const ExecutorContext& c, collectives::Algorithm algorithm)
      : context_(c),
        algorithm_(algorithm),
        buckets_(c.tensors, c.fusion.threshold_bytes),
        optimizer_(c.optimizer, c.tensors),
        queue_(c.timeline) {}

  std::string_view mode() const override {
    return algorithm_ == collectives::Algorithm::kLinearPipeline ? "lp" : "allreduce";
  }
  std::string Describe() const override {
    return absl::StrFormat("%s: %d buckets of at most %d bytes", mode(), buckets_.buckets(),
                           context_.fusion.threshold_bytes);
  }

  absl::Status BeginIteration(int64_t iteration) override {
    buckets_.ResetReady();
    tickets_.clear();
    next_launch_ = 0;
    return absl::OkStatus();
  }

  absl::Status BeforeForward(int tensor) override { return absl::OkStatus(); }

  absl::Status GradientReady(int tensor, std::span<const float> grad) override {
    buckets_.Store(tensor, grad);
    LaunchCompleteBuckets();
    return absl::OkStatus();
  }

  absl::Status EndBackward() override {
    for (int b = next_launch_; b < buckets_.buckets(); ++b) buckets_.FillMissing(b);
    LaunchCompleteBuckets();
    {
      WaitTimer timer(&exposed_seconds_, context_.timeline, "wait allreduce");
      HERD_RETURN_IF_ERROR(queue_.Drain(Deadline::After(context_.timeout)));
    }
    Timeline::Span span(context_.timeline, "update", Timeline::Lane::kCompute);
    for (int t = 0; t < static_cast<int>(context_.tensors.size()); ++t) {
      optimizer_.Step(t, buckets_.GradOf(t));
    }
    return absl::OkStatus();
  }

  absl::Status Flush() override { return queue_.Drain(Deadline::After(context_.timeout)); }

 private:

  // Buckets go out in bucket order only, so every rank submits the same sequence.
  void LaunchCompleteBuckets() {
    while (next_launch_ < buckets_.buckets() && buckets_.Complete(next_launch_)) {
      const int b = next_launch_++;
      collectives::AllReduceOptions o;
      o.comm = context_.comm;
      o.tag = static_cast<uint32_t>(b);
      o.timeout = context_.timeout;
      o.data = buckets_.data(b);
      o.count = buckets_.count(b);
      o.op = ReduceOp::kAverage;
      if (context_.plan.mode().block_bytes() > 0) {
        o.block_bytes = static_cast<size_t>(context_.plan.mode().block_bytes());
      }
      const collectives::Algorithm algorithm = algorithm_;
      tickets_.push_back(queue_.Submit(absl::StrFormat("allreduce bucket %d", b),
                                       [o, algorithm] { return collectives::AllReduce(o, algorithm); }));
    }
  }

  ExecutorContext context_;
  collectives::Algorithm algorithm_;
  FusedBuckets buckets_;
  LocalOptimizer optimizer_;
  CommQueue queue_;
  std::vector<CommQueue::Ticket> tickets_;
  int next_launch_ = 0;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Executor>> MakeWfbpExecutor(const ExecutorContext& context,
                                                           collectives::Algorithm algorithm) {
  return std::unique_ptr<Executor>(new WfbpExecutor(context, algorithm));
}

}  // namespace herd::worker
