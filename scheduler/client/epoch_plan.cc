#include "scheduler/client/epoch_plan.h"

#include <algorithm>

#include "common/dtype.h"
#include "plan/modes.h"
#include "plan/shard_map.h"
#include "plan/topology.h"
#include "scheduler/client/job_states.h"

namespace herd::scheduler {

using herd::v1::EpochView;
using herd::v1::Plan;

const herd::v1::ModeSpec& ModeAt(
    const herd::v1::JobSpec& spec,
    const google::protobuf::RepeatedPtrField<herd::v1::ModeSwitch>& schedule, int64_t iteration) {
  const herd::v1::ModeSpec* mode = &spec.mode();
  for (const auto& sw : schedule) {
    if (sw.from_iteration() <= iteration) mode = &sw.mode();
  }
  return *mode;
}

std::vector<int> ViewRanks(const EpochView& view) {
  std::vector<int> ranks;
  ranks.reserve(static_cast<size_t>(std::max(0, view.worker_slots())));
  auto absent = view.absent_workers().begin();
  for (int r = 0; r < view.worker_slots(); ++r) {
    while (absent != view.absent_workers().end() && *absent < r) ++absent;
    if (absent != view.absent_workers().end() && *absent == r) continue;
    ranks.push_back(r);
  }
  return ranks;
}

bool ViewHasRank(const EpochView& view, int rank) {
  if (rank < 0 || rank >= view.worker_slots()) return false;
  return !std::binary_search(view.absent_workers().begin(), view.absent_workers().end(), rank);
}

bool ViewEnded(const EpochView& view) { return IsTerminal(view.job_state()); }

Plan BuildPlan(const herd::v1::JobSpec& spec, const EpochView& view, int64_t iteration) {
  Plan plan;
  // Every slot, the grown ones included (the global batch stays the spec's: the workers split
  // it by their position among the live ranks, worker/elastic_plan.h).
  const int world = std::max(spec.workers(), view.worker_slots());
  plan.set_job(spec.name());
  plan.set_epoch(view.epoch());
  plan.set_epoch_start_iteration(view.epoch_start_iteration());
  plan.set_iteration(iteration);
  plan.set_seed(spec.seed());
  plan.set_world_size(world);
  plan.set_job_state(view.job_state());
  plan.set_end_reason(view.end_reason());
  // The pending checkpoint, for every iteration up to its cut: a worker about to begin the cut
  // saves first.
  plan.set_checkpoint_iteration(-1);
  const auto& pending = view.checkpoint();
  if (!pending.id().empty() && pending.iteration() >= iteration) {
    plan.set_checkpoint_iteration(pending.iteration());
    plan.set_checkpoint_id(pending.id());
    plan.set_checkpoint_dir(pending.dir());
    plan.set_stop_at_checkpoint(pending.preempt());
  }
  plan.set_membership_generation(view.membership_generation());
  plan.set_paused(view.paused());
  plan.set_pause_reason(view.pause_reason());
  plan.set_start_iteration(view.start_iteration());
  plan.set_resume_from(view.resume_from());
  const auto& mode = ModeAt(spec, view.schedule(), iteration);
  *plan.mutable_mode() = mode;

  const std::vector<int> ranks = ViewRanks(view);
  const std::vector<int> ring = plan::RingOrder(ranks);
  plan.mutable_ranks()->Reserve(static_cast<int>(ranks.size()));
  plan.mutable_ring()->Reserve(static_cast<int>(ring.size()));
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
  plan.mutable_peers()->Reserve(static_cast<int>(peers.size()));
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
  layout.reserve(static_cast<size_t>(spec.tensors_size()));
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

  *plan.mutable_incarnations() = view.incarnations();
  *plan.mutable_servers() = view.servers();

  plan.set_next_switch_iteration(-1);
  for (const auto& sw : view.schedule()) {
    if (sw.from_iteration() > iteration) {
      plan.set_next_switch_iteration(sw.from_iteration());
      *plan.mutable_next_mode() = sw.mode();
      break;
    }
  }
  return plan;
}

}  // namespace herd::scheduler
