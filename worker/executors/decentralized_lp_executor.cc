#include "worker/executors/decentralized_lp_executor.h"

#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "algorithms/compression/compressor.h"
#include "algorithms/decentralized/low_precision.h"
#include "common/splitmix.h"
#include "common/status.h"
#include "worker/comm_queue.h"
#include "worker/executor_state.h"
#include "worker/executors/flat_model.h"
#include "worker/executors/plan_peers.h"
#include "worker/executors/wait_timer.h"
#include "worker/local_optimizer.h"

namespace herd::worker {
namespace {

class DecentralizedLpExecutor final : public Executor {
 public:
  DecentralizedLpExecutor(const ExecutorContext& c, std::vector<int> peers,
                          compression::Compressor compressor)
      : context_(c),
        model_(c.tensors),
        replicas_(peers.size() + 1, std::vector<float>(model_.count())),
        grads_(c.tensors),
        optimizer_(c.optimizer, c.tensors),
        queue_(c.timeline) {
    options_.comm = c.comm;
    options_.timeout = c.timeout;
    options_.data = model_.data();
    options_.count = model_.count();
    options_.peers = std::move(peers);
    options_.self_replica = replicas_[0].data();
    for (size_t i = 1; i < replicas_.size(); ++i) {
      options_.peer_replicas.push_back(replicas_[i].data());
    }
    options_.compressor = compressor;
  }

  // The replicas start as the peers' current models (one full-precision exchange).
  absl::Status Start() {
    model_.Gather();
    const decentralized::DecentralizedLowPrecisionOptions o = options_;
    return Run("init replicas", [o] { return decentralized::InitDecentralizedReplicas(o); });
  }

  std::string_view mode() const override { return "decentralized_lp"; }
  std::string Describe() const override {
    return absl::StrFormat("decentralized_lp: ring, %s, %d values exchanged per iteration",
                           compression::CompressorName(options_.compressor), model_.count());
  }

  absl::Status BeginIteration(int64_t iteration) override {
    grads_.Reset();
    iteration_ = iteration;
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
      Timeline::Span span(context_.timeline, "local step", Timeline::Lane::kCompute);
      for (int t = 0; t < static_cast<int>(context_.tensors.size()); ++t) {
        optimizer_.Step(t, grads_.Of(t));
      }
      model_.Gather();  // y
    }
    decentralized::DecentralizedLowPrecisionOptions o = options_;
    o.seed = Mix64(context_.plan.seed()) ^ static_cast<uint64_t>(iteration_);
    HERD_RETURN_IF_ERROR(Run(absl::StrFormat("exchange iteration %d", iteration_),
                             [o] { return decentralized::DecentralizedLowPrecision(o); }));
    model_.Scatter();  // x_{t+1}
    return absl::OkStatus();
  }

  absl::Status Flush() override { return queue_.Drain(Deadline::After(context_.timeout)); }

  // The optimizer's slots, per rank; the replicas as "replica/<t>@<owner>" (this worker's copy
  // of rank owner's model as its neighbours know it: itself and its ring neighbours), and the
  // ring they belong to (kReplicaRing). The model itself is the parameters (the session's),
  // marked per rank.
  absl::Status ExportState(checkpoint::ProcessState& out) const override {
    optimizer_.ExportState(out);
    out.values[std::string(kPerRankModels)] = "1";
    out.values[kReplicaRing] = Ring();
    for (size_t i = 0; i < replicas_.size(); ++i) {
      ExportPlaced(out, "replica", context_.tensors, PlacesOf(i), replicas_,
                   absl::StrCat("@", Owner(i)));
    }
    return absl::OkStatus();
  }

  // On the same ring the replicas come back as they were (a resume continues bit for bit). On
  // another (another worker count, or an elastic job's new membership: the ranks are the
  // positions among the live workers, so rank 1 of the new ring may be another worker than
  // rank 1 of the old one, and a rejoined worker's model is its source's) the replicas keep
  // what Start() exchanged: the new neighbours' current models, in full precision, so every
  // replica is again bitwise its owner's model, as D_LP_S needs.
  absl::Status ImportState(const checkpoint::StateSource& from) override {
    const ImportWhere where = WhereOf(context_);
    std::vector<absl::StatusOr<ImportStep>> steps;
    steps.push_back(optimizer_.ImportState(from, Reshard::kAverage, where));
    const std::optional<std::string> ring = ReadValue(from, kReplicaRing, where);
    if (from.workers() == where.world && (!ring || *ring == Ring())) {
      for (size_t i = 0; i < replicas_.size(); ++i) {
        steps.push_back(ImportPlaced(from, "replica", Reshard::kAverage, where, context_.tensors,
                                     PlacesOf(i), &replicas_, absl::StrCat("@", Owner(i))));
      }
    }
    return RunAll(std::move(steps));
  }

 private:
  // The ring the replicas belong to: its size and the job's membership generation (which
  // moves on at every death and join of an elastic job).
  static constexpr char kReplicaRing[] = "replica/ring";
  std::string Ring() const {
    return absl::StrFormat("%d workers, membership generation %d", context_.plan.world_size(),
                           context_.plan.membership_generation());
  }

  // Replica i: 0 is this worker's own, i >= 1 its peer i-1's.
  int Owner(size_t i) const { return i == 0 ? context_.rank : options_.peers[i - 1]; }
  std::vector<TensorPlace> PlacesOf(size_t i) const {
    std::vector<TensorPlace> places = FlatPlaces(context_.tensors);
    for (TensorPlace& p : places) p.buffer = static_cast<int>(i);
    return places;
  }

  // On the communication thread (where every collective of a worker runs), waited for.
  absl::Status Run(std::string name, CommQueue::Op op) {
    WaitTimer timer(&exposed_seconds_, context_.timeline, "wait " + name);
    const CommQueue::Ticket ticket = queue_.Submit(std::move(name), std::move(op));
    return queue_.Wait(ticket, Deadline::After(context_.timeout));
  }

  ExecutorContext context_;
  FlatModel model_;
  std::vector<std::vector<float>> replicas_;  // this worker's own, then its peers', in order
  IterationGradients grads_;
  LocalOptimizer optimizer_;
  CommQueue queue_;
  decentralized::DecentralizedLowPrecisionOptions options_;
  int64_t iteration_ = 0;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Executor>> MakeDecentralizedLpExecutor(
    const ExecutorContext& context) {
  HERD_ASSIGN_OR_RETURN(PlanPeers peers, PlanPeers::FromContext(context));
  if (peers.topology() != plan::Topology::kRing) {
    return absl::InvalidArgumentError(
        "decentralized_lp keeps replicas of fixed peers, so it runs on the ring topology only "
        "(the plan asks for random)");
  }
  const std::string& name = context.plan.mode().compressor();
  HERD_ASSIGN_OR_RETURN(compression::Compressor compressor,
                        compression::ParseCompressor(name.empty() ? "minmax_uint8" : name));
  auto executor = std::make_unique<DecentralizedLpExecutor>(context, peers.At(0), compressor);
  HERD_RETURN_IF_ERROR(executor->Start());
  return std::unique_ptr<Executor>(std::move(executor));
}

}  // namespace herd::worker
