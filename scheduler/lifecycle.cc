// SchedulerCore: the life of a job after submission — the model a worker declares, workers
// finishing, a process failing, cancellation and deletion. Every ending is a terminal state
// with a new epoch, so each process of the job learns it from its next plan, heartbeat or
// watch, and exits (0 on COMPLETED).

#include <chrono>
#include <cmath>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/dtype.h"
#include "common/logging.h"
#include "common/status.h"
#include "common/unix_time.h"
#include "scheduler/bounds.h"
#include "scheduler/elastic_spec.h"
#include "scheduler/job_spec.h"
#include "scheduler/limits.h"
#include "scheduler/scheduler_core.h"

namespace herd::scheduler {
namespace {

using herd::v1::JobStatus;

// Reasons end up in every JobStatus answer: bounded, so a long one cannot push `herd job list`
// past the clients' message limit.
using limits::kMaxMetricNameBytes;
using limits::kMaxMetrics;
using limits::kMaxReasonBytes;

// A reason a process sends: kept, cut to the bound (the start says the most), control bytes
// (newlines of a multi-line error included) made spaces so it prints on one line.
std::string Bounded(std::string_view reason) {
  std::string out(reason.substr(0, kMaxReasonBytes));
  for (char& c : out) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = ' ';
  }
  if (reason.size() > kMaxReasonBytes) {
    out += absl::StrFormat(" ... (%d bytes cut)", reason.size() - kMaxReasonBytes);
  }
  return out;
}

std::string DescribeTensor(const herd::v1::TensorSpec& t) {
  return absl::StrFormat("'%s' [%s] %s", t.name(), absl::StrJoin(t.shape(), "x"), t.dtype());
}

// Dtypes compare by meaning ("float32" is "fp32"); an unknown one never matches.
bool SameDType(const std::string& a, const std::string& b) {
  auto x = ParseDType(a), y = ParseDType(b);
  return x.ok() && y.ok() && *x == *y;
}

bool SameTensor(const herd::v1::TensorSpec& a, const herd::v1::TensorSpec& b) {
  return a.name() == b.name() && SameDType(a.dtype(), b.dtype()) &&
         std::equal(a.shape().begin(), a.shape().end(), b.shape().begin(), b.shape().end());
}

// The first difference between the job's layout and a declared one, or "" when they match.
std::string LayoutDifference(const herd::v1::JobSpec& spec,
                             const google::protobuf::RepeatedPtrField<herd::v1::TensorSpec>& got) {
  const int n = std::min(spec.tensors_size(), got.size());
  for (int i = 0; i < n; ++i) {
    if (!SameTensor(spec.tensors(i), got[i])) {
      return absl::StrFormat("tensor #%d is %s, the job's is %s", i, DescribeTensor(got[i]),
                             DescribeTensor(spec.tensors(i)));
    }
  }
  if (got.size() != spec.tensors_size()) {
    return absl::StrFormat("the model has %d tensors, the job %d", got.size(), spec.tensors_size());
  }
  return "";
}

absl::Status ValidateResult(const herd::v1::TrainingResult& r) {
  if (r.metrics_size() > kMaxMetrics) {
    return absl::InvalidArgumentError(
        absl::StrFormat("a result has at most %d metrics, got %d", kMaxMetrics, r.metrics_size()));
  }
  for (const auto& [name, value] : r.metrics()) {
    HERD_RETURN_IF_ERROR(CheckText("a metric name", name, kMaxMetricNameBytes));
    if (!std::isfinite(value)) {
      return absl::InvalidArgumentError(
          absl::StrFormat("metric '%s' is %g; metrics must be finite", name, value));
    }
  }
  if (r.executor().size() > kMaxReasonBytes) {
    return absl::InvalidArgumentError(
        absl::StrFormat("the result's executor has %d bytes, more than the limit of %d",
                        r.executor().size(), kMaxReasonBytes));
  }
  if (r.iterations() < 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("a result has %d iterations; give a count >= 0", r.iterations()));
  }
  return absl::OkStatus();
}

}  // namespace

void SchedulerCore::EndJob(JobStatus& next, herd::v1::JobState state, std::string reason) {
  next.set_state(state);
  next.set_ended_unix_ms(NowUnixMs());
  next.set_wall_seconds(static_cast<double>(next.ended_unix_ms() - next.submitted_unix_ms()) /
                        1000.0);
  AdvanceEpoch(next, std::move(reason));
}

absl::Status SchedulerCore::CommitEnding(Job& job, JobStatus next) {
  const std::string name = next.spec().name();
  HERD_RETURN_IF_ERROR(Commit(job, std::move(next), next_node_id_, /*sync=*/true));
  // The bootstrap data of an ended job is of no further use.
  if (auto st = db_->DeleteKvOfJob(name); !st.ok()) {
    Log().warn("scheduler: {}", std::string(st.message()));
  }
  job.kv.clear();
  store_bytes_ -= job.kv_bytes;
  job.kv_bytes = 0;
  return absl::OkStatus();
}

absl::StatusOr<JobStatus> SchedulerCore::CancelJob(std::string_view name, std::string_view reason) {
  HERD_RETURN_IF_ERROR(CheckText("the cancel reason", reason, kMaxReasonBytes, true));
  std::lock_guard<std::mutex> lock(mu_);
  if (!refusal_.ok()) return refusal_;
  HERD_ASSIGN_OR_RETURN(Job * job, FindActiveJob(name, "cancel the job"));
  JobStatus next = job->status;
  next.set_cancel_reason(reason.empty() ? std::string("cancelled by the operator")
                                        : std::string(reason));
  EndJob(next, herd::v1::JOB_CANCELLED, absl::StrFormat("cancelled: %s", next.cancel_reason()));
  HERD_RETURN_IF_ERROR(CommitEnding(*job, std::move(next)));
  return job->status;
}

absl::StatusOr<JobStatus> SchedulerCore::DeclareModel(const herd::v1::DeclareModelRequest& req) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!refusal_.ok()) return refusal_;
  HERD_ASSIGN_OR_RETURN(Job * job, FindActiveJob(req.job(), "declare the model"));
  NodeRef ref;
  HERD_ASSIGN_OR_RETURN(herd::v1::Member * me,
                        FindLiveMember(*job, req.node_id(), "declare the model", &ref));
  const std::string who = DescribeMember(ref.role, *me);
  if (ref.role != herd::v1::ROLE_WORKER) {
    return absl::InvalidArgumentError(absl::StrFormat("%s declares a model; only workers do", who));
  }
  if (req.planned_iterations() < 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s plans %d iterations; give a count >= 1, or 0 when unknown", who,
                        req.planned_iterations()));
  }
  JobStatus next = job->status;
  std::string reason;
  if (next.spec().tensors_size() == 0) {
    // The first declaration sets the layout; it is checked as a submitted one would be, and
    // every mode of the schedule must still accept it (e.g. integer tensors in a mode that
    // averages them).
    herd::v1::JobSpec with = next.spec();
    *with.mutable_tensors() = req.tensors();
    auto normalized = NormalizeJobSpec(with);
    if (!normalized.ok()) {
      return absl::Status(normalized.status().code(),
                          absl::StrFormat("%s: %s", who, normalized.status().message()));
    }
    for (const auto& sw : next.schedule()) {
      auto mode = NormalizeMode(sw.mode(), *normalized);
      if (!mode.ok()) {
        return absl::FailedPreconditionError(
            absl::StrFormat("%s: %s", who, mode.status().message()));
      }
    }
    *next.mutable_spec()->mutable_tensors() = normalized->tensors();
    reason =
        absl::StrFormat("%s declared the model's layout (%d tensors)", who, req.tensors_size());
  } else if (std::string diff = LayoutDifference(next.spec(), req.tensors()); !diff.empty()) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "%s trains another model than job '%s': %s; every worker must train the same model", who,
        req.job(), diff));
  }
  if (req.planned_iterations() > 0) {
    if (next.planned_iterations() > 0 && next.planned_iterations() != req.planned_iterations()) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "%s plans %d iterations, but job '%s' runs %d (as its other workers declared); "
          "every worker must run the same number of iterations",
          who, req.planned_iterations(), req.job(), next.planned_iterations()));
    }
    next.set_planned_iterations(req.planned_iterations());
    // A cut the horizon placed past the end it now declares is never reached: the final
    // checkpoint takes its place.
    if (const auto& pending = next.pending_checkpoint();
        !pending.id().empty() && pending.iteration() > req.planned_iterations()) {
      AbortCheckpoint(next, absl::StrFormat("the job ends at iteration %d, before its cut %d",
                                            req.planned_iterations(), pending.iteration()));
    }
  }
  if (!reason.empty()) {
    AdvanceEpoch(next, std::move(reason));  // the layout changes the plan (the shard map)
  }
  HERD_RETURN_IF_ERROR(CheckJobStatusSize(next, absl::StrFormat("the model %s declared", who)));
  HERD_RETURN_IF_ERROR(Commit(*job, std::move(next), next_node_id_, /*sync=*/true));
  return req.brief() ? Brief(job->status) : job->status;
}

absl::StatusOr<JobStatus> SchedulerCore::FinishWorker(const herd::v1::FinishWorkerRequest& req) {
  HERD_RETURN_IF_ERROR(ValidateResult(req.result()));
  std::lock_guard<std::mutex> lock(mu_);
  if (!refusal_.ok()) return refusal_;
  HERD_ASSIGN_OR_RETURN(Job * job, FindActiveJob(req.job(), "finish"));
  NodeRef ref;
  HERD_ASSIGN_OR_RETURN(herd::v1::Member * me, FindLiveMember(*job, req.node_id(), "finish", &ref));
  if (ref.role != herd::v1::ROLE_WORKER) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s of job '%s' reports a finished training; only workers do",
                        DescribeMember(ref.role, *me), req.job()));
  }
  JobStatus next = job->status;
  next.mutable_workers(ref.slot)->set_finished(true);
  while (next.worker_results_size() < next.workers_size()) next.add_worker_results();
  *next.mutable_worker_results(ref.slot) = req.result();
  // Written by a process, printed to operators: on one line, without escape sequences.
  next.mutable_worker_results(ref.slot)->set_executor(Bounded(req.result().executor()));
  HERD_RETURN_IF_ERROR(
      CheckJobStatusSize(next, absl::StrFormat("the result of %s", DescribeMember(ref.role, *me))));
  if (!CompleteIfDone(next)) {
    HERD_RETURN_IF_ERROR(Commit(*job, std::move(next), next_node_id_, /*sync=*/true));
    return req.brief() ? Brief(job->status) : job->status;
  }
  HERD_RETURN_IF_ERROR(CommitEnding(*job, std::move(next)));
  return req.brief() ? Brief(job->status) : job->status;
}

bool SchedulerCore::CompleteIfDone(JobStatus& next) {
  bool done = true;
  int finished = 0;
  for (const auto& m : next.workers()) {
    done &= m.finished() || !m.alive();
    finished += m.finished();
  }
  if (!done || finished == 0) return false;
  // The job's result is rank 0's (the rank that evaluates), or the first finished worker's.
  int from = next.workers(0).finished() ? 0 : -1;
  for (int r = 0; from < 0 && r < next.workers_size(); ++r) {
    if (next.workers(r).finished()) from = r;
  }
  while (next.worker_results_size() < next.workers_size()) next.add_worker_results();
  *next.mutable_result() = next.worker_results(from);
  EndJob(next, herd::v1::JOB_COMPLETED,
         absl::StrFormat("completed: %d of %d workers finished %d iterations", finished,
                         next.workers_size(), next.result().iterations()));
  Log().info("scheduler: job '{}' completed: {} iterations, loss {:.4f}, test accuracy {:.4f}",
             next.spec().name(), next.result().iterations(), next.result().final_loss(),
             next.result().test_accuracy());
  return true;
}

absl::StatusOr<JobStatus> SchedulerCore::FailJob(const herd::v1::FailJobRequest& req) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!refusal_.ok()) return refusal_;
  HERD_ASSIGN_OR_RETURN(Job * job, FindJob(req.job()));
  auto it = nodes_.find(req.node_id());
  if (req.node_id() == 0 || it == nodes_.end() || it->second.job != req.job()) {
    return absl::NotFoundError(absl::StrFormat(
        "cannot fail job '%s': node id %d is not one of its processes", req.job(), req.node_id()));
  }
  if (IsTerminal(job->status.state())) return job->status;  // the first ending stands
  const NodeRef& ref = it->second;
  const auto& slots =
      ref.role == herd::v1::ROLE_WORKER ? job->status.workers() : job->status.servers();
  // A worker of an elastic job that was declared dead (and the job went on without it) does
  // not fail the job on its way out.
  if (ref.role == herd::v1::ROLE_WORKER && IsElastic(job->status.spec()) &&
      !slots[ref.slot].alive()) {
    Log().info("scheduler: job '{}' goes on without {}, which stopped: {}", req.job(),
               DescribeMember(ref.role, slots[ref.slot]), Bounded(req.reason()));
    return job->status;
  }
  JobStatus next = job->status;
  next.set_failed_process(DescribeMember(ref.role, slots[ref.slot]));
  next.set_failure_reason(req.reason().empty() ? std::string("no reason given")
                                               : Bounded(req.reason()));
  EndJob(next, herd::v1::JOB_FAILED,
         absl::StrFormat("failed: %s: %s", next.failed_process(), next.failure_reason()));
  HERD_RETURN_IF_ERROR(CommitEnding(*job, std::move(next)));
  return job->status;
}

absl::Status SchedulerCore::DeleteJob(std::string_view name) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!refusal_.ok()) return refusal_;
  HERD_ASSIGN_OR_RETURN(Job * job, FindJob(name));
  if (!IsTerminal(job->status.state())) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "job '%s' is %s; only a job that has ended can be deleted (`herd job cancel %s` first)",
        name, JobStateName(job->status.state()), name));
  }
  HERD_RETURN_IF_ERROR(db_->DeleteJob(name));
  for (auto it = nodes_.begin(); it != nodes_.end();) {
    it = it->second.job == name ? nodes_.erase(it) : std::next(it);
  }
  for (auto it = replaced_.begin(); it != replaced_.end();) {
    it = it->second.job == name ? replaced_.erase(it) : std::next(it);
  }
  store_bytes_ -= job->kv_bytes;
  jobs_.erase(jobs_.find(name));
  Log().info("scheduler: job '{}' deleted", name);
  changed_.notify_all();
  return absl::OkStatus();
}

}  // namespace herd::scheduler
