#pragma once
// The decentralized modes' peers: the topology named by the plan's mode, and this rank's peers
// of any iteration, computed locally (the executor lives for many iterations, the plan it was
// built from is one iteration's). The rule is the scheduler's (plan/topology.h);
// PlanPeers checks it against the peers the scheduler published for the executor's first
// iteration, so a divergence is an error rather than ranks waiting for each other.

#include <vector>

#include "absl/status/statusor.h"
#include "plan/topology.h"
#include "worker/executor.h"

namespace herd::worker {

class PlanPeers {
 public:
  // INVALID_ARGUMENT for an unknown topology; FAILED_PRECONDITION when the plan's published
  // peers of this rank differ from the computed ones.
  static absl::StatusOr<PlanPeers> FromContext(const ExecutorContext& context);

  plan::Topology topology() const { return topology_; }
  std::vector<int> At(int64_t iteration) const {
    return plan::PeersForIteration(topology_, size_, seed_, iteration, rank_);
  }

 private:
  PlanPeers(plan::Topology t, int size, uint64_t seed, int rank)
      : topology_(t), size_(size), seed_(seed), rank_(rank) {}

  plan::Topology topology_;
  int size_;
  uint64_t seed_;
  int rank_;
};

}  // namespace herd::worker
