#include "worker/executors/decentralized_executor.h"

#include "absl/strings/str_format.h"
#include "algorithms/decentralized/full_precision.h"
#include "common/status.h"
#include "worker/comm_queue.h"
#include "worker/executor_state.h"
#include "worker/executors/flat_model.h"
#include "worker/executors/plan_peers.h"
#include "worker/executors/wait_timer.h"
#include "worker/local_optimizer.h"

namespace herd::worker {
namespace {

class DecentralizedExecutor final : public Executor {
 public:
  DecentralizedExecutor(const ExecutorContext& c, PlanPeers peers)
      : context_(c),
        peers_(peers),
        model_(c.tensors),
        grads_(c.tensors),
        optimizer_(c.optimizer, c.tensors),
        queue_(c.timeline) {}

  std::string_view mode() const override { return "decentralized"; }
  std::string Describe() const override {
    return absl::StrFormat("decentralized: %s topology, %d values averaged per iteration",
                           plan::TopologyName(peers_.topology()), model_.count());
  }

  absl::Status BeginIteration(int64_t iteration) override {
    grads_.Reset();
    model_.Gather();  // x_t, averaged while forward and backward run on the parameters
    decentralized::DecentralizedFullPrecisionOptions o;
    o.comm = context_.comm;
    o.timeout = context_.timeout;
    o.data = model_.data();
    o.count = model_.count();
    o.peers = peers_.At(iteration);
    average_ = queue_.Submit(absl::StrFormat("average iteration %d", iteration),
                             [o] { return decentralized::DecentralizedFullPrecision(o); });
    return absl::OkStatus();
  }

  absl::Status BeforeForward(int tensor) override { return absl::OkStatus(); }

  absl::Status GradientReady(int tensor, std::span<const float> grad) override {
    grads_.Store(tensor, grad);
    return absl::OkStatus();
  }

  absl::Status EndBackward() override {
    grads_.FillMissing();
    {
      WaitTimer timer(&exposed_seconds_, context_.timeline, "wait average");
      HERD_RETURN_IF_ERROR(queue_.Wait(average_, Deadline::After(context_.timeout)));
    }
    Timeline::Span span(context_.timeline, "update", Timeline::Lane::kCompute);
    model_.Scatter();
    for (int t = 0; t < static_cast<int>(context_.tensors.size()); ++t) {
      optimizer_.Step(t, grads_.Of(t));
    }
    return absl::OkStatus();
  }

  absl::Status Flush() override { return queue_.Drain(Deadline::After(context_.timeout)); }

  // The model is the parameters (the session's), which differ per rank: marked so, they import
  // averaged at another worker count; so do the optimizer's slots.
  absl::Status ExportState(checkpoint::ProcessState& out) const override {
    optimizer_.ExportState(out);
    out.values[std::string(kPerRankModels)] = "1";
    return absl::OkStatus();
  }

  absl::Status ImportState(const checkpoint::StateSource& from) override {
    return RunAll({optimizer_.ImportState(from, Reshard::kAverage, WhereOf(context_))});
  }

 private:
  ExecutorContext context_;
  PlanPeers peers_;
  FlatModel model_;
  IterationGradients grads_;
  LocalOptimizer optimizer_;
  CommQueue queue_;
  CommQueue::Ticket average_ = 0;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Executor>> MakeDecentralizedExecutor(
    const ExecutorContext& context) {
  HERD_ASSIGN_OR_RETURN(PlanPeers peers, PlanPeers::FromContext(context));
  return std::unique_ptr<Executor>(new DecentralizedExecutor(context, peers));
}

}  // namespace herd::worker
