// SchedulerCore: jobs, epochs, persistence and the failure-detector thread. Membership is in
// membership.cc; plans, barriers, progress and the store in sync.cc.

#include "scheduler/scheduler_core.h"

#include <algorithm>
#include <filesystem>

#include "absl/strings/str_format.h"
#include "common/logging.h"
#include "common/status.h"
#include "common/unix_time.h"
#include "scheduler/bounds.h"
#include "scheduler/job_metrics.h"
#include "scheduler/job_spec.h"
#include "scheduler/limits.h"
#include "scheduler/plan_builder.h"
#include "scheduler/stored_job.h"

namespace herd::scheduler {

using herd::v1::JobState;
using herd::v1::JobStatus;

namespace {

// With --accept-data-loss, new node ids start this far past the recovered counter: more
// registrations than this between the last write kept and the loss are not plausible.
constexpr uint64_t kNodeIdsSkippedOnDataLoss = uint64_t{1} << 20;

// ": <why>" for a job that ended with a reason, "" otherwise.
std::string EndReasonSuffix(const JobStatus& s) {
  if (s.state() == herd::v1::JOB_CANCELLED && !s.cancel_reason().empty()) {
    return ": " + s.cancel_reason();
  }
  if (s.state() == herd::v1::JOB_FAILED && !s.failure_reason().empty()) {
    return ": " + s.failure_reason();
  }
  if (s.state() == herd::v1::JOB_PREEMPTED && !s.preempt_reason().empty()) {
    return ": " + s.preempt_reason();
  }
  return "";
}

}  // namespace

std::string DescribeMember(herd::v1::Role role, const herd::v1::Member& m) {
  if (role == herd::v1::ROLE_SERVER) {
    return absl::StrFormat("server '%s' (shard %d)", m.name(), m.rank());
  }
  return absl::StrFormat("worker '%s' (rank %d)", m.name(), m.rank());
}

SchedulerCore::SchedulerCore(SchedulerOptions options) : options_(std::move(options)) {}

absl::StatusOr<std::unique_ptr<SchedulerCore>> SchedulerCore::Open(SchedulerOptions options) {
  if (options.heartbeat_timeout.count() < 1) {
    return absl::InvalidArgumentError(
        absl::StrFormat("the heartbeat timeout must be at least 1 ms, got %d ms",
                        options.heartbeat_timeout.count()));
  }
  std::unique_ptr<SchedulerCore> core(new SchedulerCore(std::move(options)));
  HERD_ASSIGN_OR_RETURN(
      core->db_, StateDb::Open(core->options_.state_dir,
                               {core->options_.accept_data_loss, core->options_.file_system}));
  core->history_ = std::make_unique<metrics::HistoryWriter>(
      (std::filesystem::path(core->options_.state_dir) / "history").string());
  HERD_RETURN_IF_ERROR(core->Load());
  core->completer_ = std::thread([c = core.get()] { c->CompleterLoop(); });
  core->detector_ = std::thread([c = core.get()] { c->DetectorLoop(); });
  core->ticker_ = std::thread([c = core.get()] { c->TickerLoop(); });
  return core;
}

absl::Status SchedulerCore::Load() {
  HERD_ASSIGN_OR_RETURN(StateDb::Contents contents, db_->Load());
  std::lock_guard<std::mutex> lock(mu_);
  HERD_RETURN_IF_ERROR(CheckRecordedLoss(contents.lost));
  // A record the scheduler cannot serve is set aside with a log line; it never stops a start.
  auto set_aside = [&](const std::string& key, std::string_view why) {
    Log().error("scheduler: {} in {}; set aside as 'bad/{}', the other jobs are served",
                std::string(why), options_.state_dir, Echo(key));
    if (auto st = db_->SetAside(key); !st.ok()) {
      Log().error("scheduler: {}", std::string(st.message()));
    }
  };
  for (const auto& [key, why] : contents.unreadable) {
    set_aside(key, absl::StrFormat("job record '%s': %s", Echo(key), why));
  }
  uint64_t next_node_id = 1;
  // Nodes alive at the crash get a whole timeout from now to reconnect: the scheduler cannot
  // tell how long it was down, and running processes keep their node ids across its restart.
  const auto now = Clock::now();
  for (auto& [name, status] : contents.jobs) {
    // Records of older versions kept every member's UCX address, which nothing reads
    // (job.proto, Member.ucx_address): dropped here, and from the record at its next write.
    for (auto* slots : {status.mutable_workers(), status.mutable_servers()}) {
      for (auto& m : *slots) m.clear_ucx_address();
    }
    absl::Status check = CheckStoredJob(name, status);
    // Node ids are unique across jobs: a record that reuses one would steal another's node.
    for (const auto* slots : {&status.workers(), &status.servers()}) {
      for (const auto& m : *slots) {
        if (check.ok() && m.node_id() != 0 && nodes_.contains(m.node_id())) {
          check = absl::DataLossError(
              absl::StrFormat("job record '%s': node id %d is also held by job '%s'", Echo(name),
                              m.node_id(), nodes_[m.node_id()].job));
        }
      }
    }
    if (!check.ok()) {
      set_aside(StateDb::JobKey(name), std::string(check.message()));
      continue;
    }
    Job job;
    job.status = std::move(status);
    job.worker_seen.assign(static_cast<size_t>(job.status.workers_size()), now);
    job.server_seen.assign(static_cast<size_t>(job.status.servers_size()), now);
    for (int i = 0; i < job.status.workers_size(); ++i) {
      const auto& m = job.status.workers(i);
      if (m.node_id() != 0) nodes_[m.node_id()] = {name, herd::v1::ROLE_WORKER, i};
      next_node_id = std::max(next_node_id, m.node_id() + 1);
    }
    for (int i = 0; i < job.status.servers_size(); ++i) {
      const auto& m = job.status.servers(i);
      if (m.node_id() != 0) nodes_[m.node_id()] = {name, herd::v1::ROLE_SERVER, i};
      next_node_id = std::max(next_node_id, m.node_id() + 1);
    }
    if (auto kv = contents.kv.find(name); kv != contents.kv.end()) {
      job.kv = std::move(kv->second);
      for (const auto& [k, v] : job.kv) job.kv_bytes += k.size() + v.size();
      store_bytes_ += job.kv_bytes;
    }
    jobs_.emplace(name, std::move(job));
  }
  // The stored counter, unless it is missing, damaged or behind a member (then recomputed).
  next_node_id_ = std::max(contents.next_node_id, next_node_id);
  if (options_.accept_data_loss) {
    // Registrations may be among the lost writes, and their processes may still run with the
    // ids they got: new ids skip far past them, so none is handed out twice.
    next_node_id_ += kNodeIdsSkippedOnDataLoss;
  }
  if (!jobs_.empty()) {
    Log().info("scheduler: resumed {} job(s) from {}", jobs_.size(), options_.state_dir);
  }
  return absl::OkStatus();
}

SchedulerCore::~SchedulerCore() {
  Shutdown();
  if (detector_.joinable()) detector_.join();
  if (ticker_.joinable()) ticker_.join();
  {
    std::lock_guard<std::mutex> lock(mu_);
    completer_stop_ = true;
  }
  completions_cv_.notify_all();
  if (completer_.joinable()) completer_.join();
}

void SchedulerCore::Shutdown() {
  std::lock_guard<std::mutex> lock(mu_);
  shutdown_ = true;
  // Every wait is answered: the processes retry against the scheduler's successor.
  for (auto& [name, job] : jobs_) {
    for (auto& [key, w] : job.store_waiters) {
      Complete([done = std::move(w.done)] {
        done(absl::UnavailableError(
            "cannot read a store key: the scheduler is shutting down; retry against its "
            "successor"));
      });
    }
    job.store_waiters.clear();
    for (auto& [key, w] : job.many_waiters) {
      Complete([done = std::move(w->done)] {
        done(absl::UnavailableError(
            "cannot read store keys: the scheduler is shutting down; retry against its "
            "successor"));
      });
    }
    job.many_waiters.clear();
    for (auto& w : job.barrier_waiters) {
      Complete([done = std::move(w.done)] {
        done(absl::UnavailableError(
            "cannot wait at a barrier: the scheduler is shutting down; retry against its "
            "successor"));
      });
    }
    job.barrier_waiters.clear();
    for (auto& [id, f] : job.followers) {
      f.sink->Close(absl::UnavailableError(
          "the scheduler is shutting down; follow its successor (the same address)"));
    }
  }
  changed_.notify_all();
}

void SchedulerCore::DetectorLoop() {
  // A tenth of the timeout: a death is noticed at most 10% after the deadline passes.
  const auto period = std::max<std::chrono::milliseconds>(options_.heartbeat_timeout / 10,
                                                          std::chrono::milliseconds(5));
  std::unique_lock<std::mutex> lock(mu_);
  auto last = Clock::now();
  while (!shutdown_) {
    changed_.wait_for(lock, period);
    if (shutdown_) break;
    // The scheduler itself stopped (SIGSTOP, a paused VM, a long swap): the silence it would
    // see now is its own, not its nodes'. Everyone gets a full timeout from now, as at a
    // restart.
    const auto now = Clock::now();
    if (now - last > std::max<Clock::duration>(3 * period, options_.heartbeat_timeout / 2)) {
      Log().warn(
          "scheduler: it did not run for {} ms (stopped?); every node gets a full heartbeat "
          "timeout from now before it is declared dead",
          std::chrono::duration_cast<std::chrono::milliseconds>(now - last).count());
      for (auto& [name, job] : jobs_) {
        std::fill(job.worker_seen.begin(), job.worker_seen.end(), now);
        std::fill(job.server_seen.begin(), job.server_seen.end(), now);
      }
    }
    last = now;
    lock.unlock();
    DetectFailures();
    ExpireCheckpoints();
    lock.lock();
  }
}

void SchedulerCore::WaitChanged(std::unique_lock<std::mutex>& lock, Deadline deadline) {
  const auto slice =
      std::min<std::chrono::nanoseconds>(deadline.remaining(), std::chrono::seconds(1));
  changed_.wait_for(lock, slice);
}

absl::StatusOr<SchedulerCore::Job*> SchedulerCore::FindJob(std::string_view name) {
  auto it = jobs_.find(name);
  if (it == jobs_.end()) {
    return absl::NotFoundError(
        absl::StrFormat("job '%s' does not exist; `herd job list` shows the jobs", Echo(name)));
  }
  return &it->second;
}

absl::StatusOr<SchedulerCore::Job*> SchedulerCore::FindActiveJob(std::string_view name,
                                                                 std::string_view action) {
  HERD_ASSIGN_OR_RETURN(Job * job, FindJob(name));
  const JobStatus& s = job->status;
  if (IsTerminal(s.state())) {
    return absl::FailedPreconditionError(absl::StrFormat("cannot %s: job '%s' has ended (%s%s)",
                                                         action, name, JobStateName(s.state()),
                                                         EndReasonSuffix(s)));
  }
  return job;
}

absl::StatusOr<herd::v1::Member*> SchedulerCore::FindLiveMember(Job& job, uint64_t node_id,
                                                                std::string_view action,
                                                                NodeRef* ref) {
  const std::string& name = job.status.spec().name();
  auto it = nodes_.find(node_id);
  if (auto r = replaced_.find(node_id); r != replaced_.end() && r->second.job == name) {
    // The slot went to a replacement: the node must register again (documented code).
    const NodeRef& was = r->second;
    const auto& slots =
        was.role == herd::v1::ROLE_WORKER ? job.status.workers() : job.status.servers();
    return absl::FailedPreconditionError(absl::StrFormat(
        "cannot %s: node id %d of job '%s' was declared dead and its slot taken by %s; register "
        "again",
        action, node_id, name, DescribeMember(was.role, slots[was.slot])));
  }
  if (node_id == 0 || it == nodes_.end() || it->second.job != name) {
    return absl::NotFoundError(absl::StrFormat(
        "cannot %s: node id %d is not registered in job '%s'; register the node first", action,
        node_id, name));
  }
  *ref = it->second;
  auto* slots = ref->role == herd::v1::ROLE_WORKER ? job.status.mutable_workers()
                                                   : job.status.mutable_servers();
  herd::v1::Member* m = slots->Mutable(ref->slot);
  if (m->node_id() != node_id) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "cannot %s: node id %d of job '%s' was declared dead and its slot taken by %s; register "
        "again",
        action, node_id, name, DescribeMember(ref->role, *m)));
  }
  if (!m->alive()) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "cannot %s: %s of job '%s' was declared dead (no heartbeat within %d ms); register again "
        "with the same name to take its place back",
        action, DescribeMember(ref->role, *m), name, options_.heartbeat_timeout.count()));
  }
  return m;
}

absl::Status SchedulerCore::CheckEpoch(const Job& job, uint64_t epoch, std::string_view action) {
  const uint64_t current = job.status.epoch();
  if (epoch == 0 || epoch == current) return absl::OkStatus();
  if (epoch < current) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "cannot %s: epoch %d of job '%s' is stale, the current epoch is %d (%s); fetch the new "
        "plan",
        action, epoch, job.status.spec().name(), current, job.status.epoch_reason()));
  }
  return absl::InvalidArgumentError(
      absl::StrFormat("cannot %s: epoch %d of job '%s' does not exist yet (the current one is %d)",
                      action, epoch, job.status.spec().name(), current));
}

void SchedulerCore::AdvanceEpoch(JobStatus& next, std::string reason, EpochStart start) {
  if (next.state() == herd::v1::JOB_PENDING) {
    // A job starts once every process is there and the model's layout is known (the spec's,
    // or the first worker's declaration); it never goes back to PENDING.
    bool all_alive = next.spec().tensors_size() > 0;
    for (const auto& m : next.workers()) all_alive &= m.alive();
    for (const auto& m : next.servers()) all_alive &= m.alive();
    if (all_alive) next.set_state(herd::v1::JOB_RUNNING);
  }
  // The new epoch begins after the last iteration every live worker finished: the iteration in
  // flight when membership changed is run again with the new membership.
  int64_t low = INT64_MAX;
  for (const auto& p : next.progress()) {
    if (p.rank() < next.workers_size() && next.workers(p.rank()).alive()) {
      low = std::min(low, p.iteration());
    }
  }
  if (low != INT64_MAX) next.set_completed_iteration(std::max(next.completed_iteration(), low));
  next.set_epoch(next.epoch() + 1);
  if (start == EpochStart::kAfterHorizon) {
    // No live worker runs anything again: every iteration one may have begun (the horizon)
    // stays in the epoch before.
    next.set_epoch_start_iteration(FirstIterationAfterHorizon(next));
  } else {
    // A death: the first iteration some live worker has not completed, even if a planned change
    // had put the epoch's start after the horizon (that change is part of this epoch now).
    next.set_epoch_start_iteration(next.completed_iteration() + 1);
  }
  next.set_epoch_reason(std::move(reason));
}

absl::Status SchedulerCore::Commit(Job& job, JobStatus next, uint64_t next_node_id, bool sync) {
  HERD_RETURN_IF_ERROR(db_->PutJob(next, next_node_id, sync));
  RecordJobMetrics(job.status, next);
  const bool new_epoch = next.epoch() != job.status.epoch();
  if (new_epoch) job.previous_view = EpochViewOf(job.status);
  job.status = std::move(next);
  job.progress_unsaved = false;  // the record just written holds the progress too
  job.progress_saved_at = Clock::now();
  if (new_epoch) {
    job.barriers.clear();
    Log().info("scheduler: job '{}' epoch {} ({}, from iteration {}): {}", job.status.spec().name(),
               job.status.epoch(), JobStateName(job.status.state()),
               job.status.epoch_start_iteration(), job.status.epoch_reason());
  }
  Publish(job);
  changed_.notify_all();
  return absl::OkStatus();
}

absl::StatusOr<JobStatus> SchedulerCore::SubmitJob(const herd::v1::JobSpec& in) {
  HERD_ASSIGN_OR_RETURN(herd::v1::JobSpec spec, NormalizeJobSpec(in));
  // The checkpoint to resume from is read before the lock: it touches the disk.
  JobStatus resume;
  *resume.mutable_spec() = spec;
  HERD_RETURN_IF_ERROR(ResolveResume(resume));
  std::lock_guard<std::mutex> lock(mu_);
  if (!refusal_.ok()) return refusal_;
  if (auto it = jobs_.find(spec.name()); it != jobs_.end()) {
    return absl::AlreadyExistsError(
        absl::StrFormat("job '%s' already exists (state %s); choose another name", spec.name(),
                        JobStateName(it->second.status.state())));
  }
  if (jobs_.size() >= limits::kMaxJobs) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "the scheduler holds %d jobs, its limit; delete ended jobs (`herd job delete NAME`) "
        "before submitting '%s'",
        jobs_.size(), spec.name()));
  }
  JobStatus status;
  *status.mutable_spec() = spec;
  status.set_state(herd::v1::JOB_PENDING);
  status.set_epoch(1);
  status.set_epoch_start_iteration(0);
  status.set_epoch_reason("submitted");
  status.set_completed_iteration(-1);
  status.set_issued_iteration(-1);
  status.set_begun_iteration(-1);
  status.set_submitted_unix_ms(NowUnixMs());
  // A resumed job begins at its checkpoint's iteration: as if every earlier one had run.
  const int64_t start = resume.has_resumed() ? resume.resumed().iteration() : 0;
  if (resume.has_resumed()) {
    *status.mutable_resumed() = resume.resumed();
    status.set_epoch_start_iteration(start);
    status.set_completed_iteration(start - 1);
    status.set_issued_iteration(start - 1);
    status.set_begun_iteration(start - 1);
    status.set_epoch_reason(absl::StrFormat("submitted, resuming from %s at iteration %d",
                                            resume.resumed().path(), start));
  }
  for (int r = 0; r < spec.workers(); ++r) {
    status.add_workers()->set_rank(r);
    auto* p = status.add_progress();
    p->set_rank(r);
    p->set_iteration(start - 1);
  }
  for (int s = 0; s < spec.servers(); ++s) status.add_servers()->set_rank(s);
  auto* first = status.add_schedule();
  first->set_from_iteration(0);
  *first->mutable_mode() = spec.mode();
  HERD_RETURN_IF_ERROR(CheckJobStatusSize(status, "submitting the spec"));
  HERD_RETURN_IF_ERROR(db_->PutJob(status, next_node_id_, /*sync=*/true));
  Job job;
  job.status = status;
  job.worker_seen.assign(static_cast<size_t>(spec.workers()), Clock::now());
  job.server_seen.assign(static_cast<size_t>(spec.servers()), Clock::now());
  jobs_.emplace(spec.name(), std::move(job));
  Log().info("scheduler: job '{}' submitted: mode {}, {} workers, {} servers, {} tensors",
             spec.name(), spec.mode().mode(), spec.workers(), spec.servers(), spec.tensors_size());
  changed_.notify_all();
  return status;
}

absl::StatusOr<JobStatus> SchedulerCore::GetJob(std::string_view name) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!refusal_.ok()) return refusal_;
  HERD_ASSIGN_OR_RETURN(Job * job, FindJob(name));
  return job->status;
}

JobStatus SchedulerCore::Brief(const JobStatus& s) {
  // Everything but what grows with the job's processes (members, progress, results, events,
  // the checkpoints' file lists), without copying those first: the status of a large job is
  // megabytes, a brief answer about its spec's size. The lists are moved out for the copy and
  // back, so `s` is unchanged when this returns.
  JobStatus& from = const_cast<JobStatus&>(s);
  JobStatus lists;
  lists.mutable_workers()->Swap(from.mutable_workers());
  lists.mutable_servers()->Swap(from.mutable_servers());
  lists.mutable_progress()->Swap(from.mutable_progress());
  lists.mutable_worker_results()->Swap(from.mutable_worker_results());
  lists.mutable_membership_events()->Swap(from.mutable_membership_events());
  herd::v1::CheckpointRecord* records[] = {from.mutable_pending_checkpoint(),
                                           from.mutable_last_checkpoint(),
                                           from.mutable_failed_checkpoint()};
  herd::v1::CheckpointRecord held[3];
  for (int i = 0; i < 3; ++i) {
    held[i].mutable_files()->Swap(records[i]->mutable_files());
    held[i].mutable_expected()->Swap(records[i]->mutable_expected());
  }
  JobStatus brief = from;
  for (int i = 0; i < 3; ++i) {
    records[i]->mutable_files()->Swap(held[i].mutable_files());
    records[i]->mutable_expected()->Swap(held[i].mutable_expected());
  }
  from.mutable_workers()->Swap(lists.mutable_workers());
  from.mutable_servers()->Swap(lists.mutable_servers());
  from.mutable_progress()->Swap(lists.mutable_progress());
  from.mutable_worker_results()->Swap(lists.mutable_worker_results());
  from.mutable_membership_events()->Swap(lists.mutable_membership_events());
  return brief;
}

absl::StatusOr<JobStatus> SchedulerCore::GetJobBrief(std::string_view name) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!refusal_.ok()) return refusal_;
  HERD_ASSIGN_OR_RETURN(Job * job, FindJob(name));
  return Brief(job->status);
}

std::vector<JobStatus> SchedulerCore::ListJobs() {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<JobStatus> out;
  for (const auto& [name, job] : jobs_) out.push_back(job.status);
  return out;
}

SchedulerCore::JobPage SchedulerCore::ListJobs(std::string_view after, size_t max_bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  JobPage page;
  size_t bytes = 0;
  auto it = after.empty() ? jobs_.begin() : jobs_.upper_bound(after);
  for (; it != jobs_.end(); ++it) {
    // Each entry costs its size plus a tag and a length prefix of at most 5 bytes.
    const size_t entry = it->second.status.ByteSizeLong() + 6;
    if (!page.jobs.empty() && bytes + entry > max_bytes) {
      page.next_page_token = page.jobs.back().spec().name();
      break;
    }
    bytes += entry;
    page.jobs.push_back(it->second.status);
  }
  return page;
}

absl::StatusOr<JobStatus> SchedulerCore::SetMode(const herd::v1::SetModeRequest& req) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!refusal_.ok()) return refusal_;
  HERD_ASSIGN_OR_RETURN(Job * job, FindActiveJob(req.job(), "switch the mode"));
  HERD_ASSIGN_OR_RETURN(herd::v1::ModeSpec mode, NormalizeMode(req.mode(), job->status.spec()));
  // A switch takes effect at an iteration boundary no worker has crossed yet: every worker
  // then sees the new mode in the plan of that iteration, never in the middle of one.
  const int64_t earliest =
      std::max({job->status.issued_iteration(), job->status.completed_iteration(),
                job->status.epoch_start_iteration() - 1}) +
      1;
  const int64_t from = req.has_from_iteration() ? req.from_iteration() : earliest;
  if (from < 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("--from-iteration must be >= 0, got %d", from));
  }
  const int64_t planned = job->status.planned_iterations();
  if (planned > 0 && from >= planned) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "cannot switch job '%s' to '%s' from iteration %d: the job runs %d iterations (0..%d), "
        "so the switch would never take effect",
        req.job(), mode.mode(), from, planned, planned - 1));
  }
  if (from < earliest) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "cannot switch job '%s' to '%s' from iteration %d: workers have already begun iteration "
        "%d; use --from-iteration %d or later",
        req.job(), mode.mode(), from, earliest - 1, earliest));
  }
  JobStatus next = job->status;
  if (next.schedule_size() >= limits::kMaxModeSwitches) {
    // Counted before the replaced switches are dropped: simple, and a schedule that long is a
    // script gone wrong, not a plan.
    return absl::ResourceExhaustedError(
        absl::StrFormat("job '%s' has %d scheduled mode switches, the limit; no more can be added",
                        req.job(), next.schedule_size()));
  }
  // A new switch replaces the switches scheduled at or after its iteration.
  auto* schedule = next.mutable_schedule();
  schedule->erase(std::remove_if(schedule->begin(), schedule->end(),
                                 [&](const herd::v1::ModeSwitch& s) {
                                   return s.from_iteration() >= from && s.from_iteration() > 0;
                                 }),
                  schedule->end());
  if (from == 0 && !schedule->empty() && schedule->Get(0).from_iteration() == 0) {
    *schedule->Mutable(0)->mutable_mode() = mode;
  } else {
    auto* sw = schedule->Add();
    sw->set_from_iteration(from);
    *sw->mutable_mode() = mode;
  }
  AdvanceEpoch(next, absl::StrFormat("mode switch to '%s' from iteration %d", mode.mode(), from));
  HERD_RETURN_IF_ERROR(CheckJobStatusSize(next, "a mode switch"));
  HERD_RETURN_IF_ERROR(Commit(*job, std::move(next), next_node_id_, /*sync=*/true));
  return job->status;
}

}  // namespace herd::scheduler
