#pragma once
// The plan's topology rules: who exchanges with whom in one iteration, and the SparDL teams.
// Pure (no gRPC, no protobuf) and deterministic in their arguments, so the scheduler publishes
// a plan with them and every worker recomputes the same answer (docs/scheduler.md, "Plan
// generation rules"; BAGUA section 3.4 for the `ring` and `random` peer selections).
//
// Ranks are worker ranks (0 .. world_size-1). `ranks` is the list of participating ranks (the
// survivors of the epoch); results indexed by rank cover the whole world, with an empty entry
// for a rank that does not participate.
//
//   ring:   left and right neighbour in ascending rank order; one peer when two ranks take
//           part, none when one.
//   random: a perfect pairing drawn from (seed, iteration): a Fisher-Yates shuffle of the
//           ascending ranks driven by SplitMix64(IterationSeed(seed, iteration)) (common/
//           splitmix.h), then consecutive positions pair up. With an odd count the last three
//           positions of the shuffle form a triple (each exchanges with the other two), so
//           every participating rank averages with someone in every iteration.
// Both relations are symmetric (a is b's peer iff b is a's) and regular within each group of
// exchanging ranks, so averaging with equal weights preserves the global mean.

#include <cstdint>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace herd::plan {

enum class Topology : uint8_t { kRing, kRandom };

// "ring" | "random"; INVALID_ARGUMENT otherwise.
absl::StatusOr<Topology> ParseTopology(std::string_view name);
std::string_view TopologyName(Topology t);

// The seed of iteration `iteration` of a job seeded `job_seed`: the first output of a
// splitmix64 seeded with job_seed, xor-ed with the iteration, mixed once more. Distinct
// iterations get unrelated streams.
uint64_t IterationSeed(uint64_t job_seed, int64_t iteration);

// Ring order over the participating ranks: ascending.
std::vector<int> RingOrder(const std::vector<int>& ranks);

// The ring rule over `ranks`, every peer list ascending.
std::vector<std::vector<int>> RingPeers(const std::vector<int>& ranks, int world_size);

// The random rule over `ranks` for (job_seed, iteration), every peer list ascending.
std::vector<std::vector<int>> RandomPeers(const std::vector<int>& ranks, int world_size,
                                          uint64_t job_seed, int64_t iteration);

// The rule of `topology` over `ranks` (RingPeers or RandomPeers).
std::vector<std::vector<int>> Peers(Topology topology, const std::vector<int>& ranks,
                                    int world_size, uint64_t job_seed, int64_t iteration);

// The peers of `rank` when every rank 0..size-1 takes part (what a worker of a full ring
// computes for any iteration), ascending. Empty when size < 2 or rank is not in [0, size).
std::vector<int> PeersForIteration(Topology topology, int size, uint64_t seed, int64_t iteration,
                                   int rank);

// The team count actually used for `participants` ranks when `requested` teams were asked
// for: the largest divisor of participants not above requested (teams must be equal in size).
int EffectiveTeams(int participants, int requested);

// SparDL teams: `teams` consecutive blocks of the ring order, equal in size.
// Precondition: teams divides ring.size() (use EffectiveTeams).
std::vector<std::vector<int>> Teams(const std::vector<int>& ring, int teams);

}  // namespace herd::plan
