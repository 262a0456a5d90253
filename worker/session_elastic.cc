// Session: elastic membership (docs/elastic.md). In a job with an `elastic` block every
// iteration that ends is committed in memory (the parameters and the executor's state, by the
// export checkpoints use); when a worker dies the scheduler starts a new epoch with the live
// workers, and each survivor rolls back to the commit before the epoch's first iteration and
// runs on with a communicator of the live workers.

#include <algorithm>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/logging.h"
#include "common/status.h"
#include "plan/modes.h"
#include "scheduler/client/epoch_plan.h"
#include "scheduler/client/job_states.h"
#include "scheduler/client/job_wait.h"
#include "worker/executor_state.h"
#include "worker/session.h"
#include "worker/state_handover.h"

namespace herd::worker {
namespace {

using Seconds = std::chrono::duration<double>;
using std::chrono::milliseconds;

// Values of a handed-over state that are the handover's, not the executor's.
constexpr char kHandoverIteration[] = "handover/iteration";
constexpr char kHandoverSource[] = "handover/source";  // the source's job rank
constexpr char kDataEpoch[] = "data/epoch";
constexpr char kDataOffset[] = "data/offset";
constexpr char kProgramValuePrefix[] = "program/";

// ps_ec and ps_sync: a worker back in its slot takes its iteration, round and data position
// from a live one, whose pushes of that round announce it to the shards, so no round it needs
// completes without it. ps_ec must (its model and optimizer state live on the workers only, the
// shards hold none to pull); ps_sync's model is the shards', but a joiner that pulled it on its
// own could find the survivors a round past the scheduler's epoch start and push a round nobody
// else pushes. ps_async's workers run at their own pace: a joiner there pulls.
bool HandsOverOnShards(std::string_view mode) {
  const plan::ModeInfo* info = plan::FindMode(mode);
  return info != nullptr && (info->server_engine == plan::ServerEngine::kErrorCompensated ||
                             info->server_engine == plan::ServerEngine::kSync);
}

// Bytes of a commit that only this worker held, so a dead worker's copy of them is gone: its
// error-feedback residuals and replicas, and in the decentralized modes its whole model.
int64_t OwnStateBytes(const checkpoint::ProcessState& s) {
  const bool own_model = s.values.contains(std::string(kPerRankModels));
  int64_t bytes = 0;
  for (const auto& e : s.extents) {
    const std::string_view kind = std::string_view(e.name).substr(0, e.name.find('/'));
    if (own_model || kind == "residual" || kind == "reducer_residual" || kind == "replica") {
      bytes += static_cast<int64_t>(e.bytes.size());
    }
  }
  return bytes;
}

}  // namespace

absl::Status Session::CommitIteration(int64_t iteration, bool flush) {
  // The state of that iteration is held already (dear after a rollback or a join: the first
  // EndIteration commits the iteration before, which the rollback restored).
  if (rollback_.Newest(iteration)) return absl::OkStatus();
  const auto begin = std::chrono::steady_clock::now();
  checkpoint::ProcessState state;
  state.process = checkpoint::WorkerProcess(member_index_);
  if (executor_) {
    // The modes with nothing in flight after EndBackward: Flush returns at once and the
    // export is a copy. dear (flush false) leaves its all-gathers running: the parameters and
    // its state are those of the iteration before (Executor::StateLag).
    if (flush) HERD_RETURN_IF_ERROR(executor_->Flush());
    HERD_RETURN_IF_ERROR(executor_->ExportState(state));
  }
  ExportParams(state, tensors_);
  rollback_.Keep(iteration, std::move(state),
                 Seconds(std::chrono::steady_clock::now() - begin).count());
  return absl::OkStatus();
}

bool Session::MembershipChanged(const herd::v1::Plan& plan) const {
  if (executor_ == nullptr) return false;
  std::lock_guard<std::mutex> lock(mu_);
  return !members_.empty() && plan.membership_generation() != generation_;
}

void Session::WatchMembership(const herd::v1::EpochView& view) {
  if (view.job_state() != herd::v1::JOB_RUNNING) return;
  job_epoch_start_.store(view.epoch_start_iteration());
  job_generation_.store(view.membership_generation());
  std::lock_guard<std::mutex> lock(mu_);
  if (comm_ == nullptr || members_.empty() || view.membership_generation() == generation_) return;
  std::vector<std::string> gone;
  for (int r : members_) {
    if (!scheduler::ViewHasRank(view, r)) gone.push_back(absl::StrFormat("worker %d", r));
  }
  if (!gone.empty()) {
    // Wakes a rank blocked in a collective with the dead peer: it returns now and Recovers.
    (void)comm_->abort(absl::UnavailableError(absl::StrFormat(
        "%s left job '%s' (%s)", absl::StrJoin(gone, ", "), options_.job, view.epoch_reason())));
  } else if (view.epoch_start_iteration() <= begun_.load()) {
    // The membership changed under iterations already begun (a death and a return this worker
    // saw as one view): the stretch's communicator may hold a dead process. Every rank leaves
    // it and Recovers to the epoch's boundary. (A worker joining begins after the horizon:
    // nothing to leave now, every worker leaves the stretch at that boundary.)
    (void)comm_->abort(absl::UnavailableError(absl::StrFormat(
        "job '%s' changed its membership (%s)", options_.job, view.epoch_reason())));
  }
}

bool Session::MembershipMovedPast(int32_t generation, int64_t iteration) const {
  return job_generation_.load() > generation &&
         job_epoch_start_.load() <= std::max(iteration, begun_.load());
}

absl::Status Session::SettleLaggedReport() {
  if (!lagged_report_) return absl::OkStatus();
  HERD_RETURN_IF_ERROR(CommitIteration(lagged_report_->iteration(), /*flush=*/true));
  SendReport(*lagged_report_);
  lagged_report_.reset();
  return absl::OkStatus();
}

absl::Status Session::AwaitLiveWorkersAt(int64_t iteration) {
  if (!elastic_ || iteration < 0 || iteration <= confirmed_by_all_ || job_over_.load() ||
      finished_) {
    return absl::OkStatus();
  }
  int32_t generation = 0;
  std::vector<int> members;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (comm_ == nullptr) return absl::OkStatus();
    generation = generation_;
    members = members_;
  }
  const Deadline by =
      Deadline::After(options_.timeout + milliseconds(registered_.heartbeat_timeout_ms()));
  // This worker's report goes now, and the scheduler tells it as soon as every live worker's
  // has (no polling).
  follower_->AskCompleted(iteration);
  // A death changes everything here (every survivor meets it and Recovers, even when nothing
  // runs again); a worker joining after the horizon changes nothing: the live workers still
  // complete `iteration`, and every one leaves the stretch at the join's boundary.
  auto changed_under = [&](const herd::v1::EpochView& v) {
    if (v.membership_generation() == generation) return false;
    if (v.epoch_start_iteration() <= iteration) return true;
    return std::any_of(members.begin(), members.end(),
                       [&](int r) { return !scheduler::ViewHasRank(v, r); });
  };
  const scheduler::Follower::State state = follower_->WaitFor(
      [&](const scheduler::Follower::State& s) {
        return !s.refused.ok() || s.completed >= iteration ||
               (s.view != nullptr && (scheduler::ViewEnded(*s.view) || changed_under(*s.view)));
      },
      by);
  // An ended job: the caller's next call to the scheduler says how.
  if (state.view != nullptr && scheduler::ViewEnded(*state.view)) return absl::OkStatus();
  if (state.view != nullptr && changed_under(*state.view)) {
    return absl::UnavailableError(absl::StrFormat(
        "job '%s' changed its membership (%s) while worker %d waited for the live workers "
        "to complete iteration %d",
        options_.job, state.view->epoch_reason(), rank_, iteration));
  }
  if (state.completed >= iteration) {
    confirmed_by_all_ = iteration;
    return absl::OkStatus();
  }
  return absl::DeadlineExceededError(absl::StrFormat(
      "worker %d: the live workers of job '%s' did not all complete iteration %d in time%s", rank_,
      options_.job, iteration,
      state.refused.ok() ? "" : absl::StrCat(" (the scheduler: ", state.refused.message(), ")")));
}

absl::Status Session::FollowShrinkOnShards(const herd::v1::Plan& plan, int64_t iteration) {
  const int index = MemberIndex(plan, rank_);
  if (index < 0) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "iteration %d: worker %d is not among the live workers of job '%s' (the scheduler "
        "declared it dead)",
        iteration, rank_, options_.job));
  }
  // ps_ec: the dead worker's error-feedback residuals (what its compressed pushes had not yet
  // delivered) are gone with it; their size is this worker's own (ps_sync: none).
  int64_t lost = 0;
  if (executor_ != nullptr) {
    checkpoint::ProcessState own;
    HERD_RETURN_IF_ERROR(executor_->ExportState(own));
    lost = OwnStateBytes(own);
  }
  // Workers back in their slot: the plan's live ranks held by another process (node id) than
  // the one this worker followed last, or not followed at all. A restarted process registers
  // under a new node id, so a death and a return between two of this worker's iterations (it
  // never saw the plan without the dead worker) are told apart from no change. In ps_ec and
  // ps_sync the lowest rank held by the same process before and now (every survivor computes
  // the same) hands each its state, and its pushes of this iteration announce them to the
  // shards.
  std::map<int, uint64_t> live_now = ShardLiveNodes(plan);
  std::vector<int> joiners;
  int source = -1;
  for (const auto& [r, node] : live_now) {
    const auto before = shard_live_nodes_.find(r);
    if (before == shard_live_nodes_.end() || before->second != node) {
      joiners.push_back(r);
    } else if (source < 0) {
      source = r;  // the map is ordered: the lowest such rank
    }
  }
  if (!joiners.empty() && !shard_live_nodes_.empty() && HandsOverOnShards(plan.mode().mode())) {
    Log().info(
        "worker {}: worker(s) {} back in job '{}' at iteration {}; worker {} hands them "
        "its state",
        rank_, absl::StrJoin(joiners, ", "), options_.job, iteration, source);
    if (source == rank_) {
      HERD_ASSIGN_OR_RETURN(std::vector<int> failed, HandOverOnShards(plan, iteration, joiners));
      // Not followed as live: a later plan that names one of them again makes it a joiner.
      for (int r : failed) live_now.erase(r);
    }
  }
  shard_live_nodes_ = std::move(live_now);
  const int before = members_count_;
  member_index_ = index;
  members_count_ = plan.ranks_size();
  {
    std::lock_guard<std::mutex> lock(mu_);  // the heartbeat thread reads it
    generation_ = plan.membership_generation();
  }
  Log().info(
      "worker {}: {} live worker(s) from iteration {} (membership generation {}); this "
      "worker is member {} of them{}",
      rank_, members_count_, iteration, generation_, member_index_,
      lost > 0 && members_count_ < before
          ? absl::StrFormat("; the dead worker's own error-feedback residuals (about %d bytes) "
                            "are lost",
                            lost)
          : std::string());
  return absl::OkStatus();
}

absl::StatusOr<Session::Rollback> Session::Recover(const absl::Status& error) {
  if (error.ok()) return absl::InvalidArgumentError("Recover needs the error it recovers from");
  if (!elastic_ || job_over_.load() || finished_ || tensors_.empty()) return Diagnose(error);
  const auto begin = std::chrono::steady_clock::now();
  const milliseconds heartbeat_timeout(registered_.heartbeat_timeout_ms());

  // 1. The scheduler names the change: a new membership generation (it declares a dead worker
  // within its heartbeat timeout), in the view its stream brings. An error with no change
  // behind it is this worker's own.
  const Deadline changed_by = Deadline::After(heartbeat_timeout + std::chrono::seconds(3));
  scheduler::Follower::State heard = follower_->WaitFor(
      [&](const scheduler::Follower::State& s) {
        return s.view != nullptr &&
               (scheduler::ViewEnded(*s.view) || s.view->membership_generation() != generation_);
      },
      changed_by);
  if (heard.view == nullptr) return Diagnose(error);
  std::shared_ptr<const herd::v1::EpochView> view = heard.view;
  if (scheduler::ViewEnded(*view)) {
    NoteJobEnded(view->job_state(), view->end_reason());
    return Explain(error);
  }
  if (view->membership_generation() == generation_) return Diagnose(error);
  if (!scheduler::ViewHasRank(*view, rank_)) {
    return absl::FailedPreconditionError(
        absl::StrFormat("worker %d was declared dead by the scheduler (%s) after: %s", rank_,
                        view->epoch_reason(), error.message()));
  }

  // 2. Below min_workers the job pauses at this boundary until the scheduler goes on or fails
  // it (after its pending_timeout; this wait is bounded a little beyond that).
  const Deadline pause_by = Deadline::After(milliseconds(spec_.elastic().pending_timeout_ms()) +
                                            heartbeat_timeout + std::chrono::seconds(5));
  if (view->paused()) {
    Log().warn("worker {}: job '{}' paused: {}", rank_, options_.job, view->pause_reason());
    heard = follower_->WaitFor(
        [](const scheduler::Follower::State& s) {
          return s.view != nullptr && (!s.view->paused() || scheduler::ViewEnded(*s.view));
        },
        pause_by);
    view = heard.view;
    if (scheduler::ViewEnded(*view)) {
      NoteJobEnded(view->job_state(), view->end_reason());
      return Explain(error);
    }
    if (view->paused()) {
      return absl::DeadlineExceededError(
          absl::StrFormat("job '%s' stayed paused past its pending_timeout: %s", options_.job,
                          view->pause_reason()));
    }
  }

  // 3. The commit before the new epoch's first iteration.
  const int64_t target = view->epoch_start_iteration();
  const RollbackLog::Commit* commit = rollback_.Find(target - 1);
  std::optional<DataPosition> position = rollback_.PositionOf(target);
  if (!position && target == last_ended_ + 1) {
    // Every live worker completed the iteration this worker ended last (a death at the end:
    // nothing runs again): it has not begun `target`, and its position is the one the program
    // set since (SetDataPosition before the final Flush).
    rollback_.NotePosition(target, position_);
    position = position_;
  }
  if (commit == nullptr || !position) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "job '%s' goes on from iteration %d after: %s; worker %d cannot roll back there: it "
        "holds the state after iteration(s) %s",
        options_.job, target, view->epoch_reason(), rank_, absl::StrJoin(rollback_.Held(), ", ")));
  }

  // 4. Tear down the stretch (its communicator is aborted first, so no collective of the old
  // membership keeps the executor's thread) and restore the commit.
  bool someone_died = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (int r : members_) someone_died |= !scheduler::ViewHasRank(*view, r);
    if (comm_) (void)comm_->abort(absl::UnavailableError("the job's membership changed"));
  }
  if (executor_) {
    exposed_seconds_ += executor_->TakeExposedSeconds();
    executor_.reset();
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    comm_.reset();
    members_.clear();
  }
  executor_key_.clear();
  lagged_report_.reset();  // dear: the iteration it reports runs again
  checkpoint::ProcessState state = commit->state;
  state.process = checkpoint::WorkerProcess(0);
  {
    std::vector<checkpoint::ProcessState> one;
    one.push_back(state);
    const checkpoint::MemoryStateSource source(std::move(one), 1);
    HERD_RETURN_IF_ERROR(ImportParams(source, ImportWhere{0, 1}, tensors_));
  }
  const int64_t lost = OwnStateBytes(commit->state);
  restored_ = std::move(state);
  rollback_.DropAfter(target - 1);  // `commit` is not read past here
  const int live = static_cast<int>(scheduler::ViewRanks(*view).size());
  std::string own;
  if (!someone_died) {
    own = "; no worker of the stretch died (a worker joins: it takes the state from the live ones)";
  } else if (lost > 0) {
    own = absl::StrFormat(
        "; the dead worker's own state (about %d bytes: residuals, replicas or its model) is lost",
        lost);
  } else {
    own = "; the dead worker held no state of its own (all replicated)";
  }
  Log().warn(
      "worker {}: {}; rolled back to the state after iteration {}, runs iteration {} again with "
      "{} workers ({:.2f} s after the error: {}){}",
      rank_, view->epoch_reason(), target - 1, target, live,
      Seconds(std::chrono::steady_clock::now() - begin).count(), std::string(error.message()), own);
  return Rollback{target, *position};
}

std::string Session::EncodeHandover(int64_t iteration,
                                    const checkpoint::ProcessState* executor_state) const {
  checkpoint::ProcessState state;
  state.process = checkpoint::WorkerProcess(0);
  ExportParams(state, tensors_);
  if (executor_state != nullptr) {
    // A rollback's commit carries the parameters too: they are the model's now.
    for (const auto& e : executor_state->extents) {
      if (e.name.rfind("param/", 0) != 0) state.extents.push_back(e);
    }
    state.values.insert(executor_state->values.begin(), executor_state->values.end());
  }
  const DataPosition position = rollback_.PositionOf(iteration).value_or(position_);
  state.values[kHandoverIteration] = std::to_string(iteration);
  state.values[kHandoverSource] = std::to_string(rank_);
  state.values[kDataEpoch] = std::to_string(position.epoch);
  state.values[kDataOffset] = std::to_string(position.offset);
  for (const auto& [key, value] : checkpoints_.program_values()) {
    state.values[kProgramValuePrefix + key] = value;
  }
  return EncodeState(state);
}

absl::StatusOr<Session::HandedState> Session::TakeHandedState(
    std::string_view bytes, std::optional<int64_t> iteration, std::string_view from, int process,
    std::optional<checkpoint::ProcessState>& carried) {
  HERD_ASSIGN_OR_RETURN(checkpoint::ProcessState state, DecodeState(bytes));
  HandedState handed;
  if (!absl::SimpleAtoi(state.values[kHandoverIteration], &handed.iteration) ||
      (iteration && handed.iteration != *iteration)) {
    return absl::DataLossError(absl::StrFormat(
        "%s handed over the state before iteration '%s', this worker joins at %s", from,
        state.values[kHandoverIteration], iteration ? std::to_string(*iteration) : "its boundary"));
  }
  if (!absl::SimpleAtoi(state.values[kHandoverSource], &handed.source)) handed.source = -1;
  DataPosition position;
  if (!absl::SimpleAtoi(state.values[kDataEpoch], &position.epoch) ||
      !absl::SimpleAtoi(state.values[kDataOffset], &position.offset)) {
    return absl::DataLossError(
        absl::StrFormat("%s handed over a data position that is not two integers ('%s', '%s')",
                        from, state.values[kDataEpoch], state.values[kDataOffset]));
  }
  // The parameters go into the model; the rest is the executor's (imported when it is built).
  checkpoint::ProcessState params;
  params.process = checkpoint::WorkerProcess(0);
  params.values = state.values;  // models_per_rank says how decentralized parameters import
  std::erase_if(state.extents, [&](checkpoint::Extent& e) {
    if (e.name.rfind("param/", 0) != 0) return false;
    params.extents.push_back(std::move(e));
    return true;
  });
  {
    std::vector<checkpoint::ProcessState> one;
    one.push_back(std::move(params));
    const checkpoint::MemoryStateSource source(std::move(one), 1);
    HERD_RETURN_IF_ERROR(ImportParams(source, ImportWhere{0, 1}, tensors_));
  }
  handed.own_bytes = DropOwnState(state);
  std::map<std::string, std::string> program;
  for (auto it = state.values.begin(); it != state.values.end();) {
    const std::string& key = it->first;
    if (key.rfind(kProgramValuePrefix, 0) == 0) {
      program[key.substr(sizeof(kProgramValuePrefix) - 1)] = it->second;
    }
    const bool ours = key.rfind(kProgramValuePrefix, 0) == 0 || key == kHandoverIteration ||
                      key == kHandoverSource || key == kDataEpoch || key == kDataOffset;
    it = ours ? state.values.erase(it) : std::next(it);
  }
  state.process = checkpoint::WorkerProcess(process);
  carried = std::move(state);
  checkpoints_.AdoptProgramValues(std::move(program));
  start_iteration_ = handed.iteration;
  start_position_ = position;
  position_ = position;
  joining_ = false;
  handover_bytes_ = static_cast<int64_t>(bytes.size());
  return handed;
}

int64_t Session::HandoverBound() const {
  int64_t param_bytes = 0;
  for (const auto& t : tensors_) param_bytes += static_cast<int64_t>(t.count) * 4;
  // Parameters, optimizer slots and residuals are a few copies of the model; the bound only
  // keeps a damaged size from allocating without limit.
  return 8 * param_bytes + (int64_t{64} << 20);
}

absl::Status Session::HandOverState(transport::Communicator& comm, int64_t iteration,
                                    std::optional<checkpoint::ProcessState>& carried) {
  const Deadline deadline = Deadline::After(options_.timeout);
  HERD_ASSIGN_OR_RETURN(std::vector<bool> joining, ExchangeJoining(comm, joining_, deadline));
  if (std::none_of(joining.begin(), joining.end(), [](bool j) { return j; })) {
    return absl::OkStatus();
  }
  const int me = comm.rank();
  const auto begin = std::chrono::steady_clock::now();
  if (!joining_) {
    // A source: the state before `iteration` (the parameters, restored by Recover, and the
    // executor's state it carries), encoded once for every joiner it serves.
    std::string bytes;
    for (int j = 0; j < comm.size(); ++j) {
      if (!joining[static_cast<size_t>(j)] || HandoverSource(joining, j) != me) continue;
      if (bytes.empty()) bytes = EncodeHandover(iteration, carried ? &*carried : nullptr);
      HERD_RETURN_IF_ERROR(SendState(comm, j, bytes, deadline));
      Log().info(
          "worker {}: handed the state before iteration {} ({} bytes) to member {} of {} "
          "in {:.3f} s",
          rank_, iteration, bytes.size(), j, comm.size(),
          Seconds(std::chrono::steady_clock::now() - begin).count());
    }
    return absl::OkStatus();
  }

  const int from = HandoverSource(joining, me);
  if (from < 0) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "every worker of job '%s' at iteration %d joins: none holds the job's state to take over",
        options_.job, iteration));
  }
  HERD_ASSIGN_OR_RETURN(std::string bytes, ReceiveState(comm, from, HandoverBound(), deadline));
  HERD_ASSIGN_OR_RETURN(
      HandedState handed,
      TakeHandedState(bytes, iteration, absl::StrFormat("member %d", from), me, carried));
  handover_seconds_ = Seconds(std::chrono::steady_clock::now() - begin).count();
  Log().info(
      "worker {}: joined job '{}' at iteration {} with {} workers: took {} bytes of state "
      "(parameters, optimizer state) from member {} in {:.3f} s ({:.1f} MB/s){}",
      rank_, options_.job, iteration, comm.size(), bytes.size(), from, handover_seconds_,
      handover_seconds_ > 0 ? static_cast<double>(bytes.size()) / 1e6 / handover_seconds_ : 0.0,
      handed.own_bytes > 0
          ? absl::StrFormat("; its own error-feedback state starts at zero (the source "
                            "held %d bytes of it)",
                            handed.own_bytes)
          : std::string());
  return absl::OkStatus();
}

absl::Status Session::JoinRunningJob() {
  const auto begin = std::chrono::steady_clock::now();
  const Deadline give_up =
      Deadline::After(options_.start_timeout + milliseconds(spec_.elastic().pending_timeout_ms()));
  for (bool told_paused = false;;) {
    // The job as this worker's stream has it (the view came with the stream's first event).
    const scheduler::Follower::State state = follower_->WaitFor(
        [](const scheduler::Follower::State& s) { return s.view != nullptr || !s.refused.ok(); },
        give_up);
    if (state.view == nullptr) {
      return state.refused.ok()
                 ? absl::DeadlineExceededError(absl::StrFormat(
                       "worker %d: no word from the scheduler about job '%s'", rank_, options_.job))
                 : state.refused;
    }
    const herd::v1::EpochView job = *state.view;
    if (scheduler::IsTerminal(job.job_state())) {
      HERD_RETURN_IF_ERROR(
          scheduler::JobEndedStatus(options_.job, job.job_state(), job.end_reason()));
      return absl::FailedPreconditionError(
          absl::StrFormat("job '%s' ended before worker %d could join it", options_.job, rank_));
    }
    if (job.paused()) {
      // Still below min_workers with this one: it waits at the boundary with the others.
      if (give_up.expired()) {
        return absl::DeadlineExceededError(
            absl::StrFormat("worker %d joined job '%s', which stayed paused: %s", rank_,
                            options_.job, job.pause_reason()));
      }
      if (!std::exchange(told_paused, true)) {
        Log().warn("worker {}: job '{}' paused: {}", rank_, options_.job, job.pause_reason());
      }
      follower_->WaitFor(
          [&](const scheduler::Follower::State& s) {
            return s.view != nullptr &&
                   (!s.view->paused() || scheduler::IsTerminal(s.view->job_state()));
          },
          Deadline::After(milliseconds(200)));
      continue;
    }
    const int64_t target = job.epoch_start_iteration();
    absl::StatusOr<herd::v1::Plan> plan = FetchPlan(target);
    absl::Status st = plan.status();
    if (plan.ok()) {
      if (scheduler::IsTerminal(plan->job_state())) {
        HERD_RETURN_IF_ERROR(
            scheduler::JobEndedStatus(options_.job, plan->job_state(), plan->end_reason()));
        return absl::FailedPreconditionError(
            absl::StrFormat("job '%s' ended before worker %d could join it", options_.job, rank_));
      }
      if (HandsOverOnShards(plan->mode().mode())) {
        // ps_ec and ps_sync: a live worker hands over its state (ps_ec: the model and its
        // optimizer state, which live on the workers; both: the round, the data position) on
        // a communicator of two once it reaches its next iteration boundary, and this worker
        // starts at that boundary and round, which its source's pushes announce to the shards
        // (session_shards_elastic.cc).
        st = JoinOnShards(*plan);
        if (st.ok()) {
          join_seconds_ = Seconds(std::chrono::steady_clock::now() - begin).count();
          startup_seconds_ = Seconds(begin - opened_at_).count();
          startup_registered_seconds_ = Seconds(begin - registered_at_).count();
          Log().info(
              "worker {}: joined {:.2f} s after it registered ({:.2f} s of its start-up after "
              "registering, {:.2f} s the wait for its source and the state)",
              rank_, startup_registered_seconds_ + join_seconds_, startup_registered_seconds_,
              join_seconds_);
          return absl::OkStatus();
        }
      } else if (!ModeUsesCommunicator(plan->mode().mode())) {
        // ps_async: the shards hold the model and its optimizer state; the first iteration's
        // pull brings the parameters. Its workers run at their own pace and share no
        // communicator, so no peer hands over a state: this worker starts at the iteration
        // the scheduler serves it (the new epoch's first, where the join set its progress;
        // plans before it are no longer served) and the program moves its data position
        // there from the job's start (start_position_iteration()).
        start_position_iteration_ = start_iteration_;
        start_iteration_ = target;
        joining_ = false;
        join_seconds_ = Seconds(std::chrono::steady_clock::now() - begin).count();
        startup_seconds_ = Seconds(begin - opened_at_).count();
        startup_registered_seconds_ = Seconds(begin - registered_at_).count();
        Log().info(
            "worker {}: joined job '{}' at iteration {} with {} workers: pulls the parameters "
            "from the shards ({} mode: no state is handed over; {:.2f} s after it registered)",
            rank_, options_.job, target, plan->ranks_size(), plan->mode().mode(),
            startup_registered_seconds_ + join_seconds_);
        return absl::OkStatus();
      } else {
        st = SwitchTo(*plan, target);
      }
      if (st.ok() && joining_) {
        st = absl::InternalError(absl::StrFormat(
            "worker %d built the stretch of iteration %d without taking the job's state", rank_,
            target));
      }
      if (st.ok()) {
        // The state it joins with is its first commit: a loss right away rolls back to it.
        rollback_.NotePosition(target, position_);
        join_seconds_ = Seconds(std::chrono::steady_clock::now() - begin).count();
        startup_seconds_ = Seconds(begin - opened_at_).count();
        startup_registered_seconds_ = Seconds(begin - registered_at_).count();
        Log().info(
            "worker {}: joined {:.2f} s after it registered ({:.2f} s of its start-up after "
            "registering, {:.2f} s the communicator and the state); its start-up since it "
            "opened the session: {:.2f} s",
            rank_, startup_registered_seconds_ + join_seconds_, startup_registered_seconds_,
            join_seconds_, startup_seconds_);
        return CommitIteration(target - 1);
      }
    }
    // The membership changed again while this worker connected (another worker died or
    // joined): it joins the epoch after that one.
    std::shared_ptr<const herd::v1::EpochView> now = follower_->View();
    const bool moved =
        now != nullptr &&
        (now->epoch_start_iteration() != target ||
         (plan.ok() && now->membership_generation() != plan->membership_generation()));
    if (!moved || give_up.expired()) return st;
    Log().info("worker {}: the job's membership changed while joining ({}); joining again", rank_,
               st.ToString());
    executor_.reset();
    executor_key_.clear();
    std::lock_guard<std::mutex> lock(mu_);
    comm_.reset();
    members_.clear();
  }
}

absl::StatusOr<std::vector<int>> Session::LiveRanks() const {
  std::shared_ptr<const herd::v1::EpochView> view =
      follower_ != nullptr ? follower_->View() : nullptr;
  if (view == nullptr) {
    return absl::UnavailableError(absl::StrFormat(
        "worker %d: no view of job '%s' from the scheduler yet", rank_, options_.job));
  }
  return scheduler::ViewRanks(*view);
}

BatchSlice Session::DataSlice(int batch_size) const {
  // The global batch is the spec's P x B whatever the live count (docs/elastic.md), split by
  // position among the stretch's members: with all P ranks 0..P-1 that is rank r's
  // [rB, (r+1)B), and a grown job's ranks (>= P) take their share the same way.
  const int world = spec_.workers();
  if (members_count_ <= 0) return {static_cast<int64_t>(rank_) * batch_size, batch_size};
  return SliceOfGlobalBatch(static_cast<int64_t>(batch_size) * world, member_index_,
                            members_count_);
}

}  // namespace herd::worker
