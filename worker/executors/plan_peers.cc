#include "worker/executors/plan_peers.h"

#include <algorithm>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/status.h"

namespace herd::worker {

absl::StatusOr<PlanPeers> PlanPeers::FromContext(const ExecutorContext& c) {
  const std::string& name = c.plan.mode().topology();
  HERD_ASSIGN_OR_RETURN(plan::Topology t, plan::ParseTopology(name.empty() ? "ring" : name));
  const int size = c.comm->size(), rank = c.comm->rank();
  PlanPeers peers(t, size, c.plan.seed(), rank);
  if (rank < c.plan.peers_size()) {
    std::vector<int> published(c.plan.peers(rank).ranks().begin(),
                               c.plan.peers(rank).ranks().end());
    std::sort(published.begin(), published.end());
    const std::vector<int> computed = peers.At(c.first_iteration);
    if (published != computed) {
      return absl::FailedPreconditionError(
          absl::StrFormat("iteration %d: the plan gives rank %d the peers [%s], the %s rule [%s]",
                          c.first_iteration, rank, absl::StrJoin(published, ","),
                          plan::TopologyName(t), absl::StrJoin(computed, ",")));
    }
  }
  return peers;
}

}  // namespace herd::worker
