#pragma once
// Who averages with whom in one iteration of the decentralized modes (BAGUA section 3.4: the
// `ring` and `random` peer selections). Pure and deterministic, so every rank computes the
// same plan from (topology, size, seed, iteration) without talking to anyone.
//
// The rules are the scheduler's (scheduler/plan/topology.h, RingPeers and RandomPeers over the
// ranks 0..size-1), restated here because algorithms/ must not depend on scheduler/; a test
// checks that the two agree.
//
//   ring:   left and right neighbour in rank order; one peer when size == 2, none when 1.
//   random: a perfect pairing drawn from (seed, iteration): a Fisher-Yates shuffle of
//           0..size-1 driven by splitmix64 seeded with IterationSeed(seed, iteration), then
//           consecutive positions pair up. With an odd size the last three positions of the
//           shuffle form a triple (each exchanges with the other two), so every rank averages
//           with someone in every iteration.
// Both relations are symmetric (a is b's peer iff b is a's) and regular within each group of
// exchanging ranks, so averaging with equal weights preserves the global mean.

#include <cstdint>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace herd::decentralized {

enum class Topology : uint8_t { kRing, kRandom };

absl::StatusOr<Topology> ParseTopology(std::string_view name);  // "ring" | "random"
std::string_view TopologyName(Topology t);

// The seed of one iteration: the first output of a splitmix64 seeded with `seed`, xor-ed with
// the iteration, mixed once more (the scheduler's IterationSeed).
uint64_t IterationSeed(uint64_t seed, int64_t iteration);

// The peers of `rank` in `iteration`, ascending. Empty when size < 2 or rank is not in
// [0, size) (nobody to exchange with).
std::vector<int> PeersForIteration(Topology topology, int size, uint64_t seed, int64_t iteration,
                                   int rank);

}  // namespace herd::decentralized
