#include "worker/executors/clps_executor.h"

#include "absl/strings/str_format.h"
#include "algorithms/compression/compressor.h"
#include "algorithms/lowprec/centralized_low_precision.h"
#include "common/splitmix.h"
#include "common/status.h"
#include "worker/comm_queue.h"
#include "worker/executors/wait_timer.h"
#include "worker/fused_buckets.h"
#include "worker/local_optimizer.h"

namespace herd::worker {
namespace {

class ClpsExecutor final : public Executor {
 public:
  ClpsExecutor(const ExecutorContext& c, compression::Compressor compressor)
      : context_(c),
        compressor_(compressor),
        buckets_(c.tensors, c.fusion.threshold_bytes),
        optimizer_(c.optimizer, c.tensors),
        queue_(c.timeline) {
    for (int b = 0; b < buckets_.buckets(); ++b) {
      delta_.emplace_back(buckets_.count(b), 0.0f);
      epsilon_.emplace_back(buckets_.count(b), 0.0f);
    }
  }

  std::string_view mode() const override { return "clps"; }
  std::string Describe() const override {
    return absl::StrFormat("clps: %s, %d buckets of at most %d bytes",
                           compression::CompressorName(compressor_), buckets_.buckets(),
                           context_.fusion.threshold_bytes);
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
      WaitTimer timer(&exposed_seconds_, context_.timeline, "wait clps");
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
      lowprec::CentralizedLowPrecisionOptions o;
      o.comm = context_.comm;
      o.tag = static_cast<uint32_t>(b);
      o.timeout = context_.timeout;
      o.data = buckets_.data(b);
      o.count = buckets_.count(b);
      o.compressor = compressor_;
      o.delta = delta_[b].data();
      o.epsilon = epsilon_[b].data();
      o.average = true;
      o.seed = Mix64(context_.plan.seed() ^ Mix64(static_cast<uint64_t>(iteration_))) + b;
      o.workspace = &workspace_;  // the buckets run one after the other on the queue's thread
      queue_.Submit(absl::StrFormat("clps bucket %d", b),
                    [o] { return lowprec::CentralizedLowPrecisionAllReduce(o); });
    }
  }

  ExecutorContext context_;
  compression::Compressor compressor_;
  FusedBuckets buckets_;
  LocalOptimizer optimizer_;
  CommQueue queue_;
  std::vector<std::vector<float>> delta_, epsilon_;  // per bucket
  lowprec::LowPrecisionWorkspace workspace_;
  int next_launch_ = 0;
  int64_t iteration_ = 0;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Executor>> MakeClpsExecutor(const ExecutorContext& context) {
  const std::string& name = context.plan.mode().compressor();
  HERD_ASSIGN_OR_RETURN(compression::Compressor compressor,
                        compression::ParseCompressor(name.empty() ? "minmax_uint8" : name));
  return std::unique_ptr<Executor>(new ClpsExecutor(context, compressor));
}

}  // namespace herd::worker
