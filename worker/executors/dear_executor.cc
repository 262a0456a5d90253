#include "worker/executors/dear_executor.h"

#include <optional>

#include "absl/strings/str_format.h"
#include "algorithms/collectives/run.h"
#include "common/logging.h"
#include "common/status.h"
#include "worker/comm_queue.h"
#include "worker/executor_state.h"
#include "worker/executors/wait_timer.h"
#include "worker/fused_buckets.h"
#include "worker/fusion_tuning.h"
#include "worker/local_optimizer.h"

namespace herd::worker {
namespace {

class DearExecutor final : public Executor {
 public:
  explicit DearExecutor(const ExecutorContext& c)
      : context_(c), optimizer_(c.optimizer, c.tensors), queue_(c.timeline) {
    if (c.fusion.tune) {
      size_t model_bytes = 0;
      for (const ModelTensor& t : c.tensors) model_bytes += t.count * sizeof(float);
      tuning_.emplace(c.fusion, c.comm, c.timeout, model_bytes);
    }
    Rebucket(tuning_ ? tuning_->threshold() : c.fusion.threshold_bytes);
  }

  std::string_view mode() const override { return "dear"; }
  std::string Describe() const override {
    std::string s =
        absl::StrFormat("dear: %d buckets of at most %d bytes", buckets_->buckets(), threshold_);
    if (tuning_) s += "; " + tuning_->Describe();
    return s;
  }

  absl::Status BeginIteration(int64_t iteration) override {
    if (tuning_) {
      // The tuner agrees on its next threshold with every rank (a tiny collective on the queue
      // after the all-gathers), so all ranks re-bucket at the same iteration.
      std::optional<size_t> next;
      HERD_ASSIGN_OR_RETURN(next,
                            tuning_->OnIterationBoundary([this](std::function<absl::Status()> op) {
                              return queue_.Wait(queue_.Submit("tuner agreement", op),
                                                 Deadline::After(context_.timeout));
                            }));
      if (next && *next != threshold_) {
        HERD_RETURN_IF_ERROR(Flush());
        Rebucket(*next);
      }
    }
    buckets_->ResetReady();
    rs_tickets_.clear();
    next_rs_ = 0;
    return absl::OkStatus();
  }

  absl::Status BeforeForward(int tensor) override {
    if (!gathering_) return absl::OkStatus();
    return CompleteThrough(buckets_->buckets() - 1 - buckets_->BucketOf(tensor));
  }

  absl::Status GradientReady(int tensor, std::span<const float> grad) override {
    if (gathering_) {
      // The bucket's all-gather of the last iteration was never waited for (its module's forward
      // did not announce itself): finish it before its buffer takes new gradients.
      const int f = buckets_->buckets() - 1 - buckets_->BucketOf(tensor);
      if (f >= next_update_) {
        if (!warned_) {
          Log().warn("dear: tensor {} got its gradient before its forward waited for the update",
                     context_.tensors[tensor].name);
          warned_ = true;
        }
        HERD_RETURN_IF_ERROR(CompleteThrough(f));
      }
    }
    buckets_->Store(tensor, grad);
    LaunchReduceScatters();
    return absl::OkStatus();
  }

  absl::Status EndBackward() override {
    // Buckets whose forward never waited for them (no BeforeForward) finish now.
    if (gathering_) HERD_RETURN_IF_ERROR(CompleteThrough(buckets_->buckets() - 1));
    for (int b = next_rs_; b < buckets_->buckets(); ++b) buckets_->FillMissing(b);
    LaunchReduceScatters();
    {
      WaitTimer timer(&exposed_seconds_, context_.timeline, "wait reduce-scatter");
      for (CommQueue::Ticket t : rs_tickets_) {
        HERD_RETURN_IF_ERROR(queue_.Wait(t, Deadline::After(context_.timeout)));
      }
    }
    rs_tickets_.clear();
    next_rs_ = 0;
    gathering_ = true;
    next_update_ = 0;
    ag_tickets_.assign(buckets_->buckets(), 0);
    // Every all-gather goes out now, in forward order: the communication thread runs them back
    // to back while the forward consumes them (see dear_executor.h for why not one ahead).
    for (int f = 0; f < buckets_->buckets(); ++f) LaunchAllGather(f);
    return absl::OkStatus();
  }

  absl::Status Flush() override {
    if (!gathering_) return queue_.Drain(Deadline::After(context_.timeout));
    return CompleteThrough(buckets_->buckets() - 1);
  }

  // After EndBackward(i) every update of i-1 is applied (EndBackward completes the all-gathers
  // a forward left) and none of i (they apply in the forward of i+1); the all-gathers in
  // flight write only into the buckets' buffers, which are not state.
  int StateLag() const override { return 1; }

  // The optimizer's slots (replicated) and the tuner's observations; the buckets are not state
  // (the tuned threshold is, and rebuilds them).
  absl::Status ExportState(checkpoint::ProcessState& out) const override {
    optimizer_.ExportState(out);
    if (tuning_) tuning_->ExportState(out.values);
    return absl::OkStatus();
  }

  absl::Status ImportState(const checkpoint::StateSource& from) override {
    const ImportWhere where = WhereOf(context_);
    HERD_RETURN_IF_ERROR(RunAll({optimizer_.ImportState(from, Reshard::kReplicated, where)}));
    if (!tuning_) return absl::OkStatus();
    if (std::optional<std::string> trials = ReadValue(from, "fusion/trials", where)) {
      std::optional<size_t> prior;
      if (std::optional<int64_t> p = ReadIntValue(from, "fusion/prior", where); p && *p >= 0) {
        prior = static_cast<size_t>(*p);
      }
      if (tuning_->ImportState(*trials, prior) && tuning_->threshold() != threshold_) {
        Rebucket(tuning_->threshold());
      }
    }
    return absl::OkStatus();
  }

 private:
  void Rebucket(size_t threshold) {
    threshold_ = threshold;
    buckets_.emplace(context_.tensors, threshold);
  }

  // Reduce-scatters go out in bucket order (the same sequence on every rank). Both halves run
  // the decision table's pick for the bucket's size (ring for large buckets, fewer rounds for
  // small ones); every pick leaves chunk r reduced on rank r, which the all-gather expects.
  void LaunchReduceScatters() {
    while (next_rs_ < buckets_->buckets() && buckets_->Complete(next_rs_)) {
      const int b = next_rs_++;
      collectives::ReduceScatterOptions o;
      o.comm = context_.comm;
      o.tag = static_cast<uint32_t>(b);
      o.timeout = context_.timeout;
      o.data = buckets_->data(b);
      o.count = buckets_->count(b);
      o.op = ReduceOp::kAverage;
      rs_tickets_.push_back(queue_.Submit(absl::StrFormat("RS bucket %d", b),
                                          [o] { return collectives::ReduceScatter(o); }));
    }
  }

  // Forward bucket f (bucket buckets-1-f).
  void LaunchAllGather(int f) {
    if (f >= buckets_->buckets() || ag_tickets_[f] != 0) return;
    const int b = buckets_->buckets() - 1 - f;
    collectives::AllGatherOptions o;
    o.comm = context_.comm;
    o.tag = static_cast<uint32_t>(b);
    o.timeout = context_.timeout;
    o.data = buckets_->data(b);
    o.count = buckets_->count(b);
    ag_tickets_[f] = queue_.Submit(absl::StrFormat("AG bucket %d", b),
                                   [o] { return collectives::AllGather(o); });
  }

  // Waits for the all-gathers of forward buckets up to f and applies their updates. (Launching is
  // idempotent: EndBackward has started them all.)
  absl::Status CompleteThrough(int f) {
    while (next_update_ <= f) {
      const int g = next_update_;
      LaunchAllGather(g);
      {
        WaitTimer timer(&exposed_seconds_, context_.timeline, "wait all-gather");
        HERD_RETURN_IF_ERROR(queue_.Wait(ag_tickets_[g], Deadline::After(context_.timeout)));
      }
      Timeline::Span span(context_.timeline, "update", Timeline::Lane::kCompute);
      const int b = buckets_->buckets() - 1 - g;
      for (int t : buckets_->TensorsOf(b)) optimizer_.Step(t, buckets_->GradOf(t));
      ++next_update_;
    }
    if (next_update_ >= buckets_->buckets()) {
      gathering_ = false;
    } else {
      LaunchAllGather(next_update_);
    }
    return absl::OkStatus();
  }

  ExecutorContext context_;
  LocalOptimizer optimizer_;
  CommQueue queue_;
  std::optional<FusionTuning> tuning_;
  size_t threshold_ = 0;
  std::optional<FusedBuckets> buckets_;
  std::vector<CommQueue::Ticket> rs_tickets_;
  int next_rs_ = 0;
  // FeedPipe state: between EndBackward and the last bucket's update.
  bool gathering_ = false;
  int next_update_ = 0;                        // forward buckets below it are updated
  std::vector<CommQueue::Ticket> ag_tickets_;  // by forward bucket; 0: not started
  bool warned_ = false;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Executor>> MakeDearExecutor(const ExecutorContext& context) {
  return std::unique_ptr<Executor>(new DearExecutor(context));
}

}  // namespace herd::worker
