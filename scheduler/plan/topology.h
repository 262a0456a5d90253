#pragma once
// Pure plan computation: who exchanges with whom in one iteration. No gRPC, no protobuf, so a
// worker can link it and verify the plan the scheduler published (docs/scheduler.md, "Plan
// generation rules"). Every function is deterministic in its arguments.
//
// Ranks are worker ranks (0 .. world_size-1). `ranks` is the ascending list of participating
// ranks (the survivors of the epoch); results are indexed by rank over the whole world, with
// an empty entry for a rank that does not participate.

#include <cstdint>
#include <vector>

namespace herd::plan {

// splitmix64 (Steele, Lea, Flood 2014): the generator every random choice of a plan uses.
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  uint64_t Next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // Uniform in [0, bound), bound >= 1, by rejection so there is no modulo bias.
  uint64_t Below(uint64_t bound);

 private:
  uint64_t state_;
};

// The seed of iteration `iteration` of a job seeded `job_seed`: the first output of a
// splitmix64 seeded with job_seed, xor-ed with the iteration, mixed once more. Distinct
// iterations get unrelated streams.
uint64_t IterationSeed(uint64_t job_seed, int64_t iteration);

// Ring order over the participating ranks: ascending.
std::vector<int> RingOrder(const std::vector<int>& ranks);

// Left and right neighbours in the ring (one peer when two ranks, none when one).
std::vector<std::vector<int>> RingPeers(const std::vector<int>& ranks, int world_size);

// A perfect pairing drawn from (job_seed, iteration): Fisher-Yates shuffle of `ranks` driven by
// SplitMix64(IterationSeed(...)), then consecutive positions pair up. With an odd count the last
// three positions of the shuffle form a triple (each exchanges with the other two), so every
// participating rank averages with someone in every iteration (a single rank has no peers).
std::vector<std::vector<int>> RandomPeers(const std::vector<int>& ranks, int world_size,
                                          uint64_t job_seed, int64_t iteration);

// The team count actually used for `participants` ranks when `requested` teams were asked
// for: the largest divisor of participants not above requested (teams must be equal in size).
int EffectiveTeams(int participants, int requested);

// SparDL teams: `teams` consecutive blocks of the ring order, equal in size.
// Precondition: teams divides ring.size() (use EffectiveTeams).
std::vector<std::vector<int>> Teams(const std::vector<int>& ring, int teams);

}  // namespace herd::plan
