#include "worker/executors/bucket_reduce_executor.h"

#include "absl/strings/str_format.h"
#include "common/status.h"
#include "worker/comm_queue.h"
#include "worker/executors/wait_timer.h"
#include "worker/local_optimizer.h"

namespace herd::worker {
namespace {

class BucketReduceExecutor final : public Executor {
 public:
  BucketReduceExecutor(const ExecutorContext& c, BucketReduction reduction)
      : context_(c),
        reduction_(std::move(reduction)),
        buckets_(c.tensors, c.fusion.threshold_bytes),
        optimizer_(c.optimizer, c.tensors),
        queue_(c.timeline) {
    if (reduction_.prepare) reduction_.prepare(buckets_);
  }

  std::string_view mode() const override { return reduction_.mode; }
  std::string Describe() const override {
    return absl::StrFormat("%s: %s%s%d buckets of at most %d bytes", reduction_.mode,
                           reduction_.description, reduction_.description.empty() ? "" : ", ",
                           buckets_.buckets(), context_.fusion.threshold_bytes);
  }

  absl::Status BeginIteration(int64_t iteration) override {
    buckets_.ResetReady();
    next_launch_ = 0;
    iteration_ = iteration;
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
      WaitTimer timer(&exposed_seconds_, context_.timeline, "wait " + reduction_.mode);
      HERD_RETURN_IF_ERROR(queue_.Drain(Deadline::After(context_.timeout)));
    }
    Timeline::Span span(context_.timeline, "update", Timeline::Lane::kCompute);
    for (int t = 0; t < static_cast<int>(context_.tensors.size()); ++t) {
      optimizer_.Step(t, buckets_.GradOf(t));
    }
    return absl::OkStatus();
  }

  absl::Status Flush() override { return queue_.Drain(Deadline::After(context_.timeout)); }

  absl::Status ExportState(checkpoint::ProcessState& out) const override {
    optimizer_.ExportState(out);
    if (reduction_.export_state) reduction_.export_state(buckets_, NextIteration(), out);
    return absl::OkStatus();
  }

  absl::Status ImportState(const checkpoint::StateSource& from) override {
    const ImportWhere where = WhereOf(context_);
    std::vector<absl::StatusOr<ImportStep>> steps;
    steps.push_back(optimizer_.ImportState(from, Reshard::kReplicated, where));
    if (reduction_.import_state) steps.push_back(reduction_.import_state(buckets_, from, where));
    return RunAll(std::move(steps));
  }

 private:
  int64_t NextIteration() const {
    return iteration_ < 0 ? context_.first_iteration : iteration_ + 1;
  }

  // A bucket's buffer is not touched by this thread again until EndBackward drained the queue.
  void LaunchCompleteBuckets() {
    while (next_launch_ < buckets_.buckets() && buckets_.Complete(next_launch_)) {
      const int b = next_launch_++;
      queue_.Submit(absl::StrFormat("%s bucket %d", reduction_.mode, b),
                    reduction_.make_op(b, buckets_.data(b), buckets_.count(b), iteration_));
    }
  }

  ExecutorContext context_;
  BucketReduction reduction_;
  FusedBuckets buckets_;
  LocalOptimizer optimizer_;
  CommQueue queue_;  // last: its destructor drains the queue while the buffers still exist
  int next_launch_ = 0;
  int64_t iteration_ = -1;  // begun last (-1: none yet)
};

}  // namespace

std::unique_ptr<Executor> MakeBucketReduceExecutor(const ExecutorContext& context,
                                                   BucketReduction reduction) {
  return std::make_unique<BucketReduceExecutor>(context, std::move(reduction));
}

}  // namespace herd::worker
