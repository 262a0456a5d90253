// SchedulerCore membership: heartbeats and the failure detector (registration is in
// registration.cc). Every change of membership starts a new epoch.

#include <algorithm>
#include <set>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/logging.h"
#include "common/status.h"
#include "common/unix_time.h"
#include "metrics/scheduler_metrics.h"
#include "plan/modes.h"
#include "scheduler/bounds.h"
#include "scheduler/elastic.h"
#include "scheduler/elastic_spec.h"
#include "scheduler/limits.h"
#include "scheduler/plan_builder.h"
#include "scheduler/scheduler_core.h"

namespace herd::scheduler {
namespace {

bool ModeNeedsEveryWorker(const herd::v1::ModeSpec& mode) {
  const plan::ModeInfo* m = plan::FindMode(mode.mode());
  return m == nullptr || !m->survives_worker_loss;
}

}  // namespace

absl::StatusOr<herd::v1::HeartbeatResponse> SchedulerCore::Heartbeat(
    const herd::v1::HeartbeatRequest& req) {
  metrics::SchedulerMetrics::Get().heartbeats().Increment();
  std::lock_guard<std::mutex> lock(mu_);
  HERD_RETURN_IF_ERROR(HearWitness(req.seen_state_seq(), req.job(), req.node_id()));
  HERD_ASSIGN_OR_RETURN(Job * job, FindJob(req.job()));
  herd::v1::HeartbeatResponse resp;
  resp.set_epoch(job->status.epoch());
  resp.set_job_state(job->status.state());
  resp.set_state_seq(db_->sequence().current());
  NodeRef ref;
  if (IsTerminal(job->status.state())) {
    // A node of a job that ended hears it here and exits; it is not an error to ask.
    if (!nodes_.contains(req.node_id())) {
      return absl::NotFoundError(absl::StrFormat(
          "heartbeat: node id %d is not registered in job '%s'", req.node_id(), req.job()));
    }
    return resp;
  }
  HERD_ASSIGN_OR_RETURN(herd::v1::Member * m,
                        FindLiveMember(*job, req.node_id(), "heartbeat", &ref));
  if (req.has_durable_version() &&
      (ref.role != herd::v1::ROLE_SERVER || req.durable_version() < 0)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "heartbeat of %s reports durable version %d; only servers report one, and it is >= 0",
        DescribeMember(ref.role, *m), req.durable_version()));
  }
  auto& seen = ref.role == herd::v1::ROLE_WORKER ? job->worker_seen : job->server_seen;
  seen[static_cast<size_t>(ref.slot)] = Clock::now();
  RecordDurableVersion(*job, ref.slot, req);
  return resp;
}

void SchedulerCore::RecordDurableVersion(Job& job, int slot,
                                         const herd::v1::HeartbeatRequest& req) {
  // Only servers get here with a version (Heartbeat checked it).
  if (!req.has_durable_version()) return;
  const herd::v1::Member& m = job.status.servers(slot);
  if (m.has_durable_version() && m.durable_version() == req.durable_version()) return;
  // The last report, not the highest: a shard restarted with --accept-data-loss reports the
  // older version it now serves from. A state that cannot be written keeps the previous value
  // (a lower bound still) and the heartbeat counts all the same.
  herd::v1::JobStatus next = job.status;
  next.mutable_servers(slot)->set_durable_version(req.durable_version());
  if (auto st = Commit(job, std::move(next), next_node_id_, /*sync=*/false); !st.ok()) {
    Log().debug("scheduler: not recording the durable version of shard {}: {}", slot,
                std::string(st.message()));
  }
}

void SchedulerCore::DetectFailures() {
  std::lock_guard<std::mutex> lock(mu_);
  // A refused state changes no more: no death is recorded.
  if (shutdown_ || !refusal_.ok()) return;
  // While the state cannot be written no death can be recorded: nodes stay alive until it can
  // (Writable() retries the disk at most once a second, and logs the failure once).
  if (!db_->Writable().ok()) return;
  const auto now = Clock::now();
  for (auto& [name, job] : jobs_) SweepJob(job, now);
}

void SchedulerCore::SweepJob(Job& job, Clock::time_point now) {
  if (IsTerminal(job.status.state())) return;
  auto silent_since = [&](const std::vector<Clock::time_point>& seen, int i) {
    return now - seen[static_cast<size_t>(i)];
  };
  // A worker that finished its iterations stops heartbeating on purpose.
  auto is_silent = [&](const herd::v1::Member& m, const std::vector<Clock::time_point>& seen,
                       int i) {
    return m.alive() && !m.finished() && silent_since(seen, i) > options_.heartbeat_timeout;
  };
  int silent_workers = 0, silent_servers = 0;
  for (int i = 0; i < job.status.workers_size(); ++i) {
    silent_workers += is_silent(job.status.workers(i), job.worker_seen, i);
  }
  for (int i = 0; i < job.status.servers_size(); ++i) {
    silent_servers += is_silent(job.status.servers(i), job.server_seen, i);
  }
  const bool running = job.status.state() == herd::v1::JOB_RUNNING;
  if (silent_workers == 0 && silent_servers == 0) {
    job.gathering.notice = 0;  // a false alarm (it heartbeats again), or nothing going on
    // An elastic job paused below min_workers fails once its pending_timeout has passed.
    if (std::string expired = PauseExpired(job.status, NowUnixMs()); running && !expired.empty()) {
      herd::v1::JobStatus next = job.status;
      next.set_failed_process("the scheduler's failure detector");
      next.set_failure_reason(std::move(expired));
      EndJob(next, herd::v1::JOB_FAILED, "failed: " + next.failure_reason());
      if (auto st = CommitEnding(job, std::move(next)); !st.ok()) {
        Log().error("scheduler: {}", std::string(st.message()));
      }
    }
    return;
  }
  // An elastic job whose survivors roll back (the collective modes) begins its new epoch at
  // the first iteration a survivor has not completed. The workers report their progress in
  // batches, so first they are asked where they are (a notice on their streams: they answer at
  // once); the death is declared when every live worker answered, or at a short deadline.
  const auto& mode_now = ModeAt(job.status, job.status.completed_iteration() + 1);
  const plan::ModeInfo* info = plan::FindMode(mode_now.mode());
  const bool rolls_back = info != nullptr && info->runs_on != plan::RunsOn::kServers;
  const bool followed = std::any_of(job.followers.begin(), job.followers.end(), [](const auto& f) {
    return f.second.role == herd::v1::ROLE_WORKER;
  });
  if (silent_workers > 0 && running && IsElastic(job.status.spec()) && rolls_back &&
      ModeShrinks(mode_now) && followed) {
    if (job.gathering.notice == 0) {
      job.gathering.notice = ++job.notices;
      job.gathering.deadline = now + std::max<Clock::duration>(std::chrono::milliseconds(250),
                                                               options_.heartbeat_timeout / 4);
      herd::v1::FollowEvent e = EventFor(job, /*with_view=*/false);
      for (auto& [id, f] : job.followers) {
        if (f.role == herd::v1::ROLE_WORKER) f.sink->Send(e);
      }
      Log().info(
          "scheduler: job '{}': {} worker(s) silent; asking the live workers where they "
          "are (notice {})",
          job.status.spec().name(), silent_workers, job.gathering.notice);
      return;
    }
    if (!GatheringAnswered(job) && now < job.gathering.deadline) return;
    // A live worker that did not answer (its stream is gone: it died a moment after the other,
    // and is declared next) must not hold the new epoch back to its last batched report: the
    // epoch begins after what the workers that answered completed.
    int64_t answered_low = INT64_MAX;
    std::set<int> answered;
    for (const auto& [id, f] : job.followers) {
      if (f.role != herd::v1::ROLE_WORKER || f.answered_notice != job.gathering.notice) continue;
      answered.insert(f.slot);
      answered_low = std::min(answered_low, job.status.progress(f.slot).iteration());
    }
    if (answered_low != INT64_MAX) {
      for (int i = 0; i < job.status.workers_size(); ++i) {
        auto* p = job.status.mutable_progress(i);
        // The silent workers declared dead below keep what they reported: a worker waiting
        // for every live worker to complete an iteration must not be told the dead one did.
        if (job.status.workers(i).alive() && !answered.contains(i) &&
            !is_silent(job.status.workers(i), job.worker_seen, i) &&
            p->iteration() < answered_low) {
          p->set_iteration(answered_low);
        }
      }
    }
    job.progress_changed = true;
    FoldProgress(job, now, /*save=*/false);
  }
  job.gathering.notice = 0;

  herd::v1::JobStatus next = job.status;
  std::vector<std::string> dead;
  int dead_workers = 0;
  auto sweep = [&](auto* slots, const std::vector<Clock::time_point>& seen, herd::v1::Role role) {
    for (int i = 0; i < slots->size(); ++i) {
      herd::v1::Member* m = slots->Mutable(i);
      if (!is_silent(*m, seen, i)) continue;
      m->set_alive(false);
      metrics::SchedulerMetrics::Get().nodes_lost().Increment();
      dead_workers += role == herd::v1::ROLE_WORKER;
      dead.push_back(absl::StrFormat(
          "%s declared dead: no heartbeat for %d ms", DescribeMember(role, *m),
          std::chrono::duration_cast<std::chrono::milliseconds>(silent_since(seen, i)).count()));
    }
  };
  sweep(next.mutable_workers(), job.worker_seen, herd::v1::ROLE_WORKER);
  sweep(next.mutable_servers(), job.server_seen, herd::v1::ROLE_SERVER);
  // The first few by name (bounds.h): thousands lost at once (a rack, a partition) must not make
  // the epoch's reason, which every view carries, megabytes long.
  const std::string why = NameSome(dead, "; ");
  const auto& mode = ModeAt(next, next.completed_iteration() + 1);
  // An elastic job goes on with the live workers in a mode that shrinks (docs/elastic.md), as
  // long as it has not lost more than max_failures.
  const bool elastic = dead_workers > 0 && running && IsElastic(next.spec());
  if (elastic && ModeShrinks(mode)) {
    if (std::string fail = CountWorkerLoss(next, dead_workers, why); !fail.empty()) {
      next.set_failed_process("the scheduler's failure detector");
      next.set_failure_reason(std::move(fail));
      EndJob(next, herd::v1::JOB_FAILED, "failed: " + next.failure_reason());
      if (auto st = CommitEnding(job, std::move(next)); !st.ok()) {
        Log().error("scheduler: {}", std::string(st.message()));
      }
      return;
    }
    AdvanceEpoch(next, why);
    NoteWorkerLoss(next, why, NowUnixMs());
    // The dead were the last still training (the others finished first): nothing is left to
    // wait for, the job completes with those that finished.
    const bool completed = CompleteIfDone(next);
    if (auto st = completed ? CommitEnding(job, std::move(next))
                            : Commit(job, std::move(next), next_node_id_, /*sync=*/true);
        !st.ok()) {
      Log().error("scheduler: {}", std::string(st.message()));
    }
    return;
  }
  // A running job whose mode needs every worker cannot go on without one: it fails, naming
  // the worker, so every survivor stops within a heartbeat instead of waiting out its
  // collective's deadline. (A shard that dies is expected back on its state directory.)
  if (dead_workers > 0 && running && ModeNeedsEveryWorker(mode)) {
    next.set_failed_process("the scheduler's failure detector");
    next.set_failure_reason(
        absl::StrFormat("%s; mode %s needs all %d workers%s", why, mode.mode(), next.workers_size(),
                        elastic ? " (it does not go on at P-1 in an elastic job yet)" : ""));
    EndJob(next, herd::v1::JOB_FAILED, "failed: " + next.failure_reason());
    if (auto st = CommitEnding(job, std::move(next)); !st.ok()) {
      Log().error("scheduler: {}", std::string(st.message()));
    }
    return;
  }
  AdvanceEpoch(next, why);
  if (auto st = Commit(job, std::move(next), next_node_id_, /*sync=*/true); !st.ok()) {
    // Retried at the next pass; the nodes stay alive until the state records their death.
    Log().error("scheduler: {}", std::string(st.message()));
  }
}

}  // namespace herd::scheduler
