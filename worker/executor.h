#pragma once
// The mode executor: what a worker runs each iteration to turn local gradients into updated
// parameters. One implementation per mode (worker/executors/); the training loop (the torch
// adapter, or the profile replay of the benchmarks) drives every mode through these calls:
//
//   BeginIteration(i)
//   BeforeForward(t)      for each tensor, in forward order, before the module using it runs
//   GradientReady(t, g)   for each tensor, as backward produces its gradient
//   EndBackward()         backward finished
//   ... next iteration ...
//   Flush()               before the parameters are read (evaluation, checkpoint, mode switch)
//
// After EndBackward (allreduce, lp, ps_*) or after the BeforeForward of a tensor in the next
// iteration (dear) or after Flush (every mode) the tensor's parameters hold the update. All
// ranks must make the same calls in the same order. Errors (a dead peer, a deadline) leave the
// executor failed; build a new one for the next plan epoch.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <functional>

#include "absl/status/statusor.h"
#include "algorithms/optim/optimizer.h"
#include "checkpoint/state.h"
#include "checkpoint/state_source.h"
#include "common/cancel_token.h"
#include "common/defaults.h"
#include "common/timeline.h"
#include "herd/v1/job.pb.h"
#include "transport/communicator.h"

namespace herd::worker {

// One tensor of the model: its fp32 parameters in host memory, at an address that stays put for
// the executor's lifetime (the executor writes the updates there).
struct ModelTensor {
  std::string name;
  float* param = nullptr;
  size_t count = 0;
};

struct FusionSettings {
  size_t threshold_bytes = size_t{4} << 20;  // bucket bound (dear, allreduce, lp)
  bool tune = false;                         // dear: tune the threshold online (FusionTuner)
  int tune_trials = 10;
  int iterations_per_trial = 3;
  // dear tuning: before the first trial, time a tiny and a 1 MiB all-reduce and start the
  // search at the threshold the link model prefers (worker/fusion_tuning.h).
  bool tune_warm_start = true;
  size_t tune_min_bytes = size_t{64} << 10;
  size_t tune_max_bytes = size_t{64} << 20;
};

// Everything an executor is built from. Pointers are borrowed and outlive the executor.
struct ExecutorContext {
  herd::v1::Plan plan;  // the mode (plan.mode), ranks, peers, teams, shard map, servers
  int rank = 0;         // this worker's rank
  transport::Communicator* comm = nullptr;  // the workers' communicator (collective modes)
  std::vector<ModelTensor> tensors;         // forward (registration) order
  optim::OptimizerConfig optimizer;         // applied locally by the collective modes
  FusionSettings fusion;
  std::chrono::milliseconds timeout{defaults::kOperationTimeout};  // every wait
  Timeline* timeline = nullptr;                                    // may be null
  // Parameter-server modes: how to reach the shards (the token, and TLS with these PEM roots,
  // empty: the system's).
  std::string ps_token;
  bool ps_tls = false;
  std::string ps_tls_ca_file;
  // Cancelled when the job ends (a peer died, an operator cancelled): every call to the shards
  // returns at once with the reason instead of waiting out its deadline.
  std::shared_ptr<CancelToken> ps_cancel;
  // Where shard `id` serves now, from the scheduler (a restarted shard may have a new port).
  std::function<absl::StatusOr<std::string>(int shard)> shard_address;
  int64_t first_iteration = 0;  // the iteration this executor starts at
};

class Executor {
 public:
  virtual ~Executor() = default;

  virtual std::string_view mode() const = 0;
  virtual absl::Status BeginIteration(int64_t iteration) = 0;
  virtual absl::Status BeforeForward(int tensor) = 0;
  // `grad` has the tensor's count values; it is copied before the call returns.
  virtual absl::Status GradientReady(int tensor, std::span<const float> grad) = 0;
  virtual absl::Status EndBackward() = 0;
  virtual absl::Status Flush() = 0;

  // Seconds the caller spent blocked on communication since the last call.
  double TakeExposedSeconds() {
    double s = exposed_seconds_;
    exposed_seconds_ = 0;
    return s;
  }
  // A line for the logs about what the executor settled on (e.g. the tuned threshold).
  virtual std::string Describe() const { return std::string(mode()); }
  // How many iterations the state lags right after EndBackward (elastic commits,
  // worker/session_elastic.cc). 0: the parameters and ExportState are the state after the
  // iteration that ended (Flush returns at once). 1 (dear): the updates of iteration i are
  // applied during the forward of i+1, so right after EndBackward(i) the parameters and
  // ExportState are exactly the state after iteration i-1, and read without a Flush (which
  // would wait for the all-gathers in flight and lose their overlap with the next forward).
  virtual int StateLag() const { return 0; }
  // ps_ec in an elastic job: the ranks of the workers back in their slot that this worker
  // handed its state to at the boundary before the iteration about to begin; that
  // iteration's pushes announce them to the shards, whose rounds count them from there
  // (PushChunk.joiners, docs/elastic.md). The other modes have nothing to announce.
  virtual void AnnounceJoiners(std::vector<int> /*ranks*/) {}

  // The state the executor carries from one iteration to the next, topology-free
  // (checkpoint/state.h): optimizer slots, error-feedback residuals, replicas, clocks, a
  // tuner's observations — never the parameters, which live in the model's tensors (the
  // session exports them). Called after Flush (or, with StateLag() 1, right after EndBackward:
  // the state after the iteration before). Names are "<kind>/<tensor name>"; the kinds
  // and how each one reshards are in docs/checkpoint.md.
  virtual absl::Status ExportState(checkpoint::ProcessState& out) const { return absl::OkStatus(); }
  // Takes back what `from` holds of this executor's state, whichever mode and worker count
  // exported it (a checkpoint, or the executor this one replaces at a mode switch), before the
  // first BeginIteration. A kind it does not carry is ignored; a kind it carries that `from`
  // lacks starts as a fresh executor's would. Errors: FAILED_PRECONDITION for state that does
  // not fit the model (another length), DATA_LOSS for state that cannot be read.
  virtual absl::Status ImportState(const checkpoint::StateSource& from) { return absl::OkStatus(); }

 protected:
  double exposed_seconds_ = 0;
};

// The executor of `context.plan.mode().mode()`. INVALID_ARGUMENT for a mode no executor runs,
// or a context the mode cannot use (no communicator for a collective mode, no shards for ps_*).
absl::StatusOr<std::unique_ptr<Executor>> MakeExecutor(ExecutorContext context);

// The modes this worker has an executor builder for (a test checks that they are exactly the
// modes of the registry, plan/modes.h).
std::vector<std::string> ExecutorModes();

// The registry's answer for `mode` (false for an unknown mode): whether it runs collectives
// among the workers and so needs a communicator (plan/modes.h, needs_communicator).
bool ModeUsesCommunicator(std::string_view mode);

}  // namespace herd::worker
