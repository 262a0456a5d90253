#pragma once
// Bruck all-gather of sparse blocks over a group of ranks, for any group size: ceil(log2 G)
// rounds, in round i (d = 2^i, n = min(d, G - d)) a member sends the blocks of members
// me .. me+n-1 (which it holds) to member me - d and receives those of members me+d .. me+d+n-1
// from member me + d. Blocks differ in size, so each round's frame is received into a buffer
// sized for n blocks of max_entries entries, and its length is checked against its header.
// Internal to algorithms/sparse.

#include <cstddef>
#include <functional>
#include <vector>

#include "absl/status/status.h"
#include "algorithms/sparse/coo.h"
#include "algorithms/sparse/schedule.h"
#include "algorithms/sparse/wire.h"

namespace herd::sparse {

// On entry (*blocks)[group.me] holds this member's block (at most max_entries entries); on
// return (*blocks)[m] holds member m's block for every member m (blocks has group.size
// entries). limit(m): the length of member m's block (its indices must lie below it).
absl::Status SparseBruckAllGather(Wire& wire, Phase phase, const Group& group, size_t max_entries,
                                  const std::function<size_t(int member)>& limit,
                                  std::vector<CooBlock>* blocks);

}  // namespace herd::sparse
