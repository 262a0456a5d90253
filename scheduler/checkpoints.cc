// SchedulerCore: checkpoints. The scheduler picks the cut, names it in the plans, collects every
// process's report and commits; the processes stage and write on their own (worker/session.cc,
// server/runtime.cc). docs/checkpoint.md, "Taking a checkpoint".
//
//   RequestCheckpoint / the JobSpec's policy   pending_checkpoint = {id, cut, dir, expected}
//                                              announced to the shards: store key checkpoint/<n>
//   every worker, at BeginIteration(cut)       stages its state, its writer reports
//   every shard, once the workers staged       stages its engine's state, its writer reports
//   the last ReportCheckpoint                  checkpoint::Commit (manifest, rename, LATEST),
//                                              retention; last_checkpoint
//   an error report, a death, the timeout      aborted: failed_checkpoint says why; training
//                                              goes on (a preempted job still stops)

#include <chrono>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "checkpoint/catalog.h"
#include "checkpoint/checkpoint_id.h"
#include "checkpoint/commit.h"
#include "checkpoint/env.h"
#include "checkpoint/owner.h"
#include "checkpoint/state_source.h"
#include "common/logging.h"
#include "common/status.h"
#include "common/unix_time.h"
#include "scheduler/bounds.h"
#include "scheduler/job_spec.h"
#include "scheduler/plan_builder.h"
#include "scheduler/scheduler_core.h"

namespace herd::scheduler {
namespace {

using herd::v1::CheckpointRecord;
using herd::v1::JobStatus;

constexpr int64_t kDefaultTimeoutMs = 10 * 60 * 1000;
constexpr size_t kMaxErrorBytes = 1024;

using checkpoint::ShardProcess;

// The run a job's checkpoints belong to (checkpoint/owner.h): one submission of the job.
std::string RunId(const JobStatus& s) {
  return absl::StrFormat("%s@%d", s.spec().name(), s.submitted_unix_ms());
}

int64_t TimeoutMs(const JobStatus& s) {
  const int64_t t = s.spec().checkpoint().timeout_ms();
  return t > 0 ? t : kDefaultTimeoutMs;
}

// The manifest of a checkpoint whose every process reported.
herd::v1::CheckpointManifest Manifest(const JobStatus& s, const CheckpointRecord& c) {
  herd::v1::CheckpointManifest m;
  m.set_job(s.spec().name());
  m.set_run(RunId(s));
  m.set_id(c.id());
  m.set_iteration(c.iteration());
  m.set_mode(ModeAt(s, c.iteration()).mode());
  // The worker processes that may have saved a file: the job's slots, more than the spec's
  // `workers` once an elastic job grew. The readers look for worker-0 .. worker-(N-1) and
  // reshard by this count (a resume at the spec's count is one at another worker count).
  m.set_workers(WorkerSlots(s));
  m.set_shards(s.spec().servers());
  m.set_created_unix_ms(NowUnixMs());
  m.set_trigger(c.trigger());
  for (const auto& f : c.files()) {
    *m.add_files() = f;
    if (auto d = f.values().find("params_digest"); d != f.values().end()) {
      m.set_params_digest(d->second);  // rank 0's
    }
  }
  for (const auto& t : s.spec().tensors()) {
    auto* l = m.add_layout();
    l->set_name(t.name());
    int64_t count = 1;
    for (int64_t d : t.shape()) count *= d;
    l->set_count(count);
    *l->mutable_shape() = t.shape();
    l->set_dtype(t.dtype());
  }
  return m;
}

}  // namespace

// Where the job resumes (JobStatus.resumed), from its spec's resume_from.
static absl::Status ResolveResumePoint(JobStatus& status);

void SchedulerCore::AbortCheckpoint(JobStatus& next, std::string why) {
  if (next.pending_checkpoint().id().empty()) return;
  CheckpointRecord failed = next.pending_checkpoint();
  if (why.size() > kMaxErrorBytes) why.resize(kMaxErrorBytes);
  failed.set_error(std::move(why));
  failed.set_ended_unix_ms(NowUnixMs());
  failed.clear_files();
  Log().warn("scheduler: job '{}': checkpoint {} (iteration {}) aborted: {}", next.spec().name(),
             failed.id(), failed.iteration(), failed.error());
  const bool preempt = failed.preempt();
  *next.mutable_failed_checkpoint() = std::move(failed);
  next.clear_pending_checkpoint();
  if (preempt && !IsTerminal(next.state())) {
    // The process that asked is going away with or without it: the job stops, and resumes
    // from the last checkpoint that committed.
    next.set_preempt_reason(
        absl::StrFormat("%s; its checkpoint failed (%s), resume from %s",
                        next.failed_checkpoint().trigger(), next.failed_checkpoint().error(),
                        next.last_checkpoint().id().empty() ? std::string("the start")
                                                            : next.last_checkpoint().dir()));
    EndJob(next, herd::v1::JOB_PREEMPTED, "preempted: " + next.preempt_reason());
  }
}

bool SchedulerCore::PolicyWantsCheckpoint(const JobStatus& s, int64_t iteration) const {
  const auto& policy = s.spec().checkpoint();
  if (policy.dir().empty() || !s.pending_checkpoint().id().empty()) return false;
  const int64_t start = s.has_resumed() ? s.resumed().iteration() : 0;
  // Not at the job's first iteration: that state is the submitted (or resumed) one.
  if (iteration <= start) return false;
  // Not again at a cut this run committed already (an elastic job reruns iterations after a
  // death): its id is taken.
  if (!s.last_checkpoint().id().empty() && iteration <= s.last_checkpoint().iteration()) {
    return false;
  }
  // The job's end: its final state (the workers ask for the plan after the last iteration).
  if (s.planned_iterations() > 0 && iteration == s.planned_iterations()) return true;
  if (policy.every_iterations() > 0 && iteration % policy.every_iterations() == 0) return true;
  if (policy.every_ms() > 0) {
    const int64_t since = s.last_checkpoint().id().empty() ? s.submitted_unix_ms()
                                                           : s.last_checkpoint().ended_unix_ms();
    return NowUnixMs() - since >= policy.every_ms();
  }
  return false;
}

absl::Status SchedulerCore::StartCheckpoint(Job& job, JobStatus& next, int64_t cut, std::string dir,
                                            std::string trigger, bool preempt) {
  CheckpointRecord c;
  c.set_id(checkpoint::CheckpointId(cut));
  c.set_iteration(cut);
  c.set_dir(std::move(dir));
  c.set_trigger(std::move(trigger));
  c.set_requested_unix_ms(NowUnixMs());
  c.set_preempt(preempt);
  // Every worker still training and every shard writes its part.
  for (const auto& m : next.workers()) {
    if (m.alive() && !m.finished()) c.add_expected(checkpoint::WorkerProcess(m.rank()));
  }
  for (const auto& m : next.servers()) c.add_expected(ShardProcess(m.rank()));
  const std::string key = absl::StrFormat("checkpoint/%d", next.checkpoints_requested());
  const std::string announcement = c.SerializeAsString();
  HERD_RETURN_IF_ERROR(db_->PutKv(next.spec().name(), key, announcement));
  job.kv[key] = announcement;
  next.set_checkpoints_requested(next.checkpoints_requested() + 1);
  Log().info("scheduler: job '{}': checkpoint {} at iteration {} into {} ({}; {} processes)",
             next.spec().name(), c.id(), cut, c.dir(), c.trigger(), c.expected_size());
  *next.mutable_pending_checkpoint() = std::move(c);
  return absl::OkStatus();
}

absl::StatusOr<CheckpointRecord> SchedulerCore::RequestCheckpoint(
    const herd::v1::RequestCheckpointRequest& req) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!refusal_.ok()) return refusal_;
  HERD_ASSIGN_OR_RETURN(Job * job, FindActiveJob(req.job(), "checkpoint the job"));
  const JobStatus& s = job->status;
  if (s.state() != herd::v1::JOB_RUNNING) {
    return absl::FailedPreconditionError(
        absl::StrFormat("job '%s' has not started yet (%s); a checkpoint needs running processes",
                        req.job(), JobStateName(s.state())));
  }
  const std::string dir = req.dir().empty() ? s.spec().checkpoint().dir() : req.dir();
  if (!req.dir().empty()) {
    HERD_RETURN_IF_ERROR(CheckCheckpointPath(
        absl::StrFormat("job '%s': the checkpoint directory", req.job()), req.dir()));
  }
  if (dir.empty()) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "job '%s' has no checkpoint directory: give one (--dir DIR), or submit the job with "
        "checkpoint: {dir: DIR}",
        req.job()));
  }
  // The cut: the first iteration no worker has begun (the rule of mode switches).
  const int64_t cut =
      std::max({s.issued_iteration(), s.completed_iteration(), s.epoch_start_iteration() - 1}) + 1;
  const CheckpointRecord& pending = s.pending_checkpoint();
  if (!pending.id().empty()) {
    if (pending.iteration() >= cut && (!req.preempt() || pending.preempt())) return pending;
    if (pending.iteration() >= cut) {
      // A preemption joins the pending checkpoint: it becomes the last one.
      JobStatus next = s;
      next.mutable_pending_checkpoint()->set_preempt(true);
      next.mutable_pending_checkpoint()->set_trigger(
          absl::StrFormat("%s; preemption: %s", pending.trigger(), req.who()));
      HERD_RETURN_IF_ERROR(Commit(*job, std::move(next), next_node_id_, /*sync=*/true));
      return job->status.pending_checkpoint();
    }
    return absl::FailedPreconditionError(absl::StrFormat(
        "job '%s' is writing checkpoint %s (iteration %d); ask again once it has committed",
        req.job(), pending.id(), pending.iteration()));
  }
  const int64_t planned = s.planned_iterations();
  if (planned > 0 && cut >= planned) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "job '%s' has begun its last iteration (%d of %d); there is no iteration left to "
        "checkpoint before",
        req.job(), cut - 1, planned));
  }
  JobStatus next = s;
  std::string trigger = req.preempt() ? "preemption: " + (req.who().empty() ? "SIGTERM" : req.who())
                                      : std::string("operator");
  HERD_RETURN_IF_ERROR(StartCheckpoint(*job, next, cut, dir, std::move(trigger), req.preempt()));
  HERD_RETURN_IF_ERROR(Commit(*job, std::move(next), next_node_id_, /*sync=*/true));
  return job->status.pending_checkpoint();
}

absl::StatusOr<herd::v1::ReportCheckpointResponse> SchedulerCore::ReportCheckpoint(
    const herd::v1::ReportCheckpointRequest& req) {
  HERD_ASSIGN_OR_RETURN(herd::v1::ReportCheckpointResponse resp, TakeCheckpointReport(req));
  resp.set_state_seq(StateSeq());  // covers the commit's record when this report committed
  return resp;
}

absl::StatusOr<herd::v1::ReportCheckpointResponse> SchedulerCore::TakeCheckpointReport(
    const herd::v1::ReportCheckpointRequest& req) {
  std::unique_lock<std::mutex> lock(mu_);
  if (!refusal_.ok()) return refusal_;
  HERD_ASSIGN_OR_RETURN(Job * job, FindJob(req.job()));
  auto it = nodes_.find(req.node_id());
  if (req.node_id() == 0 || it == nodes_.end() || it->second.job != req.job()) {
    return absl::NotFoundError(
        absl::StrFormat("cannot report checkpoint %s: node id %d is not a process of job '%s'",
                        req.id(), req.node_id(), req.job()));
  }
  const NodeRef ref = it->second;
  const std::string process = ref.role == herd::v1::ROLE_WORKER
                                  ? checkpoint::WorkerProcess(ref.slot)
                                  : ShardProcess(ref.slot);
  herd::v1::ReportCheckpointResponse resp;
  const JobStatus& s = job->status;
  if (s.pending_checkpoint().id() != req.id() || job->committing) {
    // Aborted (or already committed) meanwhile: the report changes nothing.
    if (s.last_checkpoint().id() == req.id()) {
      *resp.mutable_checkpoint() = s.last_checkpoint();
      resp.set_committed(true);
      return resp;
    }
    if (s.failed_checkpoint().id() == req.id()) {
      *resp.mutable_checkpoint() = s.failed_checkpoint();
      return resp;
    }
    if (job->committing && s.pending_checkpoint().id() == req.id()) {
      *resp.mutable_checkpoint() = s.pending_checkpoint();
      return resp;
    }
    return absl::FailedPreconditionError(
        absl::StrFormat("%s reports checkpoint '%s' of job '%s', which is not being taken", process,
                        req.id(), req.job()));
  }
  const CheckpointRecord& pending = s.pending_checkpoint();
  if (std::find(pending.expected().begin(), pending.expected().end(), process) ==
      pending.expected().end()) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "%s reports checkpoint %s of job '%s', which does not expect it (expected: %s)", process,
        req.id(), req.job(), absl::StrJoin(pending.expected(), ", ")));
  }
  JobStatus next = s;
  if (!req.error().empty()) {
    AbortCheckpoint(next, absl::StrFormat("%s: %s", process, req.error()));
    const bool ended = IsTerminal(next.state()) && !IsTerminal(s.state());
    if (ended) {
      HERD_RETURN_IF_ERROR(CommitEnding(*job, std::move(next)));
    } else {
      HERD_RETURN_IF_ERROR(Commit(*job, std::move(next), next_node_id_, /*sync=*/true));
    }
    *resp.mutable_checkpoint() = job->status.failed_checkpoint();
    return resp;
  }
  if (req.file().process() != process) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s reports a file of process '%s'; a process reports its own file",
                        process, req.file().process()));
  }
  auto* files = next.mutable_pending_checkpoint()->mutable_files();
  for (const auto& f : *files) {
    if (f.process() == process) {
      resp.mutable_checkpoint()->CopyFrom(s.pending_checkpoint());
      return resp;  // a retried report: the first one counts
    }
  }
  *files->Add() = req.file();
  const bool complete = files->size() == next.pending_checkpoint().expected_size();
  HERD_RETURN_IF_ERROR(Commit(*job, next, next_node_id_, /*sync=*/true));
  if (!complete) {
    *resp.mutable_checkpoint() = job->status.pending_checkpoint();
    return resp;
  }

  // Every process reported: commit, outside the lock (it writes and fsyncs files).
  job->committing = true;
  const CheckpointRecord record = next.pending_checkpoint();
  const herd::v1::CheckpointManifest manifest = Manifest(next, record);
  const herd::v1::CheckpointPolicy policy = next.spec().checkpoint();
  const std::string name = req.job();
  const std::string resumed_from = next.has_resumed() ? next.resumed().path() : std::string();
  lock.unlock();
  checkpoint::Env& env = checkpoint::PosixEnv();
  // As the directory's owner (checkpoint/owner.h): never into a directory another run commits
  // into, and retiring only this run's own checkpoints.
  absl::Status committed = checkpoint::CommitAsOwner(env, record.dir(), manifest, resumed_from);
  if (committed.ok()) {
    if (auto st = checkpoint::ApplyRetention(env, record.dir(), policy.keep_last(),
                                             policy.keep_every(), manifest.run());
        !st.ok()) {
      Log().warn("scheduler: job '{}': retention in {}: {}", name, record.dir(), st.ToString());
    }
  }
  lock.lock();
  HERD_ASSIGN_OR_RETURN(job, FindJob(name));  // deleted meanwhile: nothing to record
  job->committing = false;
  next = job->status;
  if (next.pending_checkpoint().id() != record.id()) {
    // Aborted while committing (the job failed or was cancelled): the commit stands on disk.
    return resp;
  }
  if (!committed.ok()) {
    AbortCheckpoint(next, absl::StrFormat("commit: %s", committed.message()));
  } else {
    CheckpointRecord done = record;
    done.set_ended_unix_ms(NowUnixMs());
    int64_t bytes = 0;
    for (const auto& f : done.files()) bytes += f.bytes();
    done.set_bytes(bytes);
    done.clear_files();  // the manifest holds them; the status stays small
    Log().info("scheduler: job '{}': checkpoint {} (iteration {}) committed: {} files, {} bytes",
               name, done.id(), done.iteration(), record.files_size(), bytes);
    *next.mutable_last_checkpoint() = done;
    next.clear_pending_checkpoint();
    next.set_checkpoints_committed(next.checkpoints_committed() + 1);
    if (done.preempt() && !IsTerminal(next.state())) {
      next.set_preempt_reason(absl::StrFormat("%s; saved as %s/%s (iteration %d)", done.trigger(),
                                              done.dir(), done.id(), done.iteration()));
      EndJob(next, herd::v1::JOB_PREEMPTED, "preempted: " + next.preempt_reason());
    }
  }
  const bool ended = IsTerminal(next.state()) && !IsTerminal(job->status.state());
  if (ended) {
    HERD_RETURN_IF_ERROR(CommitEnding(*job, std::move(next)));
  } else {
    HERD_RETURN_IF_ERROR(Commit(*job, std::move(next), next_node_id_, /*sync=*/true));
  }
  resp.set_committed(committed.ok());
  *resp.mutable_checkpoint() =
      committed.ok() ? job->status.last_checkpoint() : job->status.failed_checkpoint();
  return resp;
}

void SchedulerCore::ExpireCheckpoints() {
  std::lock_guard<std::mutex> lock(mu_);
  if (shutdown_ || !refusal_.ok()) return;
  const int64_t now = NowUnixMs();
  for (auto& [name, job] : jobs_) {
    const CheckpointRecord& c = job.status.pending_checkpoint();
    if (c.id().empty() || job.committing) continue;
    std::string why;
    if (now - c.requested_unix_ms() > TimeoutMs(job.status)) {
      std::vector<std::string> missing;
      for (const auto& p : c.expected()) {
        bool in = false;
        for (const auto& f : c.files()) in |= f.process() == p;
        if (!in) missing.push_back(p);
      }
      why = absl::StrFormat("not committed within %d ms: no report from %s", TimeoutMs(job.status),
                            NameSome(missing, ", "));
    } else if (job.status.state() == herd::v1::JOB_FAILED ||
               job.status.state() == herd::v1::JOB_CANCELLED) {
      why = absl::StrFormat("the job ended (%s)", JobStateName(job.status.state()));
    } else {
      // A process that must report and died will never report.
      for (const auto& m : job.status.workers()) {
        if (!m.alive() && !m.name().empty() && job.status.state() == herd::v1::JOB_RUNNING) {
          const std::string p = checkpoint::WorkerProcess(m.rank());
          if (std::find(c.expected().begin(), c.expected().end(), p) != c.expected().end()) {
            why = DescribeMember(herd::v1::ROLE_WORKER, m) + " died";
          }
        }
      }
    }
    if (why.empty()) continue;
    JobStatus next = job.status;
    AbortCheckpoint(next, std::move(why));
    const bool ended = IsTerminal(next.state()) && !IsTerminal(job.status.state());
    absl::Status st = ended ? CommitEnding(job, std::move(next))
                            : Commit(job, std::move(next), next_node_id_, /*sync=*/true);
    if (!st.ok()) Log().error("scheduler: {}", std::string(st.message()));
  }
}

absl::Status SchedulerCore::ResolveResume(JobStatus& status) {
  HERD_RETURN_IF_ERROR(ResolveResumePoint(status));
  // The checkpoint directory must be free for this run, or be the lineage it continues
  // (checkpoint/owner.h): a new run never mixes its checkpoints with another's.
  const std::string& dir = status.spec().checkpoint().dir();
  if (dir.empty()) return absl::OkStatus();
  absl::Status free =
      checkpoint::CheckNewRun(checkpoint::PosixEnv(), dir, status.spec().name(),
                              status.has_resumed() ? status.resumed().path() : std::string(),
                              status.has_resumed() ? status.resumed().iteration() : 0);
  if (!free.ok()) {
    return absl::Status(free.code(), absl::StrFormat("cannot submit job '%s': %s",
                                                     status.spec().name(), free.message()));
  }
  return absl::OkStatus();
}

static absl::Status ResolveResumePoint(JobStatus& status) {
  const std::string& from = status.spec().resume_from();
  if (from.empty()) return absl::OkStatus();
  checkpoint::Env& env = checkpoint::PosixEnv();
  auto resolved = checkpoint::ResolveCheckpoint(env, from);
  if (!resolved.ok()) {
    return absl::Status(resolved.status().code(),
                        absl::StrFormat("cannot resume job '%s' from %s: %s", status.spec().name(),
                                        from, resolved.status().message()));
  }
  const herd::v1::CheckpointManifest& m = resolved->manifest;
  auto* r = status.mutable_resumed();
  r->set_path(resolved->path);
  r->set_iteration(m.iteration());
  r->set_mode(m.mode());
  r->set_workers(m.workers());
  r->set_shards(m.shards());
  for (const auto& why : resolved->skipped) r->add_skipped(why);
  // Another model cannot take this checkpoint: say which tensor differs before anything runs.
  const auto& tensors = status.spec().tensors();
  if (!tensors.empty() && m.layout_size() > 0) {
    for (int i = 0; i < std::max(tensors.size(), m.layout_size()); ++i) {
      int64_t count = 1;
      if (i < tensors.size()) {
        for (int64_t d : tensors[i].shape()) count *= d;
      }
      if (i >= tensors.size() || i >= m.layout_size() || tensors[i].name() != m.layout(i).name() ||
          count != m.layout(i).count()) {
        return absl::FailedPreconditionError(absl::StrFormat(
            "cannot resume job '%s' from %s: tensor #%d is %s in the job, %s in the checkpoint",
            status.spec().name(), resolved->path, i,
            i < tensors.size() ? absl::StrFormat("'%s' (%d elements)", tensors[i].name(), count)
                               : std::string("absent"),
            i < m.layout_size()
                ? absl::StrFormat("'%s' (%d elements)", m.layout(i).name(), m.layout(i).count())
                : std::string("absent")));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace herd::scheduler
