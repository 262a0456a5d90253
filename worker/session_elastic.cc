// Session: elastic membership (docs/elastic.md). In a job with an `elastic` block every
// iteration that ends is committed in memory (the parameters and the executor's state, by the
// export checkpoints use); when a worker dies the scheduler starts a new epoch with the live
// workers, and each survivor rolls back to the commit before the epoch's first iteration and
// runs on with a communicator of the live workers.

#include <algorithm>
#include <thread>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/logging.h"
#include "common/status.h"
#include "worker/executor_state.h"
#include "worker/session.h"

namespace herd::worker {
namespace {

using Seconds = std::chrono::duration<double>;
using std::chrono::milliseconds;

bool Ended(herd::v1::JobState state) {
  return state == herd::v1::JOB_COMPLETED || state == herd::v1::JOB_FAILED ||
         state == herd::v1::JOB_CANCELLED || state == herd::v1::JOB_PREEMPTED;
}

std::string EndReason(const herd::v1::JobStatus& s) {
  if (s.state() == herd::v1::JOB_CANCELLED) return s.cancel_reason();
  if (s.state() == herd::v1::JOB_FAILED) {
    return absl::StrFormat("%s: %s", s.failed_process(), s.failure_reason());
  }
  return "";
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

absl::Status Session::CommitIteration(int64_t iteration) {
  const auto begin = std::chrono::steady_clock::now();
  Commit c;
  c.iteration = iteration;
  c.state.process = checkpoint::WorkerProcess(member_index_);
  ExportParams(c.state, tensors_);
  if (executor_) {
    // The collective modes that shrink have nothing in flight after EndBackward: Flush returns
    // at once and the export is a copy.
    HERD_RETURN_IF_ERROR(executor_->Flush());
    HERD_RETURN_IF_ERROR(executor_->ExportState(c.state));
  }
  // Reuse the oldest commit's memory is not worth it: two copies of the state are kept.
  commits_.push_back(std::move(c));
  while (commits_.size() > 2) commits_.pop_front();
  commit_seconds_ += Seconds(std::chrono::steady_clock::now() - begin).count();
  ++commits_taken_;
  return absl::OkStatus();
}

bool Session::MembershipChanged(const herd::v1::Plan& plan) const {
  if (executor_ == nullptr) return false;
  std::lock_guard<std::mutex> lock(mu_);
  return !members_.empty() && plan.membership_generation() != generation_;
}

void Session::WatchMembership(const herd::v1::HeartbeatResponse& answer) {
  if (answer.job_state() != herd::v1::JOB_RUNNING) return;
  if (watched_epoch_.exchange(answer.epoch()) == answer.epoch()) return;
  auto status = client_->GetJob(options_.job);
  if (!status.ok()) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (comm_ == nullptr || members_.empty()) return;
  std::vector<std::string> gone;
  for (int r : members_) {
    if (r < status->workers_size() && !status->workers(r).alive()) {
      gone.push_back(absl::StrFormat("worker '%s' (rank %d)", status->workers(r).name(), r));
    }
  }
  if (gone.empty()) return;
  // Wakes a rank blocked in a collective with the dead peer: it returns now and Recovers.
  (void)comm_->abort(absl::UnavailableError(absl::StrFormat(
      "%s left job '%s' (%s)", absl::StrJoin(gone, ", "), options_.job, status->epoch_reason())));
}

absl::StatusOr<Session::Rollback> Session::Recover(const absl::Status& error) {
  if (error.ok()) return absl::InvalidArgumentError("Recover needs the error it recovers from");
  if (!elastic_ || job_over_.load() || finished_ || tensors_.empty()) return Diagnose(error);
  const auto begin = std::chrono::steady_clock::now();
  const milliseconds heartbeat_timeout(registered_.heartbeat_timeout_ms());

  // 1. The scheduler names the change: a new membership generation (it declares a dead worker
  // within its heartbeat timeout). An error with no change behind it is this worker's own.
  herd::v1::JobStatus job;
  const Deadline changed_by = Deadline::After(heartbeat_timeout + std::chrono::seconds(3));
  for (;;) {
    auto status = client_->GetJob(options_.job);
    if (status.ok()) {
      job = *std::move(status);
      if (Ended(job.state())) {
        NoteJobEnded(job.state(), EndReason(job));
        return Explain(error);
      }
      if (job.membership_generation() != generation_) break;
    }
    if (changed_by.expired()) return Diagnose(error);
    std::this_thread::sleep_for(milliseconds(100));
  }
  if (rank_ >= job.workers_size() || !job.workers(rank_).alive()) {
    return absl::FailedPreconditionError(
        absl::StrFormat("worker %d was declared dead by the scheduler (%s) after: %s", rank_,
                        job.epoch_reason(), error.message()));
  }

  // 2. Below min_workers the job pauses at this boundary until the scheduler goes on or fails
  // it (after its pending_timeout; this wait is bounded a little beyond that).
  const Deadline pause_by = Deadline::After(milliseconds(spec_.elastic().pending_timeout_ms()) +
                                            heartbeat_timeout + std::chrono::seconds(5));
  if (job.paused_since_unix_ms() != 0) {
    Log().warn("worker {}: job '{}' paused: {}", rank_, options_.job, job.pause_reason());
  }
  while (job.paused_since_unix_ms() != 0) {
    if (pause_by.expired()) {
      return absl::DeadlineExceededError(absl::StrFormat(
          "job '%s' stayed paused past its pending_timeout: %s", options_.job, job.pause_reason()));
    }
    std::this_thread::sleep_for(milliseconds(200));
    auto status = client_->GetJob(options_.job);
    if (!status.ok()) continue;
    job = *std::move(status);
    if (Ended(job.state())) {
      NoteJobEnded(job.state(), EndReason(job));
      return Explain(error);
    }
  }

  // 3. The commit before the new epoch's first iteration.
  const int64_t target = job.epoch_start_iteration();
  auto commit = std::find_if(commits_.begin(), commits_.end(),
                             [&](const Commit& c) { return c.iteration == target - 1; });
  auto position = positions_.find(target);
  if (commit == commits_.end() || position == positions_.end()) {
    std::vector<int64_t> held;
    for (const auto& c : commits_) held.push_back(c.iteration);
    return absl::FailedPreconditionError(absl::StrFormat(
        "job '%s' goes on from iteration %d after: %s; worker %d cannot roll back there: it "
        "holds the state after iteration(s) %s",
        options_.job, target, job.epoch_reason(), rank_, absl::StrJoin(held, ", ")));
  }

  // 4. Tear down the stretch (its communicator is aborted first, so no collective of the old
  // membership keeps the executor's thread) and restore the commit.
  {
    std::lock_guard<std::mutex> lock(mu_);
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
  commits_.erase(std::next(commit), commits_.end());
  int live = 0;
  for (const auto& m : job.workers()) live += m.alive() ? 1 : 0;
  Log().warn(
      "worker {}: {}; rolled back to the state after iteration {}, runs iteration {} again with "
      "{} workers ({:.2f} s after the error: {}){}",
      rank_, job.epoch_reason(), target - 1, target, live,
      Seconds(std::chrono::steady_clock::now() - begin).count(), std::string(error.message()),
      lost > 0 ? absl::StrFormat("; the dead worker's own state (about %d bytes: residuals, "
                                 "replicas or its model) is lost",
                                 lost)
               : std::string("; the dead worker held no state of its own (all replicated)"));
  return Rollback{target, position->second};
}

BatchSlice Session::DataSlice(int batch_size) const {
  const int world = spec_.workers();
  if (members_count_ <= 0 || members_count_ == world) {
    return {static_cast<int64_t>(rank_) * batch_size, batch_size};
  }
  return SliceOfGlobalBatch(static_cast<int64_t>(batch_size) * world, member_index_,
                            members_count_);
}

}  // namespace herd::worker
