// Session: when a worker takes part in a checkpoint (the cut its plan names, the final one,
// the preemption one) and the resumed job's start (session.h, "Checkpoints and resume";
// docs/checkpoint.md). What a file holds and how it is written and reported:
// worker/checkpointing/checkpoint_participant.h.

#include <thread>

#include "absl/strings/str_format.h"
#include "common/logging.h"
#include "common/status.h"
#include "scheduler/client/job_wait.h"
#include "worker/checkpointing/params_digest.h"
#include "worker/executor_state.h"
#include "worker/session.h"

namespace herd::worker {
namespace {

using Seconds = std::chrono::duration<double>;

}  // namespace

std::string Session::ParamsDigest() const { return worker::ParamsDigest(tensors_); }

absl::Status Session::TakeCheckpoint(const herd::v1::Plan& plan) {
  const std::string& id = plan.checkpoint_id();
  Timeline::Span span(timeline_.get(), "checkpoint " + id, Timeline::Lane::kControl);
  const auto begin = std::chrono::steady_clock::now();
  // Deferred updates (DeAR's all-gathers) land first: the parameters are those of the cut.
  HERD_RETURN_IF_ERROR(executor_->Flush());
  exposed_seconds_ += executor_->TakeExposedSeconds();

  checkpoint::ProcessState state;
  state.process = checkpoint::WorkerProcess(rank_);
  ExportParams(state, tensors_);
  HERD_RETURN_IF_ERROR(executor_->ExportState(state));
  state.values["iteration"] = std::to_string(plan.iteration());
  state.values["data/epoch"] = std::to_string(position_.epoch);
  state.values["data/offset"] = std::to_string(position_.offset);
  state.values["mode"] = std::string(executor_->mode());
  state.values["workers"] = std::to_string(world_size());
  if (rank_ == 0) state.values["params_digest"] = ParamsDigest();
  checkpoints_.Stage(plan.checkpoint_dir(), id, std::move(state));
  const double staged = Seconds(std::chrono::steady_clock::now() - begin).count();
  HERD_RETURN_IF_ERROR(
      checkpoints_.MeetShardsAtCut(*store_, id, executor_->mode(), plan.servers_size()));
  Log().info("worker {}: checkpoint {} at iteration {}: staged in {:.3f} s (stall {:.3f} s)", rank_,
             id, plan.iteration(), staged,
             Seconds(std::chrono::steady_clock::now() - begin).count());
  return absl::OkStatus();
}

void Session::MaybeRequestPreemption() {
  if (options_.stop_requested == nullptr || !options_.stop_requested->load()) return;
  if (preemption_asked_.exchange(true)) return;
  preempt_deadline_ = std::chrono::steady_clock::now() + options_.preempt_grace;
  herd::v1::RequestCheckpointRequest req;
  req.set_job(options_.job);
  req.set_preempt(true);
  req.set_who(absl::StrFormat("worker '%s' (rank %d) got SIGTERM", options_.name, rank_));
  absl::StatusOr<herd::v1::CheckpointRecord> record =
      spec_.checkpoint().dir().empty()
          ? absl::FailedPreconditionError("the job has no checkpoint directory")
          : client_->RequestCheckpoint(req);
  if (!record.ok()) {
    // No checkpoint can be taken (no directory, the last iteration begun): the worker stops as
    // a signal stops it, and the job fails naming why.
    const absl::Status why = absl::CancelledError(absl::StrFormat(
        "worker %d stopped by SIGTERM without a checkpoint: %s", rank_, record.status().message()));
    std::lock_guard<std::mutex> lock(mu_);
    if (ended_.ok()) ended_ = why;
    if (comm_) (void)comm_->abort(why);
    return;
  }
  Log().info("worker {}: SIGTERM: the job stops after checkpoint {} (iteration {})", rank_,
             record->id(), record->iteration());
}

absl::Status Session::StopAtCheckpoint(const herd::v1::Plan& plan) {
  const Deadline deadline = Deadline::After(options_.preempt_grace);
  HERD_RETURN_IF_ERROR(DrainCheckpoints(deadline));
  for (;;) {
    HERD_ASSIGN_OR_RETURN(herd::v1::JobStatus status, client_->GetJobBrief(options_.job));
    if (status.state() == herd::v1::JOB_PREEMPTED) {
      preempted_ = true;
      job_over_.store(true);
      Log().info("worker {}: job '{}' preempted: {}", rank_, options_.job, status.preempt_reason());
      return absl::CancelledError(absl::StrFormat("job '%s' preempted at iteration %d: %s",
                                                  options_.job, plan.iteration(),
                                                  status.preempt_reason()));
    }
    if (status.state() != herd::v1::JOB_RUNNING) {
      HERD_RETURN_IF_ERROR(scheduler::JobEndedStatus(status));
    }
    if (deadline.expired()) {
      return absl::DeadlineExceededError(absl::StrFormat(
          "job '%s' did not stop within the preemption grace of %d s after checkpoint %s",
          options_.job,
          std::chrono::duration_cast<std::chrono::seconds>(options_.preempt_grace).count(),
          plan.checkpoint_id()));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

absl::Status Session::DeclareEnd() {
  if (spec_.checkpoint().dir().empty() || executor_ == nullptr || iteration_ < 0 ||
      last_ended_ != iteration_) {
    return absl::OkStatus();
  }
  const int64_t end = iteration_ + 1;
  herd::v1::DeclareModelRequest req;
  req.set_job(options_.job);
  req.set_node_id(registered_.node_id());
  for (const auto& t : layout_) *req.add_tensors() = t;
  req.set_planned_iterations(end);
  // Refused (FAILED_PRECONDITION naming both counts) when another worker declared another
  // end: the workers did not run the same number of iterations.
  if (auto declared = client_->DeclareModel(req); !declared.ok()) {
    return Explain(declared.status());
  }
  planned_iterations_ = end;
  return absl::OkStatus();
}

absl::Status Session::TakeFinalCheckpoint() {
  if (spec_.checkpoint().dir().empty() || planned_iterations_ <= 0 || executor_ == nullptr ||
      iteration_ != planned_iterations_ - 1) {
    return absl::OkStatus();
  }
  const int64_t end = planned_iterations_;
  const Deadline deadline = Deadline::After(options_.timeout);
  // The scheduler starts one checkpoint at a time: one still being written (the policy's, near
  // the end) commits first, else the final cut would find it pending and be skipped.
  for (;;) {
    HERD_ASSIGN_OR_RETURN(herd::v1::JobStatus status, client_->GetJobBrief(options_.job));
    if (status.state() != herd::v1::JOB_RUNNING) return scheduler::JobEndedStatus(status);
    const auto& pending = status.pending_checkpoint();
    if (pending.id().empty() || pending.iteration() >= end) break;
    if (deadline.expired()) {
      return absl::DeadlineExceededError(absl::StrFormat(
          "worker %d: checkpoint %s did not commit within %d s, so the final one cannot start",
          rank_, pending.id(),
          std::chrono::duration_cast<std::chrono::seconds>(options_.timeout).count()));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  HERD_ASSIGN_OR_RETURN(herd::v1::Plan plan, AskPlan(end));
  if (plan.checkpoint_iteration() != end || plan.checkpoint_id().empty()) return absl::OkStatus();
  if (plan.checkpoint_id() != checkpoints_.staged_id()) HERD_RETURN_IF_ERROR(TakeCheckpoint(plan));
  HERD_RETURN_IF_ERROR(DrainCheckpoints(deadline));
  // Finishing ends the job, and the shards with it: the commit comes first.
  for (;;) {
    HERD_ASSIGN_OR_RETURN(herd::v1::JobStatus status, client_->GetJobBrief(options_.job));
    if (status.last_checkpoint().id() == plan.checkpoint_id()) return absl::OkStatus();
    if (status.state() != herd::v1::JOB_RUNNING) return scheduler::JobEndedStatus(status);
    if (status.pending_checkpoint().id() != plan.checkpoint_id()) {
      // Aborted (the reason is in the job's status): the training itself is done and stands.
      Log().warn("worker {}: the final checkpoint {} was not committed", rank_,
                 plan.checkpoint_id());
      return absl::OkStatus();
    }
    if (deadline.expired()) {
      return absl::DeadlineExceededError(absl::StrFormat(
          "worker %d: the final checkpoint %s did not commit within %d s", rank_,
          plan.checkpoint_id(),
          std::chrono::duration_cast<std::chrono::seconds>(options_.timeout).count()));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

absl::Status Session::OpenResume(const herd::v1::JobStatus& job) {
  HERD_ASSIGN_OR_RETURN(std::optional<CheckpointParticipant::Start> start,
                        checkpoints_.OpenResume(job));
  if (!start) return absl::OkStatus();
  start_iteration_ = start->iteration;
  start_position_ = start->position;
  position_ = start_position_;
  return absl::OkStatus();
}

}  // namespace herd::worker
