#pragma once
// Elastic membership on the worker's side (docs/elastic.md), the pure parts:
//
// - CompactPlan: after a worker's death the scheduler's plan names the live ranks by their
//   job ranks (0, 2, 3 of 4). A collective executor runs on a communicator of the live ranks
//   only (0, 1, 2), so the session hands it the plan renumbered: ranks, ring, peers and teams
//   by position among the live ranks, world_size the live count. Every executor then runs at
//   P-1 unchanged, and the plan rules (plan/topology.h) give the same answer renumbered
//   (ring order and the random pairing depend only on the ranks' order).
// - SliceOfGlobalBatch: the global batch is kept (P x B samples of the global data order,
//   worker/data/epoch_order.h); the live workers split it as evenly as their count allows, so
//   an epoch still covers the training set, the iterations per epoch and the learning rate stay
//   as they were.

#include <cstdint>

#include "herd/v1/job.pb.h"

namespace herd::worker {

// `plan` with its live ranks numbered 0..n-1 in ascending order (a plan whose ranks are all of
// 0..world_size-1 comes back unchanged).
herd::v1::Plan CompactPlan(const herd::v1::Plan& plan);

// This worker's position among the plan's live ranks (-1 when it is not one of them).
int MemberIndex(const herd::v1::Plan& plan, int rank);

// The part of a global batch of `global` samples that member `index` of `members` takes:
// samples [first, first + count) of the global batch.
struct BatchSlice {
  int64_t first = 0;
  int64_t count = 0;
};
BatchSlice SliceOfGlobalBatch(int64_t global, int index, int members);

}  // namespace herd::worker
