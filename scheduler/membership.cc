// SchedulerCore membership: registration (rank and shard assignment), heartbeats and the
// failure detector. Every change of membership starts a new epoch.

#include <algorithm>
#include <set>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/logging.h"
#include "common/status.h"
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

using limits::kMaxAddressBytes;
using limits::kMaxNodeNameBytes;
using limits::kMaxUcxAddressBytes;

bool ModeNeedsEveryWorker(const herd::v1::ModeSpec& mode) {
  const plan::ModeInfo* m = plan::FindMode(mode.mode());
  return m == nullptr || !m->survives_worker_loss;
}

int64_t NowUnixMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string_view RoleName(herd::v1::Role role) {
  return role == herd::v1::ROLE_SERVER ? "server" : "worker";
}

absl::Status ValidateNodeName(std::string_view name) {
  const bool printable =
      std::all_of(name.begin(), name.end(), [](char c) { return c > ' ' && c < 127; });
  if (name.empty() || name.size() > kMaxNodeNameBytes || !printable) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "node name '%s' is not valid: give 1-%d printable characters without spaces (e.g. the "
        "pod or host name)",
        Echo(name), kMaxNodeNameBytes));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<herd::v1::RegisterNodeResponse> SchedulerCore::RegisterNode(
    const herd::v1::RegisterNodeRequest& req) {
  if (req.role() != herd::v1::ROLE_WORKER && req.role() != herd::v1::ROLE_SERVER) {
    return absl::InvalidArgumentError(
        absl::StrFormat("node '%s' registers with role %d; only workers and servers register",
                        req.name(), static_cast<int>(req.role())));
  }
  HERD_RETURN_IF_ERROR(ValidateNodeName(req.name()));
  HERD_RETURN_IF_ERROR(CheckText(absl::StrFormat("the address of node '%s'", req.name()),
                                 req.address(), kMaxAddressBytes, /*may_be_empty=*/true));
  HERD_RETURN_IF_ERROR(CheckText(absl::StrFormat("the host of node '%s'", req.name()), req.host(),
                                 kMaxAddressBytes, /*may_be_empty=*/true));
  if (req.ucx_address().size() > kMaxUcxAddressBytes) {
    return absl::InvalidArgumentError(
        absl::StrFormat("node '%s': the UCX address has %d bytes, more than the limit of %d",
                        req.name(), req.ucx_address().size(), kMaxUcxAddressBytes));
  }
  const std::string_view role = RoleName(req.role());
  std::lock_guard<std::mutex> lock(mu_);
  HERD_RETURN_IF_ERROR(HearWitness(
      req.seen_state_seq(), req.job(), 0,
      absl::StrFormat("%s '%s' registering in job '%s'", role, req.name(), Echo(req.job()))));
  HERD_ASSIGN_OR_RETURN(Job * job, FindActiveJob(req.job(), "register"));
  const bool worker = req.role() == herd::v1::ROLE_WORKER;
  const auto& slots = worker ? job->status.workers() : job->status.servers();
  const int count = slots.size();
  if (count == 0) {
    return absl::FailedPreconditionError(
        absl::StrFormat("job '%s' has no %ss (its spec says %s: 0); %s '%s' cannot join it",
                        req.job(), role, role, role, req.name()));
  }
  // A running elastic job below max_workers grows by one slot (rank = the slot count) for a
  // newcomer that finds every slot alive, or that asks for that rank (a Kubernetes Indexed Job
  // scaled up: its new index is the next rank); docs/elastic.md, "Grow".
  const bool elastic_worker = worker && IsElastic(job->status.spec());
  const int max_workers = elastic_worker ? job->status.spec().elastic().max_workers() : count;
  const bool running = job->status.state() == herd::v1::JOB_RUNNING;
  const bool may_grow = elastic_worker && running && count < max_workers;
  if (req.has_requested_rank() && req.requested_rank() == count && elastic_worker && running &&
      !may_grow) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "worker '%s' asks for new rank %d; job '%s' already has its max_workers %d workers; the "
        "job is unchanged",
        req.name(), count, req.job(), max_workers));
  }
  if (req.has_requested_rank() && (req.requested_rank() < 0 || req.requested_rank() > count ||
                                   (req.requested_rank() == count && !may_grow))) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s '%s' asks for rank %d; job '%s' has ranks 0..%d%s", role, req.name(),
        req.requested_rank(), req.job(), count - 1,
        elastic_worker ? absl::StrFormat(" (it grows to at most max_workers %d, one rank at a "
                                         "time while it runs)",
                                         max_workers)
                       : ""));
  }

  // The slot: the one this name held before (a node that comes back takes its place), else
  // the requested one, else the lowest never-taken slot, else the lowest dead one.
  int slot = -1;
  std::string reason;
  for (int i = 0; i < count; ++i) {
    if (slots[i].name() == req.name()) slot = i;
  }
  if (slot >= 0) {
    const auto& m = slots[slot];
    if (m.alive()) {
      const auto& seen = worker ? job->worker_seen : job->server_seen;
      const auto ago = std::chrono::duration_cast<std::chrono::milliseconds>(
          Clock::now() - seen[static_cast<size_t>(slot)]);
      return absl::AlreadyExistsError(absl::StrFormat(
          "%s of job '%s' is registered and alive (node id %d, last heartbeat %d ms ago); a "
          "restarted process can take its place once the scheduler declares it dead (heartbeat "
          "timeout %d ms), or register under another name",
          DescribeMember(req.role(), m), req.job(), m.node_id(), ago.count(),
          options_.heartbeat_timeout.count()));
    }
    if (req.has_requested_rank() && req.requested_rank() != slot) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "%s '%s' held rank %d of job '%s' and can only take that rank back, not %d", role,
          req.name(), slot, req.job(), req.requested_rank()));
    }
    reason = absl::StrFormat("%s '%s' (rank %d) rejoined", role, req.name(), slot);
  } else if (req.has_requested_rank() && req.requested_rank() == count) {
    slot = count;  // may_grow (checked above)
    reason = absl::StrFormat("worker '%s' joined as new rank %d (%d of at most %d workers)",
                             req.name(), slot, count + 1, max_workers);
  } else if (req.has_requested_rank()) {
    slot = req.requested_rank();
    const auto& m = slots[slot];
    if (!m.name().empty() && m.alive()) {
      return absl::AlreadyExistsError(
          absl::StrFormat("rank %d of job '%s' is held by live %s; %s '%s' cannot take it", slot,
                          req.job(), DescribeMember(req.role(), m), role, req.name()));
    }
  } else {
    for (int i = 0; i < count && slot < 0; ++i) {
      if (slots[i].name().empty()) slot = i;
    }
    for (int i = 0; i < count && slot < 0; ++i) {
      if (!slots[i].alive()) slot = i;
    }
    if (slot < 0) {
      // Every slot is alive: a running elastic job grows by one (a new rank) up to max_workers
      // when its mode grows (JoinRefusal and GrowRefusal below); anything else is refused.
      if (may_grow) {
        slot = count;
        reason = absl::StrFormat("worker '%s' joined as new rank %d (%d of at most %d workers)",
                                 req.name(), slot, count + 1, max_workers);
      } else {
        return absl::FailedPreconditionError(absl::StrFormat(
            "job '%s' already has its %d %ss, all alive; %s '%s' is not needed%s", req.job(), count,
            role, role, req.name(),
            !elastic_worker ? ""
            : running
                ? absl::StrFormat(" (its max_workers is %d; the job is unchanged)", max_workers)
                : absl::StrFormat(" (job is %s: it grows up to max_workers %d only while it runs)",
                                  JobStateName(job->status.state()), max_workers)));
      }
    }
  }
  // A worker that registers while an elastic job runs joins at a new epoch and takes the
  // model's state from the live workers (docs/elastic.md, "Rejoin"); a mode that cannot change
  // its worker count refuses it, and the job goes on as it was.
  const bool joins =
      worker && IsElastic(job->status.spec()) && job->status.state() == herd::v1::JOB_RUNNING;
  if (joins) {
    const auto& mode = ModeAt(job->status, job->status.issued_iteration() + 1);
    if (std::string refused = JoinRefusal(job->status, mode, req.name()); !refused.empty()) {
      return absl::FailedPreconditionError(refused);
    }
    if (std::string refused = EndRefusal(job->status, req.name()); !refused.empty()) {
      return absl::FailedPreconditionError(refused);
    }
    if (std::string refused = GrowRefusal(job->status, mode, req.name());
        slot == count && !refused.empty()) {
      return absl::FailedPreconditionError(refused);
    }
  }
  if (reason.empty()) {
    const auto& old = slots[slot];
    reason = old.name().empty()
                 ? absl::StrFormat("%s '%s' registered as rank %d", role, req.name(), slot)
                 : absl::StrFormat("%s '%s' replaced dead '%s' as rank %d", role, req.name(),
                                   old.name(), slot);
  }

  const uint64_t id = next_node_id_;
  herd::v1::JobStatus next = job->status;
  const bool grows = slot == count;
  if (grows) {
    // A new rank: its slot and its progress, at the boundary the new epoch begins at
    // (NoteWorkerJoin); its heartbeat clock is added once the state is committed.
    next.add_workers()->set_rank(slot);
    auto* p = next.add_progress();
    p->set_rank(slot);
    p->set_iteration(next.completed_iteration());
  }
  herd::v1::Member* m = (worker ? next.mutable_workers() : next.mutable_servers())->Mutable(slot);
  const uint64_t old_id = m->node_id();
  m->set_rank(slot);
  m->set_name(req.name());
  m->set_node_id(id);
  m->set_address(req.address());
  m->clear_ucx_address();  // not kept (see RegisterNodeRequest.ucx_address)
  m->set_host(req.host());
  m->set_alive(true);
  const std::string why = reason;
  // A worker that joins the running job begins after every iteration the others may have begun
  // (the horizon): they hand it their state at that boundary and run nothing again.
  AdvanceEpoch(next, std::move(reason),
               joins ? EpochStart::kAfterHorizon : EpochStart::kAfterProgress);
  m->set_joined_epoch(joins ? next.epoch() : 0);
  if (joins) NoteWorkerJoin(next, why, slot, NowUnixMs());
  HERD_RETURN_IF_ERROR(
      CheckJobStatusSize(next, absl::StrFormat("registering %s '%s'", role, req.name())));
  HERD_RETURN_IF_ERROR(Commit(*job, std::move(next), id + 1, /*sync=*/true));
  next_node_id_ = id + 1;
  if (old_id != 0) {
    nodes_.erase(old_id);
    if (old_id != id) replaced_[old_id] = NodeRef{req.job(), req.role(), slot};
  }
  nodes_[id] = NodeRef{req.job(), req.role(), slot};
  auto& seen = worker ? job->worker_seen : job->server_seen;
  if (static_cast<size_t>(slot) >= seen.size()) seen.resize(static_cast<size_t>(slot) + 1);
  seen[static_cast<size_t>(slot)] = Clock::now();

  herd::v1::RegisterNodeResponse resp;
  resp.set_node_id(id);
  resp.set_rank(slot);
  resp.set_epoch(job->status.epoch());
  resp.set_heartbeat_timeout_ms(options_.heartbeat_timeout.count());
  // Three heartbeats per timeout: one lost or late message does not kill a node.
  resp.set_heartbeat_interval_ms(std::max<int64_t>(options_.heartbeat_timeout.count() / 3, 1));
  resp.set_job_state(job->status.state());
  resp.set_joins_running_job(joins);
  resp.set_state_seq(db_->sequence().current());
  return resp;
}

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
  const std::string why = absl::StrJoin(dead, "; ");
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
    if (auto st = Commit(job, std::move(next), next_node_id_, /*sync=*/true); !st.ok()) {
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
