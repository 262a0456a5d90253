#include "worker/executors/sparse_executor.h"

#include <vector>

#include "absl/strings/str_format.h"
#include "algorithms/sparse/sparse_allreduce.h"
#include "common/status.h"
#include "worker/comm_queue.h"
#include "worker/executors/wait_timer.h"
#include "worker/fused_buckets.h"
#include "worker/local_optimizer.h"

namespace herd::worker {
namespace {

constexpr double kDefaultDensity = 0.01;

// The number of SparDL teams the plan asks for, checked against the communicator: the
// algorithm forms teams of consecutive ranks, so the plan's must be those.
absl::StatusOr<int> TeamsOf(const ExecutorContext& c) {
  const int P = c.comm->size();
  if (c.plan.teams_size() == 0) {
    const int teams = c.plan.mode().teams() > 0 ? c.plan.mode().teams() : 1;
    if (P % teams != 0) {
      return absl::InvalidArgumentError(
          absl::StrFormat("sparse mode: %d teams do not divide the %d workers", teams, P));
    }
    return teams;
  }
  const int teams = c.plan.teams_size();
  if (P % teams != 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("sparse mode: the plan's %d teams do not divide the %d workers", teams, P));
  }
  const int size = P / teams;
  for (int t = 0; t < teams; ++t) {
    const auto& ranks = c.plan.teams(t).ranks();
    bool consecutive = ranks.size() == size;
    for (int i = 0; consecutive && i < size; ++i) consecutive = ranks[i] == t * size + i;
    if (!consecutive) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "sparse mode: plan team %d is not ranks %d..%d (SparDL teams are consecutive ranks)", t,
          t * size, t * size + size - 1));
    }
  }
  return teams;
}

class SparseExecutor final : public Executor {
 public:
  SparseExecutor(const ExecutorContext& c, bool spardl, int teams)
      : context_(c),
        spardl_(spardl),
        teams_(teams),
        density_(c.plan.mode().density() > 0 ? c.plan.mode().density() : kDefaultDensity),
        buckets_(c.tensors, c.fusion.threshold_bytes),
        optimizer_(c.optimizer, c.tensors),
        queue_(c.timeline) {
    for (int b = 0; b < buckets_.buckets(); ++b) residuals_.emplace_back(buckets_.count(b), 0.0f);
    bsag_.resize(buckets_.buckets());
  }

  std::string_view mode() const override { return spardl_ ? "sparse" : "topk_allgather"; }
  std::string Describe() const override {
    return absl::StrFormat("%s: density %g%s, %d buckets of at most %d bytes", mode(), density_,
                           spardl_ ? absl::StrFormat(", %d teams", teams_) : "", buckets_.buckets(),
                           context_.fusion.threshold_bytes);
  }

  absl::Status BeginIteration(int64_t iteration) override {
    buckets_.ResetReady();
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
      WaitTimer timer(&exposed_seconds_, context_.timeline, "wait sparse allreduce");
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
  // Buckets go out in bucket order only, so every rank submits the same sequence. A bucket's
  // buffer and residual are not touched by this thread until EndBackward has drained the queue.
  void LaunchCompleteBuckets() {
    while (next_launch_ < buckets_.buckets() && buckets_.Complete(next_launch_)) {
      const int b = next_launch_++;
      sparse::SparseAllReduceOptions o;
      o.comm = context_.comm;
      o.tag = static_cast<uint32_t>(b);
      o.timeout = context_.timeout;
      o.data = buckets_.data(b);
      o.residual = residuals_[b].data();
      o.count = buckets_.count(b);
      o.density = density_;
      o.teams = teams_;
      o.bsag = &bsag_[b];
      const bool spardl = spardl_;
      queue_.Submit(absl::StrFormat("%s bucket %d", mode(), b), [o, spardl] {
        return spardl ? sparse::SparDLAllReduce(o) : sparse::TopkAllGatherAllReduce(o);
      });
    }
  }

  ExecutorContext context_;
  const bool spardl_;
  const int teams_;
  const double density_;
  FusedBuckets buckets_;
  std::vector<std::vector<float>> residuals_;  // per bucket, carried across iterations
  std::vector<sparse::BsagState> bsag_;        // per bucket
  LocalOptimizer optimizer_;
  CommQueue queue_;  // last: its destructor drains the queue while the buffers still exist
  int next_launch_ = 0;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Executor>> MakeSparseExecutor(const ExecutorContext& context) {
  const std::string& mode = context.plan.mode().mode();
  if (mode != "sparse" && mode != "topk_allgather") {
    return absl::InvalidArgumentError(absl::StrFormat(
        "the sparse executor runs modes sparse and topk_allgather, not '%s'", mode));
  }
  const double density = context.plan.mode().density();
  if (!(density >= 0 && density <= 1)) {  // 0: the default; NaN fails
    return absl::InvalidArgumentError(
        absl::StrFormat("%s mode: density %g is outside (0, 1]", mode, density));
  }
  int teams = 1;
  if (mode == "sparse") {
    HERD_ASSIGN_OR_RETURN(teams, TeamsOf(context));
  }
  return std::unique_ptr<Executor>(new SparseExecutor(context, mode == "sparse", teams));
}

}  // namespace herd::worker
