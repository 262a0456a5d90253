// Session: taking a checkpoint at the cut, stopping at one when the job is preempted, and
// resuming from one (session.h, "Checkpoints and resume"; docs/checkpoint.md).
//
// What a worker's file holds (process "worker-<rank>"):
//   param/<tensor>             its parameters (fp32, the whole tensor; ExportParams)
//   <kind>/<tensor>...         its executor's state (Executor::ExportState)
//   values: iteration (the cut), data/epoch and data/offset (the global data position of the
//   cut's batch: worker/data/epoch_order.h), mode, workers, and on rank 0 params_digest.

#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "checkpoint/env.h"
#include "checkpoint/state_source.h"
#include "common/logging.h"
#include "common/status.h"
#include "plan/modes.h"
#include "scheduler/client/job_wait.h"
#include "worker/checkpointing/params_digest.h"
#include "worker/executor_state.h"
#include "worker/session.h"

namespace herd::worker {
namespace {

using Seconds = std::chrono::duration<double>;

// The store keys by which workers and shards meet at a cut (docs/checkpoint.md, "Shards").
std::string WorkerAtCutKey(const std::string& id, int rank) {
  return absl::StrFormat("checkpoint/%s/worker-%d", id, rank);
}
std::string ShardStagedKey(const std::string& id, int shard) {
  return absl::StrFormat("checkpoint/%s/shard-%d", id, shard);
}

// The program's own values (SetProgramValue) in a worker's file.
constexpr char kProgramPrefix[] = "program/";
constexpr size_t kMaxProgramValues = 64;
constexpr size_t kMaxProgramKey = 64;
constexpr size_t kMaxProgramValueBytes = 64 << 10;

bool RunsOnServers(std::string_view mode) {
  const plan::ModeInfo* m = plan::FindMode(mode);
  return m != nullptr && m->needs_servers;
}

absl::StatusOr<int64_t> IntValue(const checkpoint::StateSource& from, const std::string& process,
                                 const std::string& key) {
  std::optional<std::string> text = from.Value(process, key);
  int64_t v = 0;
  if (!text.has_value() || !absl::SimpleAtoi(*text, &v)) {
    return absl::DataLossError(
        absl::StrFormat("the checkpoint's %s has no integer value '%s'", process, key));
  }
  return v;
}

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
  for (const auto& [key, value] : program_values_) state.values[kProgramPrefix + key] = value;

  if (writer_ == nullptr) writer_ = std::make_unique<checkpoint::CheckpointWriter>();
  writer_->Stage(plan.checkpoint_dir(), id, std::move(state),
                 [this, id](absl::StatusOr<herd::v1::CheckpointFile> file) {
                   ReportCheckpointFile(id, std::move(file));
                 });
  staged_id_ = id;
  const double staged = Seconds(std::chrono::steady_clock::now() - begin).count();

  // The shards export once every worker is at the cut. In a parameter-server mode the workers
  // then wait for them, so no push of the next round reaches a shard before it has its copy
  // (ps_async: no update is in flight, none is lost or counted twice).
  HERD_RETURN_IF_ERROR(store_->Set(WorkerAtCutKey(id, rank_), executor_->mode()));
  if (RunsOnServers(executor_->mode())) {
    const Deadline deadline = Deadline::After(options_.timeout);
    for (int s = 0; s < plan.servers_size(); ++s) {
      auto staged_shard = store_->Get(ShardStagedKey(id, s), deadline);
      if (!staged_shard.ok()) {
        return absl::Status(staged_shard.status().code(),
                            absl::StrFormat("checkpoint %s: waiting for shard %d to stage: %s", id,
                                            s, staged_shard.status().message()));
      }
    }
  }
  Log().info("worker {}: checkpoint {} at iteration {}: staged in {:.3f} s (stall {:.3f} s)", rank_,
             id, plan.iteration(), staged,
             Seconds(std::chrono::steady_clock::now() - begin).count());
  return absl::OkStatus();
}

void Session::ReportCheckpointFile(const std::string& id,
                                   absl::StatusOr<herd::v1::CheckpointFile> file) {
  herd::v1::ReportCheckpointRequest req;
  req.set_job(options_.job);
  req.set_node_id(registered_.node_id());
  req.set_id(id);
  if (file.ok()) {
    *req.mutable_file() = std::move(*file);
  } else {
    req.set_error(file.status().ToString());
    Log().warn("worker {}: checkpoint {}: {}", rank_, id, file.status().ToString());
  }
  // A restarting scheduler is waited for; anything else is its answer (an aborted checkpoint
  // stays aborted, and training goes on either way).
  const Deadline deadline = Deadline::After(options_.timeout);
  for (;;) {
    auto answer = client_->ReportCheckpoint(req);
    if (answer.ok() || !absl::IsUnavailable(answer.status()) || deadline.expired()) {
      if (!answer.ok()) {
        Log().warn("worker {}: report of checkpoint {}: {}", rank_, id, answer.status().ToString());
      }
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
}

absl::Status Session::DrainCheckpoints(Deadline deadline) {
  if (writer_ == nullptr) return absl::OkStatus();
  return writer_->Drain(deadline);
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

absl::Status Session::SetProgramValue(const std::string& key, std::string value) {
  if (key.empty() || key.size() > kMaxProgramKey) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "a checkpointed value's name has 1 to %d characters, got %d", kMaxProgramKey, key.size()));
  }
  if (value.size() > kMaxProgramValueBytes) {
    return absl::InvalidArgumentError(
        absl::StrFormat("checkpointed value '%s' has %d bytes; at most %d", key, value.size(),
                        kMaxProgramValueBytes));
  }
  if (!program_values_.count(key) && program_values_.size() >= kMaxProgramValues) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "at most %d checkpointed values; '%s' would be one more", kMaxProgramValues, key));
  }
  program_values_[key] = std::move(value);
  return absl::OkStatus();
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
  if (plan.checkpoint_id() != staged_id_) HERD_RETURN_IF_ERROR(TakeCheckpoint(plan));
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
  if (!job.has_resumed()) return absl::OkStatus();
  const auto& from = job.resumed();
  HERD_ASSIGN_OR_RETURN(resume_, checkpoint::OpenCheckpoint(checkpoint::PosixEnv(), from.path()));
  start_iteration_ = from.iteration();
  // The data position is global (the same on every worker of the run that saved it), read from
  // the lowest worker that saved a file: a checkpoint taken while an elastic job ran without a
  // worker has no file of that worker's slot, worker 0's included.
  std::optional<std::string> first;
  for (int r = 0; r < resume_->workers() && !first; ++r) {
    if (resume_->Value(checkpoint::WorkerProcess(r), "data/epoch").has_value()) {
      first = checkpoint::WorkerProcess(r);
    }
  }
  if (first) {
    HERD_ASSIGN_OR_RETURN(start_position_.epoch, IntValue(*resume_, *first, "data/epoch"));
    HERD_ASSIGN_OR_RETURN(start_position_.offset, IntValue(*resume_, *first, "data/offset"));
  }
  position_ = start_position_;
  // Each worker's own program values (at another worker count, or where its slot saved no
  // file, those of the lowest worker that did).
  std::string mine = checkpoint::WorkerProcess(rank_ < resume_->workers() ? rank_ : 0);
  if (first && !resume_->Value(mine, "data/epoch").has_value()) mine = *first;
  for (const auto& file : resume_->manifest().files()) {
    if (file.process() != mine) continue;
    for (const auto& [key, value] : file.values()) {
      if (key.rfind(kProgramPrefix, 0) == 0) {
        resumed_program_values_[key.substr(sizeof(kProgramPrefix) - 1)] = value;
      }
    }
  }
  Log().info("worker {}: resuming from {} at iteration {} (data epoch {}, offset {})", rank_,
             from.path(), start_iteration_, start_position_.epoch, start_position_.offset);
  return absl::OkStatus();
}

absl::Status Session::ImportResumedParameters(const std::vector<herd::v1::TensorSpec>& layout) {
  if (resume_ == nullptr) return absl::OkStatus();
  std::vector<herd::v1::TensorLayout> model;
  for (const auto& t : layout) {
    auto* l = &model.emplace_back();
    l->set_name(t.name());
    int64_t count = 1;
    for (int64_t d : t.shape()) count *= d;
    l->set_count(count);
    *l->mutable_shape() = t.shape();
    l->set_dtype(t.dtype());
  }
  HERD_RETURN_IF_ERROR(resume_->CheckLayout(model));
  // Decentralized models differ between workers: at the same worker count each takes its own,
  // at another the average. Every other mode's parameters are replicated: any copy, unchanged.
  // (executor_state.h has the rules.)
  if (auto st = ImportParams(*resume_, ImportWhere{rank_, world_size()}, tensors_); !st.ok()) {
    return absl::Status(st.code(),
                        absl::StrFormat("resuming from %s: %s", resume_->path(), st.message()));
  }
  return absl::OkStatus();
}

}  // namespace herd::worker
