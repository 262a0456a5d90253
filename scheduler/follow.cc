// SchedulerCore: following a job (docs/scheduler.md, "Following a job"). Each process of a job
// keeps one Follow stream open for its life. Up come its heartbeats and, from workers, their
// progress, batched; down go the epoch's view (what every plan is computed from), the horizon
// (plans hold up to it) and the job's ending. The scheduler's work per message is O(1): no
// message copies the job's state, and a view goes out only when it changed.
//
// The horizon. Plans of iterations up to the horizon granted never change (but for a worker's
// death, whose survivors roll back), because every change of plan is placed after it: a mode
// switch and a checkpoint cut start after issued_iteration (the horizon), a joining worker's
// epoch begins after it. The ticker moves it about horizon_ahead of the job's progress at the
// measured iteration rate, so workers never catch up with it while the scheduler runs, and a
// worker that does (the scheduler was stopped) asks for it (want_horizon) and waits.

#include <algorithm>

#include "absl/strings/str_format.h"
#include "common/logging.h"
#include "common/status.h"
#include "common/unix_time.h"
#include "metrics/scheduler_metrics.h"
#include "scheduler/elastic.h"
#include "scheduler/job_metrics.h"
#include "scheduler/limits.h"
#include "scheduler/plan_builder.h"
#include "scheduler/scheduler_core.h"

namespace herd::scheduler {
namespace {

using herd::v1::FollowEvent;
using herd::v1::FollowRequest;
using herd::v1::JobStatus;

// How often the ticker runs: grants, waits' deadlines, progress folded into the job.
constexpr auto kTick = std::chrono::milliseconds(20);
// Progress reports are written to the state at most this often (they are in memory at once;
// after a restart the workers report again within an interval).
constexpr auto kSaveProgressEvery = std::chrono::seconds(2);

}  // namespace

herd::v1::FollowEvent SchedulerCore::EventFor(const Job& job, bool with_view) {
  FollowEvent e;
  if (with_view) {
    // The published bytes when there are any (a PENDING job's view is built for the asker).
    if (!job.view_bytes.empty()) {
      e.mutable_view()->ParseFromString(job.view_bytes);
    } else {
      *e.mutable_view() = EpochViewOf(job.status);
    }
  }
  e.set_horizon(job.status.issued_iteration());
  e.set_completed_iteration(job.status.completed_iteration());
  e.set_state_seq(db_->sequence().current());
  const auto interval = options_.follow_interval.count() > 0
                            ? options_.follow_interval
                            : std::max<std::chrono::milliseconds>(options_.heartbeat_timeout / 3,
                                                                  std::chrono::milliseconds(1));
  e.set_interval_ms(interval.count());
  e.set_heartbeat_timeout_ms(options_.heartbeat_timeout.count());
  if (job.gathering.notice != 0) e.set_notice(job.gathering.notice);
  return e;
}

void SchedulerCore::Publish(Job& job) {
  SettleWaits(job);
  herd::v1::EpochView view = EpochViewOf(job.status);
  std::string bytes = view.SerializeAsString();
  if (bytes == job.view_bytes) return;
  job.view_bytes = std::move(bytes);
  ++job.view_revision;
  // A PENDING job's workers wait for it to start: a view per registration would cost every
  // worker's stream one event each (quadratic in the job's size); they get the view it starts
  // with. Its shards (a few) follow every view: they start serving once the layout is known.
  const bool pending = job.status.state() == herd::v1::JOB_PENDING;
  FollowEvent e = EventFor(job, /*with_view=*/true);
  size_t sent = 0;
  for (auto& [id, f] : job.followers) {
    if (pending && f.role == herd::v1::ROLE_WORKER) continue;
    f.view_revision = job.view_revision;
    f.horizon_sent = std::max(f.horizon_sent, e.horizon());
    f.sink->Send(e);
    ++sent;
  }
  metrics::SchedulerMetrics::Get().follow_events().Increment(static_cast<double>(sent));
}

absl::StatusOr<uint64_t> SchedulerCore::OpenFollow(const FollowRequest& first,
                                                   std::shared_ptr<FollowSink> sink) {
  std::lock_guard<std::mutex> lock(mu_);
  if (shutdown_) {
    return absl::UnavailableError(
        "cannot follow the job: the scheduler is shutting down; retry against its successor");
  }
  HERD_RETURN_IF_ERROR(HearWitness(first.seen_state_seq(), first.job(), first.node_id()));
  HERD_ASSIGN_OR_RETURN(Job * job, FindJob(first.job()));
  NodeRef ref;
  const bool ended = IsTerminal(job->status.state());
  if (ended) {
    // A process of a job that ended hears it at once; it is not an error to ask.
    auto it = nodes_.find(first.node_id());
    if (first.node_id() == 0 || it == nodes_.end() || it->second.job != first.job()) {
      return absl::NotFoundError(
          absl::StrFormat("cannot follow job '%s': node id %d is not registered in it", first.job(),
                          first.node_id()));
    }
    ref = it->second;
  } else {
    HERD_ASSIGN_OR_RETURN(herd::v1::Member * m,
                          FindLiveMember(*job, first.node_id(), "follow the job", &ref));
    (void)m;
  }
  const uint64_t id = next_stream_id_++;
  Follower f;
  f.node_id = first.node_id();
  f.role = ref.role;
  f.slot = ref.slot;
  f.sink = std::move(sink);
  f.view_revision = job->view_revision;
  FollowEvent e = EventFor(*job, /*with_view=*/true);
  f.horizon_sent = e.horizon();
  f.sink->Send(e);
  job->followers.emplace(id, std::move(f));
  streams_[id] = StreamRef{first.job(), first.node_id()};
  metrics::SchedulerMetrics::Get().follow_streams().Set(static_cast<double>(streams_.size()));
  if (!ended) HERD_RETURN_IF_ERROR(TakeFollowLocked(*job, id, first));
  return id;
}

absl::Status SchedulerCore::TakeFollow(uint64_t id, const FollowRequest& msg) {
  std::lock_guard<std::mutex> lock(mu_);
  if (shutdown_) {
    return absl::UnavailableError(
        "the scheduler is shutting down; follow its successor (the same address)");
  }
  auto s = streams_.find(id);
  if (s == streams_.end()) return absl::NotFoundError("the stream was closed");
  const StreamRef ref = s->second;
  if ((!msg.job().empty() && msg.job() != ref.job) ||
      (msg.node_id() != 0 && msg.node_id() != ref.node_id)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "a Follow stream of node %d of job '%s' cannot speak for node %d of job '%s'", ref.node_id,
        ref.job, msg.node_id(), msg.job()));
  }
  HERD_RETURN_IF_ERROR(HearWitness(msg.seen_state_seq(), ref.job, ref.node_id));
  HERD_ASSIGN_OR_RETURN(Job * job, FindJob(ref.job));
  if (IsTerminal(job->status.state())) return absl::OkStatus();  // it heard the ending
  return TakeFollowLocked(*job, id, msg);
}

absl::Status SchedulerCore::TakeFollowLocked(Job& job, uint64_t id, const FollowRequest& msg) {
  auto fit = job.followers.find(id);
  if (fit == job.followers.end()) return absl::NotFoundError("the stream was closed");
  Follower& f = fit->second;
  NodeRef ref;
  // A node declared dead (or replaced) learns it here: the stream ends with the reason.
  HERD_ASSIGN_OR_RETURN(herd::v1::Member * me,
                        FindLiveMember(job, f.node_id, "follow the job", &ref));
  const auto now = Clock::now();
  auto& seen = ref.role == herd::v1::ROLE_WORKER ? job.worker_seen : job.server_seen;
  if (static_cast<size_t>(ref.slot) < seen.size()) seen[static_cast<size_t>(ref.slot)] = now;
  metrics::SchedulerMetrics::Get().heartbeats().Increment();
  if (msg.has_durable_version()) {
    herd::v1::HeartbeatRequest hb;
    hb.set_durable_version(msg.durable_version());
    if (ref.role != herd::v1::ROLE_SERVER || msg.durable_version() < 0) {
      return absl::InvalidArgumentError(
          absl::StrFormat("%s reports durable version %d; only servers report one, and it is >= 0",
                          DescribeMember(ref.role, *me), msg.durable_version()));
    }
    RecordDurableVersion(job, ref.slot, hb);
  }
  if (ref.role != herd::v1::ROLE_WORKER) {
    if (msg.has_completed_iteration() || msg.iterations_size() > 0 || msg.want_horizon() > 0 ||
        msg.want_completed() > 0) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s reports training progress; only workers do", DescribeMember(ref.role, *me)));
    }
    return absl::OkStatus();
  }
  if (msg.iterations_size() > limits::kMaxReportsPerMessage) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s reports %d iterations in one message; at most %d", DescribeMember(ref.role, *me),
        msg.iterations_size(), limits::kMaxReportsPerMessage));
  }
  const int64_t far = job.status.completed_iteration() + 1 + limits::kMaxIterationsAhead;
  if (msg.want_horizon() > far || msg.want_completed() > far) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s asks about iteration %d of job '%s', more than %d iterations ahead of its progress "
        "(%d)",
        DescribeMember(ref.role, *me), std::max(msg.want_horizon(), msg.want_completed()),
        job.status.spec().name(), limits::kMaxIterationsAhead, job.status.completed_iteration()));
  }
  if (msg.has_completed_iteration()) {
    HERD_RETURN_IF_ERROR(TakeProgress(job, ref.slot, msg.completed_iteration(), msg.iterations()));
  }
  if (msg.sync() != 0) {
    FollowEvent e;
    e.set_horizon(job.status.issued_iteration());
    e.set_completed_iteration(job.status.completed_iteration());
    e.set_state_seq(db_->sequence().current());
    e.set_synced(msg.sync());
    f.sink->Send(e);
  }
  if (msg.answers_notice() != 0 && msg.answers_notice() == job.gathering.notice) {
    f.answered_notice = msg.answers_notice();
  }
  if (msg.want_completed() > f.want_completed) f.want_completed = msg.want_completed();
  if (msg.want_horizon() > job.asked_horizon) job.asked_horizon = msg.want_horizon();
  // Answers that are due now rather than at the next tick: a worker waits for them.
  if (msg.want_completed() > 0 || msg.answers_notice() != 0) FoldProgress(job, now, false);
  if (msg.want_horizon() > job.status.issued_iteration()) GrantHorizon(job, now);
  if (job.gathering.notice != 0 && GatheringAnswered(job)) SweepJob(job, now);
  return absl::OkStatus();
}

void SchedulerCore::CloseFollow(uint64_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto s = streams_.find(id);
  if (s == streams_.end()) return;
  if (auto j = jobs_.find(s->second.job); j != jobs_.end()) j->second.followers.erase(id);
  streams_.erase(s);
  metrics::SchedulerMetrics::Get().follow_streams().Set(static_cast<double>(streams_.size()));
}

size_t SchedulerCore::FollowStreams() {
  std::lock_guard<std::mutex> lock(mu_);
  return streams_.size();
}

absl::Status SchedulerCore::TakeProgress(
    Job& job, int slot, int64_t completed,
    const google::protobuf::RepeatedPtrField<herd::v1::IterationReport>& its) {
  if (completed < -1 || slot >= job.status.progress_size()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("worker %d of job '%s' reports completed iteration %d; iterations are >= 0",
                        slot, job.status.spec().name(), completed));
  }
  auto* p = job.status.mutable_progress(slot);
  p->set_iteration(completed);
  if (!its.empty()) *p->mutable_stats() = its.rbegin()->stats();
  // A worker that completed an iteration had begun it.
  if (completed > job.status.issued_iteration()) job.status.set_issued_iteration(completed);
  if (completed > job.status.begun_iteration()) job.status.set_begun_iteration(completed);
  const auto now = Clock::now();
  job.rate.Observe(completed, now);
  job.progress_changed = true;
  job.progress_unsaved = true;
  // Rank 0's figures are the job's (as in its result): its metrics and its history.
  if (p->rank() == 0) {
    for (const auto& it : its) {
      RecordRankZeroIteration(job.status, it.iteration(), it.stats(), *history_);
    }
  }
  return absl::OkStatus();
}

void SchedulerCore::FoldProgress(Job& job, Clock::time_point now, bool save) {
  if (job.progress_changed) {
    job.progress_changed = false;
    JobStatus& s = job.status;
    int64_t low = INT64_MAX;
    for (const auto& q : s.progress()) {
      if (q.rank() < s.workers_size() && s.workers(q.rank()).alive()) {
        low = std::min(low, q.iteration());
      }
    }
    if (low != INT64_MAX && low > s.completed_iteration()) {
      s.set_completed_iteration(low);
      NoteProgress(s, NowUnixMs());
      RecordJobMetrics(s, s);
      // Workers waiting for it (the end of a stretch) hear it now.
      for (auto& [id, f] : job.followers) {
        if (f.want_completed < 0 || f.want_completed > low) continue;
        f.want_completed = -1;
        FollowEvent e;
        e.set_horizon(s.issued_iteration());
        e.set_completed_iteration(low);
        e.set_state_seq(db_->sequence().current());
        f.sink->Send(e);
      }
      changed_.notify_all();
    }
  }
  if (save && job.progress_unsaved && now - job.progress_saved_at >= kSaveProgressEvery) {
    // Informational between the commits that carry it: a failed write is retried later.
    if (auto st = db_->PutJob(job.status, next_node_id_, /*sync=*/false); st.ok()) {
      job.progress_unsaved = false;
      job.progress_saved_at = now;
    }
  }
}

void SchedulerCore::GrantHorizon(Job& job, Clock::time_point now) {
  const JobStatus& s = job.status;
  if (s.state() != herd::v1::JOB_RUNNING || s.paused_since_unix_ms() != 0) return;
  // A job no worker follows (clients of the per-iteration protocol) is granted one plan at a
  // time, by the GetPlan of each iteration.
  const bool followed = std::any_of(job.followers.begin(), job.followers.end(), [](const auto& f) {
    return f.second.role == herd::v1::ROLE_WORKER;
  });
  if (!followed) return;
  const int64_t granted = s.issued_iteration();
  int64_t to = HorizonTarget(HorizonRule{options_.horizon_ahead, options_.min_horizon}, granted,
                             job.rate, now, job.asked_horizon, s.planned_iterations());
  if (to <= granted) return;
  JobStatus next = s;
  bool sync = false;
  // The checkpoint policy's cuts the grant crosses: the first one starts now (its plan names
  // it); the next waits until it has ended (one checkpoint at a time), so the horizon stops
  // before that one. A time-based cut is not waited for: its clock starts at the last commit.
  const auto& pending = next.pending_checkpoint();
  if (!pending.id().empty()) {
    // Cuts up to the pending checkpoint's are its own.
    if (auto cut = NextPolicyCut(next, std::max(granted, pending.iteration()) + 1, to, NowUnixMs(),
                                 /*time_based=*/false)) {
      to = *cut - 1;
    }
  } else if (auto cut = NextPolicyCut(next, granted + 1, to, NowUnixMs(), /*time_based=*/true)) {
    const bool final = *cut == next.planned_iterations();
    if (auto st = StartCheckpoint(job, next, *cut, next.spec().checkpoint().dir(),
                                  final ? "final" : "policy", /*preempt=*/false);
        !st.ok()) {
      Log().error("scheduler: job '{}': {}", s.spec().name(), std::string(st.message()));
      to = *cut - 1;
    } else {
      sync = true;
      if (auto second = NextPolicyCut(next, *cut + 1, to, NowUnixMs(), /*time_based=*/false)) {
        to = *second - 1;
      }
    }
  }
  if (to <= granted && !sync) return;
  next.set_issued_iteration(std::max(granted, to));
  if (auto st = Commit(job, std::move(next), next_node_id_, sync); !st.ok()) {
    // Nothing granted: the workers wait at the old horizon until the state can be written.
    Log().warn("scheduler: job '{}': cannot grant its horizon: {}", s.spec().name(),
               std::string(st.message()));
    return;
  }
  // The workers hear the new horizon (Commit sent the view when a checkpoint started).
  const int64_t horizon = job.status.issued_iteration();
  FollowEvent e;
  e.set_horizon(horizon);
  e.set_completed_iteration(job.status.completed_iteration());
  e.set_state_seq(db_->sequence().current());
  size_t sent = 0;
  for (auto& [id, f] : job.followers) {
    if (f.role != herd::v1::ROLE_WORKER || f.horizon_sent >= horizon) continue;
    f.horizon_sent = horizon;
    f.sink->Send(e);
    ++sent;
  }
  metrics::SchedulerMetrics::Get().follow_events().Increment(static_cast<double>(sent));
}

bool SchedulerCore::GatheringAnswered(const Job& job) const {
  for (const auto& [id, f] : job.followers) {
    if (f.role != herd::v1::ROLE_WORKER) continue;
    const auto& m = job.status.workers(f.slot);
    const bool silent =
        Clock::now() - job.worker_seen[static_cast<size_t>(f.slot)] > options_.heartbeat_timeout;
    if (m.alive() && !m.finished() && !silent && f.answered_notice != job.gathering.notice) {
      return false;
    }
  }
  return true;
}

void SchedulerCore::Tick() {
  std::lock_guard<std::mutex> lock(mu_);
  if (shutdown_) return;
  const auto now = Clock::now();
  ExpireWaits(now);
  for (auto& [name, job] : jobs_) {
    if (IsTerminal(job.status.state())) continue;
    FoldProgress(job, now, /*save=*/true);
    GrantHorizon(job, now);
  }
}

void SchedulerCore::TickerLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!shutdown_) {
    lock.unlock();
    std::this_thread::sleep_for(kTick);
    Tick();
    lock.lock();
  }
}

}  // namespace herd::scheduler
