// SchedulerCore registration: rank and shard assignment, written as a group commit.
//
// A registration is a synced write of the job's state (its new member and epoch), and that write
// costs the same whether it carries one registration or a hundred. When a job's processes start
// together (a Kubernetes Job of thousands of pods), their registrations queue: the first in line
// (the leader) takes every registration of its job waiting behind it, applies them one after the
// other to one copy of the job's state, exactly as they would have been applied one at a time,
// writes that state once, and answers each. A registration refused on the way (a name alive, a
// rank taken) is answered with its error and leaves the others' unchanged; a failed write
// answers every one of the group with the failure and changes nothing. This is leveldb's writer
// queue (DBImpl::Write) applied to the scheduler's state.

#include <algorithm>

#include "absl/strings/str_format.h"
#include "common/status.h"
#include "common/unix_time.h"
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

// At most this many registrations share one write: the leader's work under the lock stays
// bounded (each is a few scans of the job's slots).
constexpr size_t kMaxGroup = 256;

// An upper bound on how much one registration can grow a job's stored status: a member (name,
// address, host: kMaxNodeNameBytes + 2 * kMaxAddressBytes), a progress entry, the epoch's
// reason (two names) and a membership event. The exact size is computed only when a group
// comes this close to the bound (kMaxJobStatusBytes): computing it costs a pass over every
// member.
constexpr size_t kMaxGrowthPerRegistration = 4 << 10;
static_assert(kMaxNodeNameBytes * 4 + kMaxAddressBytes * 2 + 1024 < kMaxGrowthPerRegistration);

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

// What a request may say, checked before it queues.
absl::Status ValidateRequest(const herd::v1::RegisterNodeRequest& req) {
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
  return absl::OkStatus();
}

}  // namespace

// One registration waiting in line, and its answer once the group that carried it is written.
struct SchedulerCore::QueuedRegistration {
  const herd::v1::RegisterNodeRequest* req = nullptr;
  std::optional<absl::StatusOr<herd::v1::RegisterNodeResponse>> answer;
  std::condition_variable turn;  // its answer came, or it leads the next group
};

// Where PlaceRegistration put a node: what is done once the state is written.
struct SchedulerCore::Placement {
  int slot = -1;
  uint64_t id = 0;      // the node id it gets
  uint64_t old_id = 0;  // the id the slot held before (0: none)
  bool joins = false;   // it joins a running elastic job
};

absl::StatusOr<herd::v1::RegisterNodeResponse> SchedulerCore::RegisterNode(
    const herd::v1::RegisterNodeRequest& req) {
  HERD_RETURN_IF_ERROR(ValidateRequest(req));
  QueuedRegistration me;
  me.req = &req;
  std::vector<QueuedRegistration*> group;
  {
    // The line has its own mutex: registrations join it while a group's state is written under
    // mu_, and that is what makes the next group.
    std::unique_lock<std::mutex> line(registrations_mu_);
    registrations_.push_back(&me);
    me.turn.wait(line, [&] { return me.answer.has_value() || registrations_.front() == &me; });
    if (me.answer.has_value()) return *std::move(me.answer);
    // The leader: every registration of its job in line (up to kMaxGroup), in their order. It
    // stays first in line until its group is written, so those that come meanwhile wait and
    // form the next group, instead of each leading a group of one.
    group.push_back(&me);
    for (auto it = registrations_.begin() + 1;
         it != registrations_.end() && group.size() < kMaxGroup;) {
      if ((*it)->req->job() == req.job()) {
        group.push_back(*it);
        it = registrations_.erase(it);
      } else {
        ++it;
      }
    }
  }
  std::vector<absl::StatusOr<herd::v1::RegisterNodeResponse>> answers;
  {
    std::lock_guard<std::mutex> lock(mu_);
    answers = RegisterGroup(group);
  }
  std::lock_guard<std::mutex> line(registrations_mu_);
  registrations_.pop_front();  // the leader
  for (size_t i = 0; i < group.size(); ++i) {
    group[i]->answer = std::move(answers[i]);
    if (group[i] != &me) group[i]->turn.notify_one();
  }
  if (!registrations_.empty()) registrations_.front()->turn.notify_one();  // the next leader
  return *std::move(me.answer);
}

std::vector<absl::StatusOr<herd::v1::RegisterNodeResponse>> SchedulerCore::RegisterGroup(
    const std::vector<QueuedRegistration*>& group) {
  std::vector<std::optional<absl::StatusOr<herd::v1::RegisterNodeResponse>>> answers(group.size());
  auto all_answered = [&](const absl::Status& st) {
    std::vector<absl::StatusOr<herd::v1::RegisterNodeResponse>> out;
    for (auto& a : answers) out.push_back(a.has_value() ? *std::move(a) : st);
    return out;
  };
  // What each process witnessed of the state first (witness.cc), as a registration alone does.
  for (size_t i = 0; i < group.size(); ++i) {
    const auto& req = *group[i]->req;
    if (auto st = HearWitness(req.seen_state_seq(), req.job(), 0,
                              absl::StrFormat("%s '%s' registering in job '%s'",
                                              RoleName(req.role()), req.name(), Echo(req.job())));
        !st.ok()) {
      answers[i] = st;
    }
  }
  auto found = FindActiveJob(group.front()->req->job(), "register");
  if (!found.ok()) return all_answered(found.status());
  Job& job = **found;
  herd::v1::JobStatus next = job.status;
  const size_t base_bytes = next.ByteSizeLong();
  std::vector<std::pair<size_t, Placement>> placed;
  for (size_t i = 0; i < group.size(); ++i) {
    if (answers[i].has_value()) continue;
    const auto& req = *group[i]->req;
    const std::string_view role = RoleName(req.role());
    Placement p;
    p.id = next_node_id_ + placed.size();
    // The exact size only near the bound: a refusal there keeps `next` as it was.
    const bool near_bound =
        base_bytes + (placed.size() + 1) * kMaxGrowthPerRegistration > limits::kMaxJobStatusBytes;
    herd::v1::JobStatus before;
    if (near_bound) before = next;
    absl::Status st = PlaceRegistration(job, next, req, &p);
    if (st.ok() && near_bound) {
      st = CheckJobStatusSize(next, absl::StrFormat("registering %s '%s'", role, req.name()));
      if (!st.ok()) next = std::move(before);
    }
    if (!st.ok()) {
      answers[i] = st;
      continue;
    }
    placed.emplace_back(i, p);
  }
  if (placed.empty()) return all_answered(absl::OkStatus());
  const uint64_t next_id = next_node_id_ + placed.size();
  if (auto st = Commit(job, std::move(next), next_id, /*sync=*/true); !st.ok()) {
    for (auto& [i, p] : placed) answers[i] = st;
    return all_answered(st);
  }
  next_node_id_ = next_id;
  for (auto& [i, p] : placed) answers[i] = FinishRegistration(job, *group[i]->req, p);
  return all_answered(absl::OkStatus());
}

absl::Status SchedulerCore::PlaceRegistration(Job& job, herd::v1::JobStatus& next,
                                              const herd::v1::RegisterNodeRequest& req,
                                              Placement* placement) {
  const std::string_view role = RoleName(req.role());
  const bool worker = req.role() == herd::v1::ROLE_WORKER;
  const auto& slots = worker ? next.workers() : next.servers();
  const int count = slots.size();
  if (count == 0) {
    return absl::FailedPreconditionError(
        absl::StrFormat("job '%s' has no %ss (its spec says %s: 0); %s '%s' cannot join it",
                        req.job(), role, role, role, req.name()));
  }
  // A running elastic job below max_workers grows by one slot (rank = the slot count) for a
  // newcomer that finds every slot alive, or that asks for that rank (a Kubernetes Indexed Job
  // scaled up: its new index is the next rank); docs/elastic.md, "Grow".
  const bool elastic_worker = worker && IsElastic(next.spec());
  const int max_workers = elastic_worker ? next.spec().elastic().max_workers() : count;
  const bool running = next.state() == herd::v1::JOB_RUNNING;
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
      // A member placed earlier in this group has no heartbeat clock yet: it is alive now.
      const auto& seen = worker ? job.worker_seen : job.server_seen;
      const bool just_placed = m.node_id() >= next_node_id_;
      const auto ago = just_placed || static_cast<size_t>(slot) >= seen.size()
                           ? std::chrono::milliseconds(0)
                           : std::chrono::duration_cast<std::chrono::milliseconds>(
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
                                  JobStateName(next.state()), max_workers)));
      }
    }
  }
  // A worker that registers while an elastic job runs joins at a new epoch and takes the
  // model's state from the live workers (docs/elastic.md, "Rejoin"); a mode that cannot change
  // its worker count refuses it, and the job goes on as it was.
  const bool joins = worker && IsElastic(next.spec()) && running;
  if (joins) {
    const auto& mode = ModeAt(next, next.issued_iteration() + 1);
    if (std::string refused = JoinRefusal(next, mode, req.name()); !refused.empty()) {
      return absl::FailedPreconditionError(refused);
    }
    if (std::string refused = EndRefusal(next, req.name()); !refused.empty()) {
      return absl::FailedPreconditionError(refused);
    }
    if (std::string refused = GrowRefusal(next, mode, req.name());
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

  if (slot == count) {
    // A new rank: its slot and its progress, at the boundary the new epoch begins at
    // (NoteWorkerJoin); its heartbeat clock is added once the state is committed.
    next.add_workers()->set_rank(slot);
    auto* p = next.add_progress();
    p->set_rank(slot);
    p->set_iteration(next.completed_iteration());
  }
  herd::v1::Member* m = (worker ? next.mutable_workers() : next.mutable_servers())->Mutable(slot);
  placement->slot = slot;
  placement->old_id = m->node_id();
  placement->joins = joins;
  m->set_rank(slot);
  m->set_name(req.name());
  m->set_node_id(placement->id);
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
  return absl::OkStatus();
}

herd::v1::RegisterNodeResponse SchedulerCore::FinishRegistration(
    Job& job, const herd::v1::RegisterNodeRequest& req, const Placement& p) {
  if (p.old_id != 0) {
    nodes_.erase(p.old_id);
    if (p.old_id != p.id) replaced_[p.old_id] = NodeRef{req.job(), req.role(), p.slot};
  }
  nodes_[p.id] = NodeRef{req.job(), req.role(), p.slot};
  const bool worker = req.role() == herd::v1::ROLE_WORKER;
  auto& seen = worker ? job.worker_seen : job.server_seen;
  if (static_cast<size_t>(p.slot) >= seen.size()) seen.resize(static_cast<size_t>(p.slot) + 1);
  seen[static_cast<size_t>(p.slot)] = Clock::now();

  herd::v1::RegisterNodeResponse resp;
  resp.set_node_id(p.id);
  resp.set_rank(p.slot);
  resp.set_epoch(job.status.epoch());
  resp.set_heartbeat_timeout_ms(options_.heartbeat_timeout.count());
  // Three heartbeats per timeout: one lost or late message does not kill a node.
  resp.set_heartbeat_interval_ms(std::max<int64_t>(options_.heartbeat_timeout.count() / 3, 1));
  resp.set_job_state(job.status.state());
  resp.set_joins_running_job(p.joins);
  resp.set_state_seq(db_->sequence().current());
  return resp;
}

}  // namespace herd::scheduler
