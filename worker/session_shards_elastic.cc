// Session: a worker back in its slot in an elastic ps_ec or ps_sync job (docs/elastic.md,
// "ps_sync and ps_ec"). The workers share no communicator, so at its next iteration boundary
// after the new membership generation one live worker (the source: the lowest rank live before
// and after) hands the joiner its state over a communicator of two made for that handover
// alone; the source's pushes of that iteration then announce the joiner to the shards
// (PushChunk.joiners). A shard counts the joiner in a key's rounds from that round on: the round
// cannot complete without the source's push, so it waits for the joiner too, and every round
// before it completed without the joiner, whose state starts after them (the source's). No
// round the joiner needs can complete without it, and the joiner's iteration, round and data
// position come together from one live worker. ps_ec needs it for the model and its optimizer
// state, which live on the workers only; ps_sync's model is the shards' (its joiner pulls the
// round it was handed), but a joiner that picked its round on its own could take one the
// survivors had already completed past the scheduler's epoch start.

#include <algorithm>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/logging.h"
#include "common/status.h"
#include "plan/modes.h"
#include "worker/session.h"
#include "worker/state_handover.h"
#include "worker/watched_store.h"

namespace herd::worker {
namespace {

using Seconds = std::chrono::duration<double>;

// The shards hold the model (ps_sync), so a joiner pulls it; or the workers do (ps_ec).
bool ShardsHoldParameters(std::string_view mode) {
  const plan::ModeInfo* info = plan::FindMode(mode);
  return info != nullptr && info->server_state.contains(plan::State::kParameters);
}

}  // namespace

std::chrono::milliseconds Session::ShardHandoverTimeout() const {
  // The joiner waits for its source to notice the new generation at its next iteration
  // boundary (at most an iteration), then for the transfer: an operation's timeout plus the
  // heartbeat timeout bounds both sides.
  return options_.timeout + std::chrono::milliseconds(registered_.heartbeat_timeout_ms());
}

absl::StatusOr<std::unique_ptr<transport::Communicator>> Session::ConnectForHandover(
    int32_t generation, int joiner, int comm_rank) {
  transport::ConnectOptions co;
  co.kind = options_.transport;
  co.rank = comm_rank;
  co.size = 2;
  // Given up once the job's membership moved past this generation (the joiner or its source
  // died): the joiner then joins the newer epoch, the source goes on without it.
  co.store = MakeMembershipWatchedStore(
      store_, [this, generation] { return MembershipMovedPast(generation, begun_.load()); },
      absl::StrFormat("worker %d, the state handover to worker %d", rank_, joiner));
  // Keys of its own: one handover per joiner and membership generation.
  co.prefix = absl::StrFormat("handover-g%d-w%d", generation, joiner);
  co.bootstrap_timeout = ShardHandoverTimeout();
  return transport::Connect(co);
}

absl::StatusOr<std::vector<int>> Session::HandOverOnShards(const herd::v1::Plan& plan,
                                                           int64_t iteration,
                                                           const std::vector<int>& joiners) {
  // The state before `iteration`: the model's parameters and the executor's round
  // ("ps/version") and (ps_ec) optimizer slots; the joiner drops the error-feedback residuals.
  checkpoint::ProcessState own;
  HERD_RETURN_IF_ERROR(executor_->ExportState(own));
  // This worker's error-feedback residuals (ps_ec) are its own: the joiner's start at zero, so
  // they are not sent (a third of the state with momentum).
  const int64_t residuals = DropOwnState(own);
  const std::string bytes = EncodeHandover(iteration, &own);
  const int32_t generation = plan.membership_generation();
  std::vector<int> announced, failed;
  for (int joiner : joiners) {
    const auto begin = std::chrono::steady_clock::now();
    const Deadline deadline = Deadline::After(ShardHandoverTimeout());
    absl::Status st = [&]() -> absl::Status {
      HERD_ASSIGN_OR_RETURN(std::unique_ptr<transport::Communicator> comm,
                            ConnectForHandover(generation, joiner, /*comm_rank=*/0));
      HERD_RETURN_IF_ERROR(SendState(*comm, 1, bytes, deadline));
      return ConfirmReceived(*comm, 1, /*receiver=*/false, deadline);
    }();
    if (st.ok()) {
      announced.push_back(joiner);
      Log().info(
          "worker {}: handed the state before iteration {} (round {}, {} bytes; not its own "
          "error-feedback residuals, {} bytes) to worker {}, back in its slot, in {:.3f} s; "
          "this iteration's pushes announce it to the shards",
          rank_, iteration, own.values["ps/version"], bytes.size(), residuals, joiner,
          Seconds(std::chrono::steady_clock::now() - begin).count());
      continue;
    }
    // A joiner (or this worker's view of it) that the job left behind is no error: the next
    // plan says who is live.
    std::shared_ptr<const herd::v1::EpochView> job = follower_->View();
    if (job != nullptr && job->membership_generation() != generation) {
      Log().warn(
          "worker {}: no state handed to worker {}: the job's membership changed meanwhile "
          "({}; {})",
          rank_, joiner, job->epoch_reason(), st.ToString());
      failed.push_back(joiner);
      continue;
    }
    return absl::UnavailableError(
        absl::StrFormat("worker %d could not hand its state before iteration %d to worker %d, "
                        "back in job '%s': %s",
                        rank_, iteration, joiner, options_.job, st.message()));
  }
  if (!announced.empty()) executor_->AnnounceJoiners(announced);
  return failed;
}

absl::Status Session::JoinOnShards(const herd::v1::Plan& plan) {
  const auto begin = std::chrono::steady_clock::now();
  const Deadline deadline = Deadline::After(ShardHandoverTimeout());
  HERD_ASSIGN_OR_RETURN(std::unique_ptr<transport::Communicator> comm,
                        ConnectForHandover(plan.membership_generation(), rank_, /*comm_rank=*/1));
  HERD_ASSIGN_OR_RETURN(std::string bytes, ReceiveState(*comm, 0, HandoverBound(), deadline));
  HERD_RETURN_IF_ERROR(ConfirmReceived(*comm, 0, /*receiver=*/true, deadline));
  std::optional<checkpoint::ProcessState> carried;
  HERD_ASSIGN_OR_RETURN(HandedState handed,
                        TakeHandedState(bytes, std::nullopt, "its source", rank_, carried));
  const std::string round = carried->values["ps/version"];
  // The executor the first BeginIteration builds takes the round and the optimizer slots.
  restored_ = std::move(carried);
  handover_seconds_ = Seconds(std::chrono::steady_clock::now() - begin).count();
  Log().info(
      "worker {}: joined job '{}' at iteration {} (round {}) with {} workers: took {} bytes of "
      "state (parameters, round, optimizer state, data position) from worker {} in {:.3f} s "
      "({:.1f} MB/s; from its call for the state, the wait for the source's boundary "
      "included){}",
      rank_, options_.job, handed.iteration, round, plan.ranks_size(), bytes.size(), handed.source,
      handover_seconds_,
      handover_seconds_ > 0 ? static_cast<double>(bytes.size()) / 1e6 / handover_seconds_ : 0.0,
      ShardsHoldParameters(plan.mode().mode())
          ? "; its executor pulls that round's parameters from the shards"
          : "; its own error-feedback residuals start at zero");
  return absl::OkStatus();
}

}  // namespace herd::worker
