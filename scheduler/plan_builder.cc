#include "scheduler/plan_builder.h"

#include <algorithm>

#include "absl/strings/str_format.h"
#include "common/dtype.h"
#include "plan/modes.h"
#include "plan/shard_map.h"
#include "plan/topology.h"

namespace herd::scheduler {

using herd::v1::JobStatus;
using herd::v1::Plan;

int WorkerSlots(const JobStatus& job) { return std::max(job.spec().workers(), job.workers_size()); }

std::vector<int> ParticipatingRanks(const JobStatus& job) {
  std::vector<int> ranks;
  const bool started = job.state() != herd::v1::JOB_PENDING;
  for (int r = 0; r < WorkerSlots(job); ++r) {
    if (!started || (r < job.workers_size() && job.workers(r).alive())) ranks.push_back(r);
  }
  return ranks;
}

const herd::v1::ModeSpec& ModeAt(const JobStatus& job, int64_t iteration) {
  const herd::v1::ModeSpec* mode = &job.spec().mode();
  for (const auto& sw : job.schedule()) {
    if (sw.from_iteration() <= iteration) mode = &sw.mode();
  }
  return *mode;
}

Plan BuildPlan(const JobStatus& job, int64_t iteration) {
  Plan plan;
  const auto& spec = job.spec();
  // Every slot, the grown ones included (the global batch stays the spec's: the workers split
  // it by their position among the live ranks, worker/elastic_plan.h).
  const int world = WorkerSlots(job);
  plan.set_job(spec.name());
  plan.set_epoch(job.epoch());
  plan.set_epoch_start_iteration(job.epoch_start_iteration());
  plan.set_iteration(iteration);
  plan.set_seed(spec.seed());
  plan.set_world_size(world);
  plan.set_job_state(job.state());
  if (job.state() == herd::v1::JOB_CANCELLED) plan.set_end_reason(job.cancel_reason());
  if (job.state() == herd::v1::JOB_FAILED) {
    plan.set_end_reason(absl::StrFormat("%s: %s", job.failed_process(), job.failure_reason()));
  }
  if (job.state() == herd::v1::JOB_PREEMPTED) plan.set_end_reason(job.preempt_reason());
  // The pending checkpoint, for every iteration up to its cut: a worker about to begin the cut
  // saves first.
  plan.set_checkpoint_iteration(-1);
  const auto& pending = job.pending_checkpoint();
  if (!pending.id().empty() && pending.iteration() >= iteration) {
    plan.set_checkpoint_iteration(pending.iteration());
    plan.set_checkpoint_id(pending.id());
    plan.set_checkpoint_dir(pending.dir());
    plan.set_stop_at_checkpoint(pending.preempt());
  }
  plan.set_membership_generation(job.membership_generation());
  plan.set_paused(job.paused_since_unix_ms() != 0);
  plan.set_pause_reason(job.pause_reason());
  plan.set_start_iteration(job.has_resumed() ? job.resumed().iteration() : 0);
  if (job.has_resumed()) plan.set_resume_from(job.resumed().path());
  const auto& mode = ModeAt(job, iteration);
  *plan.mutable_mode() = mode;

  const std::vector<int> ranks = ParticipatingRanks(job);
  const std::vector<int> ring = plan::RingOrder(ranks);
  for (int r : ranks) plan.add_ranks(r);
  for (int r : ring) plan.add_ring(r);

  // The mode was validated when it was scheduled, so the registry knows it.
  const plan::ModeInfo* info = plan::FindMode(mode.mode());
  const plan::PlanCarries carries =
      info != nullptr ? info->plan_carries : plan::PlanCarries::kNothing;
  std::vector<std::vector<int>> peers(static_cast<size_t>(world));
  if (carries == plan::PlanCarries::kPeers) {
    const plan::Topology topology =
        plan::ParseTopology(mode.topology()).value_or(plan::Topology::kRing);
    peers = plan::Peers(topology, ranks, world, spec.seed(), iteration);
  }
  for (const auto& p : peers) {
    auto* list = plan.add_peers();
    for (int q : p) list->add_ranks(q);
  }

  if (carries == plan::PlanCarries::kTeams) {
    const int teams = plan::EffectiveTeams(static_cast<int>(ring.size()), mode.teams());
    for (const auto& team : plan::Teams(ring, teams)) {
      auto* t = plan.add_teams();
      for (int r : team) t->add_ranks(r);
    }
  }

  std::vector<plan::TensorLayout> layout;
  for (const auto& t : spec.tensors()) {
    int64_t elements = 1;
    for (int64_t d : t.shape()) elements *= d;
    auto dt = ParseDType(t.dtype());  // validated at submission
    layout.push_back({elements, dt.ok() ? static_cast<int64_t>(DTypeSize(*dt)) : 1});
  }
  for (const auto& c : plan::ShardMap(layout, spec.chunk_bytes(), spec.servers())) {
    auto* e = plan.add_shards();
    e->set_tensor(c.tensor);
    e->set_chunk(c.chunk);
    e->set_offset(c.offset);
    e->set_count(c.count);
    e->set_server(c.server);
  }

  for (const auto& m : job.workers()) *plan.add_workers() = m;
  for (const auto& m : job.servers()) *plan.add_servers() = m;

  plan.set_next_switch_iteration(-1);
  for (const auto& sw : job.schedule()) {
    if (sw.from_iteration() > iteration) {
      plan.set_next_switch_iteration(sw.from_iteration());
      *plan.mutable_next_mode() = sw.mode();
      break;
    }
  }
  return plan;
}

}  // namespace herd::scheduler
